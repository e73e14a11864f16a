// zinc/backend/cpu/f16_vec.cpp — f32/f16 dot, axpy and conversion, AVX2+F16C with scalar path.
#include "backend/cpu/f16_vec.h"

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#define ZINC_F16_SIMD 1
#endif

#include "quant/quant.h"

namespace zinc::cpu {
namespace {

#ifdef ZINC_F16_SIMD
inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}
#endif

bool use_simd() {
#ifdef ZINC_F16_SIMD
    static const bool on = quant::simd_enabled();
    return on;
#else
    return false;
#endif
}

}  // namespace

float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) {
    int64_t i = 0;
    float sum = 0.0f;
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        __m256 acc0 = _mm256_setzero_ps();
        __m256 acc1 = _mm256_setzero_ps();
        for (; i + 16 <= n; i += 16) {
            const __m256 b0 =
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
            const __m256 b1 =
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8)));
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), b1, acc1);
        }
        for (; i + 8 <= n; i += 8) {
            const __m256 b0 =
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
        }
        sum = hsum(_mm256_add_ps(acc0, acc1));
    }
#endif
    for (; i < n; ++i) sum += a[i] * quant::fp16_to_fp32(b[i]);
    return sum;
}

void axpy_f16(float s, const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        const __m256 vs = _mm256_set1_ps(s);
        for (; i + 8 <= n; i += 8) {
            const __m256 xv =
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
            _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vs, xv, _mm256_loadu_ps(y + i)));
        }
    }
#endif
    for (; i < n; ++i) y[i] += s * quant::fp16_to_fp32(x[i]);
}

void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        for (; i + 8 <= n; i += 8) {
            const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
        }
    }
#endif
    for (; i < n; ++i) dst[i] = quant::fp32_to_fp16(src[i]);
}

void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        for (; i + 8 <= n; i += 8) {
            _mm256_storeu_ps(
                dst + i,
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
        }
    }
#endif
    for (; i < n; ++i) dst[i] = quant::fp16_to_fp32(src[i]);
}

float dot_f32(const float* a, const float* b, int64_t n) {
    int64_t i = 0;
    float sum = 0.0f;
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        __m256 acc0 = _mm256_setzero_ps();
        __m256 acc1 = _mm256_setzero_ps();
        for (; i + 16 <= n; i += 16) {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        }
        for (; i + 8 <= n; i += 8) {
            acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        }
        sum = hsum(_mm256_add_ps(acc0, acc1));
    }
#endif
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

void axpy_f32(float s, const float* x, float* y, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        const __m256 vs = _mm256_set1_ps(s);
        for (; i + 8 <= n; i += 8) {
            _mm256_storeu_ps(y + i,
                             _mm256_fmadd_ps(vs, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
        }
    }
#endif
    for (; i < n; ++i) y[i] += s * x[i];
}

#ifdef ZINC_F16_SIMD
namespace {
template <int G>
void dot_rows_avx2(const float* a, int64_t a_stride, const float* b, int64_t n, float* out) {
    __m256 acc0[G], acc1[G];
    for (int g = 0; g < G; ++g) acc0[g] = acc1[g] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 b0 = _mm256_loadu_ps(b + i), b1 = _mm256_loadu_ps(b + i + 8);
        for (int g = 0; g < G; ++g) {
            acc0[g] = _mm256_fmadd_ps(_mm256_loadu_ps(a + g * a_stride + i), b0, acc0[g]);
            acc1[g] = _mm256_fmadd_ps(_mm256_loadu_ps(a + g * a_stride + i + 8), b1, acc1[g]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 b0 = _mm256_loadu_ps(b + i);
        for (int g = 0; g < G; ++g) {
            acc0[g] = _mm256_fmadd_ps(_mm256_loadu_ps(a + g * a_stride + i), b0, acc0[g]);
        }
    }
    for (int g = 0; g < G; ++g) {
        float sum = hsum(_mm256_add_ps(acc0[g], acc1[g]));
        for (int64_t k = i; k < n; ++k) sum += a[g * a_stride + k] * b[k];
        out[g] = sum;
    }
}
}  // namespace
#endif

void dot_f32_rows(const float* a, int64_t a_stride, int n_a, const float* b, int64_t n,
                  float* out) {
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        switch (n_a) {
            case 1:
                return dot_rows_avx2<1>(a, a_stride, b, n, out);
            case 2:
                return dot_rows_avx2<2>(a, a_stride, b, n, out);
            case 3:
                return dot_rows_avx2<3>(a, a_stride, b, n, out);
            case 4:
                return dot_rows_avx2<4>(a, a_stride, b, n, out);
            default:
                break;
        }
    }
#endif
    for (int g = 0; g < n_a; ++g) out[g] = dot_f32(a + g * a_stride, b, n);
}

void weighted_sum_f16(const float* w, int64_t n, const uint16_t* v, int64_t v_stride, float* out,
                      int64_t dim, bool accumulate) {
    int64_t d = 0;
#ifdef ZINC_F16_SIMD
    if (use_simd()) {
        auto load = [](const uint16_t* p) {
            return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        };
        for (; d + 32 <= dim; d += 32) {
            __m256 a0 = accumulate ? _mm256_loadu_ps(out + d) : _mm256_setzero_ps();
            __m256 a1 = accumulate ? _mm256_loadu_ps(out + d + 8) : _mm256_setzero_ps();
            __m256 a2 = accumulate ? _mm256_loadu_ps(out + d + 16) : _mm256_setzero_ps();
            __m256 a3 = accumulate ? _mm256_loadu_ps(out + d + 24) : _mm256_setzero_ps();
            const uint16_t* vp = v + d;
            for (int64_t j = 0; j < n; ++j, vp += v_stride) {
                const __m256 s = _mm256_broadcast_ss(w + j);
                a0 = _mm256_fmadd_ps(s, load(vp), a0);
                a1 = _mm256_fmadd_ps(s, load(vp + 8), a1);
                a2 = _mm256_fmadd_ps(s, load(vp + 16), a2);
                a3 = _mm256_fmadd_ps(s, load(vp + 24), a3);
            }
            _mm256_storeu_ps(out + d, a0);
            _mm256_storeu_ps(out + d + 8, a1);
            _mm256_storeu_ps(out + d + 16, a2);
            _mm256_storeu_ps(out + d + 24, a3);
        }
        for (; d + 8 <= dim; d += 8) {
            __m256 a0 = accumulate ? _mm256_loadu_ps(out + d) : _mm256_setzero_ps();
            const uint16_t* vp = v + d;
            for (int64_t j = 0; j < n; ++j, vp += v_stride) {
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j), load(vp), a0);
            }
            _mm256_storeu_ps(out + d, a0);
        }
    }
#endif
    for (; d < dim; ++d) {
        float acc = accumulate ? out[d] : 0.0f;
        for (int64_t j = 0; j < n; ++j) acc += w[j] * quant::fp16_to_fp32(v[j * v_stride + d]);
        out[d] = acc;
    }
}

}  // namespace zinc::cpu
