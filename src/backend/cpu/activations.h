// zinc/backend/cpu/activations.h — pointwise activations and gated linear units.
//
//   silu(x) = x / (1 + exp(-x))                               (Elfwing et al. 2017)
//   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (Hendrycks & Gimpel 2016)
//   gelu_erf(x) = 0.5 x (1 + erf(x / sqrt(2)))                 (the exact GELU: BERT's "gelu")
//   swiglu(g, u) = silu(g) * u,  geglu(g, u) = gelu_tanh(g) * u   (Shazeer 2020, "GLU Variants")
// All in f32; y may alias any input.
#pragma once

#include <cstdint>

namespace zinc::cpu {

float silu(float x);
float gelu_tanh(float x);

void silu_rows(const float* x, float* y, int64_t n);
void gelu_tanh_rows(const float* x, float* y, int64_t n);
/// y[i] = gelu_erf(x[i]) (std::erf; Hugging Face's BERT "gelu" activation).
void gelu_erf_rows(const float* x, float* y, int64_t n);
/// y[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, float* y, int64_t n);
/// y[i] = gelu_tanh(gate[i]) * up[i]
void geglu(const float* gate, const float* up, float* y, int64_t n);

}  // namespace zinc::cpu
