// zinc/backend/cpu/norm.cpp — RMS norm, in the canonical order of backend/canon.h (the CUDA
// tier's norms compute the same bits).
#include "backend/cpu/norm.h"

#include <cmath>

#include "backend/canon.h"

namespace zinc::cpu {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
    const float scale = canon::rms_scale(x, n, eps);
    if (w) {
        for (int64_t i = 0; i < n; ++i) y[i] = canon::rms_apply(x[i], scale, w[i]);
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = canon::rms_apply(x[i], scale);
    }
}

void rms_norm_rows(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
    for (int64_t r = 0; r < n_rows; ++r) rms_norm(x + r * n, w, y + r * n, n, eps);
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    double sq = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float d = x[i] - mean;
        sq += static_cast<double>(d) * d;
    }
    const float var = static_cast<float>(sq / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(var + eps);
    for (int64_t i = 0; i < n; ++i) {
        float v = (x[i] - mean) * scale;
        if (w) v *= w[i];
        if (b) v += b[i];
        y[i] = v;
    }
}

}  // namespace zinc::cpu
