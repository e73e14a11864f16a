// zinc/models/bert.cpp — BERT (Devlin et al. 2019), the encoder of sentence-embedding models
// such as all-MiniLM-L6-v2 (Reimers & Gurevych 2019, "Sentence-BERT"), in llama.cpp's `bert`
// GGUF layout (scripts/convert-bert-gguf.py writes it; llama.cpp's src/models/bert.cpp reads the
// same tensors):
//
//   x = token_embd[tokens] + token_types[0] + position_embd[pos]      token type 0 for every row
//   x = layer_norm(x) * token_embd_norm + bias
//   per layer (post-norm):
//     a = Wo attention(Wq x + bq, Wk x + bk, Wv x + bv) + bo          bidirectional, no RoPE,
//                                                                      scale 1/sqrt(head_dim)
//     x = layer_norm(x + a) * attn_output_norm + bias
//     f = Wdown gelu(Wup x + bup) + bdown                             exact (erf) GELU
//     x = layer_norm(x + f) * layer_output_norm + bias
//   embeddings = pool(x) (model/pooling.h; bert.pooling_type, mean for MiniLM), no LM head.
//
// GELU: Hugging Face's BertModel uses the erf form ("gelu"), as zinc does; llama.cpp's graph uses
// ggml_gelu, the tanh approximation (|difference| < 5e-4 per activation). K and V go through the
// f16 KV cache as for every other model (llama.cpp keeps them f32 here). A sequence must be
// computed whole, from position 0, in one forward (Program::bidirectional).
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

class Bert : public model::ArchModel {
  public:
    explicit Bert(ModelConfig cfg) : ArchModel(std::move(cfg)) {}

    Result<void> bind(const gguf::File& file) {
        const ModelConfig& c = cfg_;
        model::WeightBinder b(file, c.arch_name, weights_);
        const int64_t e = c.n_embd;
        tok_embd_ = b.require(tn::global(tn::kTokenEmbd), {e, c.n_vocab}, TypeClass::Matmul);
        const gguf::TensorInfo* types = file.find_tensor(tn::global(tn::kTokenTypes));
        const int64_t n_types = types && types->n_dims == 2 ? types->ne[1] : 1;
        tok_types_ = b.optional(tn::global(tn::kTokenTypes), {e, n_types}, TypeClass::Matmul);
        pos_embd_ = b.require(tn::global(tn::kPosEmbd), {e, c.n_ctx_train}, TypeClass::Matmul);
        emb_norm_ = b.require(tn::global(tn::kTokenEmbdNorm), {e}, TypeClass::F32);
        emb_norm_b_ = b.require(tn::global(tn::kTokenEmbdNorm, "bias"), {e}, TypeClass::F32);
        layers_.resize(c.n_layer);
        for (int il = 0; il < c.n_layer; ++il) {
            Layer& L = layers_[il];
            AttentionWeights& A = L.attn;
            A.wq = b.require(tn::layer(il, tn::kAttnQ), {e, c.q_dim()}, TypeClass::Matmul);
            A.wk = b.require(tn::layer(il, tn::kAttnK), {e, c.kv_dim_k()}, TypeClass::Matmul);
            A.wv = b.require(tn::layer(il, tn::kAttnV), {e, c.kv_dim_v()}, TypeClass::Matmul);
            A.wo = b.require(tn::layer(il, tn::kAttnOut), {c.attn_out_dim(), e}, TypeClass::Matmul);
            A.bq = b.require(tn::layer(il, tn::kAttnQ, "bias"), {c.q_dim()}, TypeClass::F32);
            A.bk = b.require(tn::layer(il, tn::kAttnK, "bias"), {c.kv_dim_k()}, TypeClass::F32);
            A.bv = b.require(tn::layer(il, tn::kAttnV, "bias"), {c.kv_dim_v()}, TypeClass::F32);
            A.bo = b.optional(tn::layer(il, tn::kAttnOut, "bias"), {e}, TypeClass::F32);
            L.attn_norm = b.require(tn::layer(il, tn::kAttnOutNorm), {e}, TypeClass::F32);
            L.attn_norm_b = b.require(tn::layer(il, tn::kAttnOutNorm, "bias"), {e}, TypeClass::F32);
            L.up = b.require(tn::layer(il, tn::kFfnUp), {e, c.n_ff}, TypeClass::Matmul);
            L.up_b = b.optional(tn::layer(il, tn::kFfnUp, "bias"), {c.n_ff}, TypeClass::F32);
            L.down = b.require(tn::layer(il, tn::kFfnDown), {c.n_ff, e}, TypeClass::Matmul);
            L.down_b = b.optional(tn::layer(il, tn::kFfnDown, "bias"), {e}, TypeClass::F32);
            L.out_norm = b.require(tn::layer(il, tn::kLayerOutNorm), {e}, TypeClass::F32);
            L.out_norm_b = b.require(tn::layer(il, tn::kLayerOutNorm, "bias"), {e}, TypeClass::F32);
            if (!b.status().ok()) break;
        }
        ZINC_TRY(b.status());
        program_ = build();
        return {};
    }

  private:
    struct Layer {
        AttentionWeights attn;
        const Weight *attn_norm = nullptr, *attn_norm_b = nullptr;
        const Weight *up = nullptr, *up_b = nullptr, *down = nullptr, *down_b = nullptr;
        const Weight *out_norm = nullptr, *out_norm_b = nullptr;
    };

    model::Program build() const {
        const ModelConfig& c = cfg_;
        ProgramBuilder b;
        // The decoder tensors without the logits (an encoder has no LM head): xn is the
        // attention input, which in a post-norm layer is the residual stream x itself.
        DecoderTensors t;
        t.x = b.tensor("x", c.n_embd);
        t.xn = t.x;
        t.proj = b.tensor("proj", c.n_embd);
        t.q = b.tensor("q", c.q_dim());
        t.k = b.tensor("k", c.kv_dim_k());
        t.v = b.tensor("v", c.kv_dim_v());
        t.attn = b.tensor("attn", c.attn_out_dim());
        t.up = b.tensor("up", c.n_ff);
        t.gate = model::kNoTensor;
        t.logits = model::kNoTensor;

        b.embed(*tok_embd_, 1.0f, t.x, nullptr);
        if (tok_types_) b.add_embed(t.x, {tok_types_, false, 0}, nullptr);
        b.add_embed(t.x, {pos_embd_, true, 0}, "inp_embd");
        b.layer_norm(t.x, *emb_norm_, emb_norm_b_, c.norm_eps, t.x, "inp_norm");
        for (int il = 0; il < c.n_layer; ++il) {
            const Layer& L = layers_[il];
            b.set_layer(il);
            self_attention(b, c, il, L.attn, t, t.proj);
            b.add(t.proj, t.x, nullptr);
            b.layer_norm(t.proj, *L.attn_norm, L.attn_norm_b, c.norm_eps, t.x, "ffn_inp");
            b.matmul(t.x, {{L.up, L.up_b, t.up, "ffn_up"}});
            b.gelu(t.up, "ffn_gelu");
            b.matmul(t.up, {{L.down, L.down_b, t.proj, "ffn_out"}});
            b.add(t.proj, t.x, nullptr);
            b.layer_norm(t.proj, *L.out_norm, L.out_norm_b, c.norm_eps, t.x, "l_out");
        }
        b.set_layer(-1);
        b.mark_embeddings(t.x);
        return b.finish(c.n_layer, model::kNoTensor);
    }

    const Weight* tok_embd_ = nullptr;
    const Weight* tok_types_ = nullptr;
    const Weight* pos_embd_ = nullptr;
    const Weight *emb_norm_ = nullptr, *emb_norm_b_ = nullptr;
    std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_bert(const gguf::File& file, ModelConfig cfg) {
    if (cfg.causal)
        return make_error(file.path() +
                          ": metadata bert.attention.causal is true or absent, "
                          "expected false (a BERT encoder attends in both directions)");
    cfg.n_rot = 0;  // no RoPE: self_attention's rope_kv only appends K/V
    auto m = std::make_unique<Bert>(std::move(cfg));
    ZINC_TRY(m->bind(file));
    return std::unique_ptr<Model>(std::move(m));
}

}  // namespace zinc::models
