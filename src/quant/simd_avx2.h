// zinc/quant/simd_avx2.h — internal: AVX2 building blocks shared by the SIMD dot products
// (dot_avx2.cpp, dot_avx512vnni.cpp). Only included when ZINC_QUANT_HAVE_AVX2 is defined.
// Everything here has internal linkage: the header is compiled once for AVX2 and once with
// AVX-512 VNNI enabled (ZINC_QUANT_VNNI), and the two must not be merged by the linker.
//
// Integer products use vpmaddubsw (u8 x s8 -> adjacent pairs summed to s16) followed by
// vpmaddwd (s16 x s16 -> pairs summed to s32). Signed x signed products move the sign of the
// weight onto the activation first (|w| x sign(a, w)). No s16 saturation is possible: weight
// magnitudes are <= 128 and Q8 activations are in [-127, 127], so a pair sums to at most
// 2 * 128 * 127 < 32767; the K-quants use unsigned weights <= 63.
//
// Multi-activation kernels: every kernel is a template over NA, the number of activation rows
// multiplied with one weight row (1..4). Weight-side work (unpacking bits, scales) is done once
// per block and shared; each activation keeps its own accumulators and sees exactly the same
// float operations in the same order as with NA = 1, so results do not depend on NA.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/blocks.h"

namespace zinc::quant::detail {
namespace {  // internal linkage, see above
namespace avx2 {

constexpr int max_na = 4;  // activation rows per kernel call

inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float hsum_ps128(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256i load256(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 16 packed bytes -> 32 bytes: low nibbles in lanes 0-15, high nibbles in lanes 16-31.
inline __m256i unpack_nibbles(const uint8_t* qs) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits (little-endian) -> 32 bytes, byte i = 0xFF if bit i is set, else 0.
inline __m256i expand_bits(const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof bits);
    const __m256i v = _mm256_set1_epi32(static_cast<int>(bits));
    // byte i takes source byte i / 8 (shuffles stay in 128-bit lanes; the high lane's copy of
    // the word provides bytes 2 and 3)
    const __m256i spread = _mm256_shuffle_epi8(
        v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Sum of groups of adjacent products u8 x s8, widened to 8 x s32 (which products land in which
// lane differs between the two variants; the lane sums do not).
inline __m256i dot_us8(__m256i u, __m256i s) {
#if defined(ZINC_QUANT_VNNI)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// acc + (pairs of s16 x s16 products summed to s32).
inline __m256i add_madd(__m256i acc, __m256i a, __m256i b) {
#if defined(ZINC_QUANT_VNNI)
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// Sum of adjacent products s8 x s8, widened to 8 x s32.
inline __m256i dot_ss8(__m256i x, __m256i y) {
    return dot_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// Shuffle masks for _mm256_shuffle_epi8 (which shuffles within each 128-bit lane), built at
// compile time: a mask built from a loop variable at run time costs more than the dot itself.
struct ShuffleMasks {
    // pair[g]: on a vector holding the same 8 x s16 in both lanes, puts word 2g in every slot of
    // the low lane and word 2g+1 in every slot of the high lane (g = 0..3).
    alignas(32) uint8_t pair[4][32];
    // word[w]: puts word w (0..7) in every slot of both lanes.
    alignas(32) uint8_t word[8][32];
};

constexpr ShuffleMasks make_masks() {
    ShuffleMasks m{};
    for (int g = 0; g < 4; ++g) {
        for (int j = 0; j < 32; ++j) {
            const int w = 2 * g + (j >= 16 ? 1 : 0);
            m.pair[g][j] = static_cast<uint8_t>(2 * w + (j & 1));
        }
    }
    for (int w = 0; w < 8; ++w) {
        for (int j = 0; j < 32; ++j) m.word[w][j] = static_cast<uint8_t>(2 * w + (j & 1));
    }
    return m;
}

inline constexpr ShuffleMasks shuffle_masks = make_masks();

// 16 s16 sub-block scales, arranged so that pair(g) (g = 0..7) gives scale 2g in the low lane
// and scale 2g+1 in the high lane: the layout of a maddubs result over 32 elements that span
// two 16-element sub-blocks.
struct ScalePairs {
    __m256i lo, hi;  // words 0-7 / 8-15 copied to both lanes
    explicit ScalePairs(__m256i s16)
        : lo(_mm256_permute2x128_si256(s16, s16, 0x00)),
          hi(_mm256_permute2x128_si256(s16, s16, 0x11)) {}
    __m256i pair(int g) const {
        const __m256i m =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(shuffle_masks.pair[g & 3]));
        return _mm256_shuffle_epi8(g < 4 ? lo : hi, m);
    }
};

// Broadcast word w of a vector holding the same 8 x s16 in both lanes.
inline __m256i broadcast_word(__m256i v, int w) {
    return _mm256_shuffle_epi8(
        v, _mm256_load_si256(reinterpret_cast<const __m256i*>(shuffle_masks.word[w])));
}

// The two halves at p (4 bytes) as f32 lanes 0 and 1; lanes 2 and 3 are zero.
inline __m128 two_halves(const void* p) {
    uint32_t u;
    std::memcpy(&u, p, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(u)));
}

// NA activation row pointers: row j starts at a + j * stride bytes.
template <typename Block, int NA>
struct Rows {
    const Block* p[NA];
    Rows(const void* a, size_t stride) {
        for (int j = 0; j < NA; ++j) {
            p[j] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(a) +
                                                  static_cast<size_t>(j) * stride);
        }
    }
};

// Run a kernel K (with template<int NA> static void run(n, w, a, stride, out)) over n_a
// activation rows, max_na at a time. The kernels are always_inline so that each NA gets its own
// fully specialised loop and the single-row path pays no call or stack-realignment overhead.
// K::max_na (<= max_na) caps the rows per call where more accumulators would spill registers.
template <typename K>
void run_multi(int64_t n, const void* w, const void* a, size_t stride, int n_a, float* out) {
    constexpr int cap = K::max_na;
    static_assert(cap >= 1 && cap <= max_na);
    const auto* pa = static_cast<const uint8_t*>(a);
    for (; n_a >= cap; n_a -= cap, pa += cap * stride, out += cap)
        K::template run<cap>(n, w, pa, stride, out);
    if constexpr (cap > 3) {
        if (n_a == 3) K::template run<3>(n, w, pa, stride, out);
    }
    if constexpr (cap > 2) {
        if (n_a == 2) K::template run<2>(n, w, pa, stride, out);
    }
    if (n_a == 1) K::template run<1>(n, w, pa, stride, out);
}

template <typename K>
float run_single(int64_t n, const void* w, const void* a) {
    float r;
    K::template run<1>(n, w, a, 0, &r);
    return r;
}

}  // namespace avx2
}  // namespace
}  // namespace zinc::quant::detail
