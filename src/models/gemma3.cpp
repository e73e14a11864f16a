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

        final_softcap_ = c.final_logit_softcap;  // config.h: <arch>.final_logit_softcapping
        return {};
    }

    void forward(ForwardState& st) const override {
        const ModelConfig& c = cfg_;
        model::Workspace& ws = st.ws;
        float* x = ws.x.data();
        float* xn = ws.xn.data();
        float* h = ws.proj.data();
        embed(st, *tok_embd_, std::sqrt(static_cast<float>(c.n_embd)));
        for (int il = 0; il < c.n_layer; ++il) {
            if (st.hooks && st.hooks->skip_layer(il, c.n_layer)) continue;  // ZINC_SKIP_LAYERS
            const Layer& L = layers_[il];
            rms_norm(st, x, *L.attn_norm, c.rms_eps, xn, c.n_embd);
            self_attention(st, c, il, L.attn, xn, h);
            if (il == c.n_layer - 1) keep_output_rows(st, {x, h}, c.n_embd);
            rms_norm(st, h, *L.post_attn_norm, c.rms_eps, h, c.n_embd);
            add_residual(st, x, h, c.n_embd);
            dump(st, "ffn_inp", il, x, c.n_embd);
            rms_norm(st, x, *L.ffn_norm, c.rms_eps, xn, c.n_embd);
            ffn_gated(st, c, il, L.ffn, Activation::GeluTanh, xn, h);
            rms_norm(st, h, *L.post_ffn_norm, c.rms_eps, h, c.n_embd);
            add_residual(st, x, h, c.n_embd);
            dump(st, "l_out", il, x, c.n_embd);
        }
        output_head(st, c, *output_norm_, *output_, final_softcap_);
    }

  private:
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
    float final_softcap_ = 0.0f;
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
