// zinc/quant/k_quants.cpp — dequantize for the 256-element K-quant super-blocks (Q2_K..Q6_K,
// Q8_K) and the Q8_K activation packing. The weight quantizers (scale search) are in
// k_quantize.cpp.
//
// Element order inside a super-block (checked against gguf/quants.py):
//   Q2_K/Q3_K: 2 chunks of 128; in chunk c, bits (2s, 2s+1) of qs[32c + l] are element
//              128c + 32s + l; scale index = element / 16. Q3_K's high bit of element e is bit
//              e / 32 of hmask[e % 32] (a set bit means "no -4 offset").
//   Q4_K/Q5_K: 4 chunks of 64; low nibble of qs[32c + l] is element 64c + l, high nibble
//              element 64c + 32 + l; scale index = element / 32. Q5_K's fifth bit of element e
//              is bit e / 32 of qh[e % 32].
//   Q6_K:      2 halves of 128; in half h, ql[64h + l] low nibble -> 128h + l, ql[64h + 32 + l]
//              low -> 128h + 32 + l, the high nibbles -> +64 and +96; bits (2s, 2s+1) of
//              qh[32h + l] are the top two bits of element 128h + 32s + l; scale = element / 16.
//
// FMA contraction is off: numpy computes (d * sc) * q - dmin * m as separate roundings.
#pragma GCC optimize("fp-contract=off")

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace zinc::quant::detail {

void dequantize_row_q2_k(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ2_K*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        for (int e = 0; e < qk_k; ++e) {
            const int c = e / 128, s = (e % 128) / 32, l = e % 32;
            const int q = (b[i].qs[32 * c + l] >> (2 * s)) & 3;
            const uint8_t sc = b[i].scales[e / 16];
            const float dl = d * static_cast<float>(sc & 0x0F);
            const float ml = dmin * static_cast<float>(sc >> 4);
            dst[e] = dl * static_cast<float>(q) - ml;
        }
        dst += qk_k;
    }
}

void dequantize_row_q3_k(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ3_K*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        int8_t sc[16];
        unpack_scales_q3_k(b[i].scales, sc);
        for (int e = 0; e < qk_k; ++e) {
            const int c = e / 128, s = (e % 128) / 32, l = e % 32;
            const int lo = (b[i].qs[32 * c + l] >> (2 * s)) & 3;
            const int hi = (b[i].hmask[l] >> (e / 32)) & 1;
            const int q = lo - (hi ? 0 : 4);
            const float dl = d * static_cast<float>(sc[e / 16]);
            dst[e] = dl * static_cast<float>(q);
        }
        dst += qk_k;
    }
}

void dequantize_row_q4_k(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ4_K*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        uint8_t sc[8], m[8];
        unpack_scale_min_k4(b[i].scales, sc, m);
        for (int c = 0; c < 4; ++c) {
            const float d1 = d * static_cast<float>(sc[2 * c]);
            const float m1 = dmin * static_cast<float>(m[2 * c]);
            const float d2 = d * static_cast<float>(sc[2 * c + 1]);
            const float m2 = dmin * static_cast<float>(m[2 * c + 1]);
            const uint8_t* q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; ++l)
                dst[64 * c + l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
            for (int l = 0; l < 32; ++l)
                dst[64 * c + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
        dst += qk_k;
    }
}

void dequantize_row_q5_k(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ5_K*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        const float dmin = fp16_to_fp32(b[i].dmin);
        uint8_t sc[8], m[8];
        unpack_scale_min_k4(b[i].scales, sc, m);
        for (int c = 0; c < 4; ++c) {
            const float d1 = d * static_cast<float>(sc[2 * c]);
            const float m1 = dmin * static_cast<float>(m[2 * c]);
            const float d2 = d * static_cast<float>(sc[2 * c + 1]);
            const float m2 = dmin * static_cast<float>(m[2 * c + 1]);
            const uint8_t* q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; ++l) {
                const int h1 = (b[i].qh[l] >> (2 * c)) & 1;
                const int h2 = (b[i].qh[l] >> (2 * c + 1)) & 1;
                dst[64 * c + l] = d1 * static_cast<float>((q[l] & 0x0F) | (h1 << 4)) - m1;
                dst[64 * c + 32 + l] = d2 * static_cast<float>((q[l] >> 4) | (h2 << 4)) - m2;
            }
        }
        dst += qk_k;
    }
}

void dequantize_row_q6_k(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ6_K*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i) {
        const float d = fp16_to_fp32(b[i].d);
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = b[i].ql + 64 * h;
            const uint8_t* qh = b[i].qh + 32 * h;
            float* y = dst + 128 * h;
            for (int l = 0; l < 32; ++l) {
                const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                const int e = 128 * h + l;
                y[l] = (d * static_cast<float>(b[i].scales[e / 16])) * static_cast<float>(q1);
                y[l + 32] =
                    (d * static_cast<float>(b[i].scales[(e + 32) / 16])) * static_cast<float>(q2);
                y[l + 64] =
                    (d * static_cast<float>(b[i].scales[(e + 64) / 16])) * static_cast<float>(q3);
                y[l + 96] =
                    (d * static_cast<float>(b[i].scales[(e + 96) / 16])) * static_cast<float>(q4);
            }
        }
        dst += qk_k;
    }
}

void dequantize_row_q8_k(const void* src, float* dst, int64_t n) {
    const auto* b = static_cast<const BlockQ8_K*>(src);
    for (int64_t i = 0; i < n / qk_k; ++i, dst += qk_k) {
        for (int j = 0; j < qk_k; ++j) dst[j] = b[i].d * static_cast<float>(b[i].qs[j]);
    }
}

// Q8_K: scale by the signed value of largest magnitude so that it maps to -127 exactly;
// round to nearest even; keep per-16 sums for the K-quant dots' min/offset terms.
void quantize_row_q8_k(const float* src, void* dst, int64_t n) {
    auto* b = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, src += qk_k) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < qk_k; ++j) {
            if (amax < std::fabs(src[j])) {
                amax = std::fabs(src[j]);
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < qk_k; ++j) {
            const int v = static_cast<int>(std::nearbyint(iscale * src[j]));
            b[i].qs[j] = static_cast<int8_t>(std::min(127, v));
        }
        for (int g = 0; g < qk_k / 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * g + j];
            b[i].bsums[g] = static_cast<int16_t>(sum);
        }
        b[i].d = 1.0f / iscale;
    }
}

}  // namespace zinc::quant::detail
