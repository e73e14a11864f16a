// zinc/quant/k_quantize.cpp — reference quantizers for the K-quant weight types Q2_K..Q6_K.
//
// The algorithm is ggml's quantize_row_q*_K_ref (no importance matrix), restated here:
//   * Q2_K/Q4_K/Q5_K (asymmetric: x ~ scale * q - min) fit each sub-block with a scale/min
//     search: start from the plain min/max grid, then try nstep+1 slightly different grid
//     densities; for each, round, solve the weighted least-squares (scale, min) for those levels,
//     and keep the candidate with the lowest weighted error (|err| for Q2_K, err^2 otherwise).
//     Per-block scales and mins are then themselves quantized (4 bits for Q2_K, 6 bits for
//     Q4_K/Q5_K) against the largest of each, and the elements are re-rounded with the final
//     (fp16-rounded) scales.
//   * Q3_K (symmetric, 3-bit) fits each 16-element sub-block with a weighted (w = x^2) least-
//     squares scale and up to five passes of coordinate descent on the levels; the 16 scales are
//     quantized to signed 6 bits.
//   * Q6_K (symmetric, 6-bit) fits each 16-element sub-block with a scan over 19 grid densities
//     around nmax = 32 maximising (sum w x l)^2 / sum w l^2 (w = x^2); scales go to int8.
// The float operations are written in the same order as ggml's reference so that results match
// it byte for byte (tests/py/test_quant_oracle.py checks this against libggml); FMA contraction
// is off for that reason.
#pragma GCC optimize("fp-contract=off")

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace zinc::quant::detail {
namespace {

constexpr float group_max_eps = 1e-15f;  // below this a group is treated as all zeros

// Round to nearest, ties to even (the current rounding mode; never changed in zinc).
inline int nearest_int(float v) {
    return static_cast<int>(std::nearbyint(v));
}

// Asymmetric fit of n values to levels [0, nmax]: returns the scale, stores the (positive)
// offset to subtract in *out_min and the chosen levels in L. See the file comment.
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                    float* out_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                    bool use_abs_error) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        std::memset(L, 0, static_cast<size_t>(n));
        *out_min = -min;
        return 0.0f;
    }
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * static_cast<float>(L[i]) + min - x[i];
        diff = use_abs_error ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *out_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            const float fl = static_cast<float>(l);
            sum_l += w * fl;
            sum_l2 += w * fl * fl;
            sum_xl += w * fl * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
                diff = use_abs_error ? std::fabs(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                std::memcpy(L, Laux, static_cast<size_t>(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *out_min = -min;
    return scale;
}

// Symmetric fit to levels [-nmax, nmax-1] with weights x^2 and a scan over grid densities;
// L receives level + nmax. Returns the scale (0 for an all-zero group).
float fit_symmetric_scan(int n, int nmax, const float* x, int8_t* L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < group_max_eps) {
        std::memset(L, 0, static_cast<size_t>(n));
        return 0.0f;
    }
    const float fnmax = static_cast<float>(nmax);
    float iscale = -fnmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(fnmax + 0.1f * static_cast<float>(is)) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * static_cast<float>(l);
            suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Symmetric fit to levels [-nmax, nmax-1] (w = x^2) refined by coordinate descent: each level
// is moved to the value that is optimal given the others while the fit improves (<= 5 passes).
// L receives level + nmax.
float fit_symmetric_descent(int n, int nmax, const float* x, int8_t* L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < group_max_eps) {
        std::memset(L, 0, static_cast<size_t>(n));
        return 0.0f;
    }
    const float iscale = -static_cast<float>(nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int pass = 0; pass < 5; ++pass) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            const float li = static_cast<float>(L[i]);
            float slx = sumlx - w * x[i] * li;
            if (slx > 0) {
                float sl2 = suml2 - w * li * li;
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = std::max(-nmax, std::min(nmax - 1, new_l));
                if (new_l != L[i]) {
                    const float fl = static_cast<float>(new_l);
                    slx += w * x[i] * fl;
                    sl2 += w * fl * fl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Pack 256 two-bit levels: bits (2s, 2s+1) of out[32c + l] = L[128c + 32s + l].
void pack_2bit(const uint8_t* L, uint8_t* out) {
    for (int c = 0; c < 2; ++c) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t* p = L + 128 * c + l;
            out[32 * c + l] =
                static_cast<uint8_t>(p[0] | (p[32] << 2) | (p[64] << 4) | (p[96] << 6));
        }
    }
}

// Store the 6-bit scale ls and min lm of sub-block j (0..7) into the 12-byte Q4_K/Q5_K field
// (layout in blocks.h, unpack_scale_min_k4). The field must start zeroed.
void pack_scale_min_k4(uint8_t* q, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        q[j] = ls;
        q[j + 4] = lm;
    } else {
        q[j + 4] = static_cast<uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
        q[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        q[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
}

// Shared by Q4_K and Q5_K: fit 8 sub-blocks of 32, quantize scales/mins to 6 bits, re-round
// the elements to [0, nmax] with the final scales. Writes d, dmin, scales and L[256].
void quantize_k4_common(const float* x, int nmax, float rmin, float rdelta, int nstep,
                        uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales_out, uint8_t* L) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        const float* xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
        scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta,
                                  nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(scales_out, 0, k_scale_size);
    for (int j = 0; j < 8; ++j) {
        // ggml stores these through uint8_t before clamping; values are in [0, 63] anyway.
        const auto ls =
            static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j]) & 0xFF));
        const auto lm = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j]) & 0xFF));
        pack_scale_min_k4(scales_out, j, ls, lm);
    }
    *d_out = fp32_to_fp16(max_scale / 63.f);
    *dmin_out = fp32_to_fp16(max_min / 63.f);
    uint8_t sc[8], m[8];
    unpack_scale_min_k4(scales_out, sc, m);
    for (int j = 0; j < 8; ++j) {
        const float d = fp16_to_fp32(*d_out) * static_cast<float>(sc[j]);
        if (d == 0.0f) continue;
        const float dm = fp16_to_fp32(*dmin_out) * static_cast<float>(m[j]);
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        }
    }
}

}  // namespace

void quantize_row_q2_k(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ2_K*>(dst);
    constexpr float q4scale = 15.f;
    for (int64_t i = 0; i < n / qk_k; ++i, src += qk_k) {
        uint8_t L[qk_k], Laux[16];
        float weights[16], mins[16], scales[16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                      -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < 16; ++j)
                y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
            y[i].d = fp32_to_fp16(max_scale / q4scale);
        } else {
            std::memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < 16; ++j) {
                y[i].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
            }
            y[i].dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(y[i].scales[j] & 0x0F);
            if (d == 0.0f) continue;
            const float dm = fp16_to_fp32(y[i].dmin) * static_cast<float>(y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((src[16 * j + ii] + dm) / d);
                L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void quantize_row_q3_k(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ3_K*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, src += qk_k) {
        int8_t L[qk_k];
        float scales[16];
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; ++j) {
            scales[j] = fit_symmetric_descent(16, 4, src + 16 * j, L + 16 * j);
            const float a = std::fabs(scales[j]);
            if (a > amax) {
                amax = a;
                max_scale = scales[j];
            }
        }
        std::memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale != 0.0f) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; ++j) {
                int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
                l = std::max(-32, std::min(31, l)) + 32;  // 6-bit, stored with +32
                if (j < 8) {
                    y[i].scales[j] = static_cast<uint8_t>(l & 0x0F);
                } else {
                    y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0x0F) << 4);
                }
                y[i].scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = fp32_to_fp16(0.f);
        }
        int8_t sc[16];
        unpack_scales_q3_k(y[i].scales, sc);
        for (int j = 0; j < 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(sc[j]);
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(src[16 * j + ii] / d);
                L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
            }
        }
        // High bit of element e goes to bit e / 32 of hmask[e % 32]; the low two bits remain.
        std::memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t low[qk_k];
        for (int e = 0; e < qk_k; ++e) {
            int v = L[e];
            if (v > 3) {
                y[i].hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
                v -= 4;
            }
            low[e] = static_cast<uint8_t>(v);
        }
        pack_2bit(low, y[i].qs);
    }
}

void quantize_row_q4_k(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ4_K*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, src += qk_k) {
        uint8_t L[qk_k];
        quantize_k4_common(src, 15, -1.f, 0.1f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int c = 0; c < 4; ++c) {
            for (int l = 0; l < 32; ++l) {
                y[i].qs[32 * c + l] =
                    static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
            }
        }
    }
}

void quantize_row_q5_k(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ5_K*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, src += qk_k) {
        uint8_t L[qk_k];
        quantize_k4_common(src, 31, -0.5f, 0.1f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        std::memset(y[i].qh, 0, sizeof y[i].qh);
        for (int c = 0; c < 4; ++c) {
            for (int l = 0; l < 32; ++l) {
                const int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
                y[i].qs[32 * c + l] = static_cast<uint8_t>((l1 & 0x0F) | ((l2 & 0x0F) << 4));
                y[i].qh[l] |=
                    static_cast<uint8_t>(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
            }
        }
    }
}

void quantize_row_q6_k(const float* src, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ6_K*>(dst);
    for (int64_t i = 0; i < n / qk_k; ++i, src += qk_k) {
        int8_t L[qk_k];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            scales[ib] = fit_symmetric_scan(16, 32, src + 16 * ib, L + 16 * ib);
            const float a = std::fabs(scales[ib]);
            if (a > max_abs_scale) {
                max_abs_scale = a;
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < group_max_eps) {
            std::memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < 16; ++ib) {
            y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
        }
        for (int j = 0; j < 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(y[i].scales[j]);
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(src[16 * j + ii] / d);
                L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
            }
        }
        for (int h = 0; h < 2; ++h) {
            const int8_t* Lh = L + 128 * h;
            uint8_t* ql = y[i].ql + 64 * h;
            uint8_t* qh = y[i].qh + 32 * h;
            for (int l = 0; l < 32; ++l) {
                ql[l] = static_cast<uint8_t>((Lh[l] & 0x0F) | ((Lh[l + 64] & 0x0F) << 4));
                ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0x0F) | ((Lh[l + 96] & 0x0F) << 4));
                qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                             ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

}  // namespace zinc::quant::detail
