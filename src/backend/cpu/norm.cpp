// zinc/backend/cpu/norm.cpp — RMS norm.
#include "backend/cpu/norm.h"

#include <cmath>

namespace zinc::cpu {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

void rms_norm_rows(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
    for (int64_t r = 0; r < n_rows; ++r) rms_norm(x + r * n, w, y + r * n, n, eps);
}

}  // namespace zinc::cpu
