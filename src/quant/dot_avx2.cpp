// zinc/quant/dot_avx2.cpp — AVX2/FMA/F16C dot products: the float types (F32/F16/BF16 x F32),
// the activation formats Q8_1 and Q8_K with themselves, and the AVX2 build of the quantized
// kernels in dot_avx2_kernels.h. Same contracts as dot_ref.cpp; results differ from it only by
// float summation order.
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_AVX2)

// Keep the scalar float expressions exactly as written (no implicit FMA), so that a kernel's
// result is the same for every NA instantiation and in both compilations of the kernels.
#pragma GCC optimize("fp-contract=off")

#include "quant/dot_avx2_kernels.h"  // includes simd_avx2.h
#include "quant/quant.h"

namespace zinc::quant::detail {
namespace {

using namespace avx2;

// ---- float types x F32 -------------------------------------------------------------------------

// Load: static __m256 load8(const T*) and static float one(T) for the weight element type T.
template <typename T, typename Load>
float dot_float_f32(int64_t n, const T* x, const float* y) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {  // four independent FMA chains
        acc0 = _mm256_fmadd_ps(Load::load8(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(Load::load8(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(Load::load8(x + i + 16), _mm256_loadu_ps(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(Load::load8(x + i + 24), _mm256_loadu_ps(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(Load::load8(x + i), _mm256_loadu_ps(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) sum += Load::one(x[i]) * y[i];
    return sum;
}

struct LoadF32 {
    static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
    static float one(float v) { return v; }
};

struct LoadF16 {
    static __m256 load8(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static float one(uint16_t h) { return _cvtsh_ss(h); }
};

struct LoadBf16 {
    static __m256 load8(const uint16_t* p) {
        const __m256i v =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    static float one(uint16_t h) { return bf16_to_fp32(h); }
};

}  // namespace

float dot_avx2_f32(int64_t n, const void* w, const void* a) {
    return dot_float_f32<float, LoadF32>(n, static_cast<const float*>(w),
                                         static_cast<const float*>(a));
}
float dot_avx2_f16(int64_t n, const void* w, const void* a) {
    return dot_float_f32<uint16_t, LoadF16>(n, static_cast<const uint16_t*>(w),
                                            static_cast<const float*>(a));
}
float dot_avx2_bf16(int64_t n, const void* w, const void* a) {
    return dot_float_f32<uint16_t, LoadBf16>(n, static_cast<const uint16_t*>(w),
                                             static_cast<const float*>(a));
}

// Q8_1 x Q8_1: only an activation format; a plain loop is enough.
float dot_avx2_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    const float* tab = fp16_table();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; ++i) {
        const __m256 d = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_ss8(load256(x[i].qs), load256(y[i].qs))),
                              acc);
    }
    return hsum_ps(acc);
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

ZINC_QUANT_DEFINE_DOT_EXPORTS(avx2)

}  // namespace zinc::quant::detail

#endif  // ZINC_QUANT_HAVE_AVX2
