// zinc/quant/mxfp4.cpp — MXFP4 (OCP Microscaling Formats v1.0, the FP4 E2M1 element type with a
// shared E8M0 scale per 32 elements; gpt-oss's expert weights): dequantize and the reference
// quantizer. The dot product with Q8_0 activations is canon_dot::dot_mxfp4 (scalar) and the
// AVX2 / AVX-512 VNNI kernel in dot_avx2_kernels.h.
//
// ggml's convention (ggml-common.h kvalues_mxfp4, ggml-impl.h ggml_e8m0_to_fp32_half): codes
// decode to twice their E2M1 value as int8, and the scale byte e to 2^(e - 128), half of E8M0's
// 2^(e - 127); x = half(e) * kvalues[code] is the format's value exactly.
//
// Quantizer (ggml's quantize_row_mxfp4_ref, checked byte for byte against gguf/quants.py and
// libggml): e = floor(log2(amax)) - 2 + 127 (so amax / half(e) lies in [8, 16): the largest
// doubled code 12 covers it), then per element the code of least |half(e) * kvalue - x|, the
// first on ties (codes 0 and 8 are both zero: 0 wins). amax == 0 gives e = 0. One departure:
// ggml casts a negative exponent (amax < 2^-125, f32 subnormals) to uint8 with wrap-around; here
// it is clamped to 0, the smallest scale, which represents such blocks as well as the format can.
#pragma GCC optimize("fp-contract=off")

#include <cmath>

#include "quant/blocks.h"
#include "quant/canon_dot.h"
#include "quant/quant.h"

namespace zinc::quant::detail {
namespace {

int best_index_mxfp4(float x, float d) {
    int best = 0;
    float best_err = std::fabs(static_cast<float>(kvalues_mxfp4[0]) * d - x);
    for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(static_cast<float>(kvalues_mxfp4[i]) * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

}  // namespace

void dequantize_row_mxfp4(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockMXFP4*>(src);
    for (int64_t i = 0; i < n / qk_mxfp4; ++i) {
        const float d = canon_dot::e8m0_to_fp32_half(x[i].e);
        for (int j = 0; j < qk_mxfp4 / 2; ++j) {
            dst[i * qk_mxfp4 + j] = static_cast<float>(kvalues_mxfp4[x[i].qs[j] & 0x0F]) * d;
            dst[i * qk_mxfp4 + j + 16] = static_cast<float>(kvalues_mxfp4[x[i].qs[j] >> 4]) * d;
        }
    }
}

void quantize_row_mxfp4(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockMXFP4*>(dst);
    for (int64_t i = 0; i < n / qk_mxfp4; ++i) {
        const float* x = src + i * qk_mxfp4;
        float amax = 0.0f;
        for (int j = 0; j < qk_mxfp4; ++j) {
            if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
        }
        int e = 0;
        if (amax > 0.0f) {
            e = static_cast<int>(std::floor(std::log2(amax))) - 2 + 127;
            if (e < 0) e = 0;
            if (e > 255) e = 255;  // amax is at most FLT_MAX: floor(log2) <= 127, e <= 252
        }
        y[i].e = static_cast<uint8_t>(e);
        const float d = canon_dot::e8m0_to_fp32_half(y[i].e);
        for (int j = 0; j < qk_mxfp4 / 2; ++j) {
            const int lo = best_index_mxfp4(x[j], d);
            const int hi = best_index_mxfp4(x[j + 16], d);
            y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}

}  // namespace zinc::quant::detail
