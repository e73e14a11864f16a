// zinc/models/prenorm_decoder.h — the pre-norm decoder shared by llama, qwen2 and qwen3:
//
//   x = token_embd[tokens]
//   per layer: x += attn(rms_norm(x) * attn_norm);  x += swiglu_ffn(rms_norm(x) * ffn_norm)
//   logits = output(rms_norm(x) * output_norm)      (output falls back to token_embd: tied)
//
// The variants differ only in optional weights: Q/K/V biases (qwen2), per-head Q/K RMS norms
// (qwen3), per-pair RoPE frequency factors (llama 3 "rope_freqs"), and RoPE pairing (arch table).
#pragma once

#include <vector>

#include "model/arch_model.h"
#include "models/blocks.h"

namespace zinc::models {

struct DecoderVariant {
    bool qkv_bias = false;  // attn_{q,k,v}.bias required
    bool qk_norm = false;   // attn_{q,k}_norm required
};

class PrenormDecoder : public model::ArchModel {
  public:
    /// Bind every weight of the variant; errors name the first offending tensor.
    static Result<std::unique_ptr<model::Model>> create(const gguf::File& file, ModelConfig cfg,
                                                        const DecoderVariant& variant);

  private:
    explicit PrenormDecoder(ModelConfig cfg) : ArchModel(std::move(cfg)) {}
    /// The op list of the bound weights.
    model::Program build() const;
    struct Layer {
        const Weight* attn_norm = nullptr;
        AttentionWeights attn;
        const Weight* ffn_norm = nullptr;
        FfnWeights ffn;
    };
    const Weight* tok_embd_ = nullptr;
    const Weight* output_norm_ = nullptr;
    const Weight* output_ = nullptr;  // token_embd when tied
    std::vector<Layer> layers_;
};

}  // namespace zinc::models
