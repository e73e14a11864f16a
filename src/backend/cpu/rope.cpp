// zinc/backend/cpu/rope.cpp — rotary embedding tables and rotation. The table (cos, sin per
// pair) is computed here, on the host, for both tiers: the CUDA runner uploads rope_cache's
// output, so libm's cos/sin/pow never differ between them; the rotation is canon::rope_pair.
#include "backend/cpu/rope.h"

#include <cmath>

#include "backend/canon.h"

namespace zinc::cpu {

void rope_cache(const RopeParams& p, int64_t pos, float* cs) {
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
    float theta = static_cast<float>(pos);
    for (int i = 0; i < p.n_rot / 2; ++i) {
        const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
        const float t = p.freq_scale * (theta / ff);
        cs[2 * i] = std::cos(t);
        cs[2 * i + 1] = std::sin(t);
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
