// zinc/models/prenorm_decoder.cpp — weight binding and forward pass of the pre-norm decoder.
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
    return std::unique_ptr<model::Model>(std::move(m));
}

void PrenormDecoder::forward(ForwardState& st) const {
    const ModelConfig& c = cfg_;
    model::Workspace& ws = st.ws;
    float* x = ws.x.data();
    embed(st, *tok_embd_, 1.0f);
    for (int il = 0; il < c.n_layer; ++il) {
        if (st.hooks && st.hooks->skip_layer(il, c.n_layer)) continue;  // ZINC_SKIP_LAYERS (debug)
        const Layer& L = layers_[il];
        rms_norm(st, x, *L.attn_norm, c.rms_eps, ws.xn.data(), c.n_embd);
        self_attention(st, c, il, L.attn, ws.xn.data(), ws.proj.data());
        if (il == c.n_layer - 1) keep_output_rows(st, {x, ws.proj.data()}, c.n_embd);
        add_residual(st, x, ws.proj.data(), c.n_embd);
        dump(st, "ffn_inp", il, x, c.n_embd);
        rms_norm(st, x, *L.ffn_norm, c.rms_eps, ws.xn.data(), c.n_embd);
        ffn_gated(st, c, il, L.ffn, Activation::SiLU, ws.xn.data(), ws.proj.data());
        add_residual(st, x, ws.proj.data(), c.n_embd);
        dump(st, "l_out", il, x, c.n_embd);
    }
    output_head(st, c, *output_norm_, *output_);
}

}  // namespace zinc::models
