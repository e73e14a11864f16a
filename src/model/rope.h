// zinc/model/rope.h — the parameters of rotary position embedding (Su et al. 2021, "RoFormer"),
// as the model describes them; the math is backend/cpu/rope.h (and the CUDA tier's table of it).
//
// For pair index i in [0, n_rot/2): theta_i = pos * freq_scale * base^(-2i/n_rot) / ff_i, and
// the pair (a, b) becomes (a cos - b sin, a sin + b cos). Which elements form pair i depends on
// the mode:
//   Norm: (x[2i], x[2i+1])          — GGUF llama files (the converter permutes Q/K for this)
//   Neox: (x[i], x[i + n_rot/2])    — GPT-NeoX / HF "rotate_half" (qwen2, qwen3, gemma3)
//
// YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language Models";
// gpt-oss: factor 32 over an original context of 4096), as llama.cpp computes it
// (ggml_rope_yarn_corr_dims, rope_yarn in ggml-cpu/ops.cpp): with ext_factor != 0, pair i's angle
// mixes the interpolated angle (freq_scale * theta) and the original one by a ramp over the
// correction dimensions [lo, hi] (lo = max(0, floor(corr(beta_fast))), hi = min(n_rot - 1,
// ceil(corr(beta_slow))), corr(b) = n_rot ln(n_ctx_orig / (2 pi b)) / (2 ln base)):
//   ramp_i = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1), mix = ramp_i * ext_factor,
//   angle = freq_scale theta (1 - mix) + theta mix,
// and cos and sin are multiplied by mscale = attn_factor * (1 + 0.1 ln(1 / freq_scale)) (without
// YaRN: by attn_factor). attn_factor is llama.cpp's cparams.yarn_attn_factor (config.cpp).
#pragma once

#include <cstdint>

namespace zinc::model {

enum class RopeMode { Norm, Neox };

struct RopeParams {
    int n_rot = 0;  // rotated dimensions per head (even, <= head_dim)
    RopeMode mode = RopeMode::Norm;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;              // 1 / linear scaling factor
    const float* freq_factors = nullptr;  // (n_rot/2) per-pair divisors (llama3 rope), optional
    // YaRN (see above); ext_factor 0: off. attn_factor multiplies cos and sin in either case.
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float beta_fast = 32.0f, beta_slow = 1.0f;
    int32_t n_ctx_orig = 0;  // rope.scaling.original_context_length
};

}  // namespace zinc::model

// The CPU kernels (backend/cpu/rope.h) take these parameters under their own namespace's names.
namespace zinc::cpu {
using model::RopeMode;
using model::RopeParams;
}  // namespace zinc::cpu
