// zinc/models/qwen2.cpp — Qwen2 / Qwen2.5: the llama layout plus biases on the Q, K and V
// projections; RoPE in NEOX (rotate-half) mode; output.weight optional (tied when absent).
#include "models/factories.h"
#include "models/prenorm_decoder.h"

namespace zinc::models {

Result<std::unique_ptr<Model>> make_qwen2(const gguf::File& file, ModelConfig cfg) {
    DecoderVariant v;
    v.qkv_bias = true;
    return PrenormDecoder::create(file, std::move(cfg), v);
}

}  // namespace zinc::models
