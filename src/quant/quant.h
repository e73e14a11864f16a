// zinc/quant/quant.h — dequantize, quantize and dot products for every supported block format.
//
// Formats and math follow ggml (ggml-quants.c, ggml-common.h) and are checked block by block
// against the `gguf` pip package's numpy implementation (gguf/quants.py).
//
// Dot products: a weight row of type W is multiplied with an activation row that has been packed
// to type_traits(W).vec_dot_type (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the
// K-quants, F32 for F32/F16/BF16). Each function has a portable scalar reference and a SIMD
// version (AVX2+FMA+F16C, and for the quantized weight formats an AVX-512 VNNI build of the same
// kernels with bit-identical results); the fastest available is chosen at run time from CPUID
// unless env ZINC_SIMD=0 (reference path) or ZINC_AVX512=0 (AVX2) says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace zinc::quant {

/// Convert n elements of row `src` (type t) to f32. n % block_size == 0.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

/// Quantize n f32 values into row `dst` of type t (reference rounding, as ggml's
/// quantize_row_*_ref). Supported for every type including Q8_0/Q8_1/Q8_K activation packings.
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

/// sum_i dequant(w)[i] * dequant(a)[i] over n elements, where w is a row of type t and a is a
/// row of type type_traits(t).vec_dot_type. Uses SIMD when enabled.
float vec_dot(GgmlType t, int64_t n, const void* w, const void* a);

/// One weight row times n_a activation rows (each packed as above): out[j] = vec_dot(t, n, w,
/// a_j) with a_j = (const uint8_t*)a + j * a_stride, for j < n_a. Bit-identical to calling
/// vec_dot once per activation row; faster for prefill, because the SIMD kernels unpack each
/// weight block once for up to four activation rows.
void vec_dot_multi(GgmlType t, int64_t n, const void* w, const void* a, size_t a_stride, int n_a,
                   float* out);

/// Tiled product of n_w weight rows and n_a activation rows (prefill): for r < n_w, j < n_a,
///   out[j * out_stride + r] = vec_dot(t, n, w + r * w_stride, a + j * a_stride)
/// (w and a strides in bytes, out_stride in floats; activations packed as for vec_dot).
/// Bit-identical to vec_dot for every type and selected kernel set. Types with a register-tiled
/// micro-kernel (gemm_tile_is_tiled: Q4_0, Q5_0, Q8_0, Q4_1, Q5_1 with AVX2 or AVX-512 VNNI) reuse
/// each loaded weight block across several activation rows and each activation block across
/// several weight rows; the others run vec_dot_multi once per weight row.
void gemm_tile(GgmlType t, int64_t n, const void* w, size_t w_stride, int n_w, const void* a,
               size_t a_stride, int n_a, float* out, size_t out_stride);

/// Whether gemm_tile has a register-tiled kernel for type t in the selected kernel set.
bool gemm_tile_is_tiled(GgmlType t);

/// The scalar reference of vec_dot (same contract, no SIMD).
float vec_dot_ref(GgmlType t, int64_t n, const void* w, const void* a);

/// Whether the CPU supports the SIMD path (AVX2+FMA+F16C).
bool cpu_has_avx2();
/// Global SIMD choice is read once from env ZINC_SIMD; this returns the effective setting.
bool simd_enabled();
/// The kernel set in use: "ref" (scalar; ZINC_SIMD=0 or no AVX2), "avx2", or "avx512vnni"
/// (the quantized dots built with AVX-512 VNNI, bit-identical to "avx2"; ZINC_AVX512=0 opts
/// out). Read once per process; for run reports.
const char* simd_level();

/// IEEE half / bfloat16 conversions (round-to-nearest-even), exposed for ops and tests.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace zinc::quant
