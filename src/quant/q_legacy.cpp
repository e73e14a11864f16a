// zinc/quant/q_legacy.cpp — the 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1:
// dequantize and reference quantize.
//
// Rounding follows ggml's quantize_row_*_ref (checked byte for byte against gguf/quants.py):
// Q4_0/Q5_0 scale by the signed value of largest magnitude (d = max / -8 or / -16) and round by
// truncating x/d + 8.5 (16.5); Q4_1/Q5_1 use d = (max - min) / 15 (31) and truncate
// (x - min)/d + 0.5; Q8_0/Q8_1 use d = amax / 127 and round half away from zero.
//
// FMA contraction is off in this file: numpy evaluates d * q + m as a multiply then an add, and
// a fused multiply-add would round differently in the last bit.
#pragma GCC optimize("fp-contract=off")

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace zinc::quant::detail {
namespace {

// Index-free scan for the signed value of largest magnitude (first one on ties, like argmax).
float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; ++j) {
        const float v = x[j];
        if (amax < std::fabs(v)) {
            amax = std::fabs(v);
            max = v;
        }
    }
    return max;
}

void min_max(const float* x, int n, float* out_min, float* out_max) {
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        mn = std::min(mn, x[j]);
        mx = std::max(mx, x[j]);
    }
    *out_min = mn;
    *out_max = mx;
}

// Low nibble of byte j = element j, high nibble = element j + 16.
inline int nib_lo(const uint8_t* qs, int j) {
    return qs[j] & 0x0F;
}
inline int nib_hi(const uint8_t* qs, int j) {
    return qs[j] >> 4;
}

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / qk4_0; ++i, dst += qk4_0) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < qk4_0 / 2; ++j) {
            dst[j] = d * static_cast<float>(nib_lo(b[i].qs, j) - 8);
            dst[j + 16] = d * static_cast<float>(nib_hi(b[i].qs, j) - 8);
        }
    }
}

void dequantize_row_q4_1(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / qk4_1; ++i, dst += qk4_1) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < qk4_1 / 2; ++j) {
            dst[j] = d * static_cast<float>(nib_lo(b[i].qs, j)) + m;
            dst[j + 16] = d * static_cast<float>(nib_hi(b[i].qs, j)) + m;
        }
    }
}

void dequantize_row_q5_0(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ5_0*>(src);
    for (int64_t i = 0; i < n / qk5_0; ++i, dst += qk5_0) {
        const float d = fp16_to_fp32(b[i].d);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < qk5_0 / 2; ++j) {
            const int h0 = static_cast<int>((qh >> j) & 1) << 4;
            const int h1 = static_cast<int>((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * static_cast<float>((nib_lo(b[i].qs, j) | h0) - 16);
            dst[j + 16] = d * static_cast<float>((nib_hi(b[i].qs, j) | h1) - 16);
        }
    }
}

void dequantize_row_q5_1(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ5_1*>(src);
    for (int64_t i = 0; i < n / qk5_1; ++i, dst += qk5_1) {
        const float d = fp16_to_fp32(b[i].d);
        const float m = fp16_to_fp32(b[i].m);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < qk5_1 / 2; ++j) {
            const int h0 = static_cast<int>((qh >> j) & 1) << 4;
            const int h1 = static_cast<int>((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * static_cast<float>(nib_lo(b[i].qs, j) | h0) + m;
            dst[j + 16] = d * static_cast<float>(nib_hi(b[i].qs, j) | h1) + m;
        }
    }
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ8_0*>(src);
    for (int64_t i = 0; i < n / qk8_0; ++i, dst += qk8_0) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < qk8_0; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
    }
}

void dequantize_row_q8_1(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ8_1*>(src);
    for (int64_t i = 0; i < n / qk8_1; ++i, dst += qk8_1) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < qk8_1; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
    }
}

void quantize_row_q4_0(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ4_0*>(dst);
    for (int64_t i = 0; i < n / qk4_0; ++i, src += qk4_0) {
        const float d = signed_absmax(src, qk4_0) / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (int j = 0; j < qk4_0 / 2; ++j) {
            const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(src[j] * id + 8.5f)));
            const int q1 =
                std::min(15, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 8.5f)));
            b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ4_1*>(dst);
    for (int64_t i = 0; i < n / qk4_1; ++i, src += qk4_1) {
        float mn, mx;
        min_max(src, qk4_1, &mn, &mx);
        const float d = (mx - mn) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        b[i].m = fp32_to_fp16(mn);
        for (int j = 0; j < qk4_1 / 2; ++j) {
            const int q0 =
                std::min(15, static_cast<int>(static_cast<int8_t>((src[j] - mn) * id + 0.5f)));
            const int q1 =
                std::min(15, static_cast<int>(static_cast<int8_t>((src[j + 16] - mn) * id + 0.5f)));
            b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
    }
}

void quantize_row_q5_0(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ5_0*>(dst);
    for (int64_t i = 0; i < n / qk5_0; ++i, src += qk5_0) {
        const float d = signed_absmax(src, qk5_0) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < qk5_0 / 2; ++j) {
            const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(src[j] * id + 16.5f)));
            const int q1 =
                std::min(31, static_cast<int>(static_cast<int8_t>(src[j + 16] * id + 16.5f)));
            b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
        }
        std::memcpy(b[i].qh, &qh, sizeof qh);
    }
}

void quantize_row_q5_1(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ5_1*>(dst);
    for (int64_t i = 0; i < n / qk5_1; ++i, src += qk5_1) {
        float mn, mx;
        min_max(src, qk5_1, &mn, &mx);
        const float d = (mx - mn) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        b[i].m = fp32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < qk5_1 / 2; ++j) {
            const int q0 =
                std::min(31, static_cast<int>(static_cast<int8_t>((src[j] - mn) * id + 0.5f)));
            const int q1 =
                std::min(31, static_cast<int>(static_cast<int8_t>((src[j + 16] - mn) * id + 0.5f)));
            b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
            qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
        }
        std::memcpy(b[i].qh, &qh, sizeof qh);
    }
}

void quantize_row_q8_0(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / qk8_0; ++i, src += qk8_0) {
        float amax = 0.0f;
        for (int j = 0; j < qk8_0; ++j) amax = std::max(amax, std::fabs(src[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = fp32_to_fp16(d);
        for (int j = 0; j < qk8_0; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
    }
}

void quantize_row_q8_1(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / qk8_1; ++i, src += qk8_1) {
        float amax = 0.0f;
        for (int j = 0; j < qk8_1; ++j) amax = std::max(amax, std::fabs(src[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < qk8_1; ++j) {
            b[i].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
            sum += b[i].qs[j];
        }
        b[i].d = fp32_to_fp16(d);
        b[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

}  // namespace zinc::quant::detail
