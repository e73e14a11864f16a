// zinc/quant/dot_avx2_kernels.h — internal: the integer dot-product kernels of the quantized
// weight formats (32-element blocks x Q8_0/Q8_1, K-quants x Q8_K), written once as templates and
// compiled twice: for AVX2 (dot_avx2.cpp) and for AVX-512 VNNI on 256-bit vectors
// (dot_avx512vnni.cpp, where simd_avx2.h's integer steps become vpdpbusd / vpdpwssd). The
// integer sums are exact in both, so both variants give bit-identical results.
//
// Each kernel K has `template <int NA> static void run(n, w, a, stride, out)`: one weight row
// times NA activation rows (see simd_avx2.h). Everything here has internal linkage, so the two
// compilations do not collide. The including file selects the variant (ZINC_QUANT_VNNI and the
// target options in effect) before including this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"
#include "quant/simd_avx2.h"

namespace zinc::quant::detail {
namespace {

using namespace avx2;

// ---- symmetric 32-element formats x Q8_0: sum_b d_w d_a * sum(q_w * q_a) ----------------------

// load(b): the 32 signed codes; scale(b, tab): the block's weight scale (tab: fp16_table()).
struct WeightQ4_0 {
    using Block = BlockQ4_0;
    static __m256i load(const Block& b) {
        return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8));
    }
    static float scale(const Block& b, const float* tab) { return tab[b.d]; }
};

struct WeightQ5_0 {
    using Block = BlockQ5_0;
    // q - 16 as a signed byte: nibble | 0xF0 when the fifth bit is clear (nibble - 16), the bare
    // nibble when it is set (nibble + 16 - 16).
    static __m256i load(const Block& b) {
        const __m256i f0 = _mm256_set1_epi8(static_cast<char>(0xF0));
        return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_andnot_si256(expand_bits(b.qh), f0));
    }
    static float scale(const Block& b, const float* tab) { return tab[b.d]; }
};

struct WeightQ8_0 {
    using Block = BlockQ8_0;
    static __m256i load(const Block& b) { return load256(b.qs); }
    static float scale(const Block& b, const float* tab) { return tab[b.d]; }
};

// MXFP4: the nibbles index the doubled E2M1 table (one byte shuffle per 16 codes); the scale is
// the E8M0 byte as 2^(e - 128) (canon_dot.h).
struct WeightMXFP4 {
    using Block = BlockMXFP4;
    static __m256i load(const Block& b) {
        const __m256i table = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_mxfp4)));
        return _mm256_shuffle_epi8(table, unpack_nibbles(b.qs));
    }
    static float scale(const Block& b, const float*) {
        const uint32_t bits =
            b.e < 2 ? (0x00200000u << b.e) : (static_cast<uint32_t>(b.e - 1) << 23);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }
};

template <typename W>
struct SymmetricQ8_0 {
    static constexpr int max_na = 4;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const typename W::Block*>(w);
        const Rows<BlockQ8_0, NA> y(a, stride);
        const float* tab = fp16_table();
        const int64_t nb = n / 32;
        __m256 acc0[NA], acc1[NA];
        for (int j = 0; j < NA; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 2 <= nb; i += 2) {
            const __m256i qx0 = W::load(x[i]), qx1 = W::load(x[i + 1]);
            const __m256i ax0 = _mm256_sign_epi8(qx0, qx0), ax1 = _mm256_sign_epi8(qx1, qx1);
            const float dx0 = W::scale(x[i], tab), dx1 = W::scale(x[i + 1], tab);
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_0* yb = y.p[j] + i;
                const __m256i p0 = dot_us8(ax0, _mm256_sign_epi8(load256(yb[0].qs), qx0));
                const __m256i p1 = dot_us8(ax1, _mm256_sign_epi8(load256(yb[1].qs), qx1));
                acc0[j] = _mm256_fmadd_ps(_mm256_set1_ps(dx0 * tab[yb[0].d]),
                                          _mm256_cvtepi32_ps(p0), acc0[j]);
                acc1[j] = _mm256_fmadd_ps(_mm256_set1_ps(dx1 * tab[yb[1].d]),
                                          _mm256_cvtepi32_ps(p1), acc1[j]);
            }
        }
        for (; i < nb; ++i) {
            const __m256i qx = W::load(x[i]);
            const __m256i ax = _mm256_sign_epi8(qx, qx);
            const float dx = W::scale(x[i], tab);
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_0& yb = y.p[j][i];
                const __m256i p = dot_us8(ax, _mm256_sign_epi8(load256(yb.qs), qx));
                acc0[j] =
                    _mm256_fmadd_ps(_mm256_set1_ps(dx * tab[yb.d]), _mm256_cvtepi32_ps(p), acc0[j]);
            }
        }
        for (int j = 0; j < NA; ++j) out[j] = hsum_ps(_mm256_add_ps(acc0[j], acc1[j]));
    }
};

// ---- asymmetric 32-element formats x Q8_1: sum_b d_w d_a * sum(q_w * q_a) + m_w * s_a ---------

struct WeightQ4_1 {
    using Block = BlockQ4_1;
    static __m256i load(const Block& b) { return unpack_nibbles(b.qs); }
};

struct WeightQ5_1 {
    using Block = BlockQ5_1;
    static __m256i load(const Block& b) {
        return _mm256_or_si256(unpack_nibbles(b.qs),
                               _mm256_and_si256(expand_bits(b.qh), _mm256_set1_epi8(0x10)));
    }
};

template <typename W>
struct AsymmetricQ8_1 {
    static constexpr int max_na = 3;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const typename W::Block*>(w);
        const Rows<BlockQ8_1, NA> y(a, stride);
        const int64_t nb = n / 32;
        // Block scale products: [d_w, m_w] x [d_a, s_a] -> lane 0 d_w d_a, lane 1 m_w s_a; lane 1
        // of acc_m sums the min terms.
        __m256 acc0[NA], acc1[NA];
        __m128 acc_m[NA];
        for (int j = 0; j < NA; ++j) {
            acc0[j] = acc1[j] = _mm256_setzero_ps();
            acc_m[j] = _mm_setzero_ps();
        }
        int64_t i = 0;
        for (; i + 2 <= nb; i += 2) {
            const __m256i qx0 = W::load(x[i]), qx1 = W::load(x[i + 1]);
            const __m128 sx0 = two_halves(&x[i]), sx1 = two_halves(&x[i + 1]);
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_1* yb = y.p[j] + i;
                const __m128 p0 = _mm_mul_ps(sx0, two_halves(&yb[0]));
                const __m128 p1 = _mm_mul_ps(sx1, two_halves(&yb[1]));
                acc_m[j] = _mm_add_ps(acc_m[j], _mm_add_ps(p0, p1));
                acc0[j] =
                    _mm256_fmadd_ps(_mm256_broadcastss_ps(p0),
                                    _mm256_cvtepi32_ps(dot_us8(qx0, load256(yb[0].qs))), acc0[j]);
                acc1[j] =
                    _mm256_fmadd_ps(_mm256_broadcastss_ps(p1),
                                    _mm256_cvtepi32_ps(dot_us8(qx1, load256(yb[1].qs))), acc1[j]);
            }
        }
        for (; i < nb; ++i) {
            const __m256i qx = W::load(x[i]);
            const __m128 sx = two_halves(&x[i]);
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_1& yb = y.p[j][i];
                const __m128 p = _mm_mul_ps(sx, two_halves(&yb));
                acc_m[j] = _mm_add_ps(acc_m[j], p);
                acc0[j] = _mm256_fmadd_ps(_mm256_broadcastss_ps(p),
                                          _mm256_cvtepi32_ps(dot_us8(qx, load256(yb.qs))), acc0[j]);
            }
        }
        for (int j = 0; j < NA; ++j) {
            out[j] =
                hsum_ps(_mm256_add_ps(acc0[j], acc1[j])) + _mm_cvtss_f32(_mm_movehdup_ps(acc_m[j]));
        }
    }
};

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
                        sumi[j] = add_madd(sumi[j], p, sc);
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
                        sumi[j] = add_madd(sumi[j], p, sc);
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
                    sumi[j] = add_madd(sumi[j], _mm256_maddubs_epi16(ql, load256(qy)), s1);
                    sumi[j] = add_madd(sumi[j], _mm256_maddubs_epi16(qh, load256(qy + 32)), s2);
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
                        sumi[j] = add_madd(sumi[j], p, sc);
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
}  // namespace zinc::quant::detail

// Defines the exported single-row and multi-row entry points of every kernel above, named
// dot_<prefix>_<type> and dot_multi_<prefix>_<type> (declared in blocks.h).
#define ZINC_QUANT_DEFINE_DOT_EXPORTS(prefix)                       \
    ZINC_QUANT_DOT_EXPORT(prefix, q4_0, SymmetricQ8_0<WeightQ4_0>)  \
    ZINC_QUANT_DOT_EXPORT(prefix, q5_0, SymmetricQ8_0<WeightQ5_0>)  \
    ZINC_QUANT_DOT_EXPORT(prefix, q8_0, SymmetricQ8_0<WeightQ8_0>)  \
    ZINC_QUANT_DOT_EXPORT(prefix, q4_1, AsymmetricQ8_1<WeightQ4_1>) \
    ZINC_QUANT_DOT_EXPORT(prefix, q5_1, AsymmetricQ8_1<WeightQ5_1>) \
    ZINC_QUANT_DOT_EXPORT(prefix, q2_k, KQ2)                        \
    ZINC_QUANT_DOT_EXPORT(prefix, q3_k, KQ3)                        \
    ZINC_QUANT_DOT_EXPORT(prefix, q4_k, KQ4<false, BlockQ4_K>)      \
    ZINC_QUANT_DOT_EXPORT(prefix, q5_k, KQ4<true, BlockQ5_K>)       \
    ZINC_QUANT_DOT_EXPORT(prefix, q6_k, KQ6)                        \
    ZINC_QUANT_DOT_EXPORT(prefix, mxfp4, SymmetricQ8_0<WeightMXFP4>)

#define ZINC_QUANT_DOT_EXPORT(prefix, type, ...)                                                 \
    float dot_##prefix##_##type(int64_t n, const void* w, const void* a) {                       \
        return run_single<__VA_ARGS__>(n, w, a);                                                 \
    }                                                                                            \
    void dot_multi_##prefix##_##type(int64_t n, const void* w, const void* a, size_t s, int n_a, \
                                     float* out) {                                               \
        run_multi<__VA_ARGS__>(n, w, a, s, n_a, out);                                            \
    }
