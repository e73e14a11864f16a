// zinc/backend/cpu/rope.cpp — rotary embedding tables and rotation.
#include "backend/cpu/rope.h"

#include <cmath>

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
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * c - b * s;
                v[2 * i + 1] = a * s + b * c;
            }
        } else {
            for (int i = 0; i < half; ++i) {
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = a * s + b * c;
            }
        }
    }
}

}  // namespace zinc::cpu
