// zinc/models/prenorm_decoder.cpp — weight binding and op list of the pre-norm decoder.
#include "models/prenorm_decoder.h"

#include "model/tensor_names.h"

namespace zinc::models {

using model::TypeClass;
namespace tn = model::tn;

Result<std::unique_ptr<model::Model>> PrenormDecoder::create(const gguf::File& file,
                                                             ModelConfig cfg,
                                                             const DecoderVariant& variant) {
    std::unique_ptr<PrenormDecoder> m(new PrenormDecoder(std::move(cfg)));
    const ModelConfig& c = m->cfg_;
    model::WeightBinder b(file, c.arch_name, m->weights_);
    const int64_t e = c.n_embd;
    m->tok_embd_ = b.require(tn::global(tn::kTokenEmbd), {e, c.n_vocab}, TypeClass::Matmul);
    m->output_norm_ = b.require(tn::global(tn::kOutputNorm), {e}, TypeClass::F32);
    m->output_ = b.optional(tn::global(tn::kOutput), {e, c.n_vocab}, TypeClass::Matmul);
    if (!m->output_) m->output_ = m->tok_embd_;
    const Weight* rope_freqs =
        b.optional(tn::global(tn::kRopeFreqs), {c.n_rot / 2}, TypeClass::F32);

    m->layers_.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
        Layer& L = m->layers_[il];
        L.attn_norm = b.require(tn::layer(il, tn::kAttnNorm), {e}, TypeClass::F32);
        L.attn.wq = b.require(tn::layer(il, tn::kAttnQ), {e, c.q_dim()}, TypeClass::Matmul);
        L.attn.wk = b.require(tn::layer(il, tn::kAttnK), {e, c.kv_dim_k()}, TypeClass::Matmul);
        L.attn.wv = b.require(tn::layer(il, tn::kAttnV), {e, c.kv_dim_v()}, TypeClass::Matmul);
        L.attn.wo =
            b.require(tn::layer(il, tn::kAttnOut), {c.attn_out_dim(), e}, TypeClass::Matmul);
        if (variant.qkv_bias) {
            L.attn.bq = b.require(tn::layer(il, tn::kAttnQ, "bias"), {c.q_dim()}, TypeClass::F32);
            L.attn.bk =
                b.require(tn::layer(il, tn::kAttnK, "bias"), {c.kv_dim_k()}, TypeClass::F32);
            L.attn.bv =
                b.require(tn::layer(il, tn::kAttnV, "bias"), {c.kv_dim_v()}, TypeClass::F32);
        }
        if (variant.qk_norm) {
            L.attn.q_norm =
                b.require(tn::layer(il, tn::kAttnQNorm), {c.head_dim_k}, TypeClass::F32);
            L.attn.k_norm =
                b.require(tn::layer(il, tn::kAttnKNorm), {c.head_dim_k}, TypeClass::F32);
        }
        L.attn.rope_freqs = rope_freqs;
        L.ffn_norm = b.require(tn::layer(il, tn::kFfnNorm), {e}, TypeClass::F32);
        L.ffn.gate = b.require(tn::layer(il, tn::kFfnGate), {e, c.n_ff}, TypeClass::Matmul);
        L.ffn.up = b.require(tn::layer(il, tn::kFfnUp), {e, c.n_ff}, TypeClass::Matmul);
        L.ffn.down = b.require(tn::layer(il, tn::kFfnDown), {c.n_ff, e}, TypeClass::Matmul);
        if (!b.status().ok()) break;  // report the first bad tensor, not one per layer
    }
    ZINC_TRY(b.status());
    m->program_ = m->build();
    return std::unique_ptr<model::Model>(std::move(m));
}

model::Program PrenormDecoder::build() const {
    const ModelConfig& c = cfg_;
    ProgramBuilder b;
    const DecoderTensors t = decoder_tensors(b, c);
    b.embed(*tok_embd_, 1.0f, t.x, "inp_embd");
    for (int il = 0; il < c.n_layer; ++il) {
        const Layer& L = layers_[il];
        b.set_layer(il);
        b.rms_norm(t.x, *L.attn_norm, c.rms_eps, t.xn);
        self_attention(b, c, il, L.attn, t, t.proj);
        if (il == c.n_layer - 1) b.keep_rows({t.x, t.proj});  // only the output rows from here
        b.add(t.x, t.proj, "ffn_inp");
        b.rms_norm(t.x, *L.ffn_norm, c.rms_eps, t.xn);
        ffn_gated(b, c, L.ffn, Activation::SiLU, t, t.proj);
        b.add(t.x, t.proj, "l_out");
    }
    output_head(b, c, t, *output_norm_, *output_, c.final_logit_softcap);
    return b.finish(c.n_layer, t.logits);
}

}  // namespace zinc::models
