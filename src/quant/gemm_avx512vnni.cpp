// zinc/quant/gemm_avx512vnni.cpp — the tiled GEMM micro-kernels of gemm_kernels.h compiled with
// AVX-512 VNNI on 256-bit vectors (vpdpbusd, byte masks from AVX512BW, and the 32 vector
// registers of AVX512VL, which let a 4 x 4 tile keep its accumulators in registers). Chosen at
// run time with the VNNI vec_dot kernels (same conditions, dispatch.cpp); bit-identical to them.
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_VNNI)

// Everything with external linkage or from the standard library is included before the target
// switch, so no inline function outside this file is compiled with AVX-512 enabled.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/gemm_detail.h"
#include "quant/quant.h"

#pragma GCC optimize("fp-contract=off")
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

#define ZINC_QUANT_VNNI 1
#include "quant/gemm_kernels.h"  // and dot_avx2_kernels.h / simd_avx2.h, compiled for VNNI here

namespace zinc::quant::detail {

ZINC_QUANT_DEFINE_LEGACY_GEMMS(vnni)

}  // namespace zinc::quant::detail

#pragma GCC pop_options

#endif  // ZINC_QUANT_HAVE_VNNI
