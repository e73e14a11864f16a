// zinc/quant/gemm_dispatch.cpp — quant::gemm_tile: argument checks and the choice between the
// register-tiled kernels (gemm_avx2.cpp / gemm_avx512vnni.cpp, same kernel set as vec_dot) and
// the fallback of one vec_dot_multi per weight row for the types without a tiled kernel.
#include <cstring>

#include "quant/gemm_detail.h"
#include "quant/quant.h"
#include "util/check.h"

namespace zinc::quant {
namespace {

using detail::GemmFn;

enum class Set { Ref, Avx2, Vnni };

Set kernel_set() {
    static const Set s = [] {
        const char* l = simd_level();  // read once per process by dispatch.cpp
        if (std::strcmp(l, "avx512vnni") == 0) return Set::Vnni;
        if (std::strcmp(l, "avx2") == 0) return Set::Avx2;
        return Set::Ref;
    }();
    return s;
}

#if defined(ZINC_QUANT_HAVE_AVX2)
#define ZINC_GEMM_CASES(prefix)               \
    switch (t) {                              \
        case GgmlType::Q4_0:                  \
            return detail::gemm_##prefix##_q4_0; \
        case GgmlType::Q5_0:                  \
            return detail::gemm_##prefix##_q5_0; \
        case GgmlType::Q8_0:                  \
            return detail::gemm_##prefix##_q8_0; \
        case GgmlType::Q4_1:                  \
            return detail::gemm_##prefix##_q4_1; \
        case GgmlType::Q5_1:                  \
            return detail::gemm_##prefix##_q5_1; \
        default:                              \
            return nullptr;                   \
    }
#endif

GemmFn tiled_kernel(GgmlType t) {
    switch (kernel_set()) {
        case Set::Vnni:
#if defined(ZINC_QUANT_HAVE_VNNI)
            ZINC_GEMM_CASES(vnni)
#else
            return nullptr;
#endif
        case Set::Avx2:
#if defined(ZINC_QUANT_HAVE_AVX2)
            ZINC_GEMM_CASES(avx2)
#else
            return nullptr;
#endif
        case Set::Ref:
            break;
    }
    return nullptr;
}

}  // namespace

bool gemm_tile_is_tiled(GgmlType t) {
    return tiled_kernel(t) != nullptr;
}

void gemm_tile(GgmlType t, int64_t n, const void* w, size_t w_stride, int n_w, const void* a,
               size_t a_stride, int n_a, float* out, size_t out_stride) {
    const int64_t bs = type_traits(t).block_size;
    ZINC_CHECK(n >= 0 && n % bs == 0 && n_w >= 0 && n_a >= 0);
    ZINC_CHECK(n_a <= 1 || out_stride >= static_cast<size_t>(n_w));
    if (n_w == 0 || n_a == 0) return;
    if (const GemmFn f = tiled_kernel(t)) {
        f(n, w, w_stride, n_w, a, a_stride, n_a, out, out_stride);
        return;
    }
    // No tiled kernel for this type (or the scalar reference is selected): one weight row
    // against a chunk of activation rows at a time.
    constexpr int kChunk = 16;
    float tmp[kChunk];
    const auto* pw = static_cast<const uint8_t*>(w);
    const auto* pa = static_cast<const uint8_t*>(a);
    for (int j0 = 0; j0 < n_a; j0 += kChunk) {
        const int nj = n_a - j0 < kChunk ? n_a - j0 : kChunk;
        for (int r = 0; r < n_w; ++r) {
            vec_dot_multi(t, n, pw + static_cast<size_t>(r) * w_stride,
                          pa + static_cast<size_t>(j0) * a_stride, a_stride, nj, tmp);
            for (int j = 0; j < nj; ++j) out[static_cast<size_t>(j0 + j) * out_stride + r] = tmp[j];
        }
    }
}

}  // namespace zinc::quant
