// zinc/backend/cpu/activations.cpp — silu, gelu (tanh approximation), swiglu, geglu.
#include "backend/cpu/activations.h"

#include <cmath>

namespace zinc::cpu {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    constexpr float kCoef = 0.044715f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

void silu_rows(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu(x[i]);
}

void gelu_tanh_rows(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(x[i]);
}

void swiglu(const float* gate, const float* up, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu(gate[i]) * up[i];
}

void geglu(const float* gate, const float* up, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(gate[i]) * up[i];
}

}  // namespace zinc::cpu
