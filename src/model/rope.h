// zinc/model/rope.h — the parameters of rotary position embedding (Su et al. 2021, "RoFormer"),
// as the model describes them; the math is backend/cpu/rope.h (and the CUDA tier's table of it).
//
// For pair index i in [0, n_rot/2): theta_i = pos * freq_scale * base^(-2i/n_rot) / ff_i, and
// the pair (a, b) becomes (a cos - b sin, a sin + b cos). Which elements form pair i depends on
// the mode:
//   Norm: (x[2i], x[2i+1])          — GGUF llama files (the converter permutes Q/K for this)
//   Neox: (x[i], x[i + n_rot/2])    — GPT-NeoX / HF "rotate_half" (qwen2, qwen3, gemma3)
#pragma once

namespace zinc::model {

enum class RopeMode { Norm, Neox };

struct RopeParams {
    int n_rot = 0;  // rotated dimensions per head (even, <= head_dim)
    RopeMode mode = RopeMode::Norm;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;              // 1 / linear scaling factor
    const float* freq_factors = nullptr;  // (n_rot/2) per-pair divisors (llama3 rope), optional
};

}  // namespace zinc::model

// The CPU kernels (backend/cpu/rope.h) take these parameters under their own namespace's names.
namespace zinc::cpu {
using model::RopeMode;
using model::RopeParams;
}  // namespace zinc::cpu
