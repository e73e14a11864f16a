// zinc/quant/quantize_avx2.cpp — AVX2 versions of the activation packings Q8_0, Q8_1 and Q8_K.
//
// They produce the same bytes as the scalar reference quantizers (q_legacy.cpp, k_quants.cpp):
// the scale is computed with the same scalar float operations, each element is multiplied by
// the same inverse scale (one IEEE multiply, as in the scalar code), and the rounding rules are
// reproduced exactly: Q8_0/Q8_1 round half away from zero (roundf), built from truncation plus
// a +-1 step when the dropped fraction is >= 0.5 (the fraction v - trunc(v) is exact in
// float); Q8_K rounds half to even (vroundps in nearest mode). tests/unit/quant checks byte
// equality with the reference on tie-heavy data.
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_AVX2)

#include <immintrin.h>

#include <cstring>

#include "quant/quant.h"

namespace zinc::quant::detail {
namespace {

inline __m256 abs_ps(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// roundf semantics (ties away from zero) for |v| < 2^23, as int32.
inline __m256i round_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = abs_ps(_mm256_sub_ps(v, t));
    const __m256 need = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 step = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
    return _mm256_cvtps_epi32(_mm256_add_ps(t, _mm256_and_ps(need, step)));
}

// Four vectors of 8 x i32 (values in [-128, 127]) -> 32 x i8 in element order.
inline __m256i pack_i32x4(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b);  // a0-3 b0-3 | a4-7 b4-7
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 ...
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

// One 32-element block: scale, quantized bytes and the sum of the quants.
inline void quantize_block_32(const float* x, float* d_out, int8_t* qs, int* sum) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(m, abs_ps(v[k]));
    }
    const float amax = hmax_ps(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = round_away(_mm256_mul_ps(v[k], idv));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i32x4(q[0], q[1], q[2], q[3]));
    *d_out = d;
    if (sum != nullptr) {
        *sum = hsum_epi32(
            _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    }
}

}  // namespace

void quantize_row_q8_0_avx2(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / qk8_0; ++i) {
        float d;
        quantize_block_32(src + i * qk8_0, &d, b[i].qs, nullptr);
        b[i].d = fp32_to_fp16(d);
    }
}

void quantize_row_q8_1_avx2(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / qk8_1; ++i) {
        float d;
        int sum;
        quantize_block_32(src + i * qk8_1, &d, b[i].qs, &sum);
        b[i].d = fp32_to_fp16(d);
        b[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

void quantize_row_q8_k_avx2(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float* x = src + i * qk_k;
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < qk_k; k += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + k)));
        const float amax = hmax_ps(m);
        if (amax == 0.0f) {
            std::memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        // the signed value of the first element of largest magnitude (the reference's choice)
        float max = 0.0f;
        const __m256 am = _mm256_set1_ps(amax);
        for (int k = 0; k < qk_k; k += 8) {
            const int mask =
                _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + k)), am, _CMP_EQ_OQ));
            if (mask != 0) {
                max = x[k + __builtin_ctz(static_cast<unsigned>(mask))];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127);
        __m128i sums[4];
        for (int g = 0; g < 8; ++g) {  // 32 elements per step
            __m256i q[4];
            for (int k = 0; k < 4; ++k) {
                const __m256 p = _mm256_mul_ps(is, _mm256_loadu_ps(x + 32 * g + 8 * k));
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_round_ps(
                                            p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                                        lim);
            }
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 32 * g),
                                pack_i32x4(q[0], q[1], q[2], q[3]));
            // Sums of the two 16-element groups 2g (q0, q1) and 2g+1 (q2, q3): one horizontal
            // add gives [s01 pairs, s23 pairs] per lane, adding the lanes and one more
            // horizontal add gives [S(2g), S(2g+1), S(2g), S(2g+1)].
            const __m256i h =
                _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            const __m128i lanes =
                _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            const __m128i two = _mm_hadd_epi32(lanes, lanes);
            // sums[k] collects groups 4k..4k+3
            sums[g / 2] = (g & 1) == 0 ? two : _mm_unpacklo_epi64(sums[g / 2], two);
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].bsums), _mm_packs_epi32(sums[0], sums[1]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].bsums + 8),
                         _mm_packs_epi32(sums[2], sums[3]));
        b[i].d = 1.0f / iscale;
    }
}

}  // namespace zinc::quant::detail

#endif  // ZINC_QUANT_HAVE_AVX2
