// zinc/models/qwen3.cpp — Qwen3 (dense): no projection biases, per-head RMS norm of Q and K
// (attn_q_norm / attn_k_norm, length head_dim) applied before RoPE, NEOX RoPE, and a head_dim
// given by attention.key_length that need not equal n_embd / n_head.
#include "models/factories.h"
#include "models/prenorm_decoder.h"

namespace zinc::models {

Result<std::unique_ptr<Model>> make_qwen3(const gguf::File& file, ModelConfig cfg) {
    DecoderVariant v;
    v.qk_norm = true;
    return PrenormDecoder::create(file, std::move(cfg), v);
}

}  // namespace zinc::models
