// zinc/quant/dot_avx2.cpp — AVX2/FMA/F16C dot products, weight row x packed activation row.
// Same contracts as dot_ref.cpp; results differ from it only by float summation order.
//
// Integer products use vpmaddubsw (u8 x s8 -> pairs summed to s16) followed by vpmaddwd (s16 x
// s16 -> pairs summed to s32). Signed x signed products (Q4_0/Q5_0/Q8_0 x Q8_0) move the sign of
// the weight onto the activation first (|w| x sign(a, w)). No s16 saturation is possible: the
// weight magnitudes are <= 128 and the Q8 activations are in [-127, 127], so a pair sums to at
// most 2 * 128 * 127 < 32767; the K-quants use unsigned weights <= 63.
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_AVX2)

#include <immintrin.h>

#include <cstring>

#include "quant/quant.h"

namespace zinc::quant::detail {
namespace {

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

inline float half(uint16_t h) { return _cvtsh_ss(h); }

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
    // byte i takes source byte i / 8 (lanes are 128-bit, so the high lane indexes bytes 2, 3)
    const __m256i spread = _mm256_shuffle_epi8(
        v, _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// sum of adjacent products u8 x s8, widened to 8 x s32.
inline __m256i dot_us8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// sum of adjacent products s8 x s8, widened to 8 x s32.
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

constexpr ShuffleMasks shuffle_masks = make_masks();

// 16 s16 sub-block scales, arranged so that pair(g) (g = 0..7) gives scale 2g in the low lane
// and scale 2g+1 in the high lane: the layout of a maddubs result over 32 elements that span
// two 16-element sub-blocks.
struct ScalePairs {
    __m256i lo, hi;  // words 0-7 / 8-15 copied to both lanes
    explicit ScalePairs(__m256i s16)
        : lo(_mm256_permute2x128_si256(s16, s16, 0x00)), hi(_mm256_permute2x128_si256(s16, s16, 0x11)) {}
    __m256i pair(int g) const {
        const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(shuffle_masks.pair[g & 3]));
        return _mm256_shuffle_epi8(g < 4 ? lo : hi, m);
    }
};

// Broadcast word w of a vector holding the same 8 x s16 in both lanes.
inline __m256i broadcast_word(__m256i v, int w) {
    return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(shuffle_masks.word[w])));
}

// Two fp16 pairs -> f32 in one conversion: lanes [a0, a1, b0, b1] from 4 bytes at a and at b.
inline __m128 halves_2x2(const void* a, const void* b) {
    uint32_t ua, ub;
    std::memcpy(&ua, a, 4);
    std::memcpy(&ub, b, 4);
    const uint64_t u = static_cast<uint64_t>(ua) | (static_cast<uint64_t>(ub) << 32);
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(u)));
}

// d_x * d_y for two 16-bit halves, converted together.
inline float half_product(uint16_t x, uint16_t y) {
    const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(x | (static_cast<uint32_t>(y) << 16))));
    return _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)));
}

}  // namespace

float dot_avx2_f32(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(a);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
    }
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) sum += x[i] * y[i];
    return sum;
}

namespace {

// Shared F16/BF16 x F32 body: 32 elements per iteration in four independent FMA chains.
// Load: a type with static __m256 load8(const uint16_t*) and static float one(uint16_t).
template <typename Load>
float dot_avx2_half_f32(int64_t n, const uint16_t* x, const float* y) {
    constexpr auto load8 = Load::load8;
    constexpr auto one = Load::one;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(load8(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(load8(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load8(x + i + 16), _mm256_loadu_ps(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load8(x + i + 24), _mm256_loadu_ps(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load8(x + i), _mm256_loadu_ps(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) sum += one(x[i]) * y[i];
    return sum;
}

struct LoadF16 {
    static __m256 load8(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static float one(uint16_t h) { return _cvtsh_ss(h); }
};

struct LoadBf16 {
    static __m256 load8(const uint16_t* p) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    static float one(uint16_t h) { return bf16_to_fp32(h); }
};

}  // namespace

float dot_avx2_f16(int64_t n, const void* w, const void* a) {
    return dot_avx2_half_f32<LoadF16>(n, static_cast<const uint16_t*>(w), static_cast<const float*>(a));
}

float dot_avx2_bf16(int64_t n, const void* w, const void* a) {
    return dot_avx2_half_f32<LoadBf16>(n, static_cast<const uint16_t*>(w), static_cast<const float*>(a));
}

float dot_avx2_q4_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const float* tab = fp16_table();
    const int64_t nb = n / qk4_0;
    const __m256i off = _mm256_set1_epi8(8);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {  // two blocks per iteration: independent FMA chains
        const __m256i qx0 = _mm256_sub_epi8(unpack_nibbles(x[i].qs), off);
        const __m256i qx1 = _mm256_sub_epi8(unpack_nibbles(x[i + 1].qs), off);
        const __m256i qy0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256i qy1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs));
        const __m256 d0 = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        const __m256 d1 = _mm256_set1_ps(tab[x[i + 1].d] * tab[y[i + 1].d]);
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(dot_ss8(qx0, qy0)), acc0);
        acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(dot_ss8(qx1, qy1)), acc1);
    }
    for (; i < nb; ++i) {
        const __m256i qx = _mm256_sub_epi8(unpack_nibbles(x[i].qs), off);
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256 d = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_ss8(qx, qy)), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

// d_x * d_y (lane 0) and m_x * s_y (lane 1) of a Q4_1/Q5_1 block and its Q8_1 block: both
// start with two halves, converted together.
inline __m128 scale_min_products(const void* x, const void* y) {
    const __m128 v = halves_2x2(x, y);        // [d_x, m_x, d_y, s_y]
    return _mm_mul_ps(v, _mm_movehl_ps(v, v));  // [d_x d_y, m_x s_y, ...]
}

float dot_avx2_q4_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    const int64_t nb = n / qk4_1;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();  // lane 1 sums m_x * s_y
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m128 p0 = scale_min_products(&x[i], &y[i]);
        const __m128 p1 = scale_min_products(&x[i + 1], &y[i + 1]);
        const __m256i qx0 = unpack_nibbles(x[i].qs);
        const __m256i qx1 = unpack_nibbles(x[i + 1].qs);
        const __m256i qy0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256i qy1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs));
        acc_m = _mm_add_ps(acc_m, _mm_add_ps(p0, p1));
        acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(p0), _mm256_cvtepi32_ps(dot_us8(qx0, qy0)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(p1), _mm256_cvtepi32_ps(dot_us8(qx1, qy1)), acc1);
    }
    for (; i < nb; ++i) {
        const __m128 p = scale_min_products(&x[i], &y[i]);
        const __m256i qx = unpack_nibbles(x[i].qs);
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        acc_m = _mm_add_ps(acc_m, p);
        acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(dot_us8(qx, qy)), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(acc_m));
}

float dot_avx2_q5_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const float* tab = fp16_table();
    const int64_t nb = n / qk5_0;
    const __m256i f0 = _mm256_set1_epi8(static_cast<char>(0xF0));
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    // q - 16 as a signed byte: nibble | 0xF0 when the fifth bit is clear (nibble - 16), the bare
    // nibble when it is set (nibble + 16 - 16).
    auto load_q = [&](const BlockQ5_0& b) {
        return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_andnot_si256(expand_bits(b.qh), f0));
    };
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i qx0 = load_q(x[i]);
        const __m256i qx1 = load_q(x[i + 1]);
        const __m256i qy0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256i qy1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs));
        const __m256 d0 = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        const __m256 d1 = _mm256_set1_ps(tab[x[i + 1].d] * tab[y[i + 1].d]);
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(dot_ss8(qx0, qy0)), acc0);
        acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(dot_ss8(qx1, qy1)), acc1);
    }
    for (; i < nb; ++i) {
        const __m256i qx = load_q(x[i]);
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256 d = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_ss8(qx, qy)), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

float dot_avx2_q5_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    const int64_t nb = n / qk5_1;
    const __m256i b4 = _mm256_set1_epi8(0x10);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();  // lane 1 sums m_x * s_y
    auto load_q = [&](const BlockQ5_1& b) {
        return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_and_si256(expand_bits(b.qh), b4));
    };
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m128 p0 = scale_min_products(&x[i], &y[i]);
        const __m128 p1 = scale_min_products(&x[i + 1], &y[i + 1]);
        const __m256i qy0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256i qy1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs));
        acc_m = _mm_add_ps(acc_m, _mm_add_ps(p0, p1));
        acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(p0), _mm256_cvtepi32_ps(dot_us8(load_q(x[i]), qy0)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(p1),
                               _mm256_cvtepi32_ps(dot_us8(load_q(x[i + 1]), qy1)), acc1);
    }
    for (; i < nb; ++i) {
        const __m128 p = scale_min_products(&x[i], &y[i]);
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        acc_m = _mm_add_ps(acc_m, p);
        acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(p), _mm256_cvtepi32_ps(dot_us8(load_q(x[i]), qy)), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(acc_m));
}

float dot_avx2_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const float* tab = fp16_table();
    const auto* y = static_cast<const BlockQ8_0*>(a);
    const int64_t nb = n / qk8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m256i qx0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
        const __m256i qx1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i + 1].qs));
        const __m256i qy0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256i qy1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs));
        const __m256 d0 = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        const __m256 d1 = _mm256_set1_ps(tab[x[i + 1].d] * tab[y[i + 1].d]);
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(dot_ss8(qx0, qy0)), acc0);
        acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(dot_ss8(qx1, qy1)), acc1);
    }
    for (; i < nb; ++i) {
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256 d = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        acc0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_ss8(qx, qy)), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

float dot_avx2_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_1*>(w);
    const float* tab = fp16_table();
    const auto* y = static_cast<const BlockQ8_1*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / qk8_1; ++i) {
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs));
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
        const __m256 d = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_ss8(qx, qy)), acc);
    }
    return hsum_ps(acc);
}

float dot_avx2_q2_k(int64_t n, const void* w, const void* a) {
    const float* tab = fp16_table();
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    float summ_total = 0.0f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = y[i].d * tab[x[i].d];
        const float dmin = y[i].d * tab[x[i].dmin];
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
        const ScalePairs scales(_mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4)));
        const __m128i mins = _mm_and_si128(_mm_srli_epi16(sc8, 4), m4);
        // min term: sum_k (scales[k] >> 4) * bsums[k]
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
        const __m256i pm = _mm256_madd_epi16(_mm256_cvtepu8_epi16(mins), bsums);
        const __m128i pm4 = _mm_add_epi32(_mm256_castsi256_si128(pm), _mm256_extracti128_si256(pm, 1));
        const __m128i pm2 = _mm_add_epi32(pm4, _mm_unpackhi_epi64(pm4, pm4));
        const int summ = _mm_cvtsi128_si32(pm2) + _mm_extract_epi32(pm2, 1);
        summ_total -= dmin * static_cast<float>(summ);

        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int c = 0; c < 2; ++c) {
            const __m256i qbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * c));
#pragma GCC unroll 4
            for (int s = 0; s < 4; ++s) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qbits, 2 * s), m3);
                const __m256i qy = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(y[i].qs + 128 * c + 32 * s));
                const __m256i p = _mm256_maddubs_epi16(q, qy);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scales.pair(4 * c + s)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc) + summ_total;
}

namespace {

// Q3_K's 12-byte scale field -> 16 signed scales (minus 32), on 32-bit words (same rule as
// unpack_scales_q3_k in blocks.h): low nibbles of bytes 0-7 are scales 0-7, high nibbles
// scales 8-15; 2-bit fields of bytes 8-11 are the top bits, field k serving scales 4k..4k+3.
inline __m128i unpack_scales_q3_k_vec(const uint8_t* q) {
    uint32_t w[3];
    std::memcpy(w, q, 12);
    constexpr uint32_t low4 = 0x0F0F0F0F, low2 = 0x03030303;
    // built in registers (a store of four words read back as one vector would stall on
    // store forwarding)
    const __m128i v = _mm_set_epi32(static_cast<int>(((w[1] >> 4) & low4) | (((w[2] >> 6) & low2) << 4)),
                                    static_cast<int>(((w[0] >> 4) & low4) | (((w[2] >> 4) & low2) << 4)),
                                    static_cast<int>((w[1] & low4) | (((w[2] >> 2) & low2) << 4)),
                                    static_cast<int>((w[0] & low4) | ((w[2] & low2) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

}  // namespace

float dot_avx2_q3_k(int64_t n, const void* w, const void* a) {
    const float* tab = fp16_table();
    const auto* x = static_cast<const BlockQ3_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = y[i].d * tab[x[i].d];
        const ScalePairs scales(_mm256_cvtepi8_epi16(unpack_scales_q3_k_vec(x[i].scales)));
        const __m256i hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].hmask));
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int c = 0; c < 2; ++c) {
            const __m256i qbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * c));
#pragma GCC unroll 4
            for (int s = 0; s < 4; ++s) {
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qbits, 2 * s), m3);
                // 4 where the high bit is clear (those elements carry a -4 offset), else 0
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hbits, 4 * c + s), one);
                const __m256i sub4 = _mm256_slli_epi16(_mm256_xor_si256(hb, one), 2);
                const __m256i qy = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(y[i].qs + 128 * c + 32 * s));
                const __m256i p =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(lo, qy), _mm256_maddubs_epi16(sub4, qy));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scales.pair(4 * c + s)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

namespace {

// Q4_K/Q5_K scale field -> 16 bytes: 8 scales then 8 mins (see unpack_scale_min_k4 in blocks.h;
// this is the same rule done on 32-bit words).
inline __m128i unpack_scale_min_k4_vec(const uint8_t* q) {
    uint32_t w[3];
    std::memcpy(w, q, 12);
    constexpr uint32_t low6 = 0x3F3F3F3F, low4 = 0x0F0F0F0F, low2 = 0x03030303;
    // built in registers (see unpack_scales_q3_k_vec)
    return _mm_set_epi32(static_cast<int>(((w[2] >> 4) & low4) | (((w[1] >> 6) & low2) << 4)),  // mins 4-7
                         static_cast<int>(w[1] & low6),                                         // mins 0-3
                         static_cast<int>((w[2] & low4) | (((w[0] >> 6) & low2) << 4)),         // scales 4-7
                         static_cast<int>(w[0] & low6));                                        // scales 0-3
}

// Shared Q4_K/Q5_K body; kHigh selects whether the fifth bit from qh is added.
template <bool kHigh, typename Block>
float dot_avx2_k4(int64_t n, const Block* x, const BlockQ8_K* y) {
    const float* tab = fp16_table();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = y[i].d * tab[x[i].d];
        const float dmin = -y[i].d * tab[x[i].dmin];
        const __m256i sc_m = _mm256_cvtepu8_epi16(unpack_scale_min_k4_vec(x[i].scales));
        // min term: sum_j m[j] * (bsums[2j] + bsums[2j+1])
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
        const __m128i pair_sums =
            _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        const __m128i pm = _mm_madd_epi16(_mm256_extracti128_si256(sc_m, 1), pair_sums);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(pm), acc_m);

        const __m256i scales = _mm256_permute2x128_si256(sc_m, sc_m, 0x00);
        __m256i hbits = _mm256_setzero_si256();
        if constexpr (kHigh) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh));
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
            const __m256i qbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * c));
            __m256i ql = _mm256_and_si256(qbits, m4);
            __m256i qh = _mm256_and_si256(_mm256_srli_epi16(qbits, 4), m4);
            if constexpr (kHigh) {
                const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
                const __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
                ql = _mm256_or_si256(ql, _mm256_slli_epi16(h1, 4));
                qh = _mm256_or_si256(qh, _mm256_slli_epi16(h2, 4));
            }
            const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * c));
            const __m256i y2 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 64 * c + 32));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(ql, y1), broadcast_word(scales, 2 * c));
            const __m256i p2 =
                _mm256_madd_epi16(_mm256_maddubs_epi16(qh, y2), broadcast_word(scales, 2 * c + 1));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p1, p2));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc) + hsum_ps128(acc_m);
}

}  // namespace

float dot_avx2_q4_k(int64_t n, const void* w, const void* a) {
    return dot_avx2_k4<false>(n, static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(a));
}

float dot_avx2_q5_k(int64_t n, const void* w, const void* a) {
    return dot_avx2_k4<true>(n, static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(a));
}

float dot_avx2_q6_k(int64_t n, const void* w, const void* a) {
    const float* tab = fp16_table();
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = y[i].d * tab[x[i].d];
        const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
        // The -32 offset: 32 * sum_k scale[k] * bsums[k], subtracted from the integer sum.
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums));
        const __m256i sc16 = _mm256_cvtepi8_epi16(scales);
        const ScalePairs pairs(sc16);
        const __m256i off = _mm256_madd_epi16(sc16, bsums);
        __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h));
            const __m256i l1 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
                const __m256i qy = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(y[i].qs + 128 * h + 32 * k));
                const __m256i p = _mm256_maddubs_epi16(q[k], qy);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, pairs.pair(4 * h + k)));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

float dot_avx2_q8_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / qk_k; ++i) {
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < qk_k; j += 32) {
            const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + j));
            const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + j));
            sumi = _mm256_add_epi32(sumi, dot_ss8(qx, qy));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(x[i].d * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

}  // namespace zinc::quant::detail

#endif  // ZINC_QUANT_HAVE_AVX2
