// zinc/quant/dot_avx2_k.cpp — AVX2 dot products of the K-quants (Q2_K..Q6_K) with Q8_K
// activations, plus Q8_K x Q8_K. Same contracts as dot_ref.cpp; the building blocks and the
// multi-activation scheme (template over NA activation rows) are in simd_avx2.h.
//
// Per super-block and activation: an integer sum over sub-blocks of scale * sum(q_w * q_a)
// (vpmaddubsw, then vpmaddwd against the sub-block scales broadcast by lane-local shuffles),
// scaled once by d_a * d_w; min and offset terms use the activation's per-16 sums (bsums).
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_AVX2)

// Keep scalar float expressions exactly as written (same result for every NA).
#pragma GCC optimize("fp-contract=off")

#include "quant/quant.h"
#include "quant/simd_avx2.h"

namespace zinc::quant::detail {
namespace {

using namespace avx2;

// Q3_K's 12-byte scale field -> 16 signed scales (minus 32), on 32-bit words (same rule as
// unpack_scales_q3_k in blocks.h): low nibbles of bytes 0-7 are scales 0-7, high nibbles
// scales 8-15; 2-bit fields of bytes 8-11 are the top bits, field k serving scales 4k..4k+3.
// Built in registers: four words stored and read back as one vector would stall on store
// forwarding.
inline __m128i unpack_scales_q3_k_vec(const uint8_t* q) {
    uint32_t w[3];
    std::memcpy(w, q, 12);
    constexpr uint32_t low4 = 0x0F0F0F0F, low2 = 0x03030303;
    const __m128i v =
        _mm_set_epi32(static_cast<int>(((w[1] >> 4) & low4) | (((w[2] >> 6) & low2) << 4)),
                      static_cast<int>(((w[0] >> 4) & low4) | (((w[2] >> 4) & low2) << 4)),
                      static_cast<int>((w[1] & low4) | (((w[2] >> 2) & low2) << 4)),
                      static_cast<int>((w[0] & low4) | ((w[2] & low2) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// Q4_K/Q5_K scale field -> 16 bytes: 8 scales then 8 mins (rule of unpack_scale_min_k4 in
// blocks.h, on 32-bit words).
inline __m128i unpack_scale_min_k4_vec(const uint8_t* q) {
    uint32_t w[3];
    std::memcpy(w, q, 12);
    constexpr uint32_t low6 = 0x3F3F3F3F, low4 = 0x0F0F0F0F, low2 = 0x03030303;
    return _mm_set_epi32(
        static_cast<int>(((w[2] >> 4) & low4) | (((w[1] >> 6) & low2) << 4)),  // mins 4-7
        static_cast<int>(w[1] & low6),                                         // mins 0-3
        static_cast<int>((w[2] & low4) | (((w[0] >> 6) & low2) << 4)),         // scales 4-7
        static_cast<int>(w[0] & low6));                                        // scales 0-3
}

inline int hsum_epi32_128(__m128i v) {
    v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
    return _mm_cvtsi128_si32(v) + _mm_extract_epi32(v, 1);
}

struct KQ2 {
    static constexpr int max_na = 4;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const BlockQ2_K*>(w);
        const Rows<BlockQ8_K, NA> y(a, stride);
        const float* tab = fp16_table();
        const __m256i m3 = _mm256_set1_epi8(3);
        const __m128i m4 = _mm_set1_epi8(0x0F);
        __m256 acc[NA];
        float summ_total[NA];
        for (int j = 0; j < NA; ++j) {
            acc[j] = _mm256_setzero_ps();
            summ_total[j] = 0.0f;
        }
        for (int64_t i = 0; i < n / qk_k; ++i) {
            const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
            const ScalePairs scales(_mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4)));
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
            __m256i sumi[NA];
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                // min term: sum_k (scales[k] >> 4) * bsums[k]
                const __m256i pm = _mm256_madd_epi16(mins, load256(y.p[j][i].bsums));
                const int summ = hsum_epi32_128(
                    _mm_add_epi32(_mm256_castsi256_si128(pm), _mm256_extracti128_si256(pm, 1)));
                const float dmin = y.p[j][i].d * tab[x[i].dmin];
                summ_total[j] -= dmin * static_cast<float>(summ);
                sumi[j] = _mm256_setzero_si256();
            }
#pragma GCC unroll 2
            for (int c = 0; c < 2; ++c) {
                const __m256i qbits = load256(x[i].qs + 32 * c);
#pragma GCC unroll 4
                for (int s = 0; s < 4; ++s) {
                    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qbits, 2 * s), m3);
                    const __m256i sc = scales.pair(4 * c + s);
#pragma GCC unroll 4
                    for (int j = 0; j < NA; ++j) {
                        const __m256i p =
                            _mm256_maddubs_epi16(q, load256(y.p[j][i].qs + 128 * c + 32 * s));
                        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, sc));
                    }
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const float d = y.p[j][i].d * tab[x[i].d];
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            }
        }
        for (int j = 0; j < NA; ++j) out[j] = hsum_ps(acc[j]) + summ_total[j];
    }
};

struct KQ3 {
    static constexpr int max_na = 4;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const BlockQ3_K*>(w);
        const Rows<BlockQ8_K, NA> y(a, stride);
        const float* tab = fp16_table();
        const __m256i m3 = _mm256_set1_epi8(3);
        const __m256i one = _mm256_set1_epi8(1);
        __m256 acc[NA];
        for (int j = 0; j < NA; ++j) acc[j] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / qk_k; ++i) {
            const ScalePairs scales(_mm256_cvtepi8_epi16(unpack_scales_q3_k_vec(x[i].scales)));
            const __m256i hbits = load256(x[i].hmask);
            __m256i sumi[NA];
            for (int j = 0; j < NA; ++j) sumi[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int c = 0; c < 2; ++c) {
                const __m256i qbits = load256(x[i].qs + 32 * c);
#pragma GCC unroll 4
                for (int s = 0; s < 4; ++s) {
                    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qbits, 2 * s), m3);
                    // 4 where the high bit is clear (those elements carry a -4 offset), else 0
                    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hbits, 4 * c + s), one);
                    const __m256i sub4 = _mm256_slli_epi16(_mm256_xor_si256(hb, one), 2);
                    const __m256i sc = scales.pair(4 * c + s);
#pragma GCC unroll 4
                    for (int j = 0; j < NA; ++j) {
                        const __m256i qy = load256(y.p[j][i].qs + 128 * c + 32 * s);
                        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(lo, qy),
                                                           _mm256_maddubs_epi16(sub4, qy));
                        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, sc));
                    }
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const float d = y.p[j][i].d * tab[x[i].d];
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            }
        }
        for (int j = 0; j < NA; ++j) out[j] = hsum_ps(acc[j]);
    }
};

// Q4_K and Q5_K; kHigh adds the fifth bit from qh.
template <bool kHigh, typename Block>
struct KQ4 {
    static constexpr int max_na = 4;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const Block*>(w);
        const Rows<BlockQ8_K, NA> y(a, stride);
        const float* tab = fp16_table();
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const __m256i one = _mm256_set1_epi8(1);
        __m256 acc[NA];
        __m128 acc_m[NA];
        for (int j = 0; j < NA; ++j) {
            acc[j] = _mm256_setzero_ps();
            acc_m[j] = _mm_setzero_ps();
        }
        for (int64_t i = 0; i < n / qk_k; ++i) {
            const __m256i sc_m = _mm256_cvtepu8_epi16(unpack_scale_min_k4_vec(x[i].scales));
            const __m128i mins = _mm256_extracti128_si256(sc_m, 1);
            __m256i sumi[NA];
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                // min term: sum_k m[k] * (bsums[2k] + bsums[2k+1])
                const __m256i bsums = load256(y.p[j][i].bsums);
                const __m128i pair_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums),
                                                         _mm256_extracti128_si256(bsums, 1));
                const float dmin = -y.p[j][i].d * tab[x[i].dmin];
                acc_m[j] = _mm_fmadd_ps(_mm_set1_ps(dmin),
                                        _mm_cvtepi32_ps(_mm_madd_epi16(mins, pair_sums)), acc_m[j]);
                sumi[j] = _mm256_setzero_si256();
            }
            const __m256i scales = _mm256_permute2x128_si256(sc_m, sc_m, 0x00);
            __m256i hbits = _mm256_setzero_si256();
            if constexpr (kHigh) hbits = load256(x[i].qh);
#pragma GCC unroll 4
            for (int c = 0; c < 4; ++c) {
                const __m256i qbits = load256(x[i].qs + 32 * c);
                __m256i ql = _mm256_and_si256(qbits, m4);
                __m256i qh = _mm256_and_si256(_mm256_srli_epi16(qbits, 4), m4);
                if constexpr (kHigh) {
                    const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
                    const __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
                    ql = _mm256_or_si256(ql, _mm256_slli_epi16(h1, 4));
                    qh = _mm256_or_si256(qh, _mm256_slli_epi16(h2, 4));
                }
                const __m256i s1 = broadcast_word(scales, 2 * c),
                              s2 = broadcast_word(scales, 2 * c + 1);
#pragma GCC unroll 4
                for (int j = 0; j < NA; ++j) {
                    const int8_t* qy = y.p[j][i].qs + 64 * c;
                    const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(ql, load256(qy)), s1);
                    const __m256i p2 =
                        _mm256_madd_epi16(_mm256_maddubs_epi16(qh, load256(qy + 32)), s2);
                    sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p1, p2));
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const float d = y.p[j][i].d * tab[x[i].d];
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            }
        }
        for (int j = 0; j < NA; ++j) out[j] = hsum_ps(acc[j]) + hsum_ps128(acc_m[j]);
    }
};

struct KQ6 {
    static constexpr int max_na = 4;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const BlockQ6_K*>(w);
        const Rows<BlockQ8_K, NA> y(a, stride);
        const float* tab = fp16_table();
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        const __m256i m2 = _mm256_set1_epi8(3);
        __m256 acc[NA];
        for (int j = 0; j < NA; ++j) acc[j] = _mm256_setzero_ps();
        for (int64_t i = 0; i < n / qk_k; ++i) {
            const __m256i sc16 = _mm256_cvtepi8_epi16(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
            const ScalePairs pairs(sc16);
            __m256i sumi[NA];
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                // the -32 offset: 32 * sum_k scale[k] * bsums[k], subtracted from the integer sum
                const __m256i off = _mm256_madd_epi16(sc16, load256(y.p[j][i].bsums));
                sumi[j] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m256i l0 = load256(x[i].ql + 64 * h);
                const __m256i l1 = load256(x[i].ql + 64 * h + 32);
                const __m256i hb = load256(x[i].qh + 32 * h);
                __m256i q[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
                q[1] = _mm256_or_si256(
                    _mm256_and_si256(l1, m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
                q[2] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
                q[3] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
#pragma GCC unroll 4
                for (int k = 0; k < 4; ++k) {
                    const __m256i sc = pairs.pair(4 * h + k);
#pragma GCC unroll 4
                    for (int j = 0; j < NA; ++j) {
                        const __m256i p =
                            _mm256_maddubs_epi16(q[k], load256(y.p[j][i].qs + 128 * h + 32 * k));
                        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, sc));
                    }
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const float d = y.p[j][i].d * tab[x[i].d];
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
            }
        }
        for (int j = 0; j < NA; ++j) out[j] = hsum_ps(acc[j]);
    }
};

}  // namespace

float dot_avx2_q2_k(int64_t n, const void* w, const void* a) {
    return run_single<KQ2>(n, w, a);
}
float dot_avx2_q3_k(int64_t n, const void* w, const void* a) {
    return run_single<KQ3>(n, w, a);
}
float dot_avx2_q4_k(int64_t n, const void* w, const void* a) {
    return run_single<KQ4<false, BlockQ4_K>>(n, w, a);
}
float dot_avx2_q5_k(int64_t n, const void* w, const void* a) {
    return run_single<KQ4<true, BlockQ5_K>>(n, w, a);
}
float dot_avx2_q6_k(int64_t n, const void* w, const void* a) {
    return run_single<KQ6>(n, w, a);
}

void dot_multi_avx2_q2_k(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<KQ2>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q3_k(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<KQ3>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q4_k(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<KQ4<false, BlockQ4_K>>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q5_k(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<KQ4<true, BlockQ5_K>>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q6_k(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<KQ6>(n, w, a, s, n_a, out);
}

// Q8_K x Q8_K: only an activation format; a plain loop is enough.
float dot_avx2_q8_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / qk_k; ++i) {
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < qk_k; j += 32)
            sumi = _mm256_add_epi32(sumi, dot_ss8(load256(x[i].qs + j), load256(y[i].qs + j)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(x[i].d * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_ps(acc);
}

}  // namespace zinc::quant::detail

#endif  // ZINC_QUANT_HAVE_AVX2
