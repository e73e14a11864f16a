// zinc/quant/gemm_detail.h — internal: the exported tiled-GEMM kernels (gemm_kernels.h compiled
// for AVX2 in gemm_avx2.cpp and for AVX-512 VNNI in gemm_avx512vnni.cpp) and their signature.
// The public entry point is quant::gemm_tile (gemm_dispatch.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"  // ZINC_QUANT_HAVE_AVX2 / ZINC_QUANT_HAVE_VNNI

namespace zinc::quant::detail {

// out[j * os + r] = dot(w + r * ws, a + j * as) for r < n_w, j < n_a (strides in bytes for w and
// a, in floats for out). Bit-identical to the dot_<prefix>_<type> kernel of the same type.
using GemmFn = void (*)(int64_t n, const void* w, size_t ws, int n_w, const void* a, size_t as,
                        int n_a, float* out, size_t os);

#define ZINC_QUANT_DECLARE_GEMMS(prefix)                                                   \
    void gemm_##prefix##_q4_0(int64_t n, const void* w, size_t ws, int n_w, const void* a, \
                              size_t as, int n_a, float* out, size_t os);                  \
    void gemm_##prefix##_q5_0(int64_t n, const void* w, size_t ws, int n_w, const void* a, \
                              size_t as, int n_a, float* out, size_t os);                  \
    void gemm_##prefix##_q8_0(int64_t n, const void* w, size_t ws, int n_w, const void* a, \
                              size_t as, int n_a, float* out, size_t os);                  \
    void gemm_##prefix##_q4_1(int64_t n, const void* w, size_t ws, int n_w, const void* a, \
                              size_t as, int n_a, float* out, size_t os);                  \
    void gemm_##prefix##_q5_1(int64_t n, const void* w, size_t ws, int n_w, const void* a, \
                              size_t as, int n_a, float* out, size_t os);

#if defined(ZINC_QUANT_HAVE_AVX2)
ZINC_QUANT_DECLARE_GEMMS(avx2)
#endif
#if defined(ZINC_QUANT_HAVE_VNNI)
ZINC_QUANT_DECLARE_GEMMS(vnni)
#endif

}  // namespace zinc::quant::detail
