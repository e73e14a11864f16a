// zinc/backend/cpu/rope.cpp — rotary embedding tables and rotation. The table (cos, sin per
// pair) is computed here, on the host, for both tiers: the CUDA runner uploads rope_cache's
// output, so libm's cos/sin/pow/log never differ between them; the rotation is canon::rope_pair.
// YaRN (model/rope.h) follows ggml's rope_yarn / ggml_rope_yarn_corr_dims operation by operation
// in float (with -ffp-contract=off: each product and sum rounded).
#include "backend/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "backend/canon.h"

namespace zinc::cpu {
namespace {

// ggml_rope_yarn_corr_dim: the pair dimension whose wavelength fits n_rot_turns turns in the
// original context.
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot_turns, float base) {
    return static_cast<float>(n_dims) *
           std::log(static_cast<float>(n_ctx_orig) /
                    (n_rot_turns * 2.0f * static_cast<float>(std::numbers::pi))) /
           (2.0f * std::log(base));
}

}  // namespace

void rope_yarn_corr_dims(const RopeParams& p, float dims[2]) {
    const float start = std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
    const float end = std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
    dims[0] = std::max(0.0f, start);
    dims[1] = std::min(static_cast<float>(p.n_rot - 1), end);
}

void rope_cache(const RopeParams& p, int64_t pos, float* cs) {
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
    float corr[2] = {0.0f, 0.0f};
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        rope_yarn_corr_dims(p, corr);
        mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    float theta = static_cast<float>(pos);
    for (int i = 0; i < p.n_rot / 2; ++i) {
        const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
        const float extrap = theta / ff;
        float t = p.freq_scale * extrap;
        if (p.ext_factor != 0.0f) {  // rope_yarn_ramp (i = ggml's i0 / 2)
            const float y = (static_cast<float>(i) - corr[0]) / std::max(0.001f, corr[1] - corr[0]);
            const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
            t = t * (1.0f - mix) + extrap * mix;
        }
        cs[2 * i] = std::cos(t) * mscale;
        cs[2 * i + 1] = std::sin(t) * mscale;
        theta *= theta_scale;
    }
}

void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads, int head_dim) {
    const int half = p.n_rot / 2;
    for (int h = 0; h < n_heads; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;
        if (p.mode == RopeMode::Norm) {
            for (int i = 0; i < half; ++i) {
                canon::rope_pair(v[2 * i], v[2 * i + 1], cs[2 * i], cs[2 * i + 1]);
            }
        } else {
            for (int i = 0; i < half; ++i) {
                canon::rope_pair(v[i], v[i + half], cs[2 * i], cs[2 * i + 1]);
            }
        }
    }
}

}  // namespace zinc::cpu
