// zinc/models/gpt_oss.cpp — gpt-oss (gpt-oss-20b, gpt-oss-120b; GGUF architecture "gpt-oss",
// llama.cpp's LLM_ARCH_OPENAI_MOE, models/openai-moe.cpp there):
//
//   x = token_embd[tokens]
//   per layer (even layers: sliding window <arch>.attention.sliding_window; odd: full causal):
//     h  = rms_norm(x) * attn_norm
//     q, k, v = (W h + b) for Q, K, V (biases as the file has them), NEOX RoPE (YaRN from the
//               file's rope.scaling keys), head_dim = attention.key_length
//     a  = softmax over [q.k / sqrt(head_dim) ..., sink_h] of v   (the learned per-head sink
//          logit attn_sinks in the denominator only)
//     x += attn_output a + attn_output.bias                                          ffn_inp
//     h  = rms_norm(x) * post_attention_norm
//     l  = ffn_gate_inp h + ffn_gate_inp.bias                      router logits   ffn_moe_logits
//     the k largest l, weights w = softmax over those k (no renormalisation)
//     x += sum_s w_s (down_e (swiglu_oai(gate_e h + gate_b_e, up_e h + up_b_e)) + down_b_e)
//          swiglu_oai(g, u) = min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1)
//   logits = output(rms_norm(x) * output_norm)
//
// MXFP4 expert weights stay quantized (quant/mxfp4.cpp, the CPU dot products). The CUDA tier
// refuses the experts for now (swiglu_oai and the expert biases have no kernels there).
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

class GptOss : public model::ArchModel {
  public:
    explicit GptOss(ModelConfig cfg) : ArchModel(std::move(cfg)) {}

    Result<void> bind(const gguf::File& file) {
        const ModelConfig& c = cfg_;
        model::WeightBinder b(file, c.arch_name, weights_);
        const int64_t e = c.n_embd;
        tok_embd_ = b.require(tn::global(tn::kTokenEmbd), {e, c.n_vocab}, TypeClass::Matmul);
        output_norm_ = b.require(tn::global(tn::kOutputNorm), {e}, TypeClass::F32);
        output_ = b.require(tn::global(tn::kOutput), {e, c.n_vocab}, TypeClass::Matmul);
        layers_.resize(c.n_layer);
        for (int il = 0; il < c.n_layer; ++il) {
            Layer& L = layers_[il];
            auto bias = [&](std::string_view base, int64_t n) {
                return b.optional(tn::layer(il, base, "bias"), {n}, TypeClass::F32);
            };
            L.attn_norm = b.require(tn::layer(il, tn::kAttnNorm), {e}, TypeClass::F32);
            L.attn.wq = b.require(tn::layer(il, tn::kAttnQ), {e, c.q_dim()}, TypeClass::Matmul);
            L.attn.wk = b.require(tn::layer(il, tn::kAttnK), {e, c.kv_dim_k()}, TypeClass::Matmul);
            L.attn.wv = b.require(tn::layer(il, tn::kAttnV), {e, c.kv_dim_v()}, TypeClass::Matmul);
            L.attn.wo =
                b.require(tn::layer(il, tn::kAttnOut), {c.attn_out_dim(), e}, TypeClass::Matmul);
            L.attn.bq = bias(tn::kAttnQ, c.q_dim());
            L.attn.bk = bias(tn::kAttnK, c.kv_dim_k());
            L.attn.bv = bias(tn::kAttnV, c.kv_dim_v());
            L.attn.bo = b.require(tn::layer(il, tn::kAttnOut, "bias"), {e}, TypeClass::F32);
            L.attn.sinks = b.require(tn::layer(il, tn::kAttnSinks), {c.n_head}, TypeClass::F32);
            L.post_norm = b.require(tn::layer(il, tn::kAttnPostNorm), {e}, TypeClass::F32);
            L.experts = bind_experts(b, c, il, true);
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
            b.rms_norm(t.x, *L.post_norm, c.rms_eps, t.xn);
            routed_experts(b, c, L.experts,
                           {model::MoeGating::TopKSoftmax, false, model::GluAct::SwigluOai}, t.xn,
                           router, t.proj);
            b.add(t.x, t.proj, "l_out");
        }
        output_head(b, c, t, *output_norm_, *output_, 0.0f);
        return b.finish(c.n_layer, t.logits);
    }

    struct Layer {
        const Weight* attn_norm = nullptr;
        AttentionWeights attn;  // with bo and sinks
        const Weight* post_norm = nullptr;
        ExpertWeights experts;  // with biases; MXFP4 experts in the releases
    };
    const Weight* tok_embd_ = nullptr;
    const Weight* output_norm_ = nullptr;
    const Weight* output_ = nullptr;
    std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_gpt_oss(const gguf::File& file, ModelConfig cfg) {
    ZINC_TRY(check_moe_config(file, cfg));
    auto m = std::make_unique<GptOss>(std::move(cfg));
    ZINC_TRY(m->bind(file));
    return std::unique_ptr<Model>(std::move(m));
}

}  // namespace zinc::models
