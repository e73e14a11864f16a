// zinc/quant/gemm_kernels.h — internal: register-tiled GEMM micro-kernels for prefill: RM weight
// rows x RN activation rows per inner loop, each loaded weight block reused across the RN
// activations and each activation block across the RM weight rows. Written once as templates and
// compiled twice, like dot_avx2_kernels.h: for AVX2 (gemm_avx2.cpp) and for AVX-512 VNNI with
// 32 vector registers (gemm_avx512vnni.cpp).
//
// Bit-identical to the vec_dot kernels (dot_avx2_kernels.h). Every (weight row, activation row)
// pair goes through exactly the float operations vec_dot performs, in the same order:
//  * the integer block dot is computed per lane of 4 consecutive elements (vpdpbusd, or
//    vpmaddubsw + vpmaddwd), and the lane sums are exact integers whatever product trick is used
//    to get there, so they equal vec_dot's lanes;
//  * the block scale is the IEEE product d_w * d_a (a vector multiply of the broadcasts is the
//    same single rounding as vec_dot's scalar multiply);
//  * vec_dot keeps two float chains, even blocks into acc0 and odd blocks into acc1 (the tail
//    block of an odd count goes to acc0), and returns hsum(acc0 + acc1). The two chains do not
//    depend on each other, so here they are computed one after the other ("parity passes"):
//    only RM x RN accumulators are live at a time, which is what lets a 4 x 4 tile fit.
//  * Q4_1/Q5_1's min term (vec_dot's acc_m: + (m0 s0 + m1 s1) per block pair, + m s for the
//    tail) is a third independent chain, computed lane-per-activation in its own loop.
//
// Integer product tricks (the sign trick of vec_dot costs one extra op per pair):
//  * Q4_0/Q5_0: unsigned q in 0..15 / 0..31 times the signed activation, minus
//    offset * sum(activation) per lane, which is computed once per activation block and reused
//    by every weight row (with VNNI it is the accumulator vpdpbusd starts from).
//  * Q8_0 with VNNI: (a + 128) as unsigned times the signed weight, minus 128 * sum(weight) per
//    lane (once per weight block). Without VNNI (vpmaddubsw would saturate on a + 128) the sign
//    trick of vec_dot is kept.
//  * Q4_1/Q5_1: unsigned q times signed activation, as vec_dot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "quant/dot_avx2_kernels.h"  // simd_avx2.h building blocks (internal linkage)

namespace zinc::quant::detail {
namespace {

using namespace avx2;

namespace gemm {

#if defined(ZINC_QUANT_VNNI)
constexpr int legacy_rm = 4, legacy_rn = 4;  // 16 accumulators of 32 registers
#else
constexpr int legacy_rm = 2, legacy_rn = 4;  // 8 accumulators of 16 registers
#endif

struct Prep {
    __m256i v, c;  // the operand and (where used) its per-lane correction
};

inline __m256i ones16() {
    return _mm256_set1_epi16(1);
}

// -(o * lane sums of 4 bytes of y): the offset correction of an activation block.
template <int O>
inline __m256i neg_offset_sum(__m256i y) {
#if defined(ZINC_QUANT_VNNI)
    const __m256i s =
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(O)), y);
#else
    static_assert(O < 128);  // (O * 127) * 2 must not saturate vpmaddubsw
    const __m256i s = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(O)), y), ones16());
#endif
    return _mm256_sub_epi32(_mm256_setzero_si256(), s);
}

// Unsigned weight q (0..31) x signed activation, plus the activation's correction c.
inline __m256i dot_unsigned(__m256i q, const Prep& a) {
#if defined(ZINC_QUANT_VNNI)
    return _mm256_dpbusd_epi32(a.c, q, a.v);
#else
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q, a.v), ones16()), a.c);
#endif
}

// Weight value q - O with unsigned q; activations Q8_0.
template <int O>
struct OffsetQ8_0 {
    using ABlock = BlockQ8_0;
    static Prep prep_act(const BlockQ8_0& b) {
        const __m256i y = load256(b.qs);
        return {y, neg_offset_sum<O>(y)};
    }
    static __m256i dot(const Prep& w, const Prep& a) { return dot_unsigned(w.v, a); }
};

struct GQ4_0 : OffsetQ8_0<8> {
    using Block = BlockQ4_0;
    static Prep prep_w(const Block& b) { return {unpack_nibbles(b.qs), _mm256_setzero_si256()}; }
};

struct GQ5_0 : OffsetQ8_0<16> {
    using Block = BlockQ5_0;
    static Prep prep_w(const Block& b) {
        const __m256i nib = unpack_nibbles(b.qs);
#if defined(ZINC_QUANT_VNNI)
        uint32_t bits;
        std::memcpy(&bits, b.qh, 4);
        return {_mm256_mask_add_epi8(nib, static_cast<__mmask32>(bits), nib,
                                     _mm256_set1_epi8(16)),
                _mm256_setzero_si256()};
#else
        return {_mm256_or_si256(nib, _mm256_and_si256(expand_bits(b.qh), _mm256_set1_epi8(16))),
                _mm256_setzero_si256()};
#endif
    }
};

#if defined(ZINC_QUANT_VNNI)
// (w + 128) as unsigned x signed activation, minus 128 * sum(activation).
struct GQ8_0 : OffsetQ8_0<128> {
    using Block = BlockQ8_0;
    static Prep prep_w(const Block& b) {
        return {_mm256_xor_si256(load256(b.qs), _mm256_set1_epi8(static_cast<char>(0x80))),
                _mm256_setzero_si256()};
    }
};
#else
// vec_dot's sign trick: |w| x (a with w's sign).
struct GQ8_0 {
    using Block = BlockQ8_0;
    using ABlock = BlockQ8_0;
    static Prep prep_w(const Block& b) {
        const __m256i w = load256(b.qs);
        return {_mm256_sign_epi8(w, w), w};
    }
    static Prep prep_act(const BlockQ8_0& b) { return {load256(b.qs), _mm256_setzero_si256()}; }
    static __m256i dot(const Prep& w, const Prep& a) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(w.v, _mm256_sign_epi8(a.v, w.c)), ones16());
    }
};
#endif

// Asymmetric: unsigned q x signed Q8_1 activation, no correction; min term separately.
struct AsymQ8_1 {
    using ABlock = BlockQ8_1;
    static Prep prep_act(const BlockQ8_1& b) { return {load256(b.qs), _mm256_setzero_si256()}; }
    static __m256i dot(const Prep& w, const Prep& a) { return dot_us8(w.v, a.v); }
};

struct GQ4_1 : AsymQ8_1 {
    using Block = BlockQ4_1;
    static Prep prep_w(const Block& b) { return {unpack_nibbles(b.qs), _mm256_setzero_si256()}; }
};

struct GQ5_1 : AsymQ8_1 {
    using Block = BlockQ5_1;
    static Prep prep_w(const Block& b) {
        return {_mm256_or_si256(unpack_nibbles(b.qs),
                                _mm256_and_si256(expand_bits(b.qh), _mm256_set1_epi8(0x10))),
                _mm256_setzero_si256()};
    }
};

template <typename P>
constexpr bool has_min = std::is_same_v<typename P::ABlock, BlockQ8_1>;

// One parity pass: acc[r][j] = chain over blocks i = par, par + 2, ... of
// fma(d_w * d_a, lanes(i), acc).
template <int RM, int RN>
struct Acc {
    __m256 v[RM][RN];
};

// (Returned by value: a local array the compiler keeps in registers; an array passed by
// reference was stored back to memory on every iteration.)
template <typename P, int RM, int RN>
[[gnu::always_inline]] inline Acc<RM, RN> legacy_pass(const typename P::Block* const* x,
                                                      const typename P::ABlock* const* y,
                                                      int64_t nb, int64_t par) {
    const float* tab = fp16_table();
    __m256 acc[RM][RN];
#pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
#pragma GCC unroll 16
        for (int j = 0; j < RN; ++j) acc[r][j] = _mm256_setzero_ps();
    }
    static_assert(RM <= 4);
    for (int64_t i = par; i < nb; i += 2) {
        Prep wp[RM];
        uint64_t halves = 0;
#pragma GCC unroll 16
        for (int r = 0; r < RM; ++r) {
            wp[r] = P::prep_w(x[r][i]);
            halves |= static_cast<uint64_t>(x[r][i].d) << (16 * r);
        }
        // The RM weight scales as f32 lanes (F16C conversion is exact, as the table), then the
        // RM x RN products d_w * d_a with one multiply per activation, read back as broadcast
        // operands of the FMAs: no scalar multiply or register broadcast per pair.
        const __m128 dx = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(halves)));
        alignas(16) float dd[RN][4];
#pragma GCC unroll 16
        for (int j = 0; j < RN; ++j) {
            _mm_store_ps(dd[j], _mm_mul_ps(dx, _mm_broadcast_ss(&tab[y[j][i].d])));
        }
#pragma GCC unroll 16
        for (int j = 0; j < RN; ++j) {
            const Prep ap = P::prep_act(y[j][i]);
#pragma GCC unroll 16
            for (int r = 0; r < RM; ++r) {
                const __m256i p = P::dot(wp[r], ap);
                acc[r][j] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[j][r]), _mm256_cvtepi32_ps(p),
                                            acc[r][j]);
            }
        }
    }
    Acc<RM, RN> out;
#pragma GCC unroll 16
    for (int r = 0; r < RM; ++r) {
#pragma GCC unroll 16
        for (int j = 0; j < RN; ++j) out.v[r][j] = acc[r][j];
    }
    return out;
}

// RM x RN tile of a 32-element-block format; out[j * os + r].
template <typename P, int RM, int RN>
void legacy_tile(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as, float* out,
                 size_t os) {
    const typename P::Block* x[RM];
    const typename P::ABlock* y[RN];
    for (int r = 0; r < RM; ++r) x[r] = reinterpret_cast<const typename P::Block*>(w + r * ws);
    for (int j = 0; j < RN; ++j) y[j] = reinterpret_cast<const typename P::ABlock*>(a + j * as);
    const int64_t nb = n / 32;
    const Acc<RM, RN> even = legacy_pass<P, RM, RN>(x, y, nb, 0);
    const Acc<RM, RN> odd = legacy_pass<P, RM, RN>(x, y, nb, 1);
    // Q4_1/Q5_1's min term, vec_dot's acc_m lane 1: + (m_w0 s_a0 + m_w1 s_a1) per block pair,
    // + m_w s_a for the tail. Lane j of mv[r] performs exactly those scalar operations for
    // activation j (the weight's m broadcast, the activations' s side by side).
    alignas(16) float m[RM][4] = {};
    if constexpr (has_min<P>) {
        static_assert(RN <= 4);
        const float* tab = fp16_table();
        __m128 mv[RM];
        for (int r = 0; r < RM; ++r) mv[r] = _mm_setzero_ps();
        auto s_of = [&](int64_t i) {
            uint64_t h = 0;
            for (int j = 0; j < RN; ++j) h |= static_cast<uint64_t>(y[j][i].s) << (16 * j);
            return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
        };
        int64_t i = 0;
        for (; i + 2 <= nb; i += 2) {
            const __m128 s0 = s_of(i), s1 = s_of(i + 1);
            for (int r = 0; r < RM; ++r) {
                const __m128 p0 = _mm_mul_ps(_mm_broadcast_ss(&tab[x[r][i].m]), s0);
                const __m128 p1 = _mm_mul_ps(_mm_broadcast_ss(&tab[x[r][i + 1].m]), s1);
                mv[r] = _mm_add_ps(mv[r], _mm_add_ps(p0, p1));
            }
        }
        if (i < nb) {
            const __m128 s0 = s_of(i);
            for (int r = 0; r < RM; ++r) {
                mv[r] = _mm_add_ps(mv[r], _mm_mul_ps(_mm_broadcast_ss(&tab[x[r][i].m]), s0));
            }
        }
        for (int r = 0; r < RM; ++r) _mm_store_ps(m[r], mv[r]);
    }
    for (int j = 0; j < RN; ++j) {
        for (int r = 0; r < RM; ++r) {
            float v = hsum_ps(_mm256_add_ps(even.v[r][j], odd.v[r][j]));
            if constexpr (has_min<P>) v = v + m[r][j];
            out[static_cast<size_t>(j) * os + r] = v;
        }
    }
}

using TileFn = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*, size_t);

// Every (rm, rn) tile up to RM x RN, so remainders run with a kernel of their own size.
template <template <typename, int, int> class Tile, typename P, int RM, int RN>
struct TileTable {
    TileFn f[RM][RN];
    constexpr TileTable() : f{} { fill<0>(); }
    template <int I>
    constexpr void fill() {
        if constexpr (I < RM * RN) {
            f[I / RN][I % RN] = &Tile<P, I / RN + 1, I % RN + 1>::run;
            fill<I + 1>();
        }
    }
};

template <typename P, int RM, int RN>
struct LegacyTile {
    static void run(int64_t n, const uint8_t* w, size_t ws, const uint8_t* a, size_t as,
                    float* out, size_t os) {
        legacy_tile<P, RM, RN>(n, w, ws, a, as, out, os);
    }
};

// The whole product: activation tiles outer (they stay in registers / L1 while the weight rows
// stream past), weight tiles inner.
template <template <typename, int, int> class Tile, typename P, int RM, int RN>
void run_gemm(int64_t n, const void* w, size_t ws, int n_w, const void* a, size_t as, int n_a,
              float* out, size_t os) {
    static constexpr TileTable<Tile, P, RM, RN> table{};
    const auto* pw = static_cast<const uint8_t*>(w);
    const auto* pa = static_cast<const uint8_t*>(a);
    for (int j0 = 0; j0 < n_a; j0 += RN) {
        const int nj = n_a - j0 < RN ? n_a - j0 : RN;
        for (int r0 = 0; r0 < n_w; r0 += RM) {
            const int nr = n_w - r0 < RM ? n_w - r0 : RM;
            table.f[nr - 1][nj - 1](n, pw + static_cast<size_t>(r0) * ws, ws,
                                    pa + static_cast<size_t>(j0) * as, as,
                                    out + static_cast<size_t>(j0) * os + r0, os);
        }
    }
}

}  // namespace gemm
}  // namespace
}  // namespace zinc::quant::detail

// The exported gemm_<prefix>_<type> entry points of the legacy formats (declared in
// gemm_detail.h); K-quant entry points are defined next to their kernels.
#define ZINC_QUANT_GEMM_EXPORT(prefix, type, Tile, P, RM, RN)                                    \
    void gemm_##prefix##_##type(int64_t n, const void* w, size_t ws, int n_w, const void* a,     \
                                size_t as, int n_a, float* out, size_t os) {                     \
        gemm::run_gemm<gemm::Tile, gemm::P, RM, RN>(n, w, ws, n_w, a, as, n_a, out, os);         \
    }

#define ZINC_QUANT_DEFINE_LEGACY_GEMMS(prefix)                                                    \
    ZINC_QUANT_GEMM_EXPORT(prefix, q4_0, LegacyTile, GQ4_0, gemm::legacy_rm, gemm::legacy_rn)    \
    ZINC_QUANT_GEMM_EXPORT(prefix, q5_0, LegacyTile, GQ5_0, gemm::legacy_rm, gemm::legacy_rn)    \
    ZINC_QUANT_GEMM_EXPORT(prefix, q8_0, LegacyTile, GQ8_0, gemm::legacy_rm, gemm::legacy_rn)    \
    ZINC_QUANT_GEMM_EXPORT(prefix, q4_1, LegacyTile, GQ4_1, gemm::legacy_rm, gemm::legacy_rn)    \
    ZINC_QUANT_GEMM_EXPORT(prefix, q5_1, LegacyTile, GQ5_1, gemm::legacy_rm, gemm::legacy_rn)
