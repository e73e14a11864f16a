// zinc/models/gemma3.cpp — Gemma 3 (Gemma Team 2025), text decoder.
//
//   x = token_embd[tokens] * sqrt(n_embd)
//   per layer:
//     h  = attn(rms_norm(x) * attn_norm)       Q/K RMS-normed per head, NEOX RoPE; 5 of 6
//                                              layers are local (sliding window, RoPE base
//                                              10000), every 6th is global (rope.freq_base)
//     x  = x + rms_norm(h) * post_attention_norm
//     f  = geglu_ffn(rms_norm(x) * ffn_norm)   GELU (tanh approximation) gate
//     x  = x + rms_norm(f) * post_ffw_norm
//   logits = token_embd(rms_norm(x) * output_norm)   (tied unless output.weight exists)
//
// Gemma's RMSNorm multiplies by (1 + w); llama.cpp's converter stores w + 1 in the GGUF, so the
// norm weights are used as they are. Attention scale is 1/sqrt(head_dim) (query_pre_attn_scalar
// = head_dim), except for the 27B model (62 layers) where it is 1/sqrt(n_embd / n_head).
// Optional gemma3.final_logit_softcapping (ModelConfig::final_logit_softcap) is honoured if
// present; attn_logit_softcapping is not applied (Gemma 3 has none; llama.cpp ignores the key).
#include <cmath>
#include <vector>

#include "gguf/gguf.h"
#include "model/arch_model.h"
#include "model/tensor_names.h"
#include "models/blocks.h"
#include "models/factories.h"

namespace zinc::models {
namespace {

using model::TypeClass;
namespace tn = model::tn;

class Gemma3 : public model::ArchModel {
  public:
    explicit Gemma3(ModelConfig cfg) : ArchModel(std::move(cfg)) {}

    Result<void> bind(const gguf::File& file) {
        const ModelConfig& c = cfg_;
        model::WeightBinder b(file, c.arch_name, weights_);
        const int64_t e = c.n_embd;
        tok_embd_ = b.require(tn::global(tn::kTokenEmbd), {e, c.n_vocab}, TypeClass::Matmul);
        output_norm_ = b.require(tn::global(tn::kOutputNorm), {e}, TypeClass::F32);
        output_ = b.optional(tn::global(tn::kOutput), {e, c.n_vocab}, TypeClass::Matmul);
        if (!output_) output_ = tok_embd_;
        layers_.resize(c.n_layer);
        for (int il = 0; il < c.n_layer; ++il) {
            Layer& L = layers_[il];
            L.attn_norm = b.require(tn::layer(il, tn::kAttnNorm), {e}, TypeClass::F32);
            L.attn.wq = b.require(tn::layer(il, tn::kAttnQ), {e, c.q_dim()}, TypeClass::Matmul);
            L.attn.wk = b.require(tn::layer(il, tn::kAttnK), {e, c.kv_dim_k()}, TypeClass::Matmul);
            L.attn.wv = b.require(tn::layer(il, tn::kAttnV), {e, c.kv_dim_v()}, TypeClass::Matmul);
            L.attn.wo =
                b.require(tn::layer(il, tn::kAttnOut), {c.attn_out_dim(), e}, TypeClass::Matmul);
            L.attn.q_norm =
                b.require(tn::layer(il, tn::kAttnQNorm), {c.head_dim_k}, TypeClass::F32);
            L.attn.k_norm =
                b.require(tn::layer(il, tn::kAttnKNorm), {c.head_dim_k}, TypeClass::F32);
            L.post_attn_norm = b.require(tn::layer(il, tn::kAttnPostNorm), {e}, TypeClass::F32);
            L.ffn_norm = b.require(tn::layer(il, tn::kFfnNorm), {e}, TypeClass::F32);
            L.ffn.gate = b.require(tn::layer(il, tn::kFfnGate), {e, c.n_ff}, TypeClass::Matmul);
            L.ffn.up = b.require(tn::layer(il, tn::kFfnUp), {e, c.n_ff}, TypeClass::Matmul);
            L.ffn.down = b.require(tn::layer(il, tn::kFfnDown), {c.n_ff, e}, TypeClass::Matmul);
            L.post_ffn_norm = b.require(tn::layer(il, tn::kFfnPostNorm), {e}, TypeClass::F32);
            if (!b.status().ok()) break;
        }
        ZINC_TRY(b.status());

        program_ = build();
        return {};
    }

  private:
    model::Program build() const {
        const ModelConfig& c = cfg_;
        ProgramBuilder b;
        const DecoderTensors t = decoder_tensors(b, c);
        const Tid h = t.proj;
        b.embed(*tok_embd_, std::sqrt(static_cast<float>(c.n_embd)), t.x, "inp_embd");
        for (int il = 0; il < c.n_layer; ++il) {
            const Layer& L = layers_[il];
            b.set_layer(il);
            b.rms_norm(t.x, *L.attn_norm, c.rms_eps, t.xn);
            self_attention(b, c, il, L.attn, t, h);
            if (il == c.n_layer - 1) b.keep_rows({t.x, h});  // only the output rows from here
            b.rms_norm(h, *L.post_attn_norm, c.rms_eps, h);  // (fusable: add_rms_norm)
            b.add(t.x, h, "ffn_inp");
            b.rms_norm(t.x, *L.ffn_norm, c.rms_eps, t.xn);
            ffn_gated(b, c, L.ffn, Activation::GeluTanh, t, h);
            b.rms_norm(h, *L.post_ffn_norm, c.rms_eps, h);
            b.add(t.x, h, "l_out");
        }
        // config.h: <arch>.final_logit_softcapping (0: none)
        output_head(b, c, t, *output_norm_, *output_, c.final_logit_softcap);
        return b.finish(c.n_layer, t.logits);
    }

    struct Layer {
        const Weight* attn_norm = nullptr;
        AttentionWeights attn;
        const Weight* post_attn_norm = nullptr;
        const Weight* ffn_norm = nullptr;
        FfnWeights ffn;
        const Weight* post_ffn_norm = nullptr;
    };
    const Weight* tok_embd_ = nullptr;
    const Weight* output_norm_ = nullptr;
    const Weight* output_ = nullptr;
    std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_gemma3(const gguf::File& file, ModelConfig cfg) {
    if (cfg.n_layer == 62) {
        cfg.attn_scale = 1.0f / std::sqrt(static_cast<float>(cfg.n_embd / cfg.n_head));
    }
    auto m = std::make_unique<Gemma3>(std::move(cfg));
    ZINC_TRY(m->bind(file));
    return std::unique_ptr<Model>(std::move(m));
}

}  // namespace zinc::models
