// zinc/backend/cpu/activations.cpp — silu, gelu (tanh approximation), swiglu, geglu.
//
// Both activations are x * sigmoid(z): silu has z = x, and the tanh-approximated GELU has
// z = 2 sqrt(2/pi) (x + 0.044715 x^3), because 0.5 (1 + tanh(u)) = sigmoid(2u). The AVX2 path
// evaluates sigmoid with a vectorised exp (Cody-Waite range reduction + degree-6 polynomial,
// about 2 ulp), so GeGLU no longer spends most of its time in libm's tanhf. The scalar path
// (ZINC_SIMD=0, and the tails) is canon::exp / canon::silu / canon::gelu_tanh of
// backend/canon.h: the same operations, so both paths and the CUDA tier give the same bits.
#include "backend/cpu/activations.h"

#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ZINC_ACT_SIMD 1
#endif

#include "backend/canon.h"
#include "quant/quant.h"

namespace zinc::cpu {
namespace {

constexpr float kGeluZ = canon::kGeluZ;
constexpr float kGeluC = canon::kGeluC;

bool use_simd() {
#ifdef ZINC_ACT_SIMD
    static const bool on = quant::simd_enabled();
    return on;
#else
    return false;
#endif
}

#ifdef ZINC_ACT_SIMD
// exp(x) for 8 floats; inputs clamped to [-87.3, 88.7] (results stay finite and normal).
inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// x * sigmoid(z) = x / (1 + exp(-z))
inline __m256 x_sigmoid8(__m256 x, __m256 z) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), z));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

inline __m256 gelu8(__m256 x) {
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 z =
        _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(kGeluZ)),
                      _mm256_fmadd_ps(x2, _mm256_set1_ps(kGeluC), _mm256_set1_ps(1.0f)));
    return x_sigmoid8(x, z);
}
#endif

}  // namespace

float silu(float x) {
    return canon::silu(x);
}

float gelu_tanh(float x) {
    // 0.5 x (1 + tanh(u)) == x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3)
    return canon::gelu_tanh(x);
}

void silu_rows(const float* x, float* y, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_ACT_SIMD
    if (use_simd()) {
        for (; i + 8 <= n; i += 8) {
            const __m256 v = _mm256_loadu_ps(x + i);
            _mm256_storeu_ps(y + i, x_sigmoid8(v, v));
        }
    }
#endif
    for (; i < n; ++i) y[i] = silu(x[i]);
}

void gelu_tanh_rows(const float* x, float* y, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_ACT_SIMD
    if (use_simd()) {
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
    }
#endif
    for (; i < n; ++i) y[i] = gelu_tanh(x[i]);
}

void swiglu(const float* gate, const float* up, float* y, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_ACT_SIMD
    if (use_simd()) {
        for (; i + 8 <= n; i += 8) {
            const __m256 g = _mm256_loadu_ps(gate + i);
            _mm256_storeu_ps(y + i, _mm256_mul_ps(x_sigmoid8(g, g), _mm256_loadu_ps(up + i)));
        }
    }
#endif
    for (; i < n; ++i) y[i] = canon::mul(silu(gate[i]), up[i]);
}

void geglu(const float* gate, const float* up, float* y, int64_t n) {
    int64_t i = 0;
#ifdef ZINC_ACT_SIMD
    if (use_simd()) {
        for (; i + 8 <= n; i += 8) {
            _mm256_storeu_ps(
                y + i, _mm256_mul_ps(gelu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
        }
    }
#endif
    for (; i < n; ++i) y[i] = canon::mul(gelu_tanh(gate[i]), up[i]);
}

void gelu_erf_rows(const float* x, float* y, int64_t n) {
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

}  // namespace zinc::cpu
