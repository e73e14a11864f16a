// zinc/backend/cpu/f16_vec.h — f32 / f16 vector kernels used by attention over the f16 KV cache.
// Each has an AVX2+F16C path (when compiled for it and quant::simd_enabled()) and a scalar path;
// both compute in f32.
#pragma once

#include <cstdint>

namespace zinc::cpu {

/// sum_i a[i] * f16(b[i])
float dot_f32_f16(const float* a, const uint16_t* b, int64_t n);
/// y[i] += s * f16(x[i])
void axpy_f16(float s, const uint16_t* x, float* y, int64_t n);
/// dst[i] = f16(src[i]) (round to nearest even)
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);
/// dst[i] = f32(src[i])
void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n);
/// sum_i a[i] * b[i]
float dot_f32(const float* a, const float* b, int64_t n);
/// y[i] += s * x[i]
void axpy_f32(float s, const float* x, float* y, int64_t n);
/// out[g] = a_g . b for g < n_a (n_a <= 4), a_g = a + g * a_stride: one pass over b shared by
/// all rows (bit-identical to dot_f32 per row).
void dot_f32_rows(const float* a, int64_t a_stride, int n_a, const float* b, int64_t n, float* out);
/// out[d] = sum_{j < n} w[j] * f16(v[j * v_stride + d]) for d < dim, accumulated in registers
/// in j order (bit-identical to zeroing out and calling axpy_f16 for j = 0, 1, ...). With
/// accumulate, the sum starts from out's values instead of 0, so a sum cut into consecutive
/// runs of j (the blocks of a paged KV cache) is bit-identical to one call over all of them.
void weighted_sum_f16(const float* w, int64_t n, const uint16_t* v, int64_t v_stride, float* out,
                      int64_t dim, bool accumulate = false);

}  // namespace zinc::cpu
