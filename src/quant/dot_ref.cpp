// zinc/quant/dot_ref.cpp — scalar reference dot products: weight row (type W) x activation row
// packed as type_traits(W).vec_dot_type. Integer sums per block, scaled once per block, as the
// SIMD kernels do, so the two paths differ only in float summation order.
//
//   F32/F16/BF16 x F32 : sum w[i] * a[i], accumulated in double
//   Q4_0/Q5_0/Q8_0 x Q8_0 : sum_b d_w d_a * sum_j q_w q_a   (q_w already offset by -8 / -16)
//   Q4_1/Q5_1 x Q8_1 : sum_b d_w d_a * sum_j q_w q_a + m_w * s_a   (s_a = d_a * sum_j q_a)
//   K-quants x Q8_K : sum_b d_a * (d_w * sum_sub sc * sum_j q_w q_a - dmin_w * sum_sub m * bsum)
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace zinc::quant::detail {
namespace {

inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

}  // namespace

float dot_ref_f32(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(a);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(y[i]);
    return static_cast<float>(sum);
}

float dot_ref_f16(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const float*>(a);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(fp16_to_fp32(x[i])) * static_cast<double>(y[i]);
    }
    return static_cast<float>(sum);
}

float dot_ref_bf16(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const float*>(a);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        sum += static_cast<double>(bf16_to_fp32(x[i])) * static_cast<double>(y[i]);
    }
    return static_cast<float>(sum);
}

float dot_ref_q4_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk4_0; ++i) {
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sum;
}

float dot_ref_q4_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk4_1; ++i) {
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            sumi += (x[i].qs[j] & 0x0F) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sum;
}

float dot_ref_q5_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk5_0; ++i) {
        const uint32_t qh = load_u32(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = ((x[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4)) - 16;
            const int q1 = ((x[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4)) - 16;
            sumi += q0 * y[i].qs[j] + q1 * y[i].qs[j + 16];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sum;
}

float dot_ref_q5_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk5_1; ++i) {
        const uint32_t qh = load_u32(x[i].qh);
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            const int q0 = (x[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
            const int q1 = (x[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
            sumi += q0 * y[i].qs[j] + q1 * y[i].qs[j + 16];
        }
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) +
               fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sum;
}

float dot_ref_q8_0(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk8_0; ++i) {
        int sumi = 0;
        for (int j = 0; j < qk8_0; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sum;
}

float dot_ref_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk8_1; ++i) {
        int sumi = 0;
        for (int j = 0; j < qk8_1; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sum += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sum;
}

float dot_ref_q2_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        int sumi = 0, summ = 0;
        for (int k = 0; k < 16; ++k) summ += (x[i].scales[k] >> 4) * y[i].bsums[k];
        for (int e0 = 0; e0 < qk_k; e0 += 16) {  // one 16-element sub-block at a time
            int s = 0;
            for (int e = e0; e < e0 + 16; ++e) {
                const int c = e / 128, sh = (e % 128) / 32, l = e % 32;
                s += ((x[i].qs[32 * c + l] >> (2 * sh)) & 3) * y[i].qs[e];
            }
            sumi += (x[i].scales[e0 / 16] & 0x0F) * s;
        }
        sum += y[i].d * fp16_to_fp32(x[i].d) * static_cast<float>(sumi) -
               y[i].d * fp16_to_fp32(x[i].dmin) * static_cast<float>(summ);
    }
    return sum;
}

float dot_ref_q3_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ3_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        int8_t sc[16];
        unpack_scales_q3_k(x[i].scales, sc);
        int sumi = 0;
        for (int e0 = 0; e0 < qk_k; e0 += 16) {
            int s = 0;
            for (int e = e0; e < e0 + 16; ++e) {
                const int c = e / 128, sh = (e % 128) / 32, l = e % 32;
                const int lo = (x[i].qs[32 * c + l] >> (2 * sh)) & 3;
                const int hi = (x[i].hmask[l] >> (e / 32)) & 1;
                s += (lo - (hi ? 0 : 4)) * y[i].qs[e];
            }
            sumi += sc[e0 / 16] * s;
        }
        sum += y[i].d * fp16_to_fp32(x[i].d) * static_cast<float>(sumi);
    }
    return sum;
}

float dot_ref_q4_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        uint8_t sc[8], m[8];
        unpack_scale_min_k4(x[i].scales, sc, m);
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; ++j) summ += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        for (int c = 0; c < 4; ++c) {
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 32; ++l) {
                s1 += (x[i].qs[32 * c + l] & 0x0F) * y[i].qs[64 * c + l];
                s2 += (x[i].qs[32 * c + l] >> 4) * y[i].qs[64 * c + 32 + l];
            }
            sumi += sc[2 * c] * s1 + sc[2 * c + 1] * s2;
        }
        sum += y[i].d * fp16_to_fp32(x[i].d) * static_cast<float>(sumi) -
               y[i].d * fp16_to_fp32(x[i].dmin) * static_cast<float>(summ);
    }
    return sum;
}

float dot_ref_q5_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ5_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        uint8_t sc[8], m[8];
        unpack_scale_min_k4(x[i].scales, sc, m);
        int sumi = 0, summ = 0;
        for (int j = 0; j < 8; ++j) summ += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        for (int c = 0; c < 4; ++c) {
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 32; ++l) {
                const int q1 = (x[i].qs[32 * c + l] & 0x0F) | (((x[i].qh[l] >> (2 * c)) & 1) << 4);
                const int q2 =
                    (x[i].qs[32 * c + l] >> 4) | (((x[i].qh[l] >> (2 * c + 1)) & 1) << 4);
                s1 += q1 * y[i].qs[64 * c + l];
                s2 += q2 * y[i].qs[64 * c + 32 + l];
            }
            sumi += sc[2 * c] * s1 + sc[2 * c + 1] * s2;
        }
        sum += y[i].d * fp16_to_fp32(x[i].d) * static_cast<float>(sumi) -
               y[i].d * fp16_to_fp32(x[i].dmin) * static_cast<float>(summ);
    }
    return sum;
}

float dot_ref_q6_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        int q[qk_k];
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = x[i].ql + 64 * h;
            const uint8_t* qh = x[i].qh + 32 * h;
            for (int l = 0; l < 32; ++l) {
                q[128 * h + l] = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                q[128 * h + l + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                q[128 * h + l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                q[128 * h + l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            }
        }
        int sumi = 0;
        for (int k = 0; k < 16; ++k) {
            int s = 0;
            for (int l = 0; l < 16; ++l) s += q[16 * k + l] * y[i].qs[16 * k + l];
            sumi += x[i].scales[k] * s;
        }
        sum += y[i].d * fp16_to_fp32(x[i].d) * static_cast<float>(sumi);
    }
    return sum;
}

float dot_ref_q8_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / qk_k; ++i) {
        int sumi = 0;
        for (int j = 0; j < qk_k; ++j) sumi += x[i].qs[j] * y[i].qs[j];
        sum += x[i].d * y[i].d * static_cast<float>(sumi);
    }
    return sum;
}

}  // namespace zinc::quant::detail
