// zinc/quant/gemm_avx2.cpp — the AVX2 build of the tiled GEMM micro-kernels (gemm_kernels.h).
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_AVX2)

// No implicit FMA: the float operations must be exactly those of the vec_dot kernels.
#pragma GCC optimize("fp-contract=off")

#include "quant/gemm_detail.h"
#include "quant/gemm_kernels.h"

namespace zinc::quant::detail {

ZINC_QUANT_DEFINE_LEGACY_GEMMS(avx2)

}  // namespace zinc::quant::detail

#endif  // ZINC_QUANT_HAVE_AVX2
