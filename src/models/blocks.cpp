// zinc/models/blocks.cpp — the shared transformer blocks as ops.
#include "models/blocks.h"

namespace zinc::models {

DecoderTensors decoder_tensors(ProgramBuilder& b, const ModelConfig& c) {
    DecoderTensors t;
    t.x = b.tensor("x", c.n_embd);
    t.xn = b.tensor("xn", c.n_embd);
    t.proj = b.tensor("proj", c.n_embd);
    t.q = b.tensor("q", c.q_dim());
    t.k = b.tensor("k", c.kv_dim_k());
    t.v = b.tensor("v", c.kv_dim_v());
    t.attn = b.tensor("attn", c.attn_out_dim());
    t.gate = b.tensor("gate", c.n_ff);
    t.up = b.tensor("up", c.n_ff);
    t.logits = b.tensor("logits", c.n_vocab);
    return t;
}

Result<void> check_moe_config(const gguf::File& file, const ModelConfig& c) {
    auto missing = [&](const char* key, const char* what) {
        return make_error(file.path() + ": missing metadata key " + c.arch_name + "." + key +
                          " (" + what + ", required for architecture " + c.arch_name + ")");
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

void self_attention(ProgramBuilder& b, const ModelConfig& c, int il, const AttentionWeights& w,
                    const DecoderTensors& t, Tid out) {
    b.matmul(t.xn,
             {{w.wq, w.bq, t.q, "Qcur"}, {w.wk, w.bk, t.k, "Kcur"}, {w.wv, w.bv, t.v, "Vcur"}});
    model::RopeKvP r;
    r.q_norm = w.q_norm;
    r.k_norm = w.k_norm;
    r.rope = c.rope(il);
    if (w.rope_freqs) r.rope.freq_factors = w.rope_freqs->f32();
    r.kv_layer = il;
    r.n_head = c.n_head;
    r.n_head_kv = c.n_head_kv;
    r.head_dim_k = c.head_dim_k;
    r.head_dim_v = c.head_dim_v;
    r.eps = c.rms_eps;
    b.rope_kv(t.q, t.k, t.v, r);
    model::AttentionP a;
    a.q = t.q;
    a.kv_layer = il;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.head_dim_k = c.head_dim_k;
    a.head_dim_v = c.head_dim_v;
    a.scale = c.attn_scale;
    a.window = c.window(il);
    a.sinks = w.sinks;
    b.attention(t.attn, a, "kqv_out");
    b.matmul(t.attn, {{w.wo, w.bo, out, "attn_out"}});
}

void ffn_gated(ProgramBuilder& b, const ModelConfig& c, const FfnWeights& w, Activation act,
               const DecoderTensors& t, Tid out) {
    b.matmul(t.xn, {{w.gate, nullptr, t.gate, "ffn_gate"}, {w.up, nullptr, t.up, "ffn_up"}});
    b.glu(t.gate, t.up, act == Activation::SiLU ? model::GluAct::SiLU : model::GluAct::GeluTanh,
          t.gate, "ffn_glu");
    b.matmul(t.gate, {{w.down, nullptr, out, "ffn_out"}});
}

void output_head(ProgramBuilder& b, const ModelConfig& c, const DecoderTensors& t,
                 const Weight& norm, const Weight& lm_head, float softcap) {
    b.set_layer(-1);
    b.set_head(true);
    b.rms_norm(t.x, norm, c.rms_eps, t.xn, "result_norm", /*validate=*/false);
    b.matmul(t.xn, {{&lm_head, nullptr, t.logits, nullptr}});
    if (softcap > 0.0f) b.softcap(t.logits, softcap);
    b.set_head(false);
}

}  // namespace zinc::models
