// zinc/quant/dot_ref.cpp — scalar reference dot products: weight row (type W) x activation row
// packed as type_traits(W).vec_dot_type. They perform the canonical float order of canon_dot.h,
// which is the order of the SIMD kernels, so this path is bit-identical to AVX2, AVX-512 VNNI,
// gemm_tile and the CUDA tier's exact kernels (tests/unit/quant/exact_test.cpp).
//
//   F32/F16/BF16 x F32 : sum w[i] * a[i] (4 x 8 float chains)
//   Q4_0/Q5_0/Q8_0 x Q8_0 : sum_b d_w d_a * sum_j q_w q_a   (q_w already offset by -8 / -16)
//   Q4_1/Q5_1 x Q8_1 : sum_b d_w d_a * sum_j q_w q_a + m_w * s_a   (s_a = d_a * sum_j q_a)
//   MXFP4 x Q8_0 : as Q4_0 with codes kvalues_mxfp4[nibble] and d_w = e8m0_half(e)
//   K-quants x Q8_K : sum_b d_a * (d_w * sum_sub sc * sum_j q_w q_a - dmin_w * sum_sub m * bsum)
#include "quant/blocks.h"
#include "quant/canon_dot.h"
#include "quant/quant.h"

namespace zinc::quant::detail {

#define ZINC_QUANT_REF(t)                                        \
    float dot_ref_##t(int64_t n, const void* w, const void* a) { \
        return canon_dot::dot_##t(n, w, a);                      \
    }

ZINC_QUANT_REF(f32)
ZINC_QUANT_REF(f16)
ZINC_QUANT_REF(bf16)
ZINC_QUANT_REF(q4_0)
ZINC_QUANT_REF(q4_1)
ZINC_QUANT_REF(q5_0)
ZINC_QUANT_REF(q5_1)
ZINC_QUANT_REF(q8_0)
ZINC_QUANT_REF(q8_1)
ZINC_QUANT_REF(q2_k)
ZINC_QUANT_REF(q3_k)
ZINC_QUANT_REF(q4_k)
ZINC_QUANT_REF(q5_k)
ZINC_QUANT_REF(q6_k)
ZINC_QUANT_REF(q8_k)
ZINC_QUANT_REF(mxfp4)

#undef ZINC_QUANT_REF

}  // namespace zinc::quant::detail
