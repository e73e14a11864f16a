// zinc/backend/cpu/norm.h — RMS normalisation (Zhang & Sennrich 2019, "Root Mean Square Layer
// Normalization"): y = x / sqrt(mean(x^2) + eps) * w. The sum of squares is accumulated in
// double, as ggml does, so long rows do not lose precision.
#pragma once

#include <cstdint>

namespace zinc::cpu {

/// One row: y[i] = x[i] * w[i] / sqrt(mean(x^2) + eps). w may be nullptr (no scale). y may
/// alias x.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

/// n_rows independent rows of n elements each, contiguous (row stride n).
void rms_norm_rows(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps);

/// LayerNorm (Ba et al. 2016, "Layer Normalization") of one row, as BERT uses it:
/// y[i] = (x[i] - mean) / sqrt(var + eps) * w[i] + b[i], with mean and the (biased) variance
/// over the n elements summed in double (as ggml_norm). w, b may be nullptr (1, 0). y may alias x.
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);

}  // namespace zinc::cpu
