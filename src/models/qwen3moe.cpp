// zinc/models/qwen3moe.cpp — Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B): the Qwen3 decoder layer
// (per-head Q/K RMS norms before NEOX RoPE, no biases, head_dim from attention.key_length) with
// the dense FFN replaced by routed experts and no shared expert:
//
//   x = token_embd[tokens]
//   per layer:
//     x += attn(rms_norm(x) * attn_norm)
//     h  = rms_norm(x) * ffn_norm
//     l  = ffn_gate_inp h                            router logits (n_expert)      ffn_moe_logits
//     p  = softmax(l); top-k experts e_1..e_k by p; w_s = p_{e_s} / sum_s p_{e_s}
//     x += sum_s w_s down_{e_s}(silu(gate_{e_s} h) * up_{e_s} h)                  ffn_moe_out
//   logits = output(rms_norm(x) * output_norm)     (tied to token_embd when output is absent)
//
// Keys: qwen3moe.expert_count, .expert_used_count, .expert_feed_forward_length (required; the
// experts' width, n_ff_exp; llama.cpp falls back to feed_forward_length / expert_used_count,
// zinc asks for the key). llama.cpp's graph (models/qwen3moe.cpp) normalises the weights
// (norm_w true) and applies <arch>.expert_weights_scale if the file has one.
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

class Qwen3Moe : public model::ArchModel {
  public:
    explicit Qwen3Moe(ModelConfig cfg) : ArchModel(std::move(cfg)) {}

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
            L.ffn_norm = b.require(tn::layer(il, tn::kFfnNorm), {e}, TypeClass::F32);
            L.experts = bind_experts(b, c, il, false);
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
        const DecoderTensors t = decoder_tensors(b, c, false);
        const Tid router = b.tensor("router", c.n_expert);
        b.embed(*tok_embd_, 1.0f, t.x, "inp_embd");
        for (int il = 0; il < c.n_layer; ++il) {
            const Layer& L = layers_[il];
            b.set_layer(il);
            b.rms_norm(t.x, *L.attn_norm, c.rms_eps, t.xn);
            self_attention(b, c, il, L.attn, t, t.proj);
            if (il == c.n_layer - 1) b.keep_rows({t.x, t.proj});  // only the output rows from here
            b.add(t.x, t.proj, "ffn_inp");
            b.rms_norm(t.x, *L.ffn_norm, c.rms_eps, t.xn);
            routed_experts(b, c, L.experts, {model::MoeGating::SoftmaxTopK, true}, t.xn, router,
                           t.proj);
            b.add(t.x, t.proj, "l_out");
        }
        output_head(b, c, t, *output_norm_, *output_, 0.0f);
        return b.finish(c.n_layer, t.logits);
    }

    struct Layer {
        const Weight* attn_norm = nullptr;
        AttentionWeights attn;
        const Weight* ffn_norm = nullptr;
        ExpertWeights experts;  // router f32 in llama.cpp's files
    };
    const Weight* tok_embd_ = nullptr;
    const Weight* output_norm_ = nullptr;
    const Weight* output_ = nullptr;
    std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_qwen3moe(const gguf::File& file, ModelConfig cfg) {
    ZINC_TRY(check_moe_config(file, cfg));
    auto m = std::make_unique<Qwen3Moe>(std::move(cfg));
    ZINC_TRY(m->bind(file));
    return std::unique_ptr<Model>(std::move(m));
}

}  // namespace zinc::models
