// zinc/backend/cpu/rope.h — rotary position embedding (Su et al. 2021, "RoFormer").
//
// For pair index i in [0, n_rot/2): theta_i = pos * freq_scale * base^(-2i/n_rot) / ff_i, and
// the pair (a, b) becomes (a cos - b sin, a sin + b cos). Which elements form pair i depends on
// the mode:
//   Norm: (x[2i], x[2i+1])          — GGUF llama files (the converter permutes Q/K for this)
//   Neox: (x[i], x[i + n_rot/2])    — GPT-NeoX / HF "rotate_half" (qwen2, qwen3, gemma3)
// Elements past n_rot are left as they are. theta_i is formed as ggml does (repeated float
// multiplication by base^(-2/n_rot)), so positions match llama.cpp to the last bit of theta.
#pragma once

#include <cstdint>

#include "model/rope.h"

namespace zinc::cpu {

// RopeMode and RopeParams: model/rope.h (the model's description; cpu:: names them too).

/// cos/sin table for one position: cs[2i] = cos theta_i, cs[2i+1] = sin theta_i, i < n_rot/2
/// (YaRN: the mixed angle, both times mscale; model/rope.h).
void rope_cache(const RopeParams& p, int64_t pos, float* cs);

/// YaRN's correction dimensions [lo, hi] (ggml_rope_yarn_corr_dims), from n_rot, n_ctx_orig,
/// freq_base, beta_fast and beta_slow.
void rope_yarn_corr_dims(const RopeParams& p, float dims[2]);

/// Rotate n_heads heads of head_dim floats each (contiguous) in place, using a rope_cache table.
void rope_apply(const RopeParams& p, const float* cs, float* x, int n_heads, int head_dim);

}  // namespace zinc::cpu
