// zinc/quant/dot_avx512vnni.cpp — the quantized dot kernels of dot_avx2_kernels.h compiled with
// AVX-512 VNNI (vpdpbusd / vpdpwssd on 256-bit vectors, AVX512VL), chosen at run time when the
// CPU has it (dispatch.cpp; env ZINC_AVX512=0 opts out). VNNI fuses the u8 x s8 product-and-add
// steps, one instruction instead of two or three, and the exact integer sums are the same, so the
// results are bit-identical to the AVX2 kernels (tests/unit/quant checks this).
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_VNNI)

// Everything with external linkage or from the standard library is included before the target
// switch, so no inline function outside this file is compiled with AVX-512 enabled.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/quant.h"

#pragma GCC optimize("fp-contract=off")
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

#define ZINC_QUANT_VNNI 1
#include "quant/dot_avx2_kernels.h"  // and simd_avx2.h, both compiled for VNNI here

namespace zinc::quant::detail {

ZINC_QUANT_DEFINE_DOT_EXPORTS(vnni)

}  // namespace zinc::quant::detail

#pragma GCC pop_options

#endif  // ZINC_QUANT_HAVE_VNNI
