// zinc/models/blocks.cpp — the shared transformer blocks as ops.
#include "models/blocks.h"

#include "model/tensor_names.h"

namespace zinc::models {

DecoderTensors decoder_tensors(ProgramBuilder& b, const ModelConfig& c, bool dense_ffn) {
    DecoderTensors t;
    t.x = b.tensor("x", c.n_embd);
    t.xn = b.tensor("xn", c.n_embd);
    t.proj = b.tensor("proj", c.n_embd);
    t.q = b.tensor("q", c.q_dim());
    t.k = b.tensor("k", c.kv_dim_k());
    t.v = b.tensor("v", c.kv_dim_v());
    t.attn = b.tensor("attn", c.attn_out_dim());
    t.gate = dense_ffn ? b.tensor("gate", c.n_ff) : model::kNoTensor;
    t.up = dense_ffn ? b.tensor("up", c.n_ff) : model::kNoTensor;
    t.logits = b.tensor("logits", c.n_vocab);
    return t;
}

Result<void> check_moe_config(const gguf::File& file, const ModelConfig& c) {
    auto missing = [&](const char* key, const char* what) {
        return make_error(file.path() + ": missing metadata key " + c.arch_name + "." + key + " (" +
                          what + ", required for architecture " + c.arch_name + ")");
    };
    if (c.n_expert < 1) return missing("expert_count", "integer >= 1");
    if (c.n_expert_used < 1) return missing("expert_used_count", "integer >= 1");
    if (c.n_ff_exp < 1) return missing("expert_feed_forward_length", "integer >= 1");
    if (c.n_expert_used > model::kMoeMaxUsed || c.n_expert_used > c.n_expert)
        return make_error(file.path() + ": metadata " + c.arch_name + ".expert_used_count = " +
                          std::to_string(c.n_expert_used) + ", expected at most " +
                          std::to_string(std::min(model::kMoeMaxUsed, c.n_expert)) +
                          " (kMoeMaxUsed and expert_count)");
    return {};
}

ExpertWeights bind_experts(model::WeightBinder& b, const ModelConfig& c, int il, bool biases) {
    using model::TypeClass;
    namespace tn = model::tn;
    const int64_t e = c.n_embd, ff = c.n_ff_exp, ne = c.n_expert;
    ExpertWeights w;
    w.router = b.require(tn::layer(il, tn::kFfnGateInp), {e, ne}, TypeClass::Matmul);
    w.gate = b.require(tn::layer(il, tn::kFfnGateExps), {e, ff, ne}, TypeClass::Matmul);
    w.up = b.require(tn::layer(il, tn::kFfnUpExps), {e, ff, ne}, TypeClass::Matmul);
    w.down = b.require(tn::layer(il, tn::kFfnDownExps), {ff, e, ne}, TypeClass::Matmul);
    if (biases) {
        w.router_b = b.require(tn::layer(il, tn::kFfnGateInp, "bias"), {ne}, TypeClass::F32);
        w.gate_b = b.require(tn::layer(il, tn::kFfnGateExps, "bias"), {ff, ne}, TypeClass::F32);
        w.up_b = b.require(tn::layer(il, tn::kFfnUpExps, "bias"), {ff, ne}, TypeClass::F32);
        w.down_b = b.require(tn::layer(il, tn::kFfnDownExps, "bias"), {e, ne}, TypeClass::F32);
    }
    return w;
}

void routed_experts(ProgramBuilder& b, const ModelConfig& c, const ExpertWeights& w,
                    const ExpertRouting& r, Tid in, Tid logits, Tid out, Tid router_in) {
    b.matmul(router_in == model::kNoTensor ? in : router_in,
             {{w.router, w.router_b, logits, "ffn_moe_logits"}});
    model::MoeP m;
    m.in = in;
    m.logits = logits;
    m.gate_exps = w.gate;
    m.up_exps = w.up;
    m.down_exps = w.down;
    m.gate_b = w.gate_b;
    m.up_b = w.up_b;
    m.down_b = w.down_b;
    m.n_expert = c.n_expert;
    m.n_used = c.n_expert_used;
    m.n_ff = c.n_ff_exp;
    m.gating = r.gating;
    m.norm_w = r.norm_w;
    m.w_scale = c.expert_weights_scale;
    m.act = r.act;
    m.gate_up_fused = w.gate_up_fused;
    m.down_scale = w.down_scale;
    b.moe(m, out, "ffn_moe_out");
}

model::RopeKvP rope_kv_params(const ModelConfig& c, int rope_layer, int kv_layer,
                              const Weight* q_norm, const Weight* k_norm) {
    model::RopeKvP r;
    r.q_norm = q_norm;
    r.k_norm = k_norm;
    r.rope = c.rope(rope_layer);
    r.kv_layer = kv_layer;
    r.n_head = c.n_head;
    r.n_head_kv = c.n_head_kv;
    r.head_dim_k = c.head_dim_k;
    r.head_dim_v = c.head_dim_v;
    r.eps = c.rms_eps;
    return r;
}

model::AttentionP attention_params(const ModelConfig& c, int kv_layer) {
    model::AttentionP a;
    a.kv_layer = kv_layer;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.head_dim_k = c.head_dim_k;
    a.head_dim_v = c.head_dim_v;
    a.scale = c.attn_scale;
    return a;
}

void self_attention(ProgramBuilder& b, const ModelConfig& c, int il, const AttentionWeights& w,
                    const DecoderTensors& t, Tid out) {
    b.matmul(t.xn,
             {{w.wq, w.bq, t.q, "Qcur"}, {w.wk, w.bk, t.k, "Kcur"}, {w.wv, w.bv, t.v, "Vcur"}});
    model::RopeKvP r = rope_kv_params(c, il, il, w.q_norm, w.k_norm);
    if (w.rope_freqs) r.rope.freq_factors = w.rope_freqs->f32();
    r.v_norm = w.v_norm;
    b.rope_kv(t.q, t.k, t.v, r);
    model::AttentionP a = attention_params(c, il);
    a.q = t.q;
    a.window = c.window(il);
    a.causal = c.causal;
    a.sinks = w.sinks;
    b.attention(t.attn, a, "kqv_out");
    b.matmul(t.attn, {{w.wo, w.bo, out, "attn_out"}});
}

void ffn_gated(ProgramBuilder& b, const ModelConfig& c, const FfnWeights& w, Activation act,
               const DecoderTensors& t, Tid out, const char* out_name) {
    b.matmul(t.xn, {{w.gate, nullptr, t.gate, "ffn_gate"}, {w.up, nullptr, t.up, "ffn_up"}});
    b.glu(t.gate, t.up, act == Activation::SiLU ? model::GluAct::SiLU : model::GluAct::GeluTanh,
          t.gate, "ffn_glu");
    b.matmul(t.gate, {{w.down, nullptr, out, out_name}});
}

void output_head(ProgramBuilder& b, const ModelConfig& c, const DecoderTensors& t,
                 const Weight& norm, const Weight& lm_head, float softcap) {
    b.set_layer(-1);
    b.set_head(true);
    b.rms_norm(t.x, norm, c.rms_eps, t.xn, "result_norm", /*validate=*/false);
    b.mark_embeddings(t.xn);
    b.matmul(t.xn, {{&lm_head, nullptr, t.logits, nullptr}});
    if (softcap > 0.0f) b.softcap(t.logits, softcap);
    b.set_head(false);
}

}  // namespace zinc::models
