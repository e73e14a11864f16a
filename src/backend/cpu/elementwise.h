// zinc/backend/cpu/elementwise.h — residual add and scaling.
#pragma once

#include <cstdint>

namespace zinc::cpu {

/// y[i] = a[i] + b[i]; y may alias a or b.
void add(const float* a, const float* b, float* y, int64_t n);
/// x[i] *= s
void scale(float* x, float s, int64_t n);
/// x[i] = cap * tanh(x[i] / cap) (logit soft-capping, Gemma 2)
void softcap(float* x, float cap, int64_t n);

}  // namespace zinc::cpu
