// zinc/models/qwen35.cpp — Qwen 3.5 (dense): the Gated DeltaNet hybrid, as llama.cpp stores and
// runs it (src/models/qwen35.cpp and delta-net-base.cpp of llama.cpp; GGUF keys and tensor
// names from its llama-arch.cpp). Three of every full_attention_interval (4) layers are Gated
// DeltaNet (linear attention with a recurrent state), the fourth is gated full attention:
//
//   x = token_embd[tokens]
//   per layer:
//     h = rms_norm(x) * attn_norm
//     DeltaNet layer (recurrent, state per sequence):
//       qkv = W_qkv h; z = W_gate h; beta = W_beta h; alpha = W_alpha h
//       c = silu(conv1d_causal(qkv; ssm_conv1d, kernel 4, rolling conv state))
//       o = gated_delta_rule(l2(q_c), l2(k_c), v_c; sigmoid(beta),
//                            g = softplus(alpha + ssm_dt.bias) * ssm_a)   (ssm_a = -exp(A_log))
//       a = W_ssm_out (rms_norm_per_head(o) * ssm_norm * silu(z))
//     attention layer (paged KV):
//       [q | gate] per head = W_q h (joint projection, 2 * head_dim per head); k = W_k h; v = W_v h
//       q, k = rms_norm_per_head * q_norm / k_norm, RoPE (multi-section, below)
//       a = W_o (attention(q, k, v) * sigmoid(gate))
//     x = x + a
//     x = x + W_down (silu(W_gate f) * W_up f),  f = rms_norm(x) * post_attention_norm
//   logits = W_out (rms_norm(x) * output_norm)              W_out = token_embd when absent
//
// RoPE is llama.cpp's IMROPE (interleaved multi-section, rope.dimension_sections): for text
// every section's position is the token position except the 4th (0), so a rotated pair whose
// sector falls in the 4th section is not rotated. The Qwen 3.5 sections ([11, 11, 10, 0] over 32
// pairs) put no pair there, and then IMROPE is NEOX RoPE over rope.dimension_count dimensions;
// a file whose sections would rotate some pair by position 0 is refused at load.
//
// qwen35moe (Qwen 3.6 35B-A3B; llama.cpp's src/models/qwen35moe.cpp): the same layers with the
// FFN replaced by routed experts (softmax, top-k, renormalised, as qwen3moe) plus a shared
// expert gated per row:
//     x = x + moe(f) + sigmoid(ffn_gate_inp_shexp f) * W_down_sh (silu(W_gate_sh f) * W_up_sh f)
// (<arch>.expert_shared_feed_forward_length, default feed_forward_length); the NextN blocks
// carry the same MoE FFN.
//
// NextN / MTP: <arch>.nextn_predict_layers blocks after the trunk (block_count includes them)
// are bound (Model::n_nextn_layers() counts them); the trunk's op list does not run them, as
// llama.cpp's main graph does not. The first is a second op list (build_nextn, below;
// ArchModel::nextn_program) for the NextN drafter (engine/nextn_drafter.h); it reuses the
// trunk's block builder.
#include <array>
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

struct HybridParams {
    int d_conv = 0;      // ssm.conv_kernel
    int d_inner = 0;     // ssm.inner_size = n_v_heads * head_v_dim
    int head_k_dim = 0;  // ssm.state_size (= head_v_dim)
    int n_v_heads = 0;   // ssm.time_step_rank
    int n_k_heads = 0;   // ssm.group_count
    int interval = 4;    // full_attention_interval
    int n_nextn = 0;     // nextn_predict_layers
    bool moe = false;    // qwen35moe: routed + shared experts instead of the dense FFN
    int n_ff_shexp = 0;  // expert_shared_feed_forward_length (default feed_forward_length)
    std::array<int, 4> sections{};
    int head_v_dim() const { return d_inner / n_v_heads; }
    int key_dim() const { return n_k_heads * head_k_dim; }
    int conv_dim() const { return 2 * key_dim() + d_inner; }
    bool recurrent(int il) const { return (il + 1) % interval != 0; }
};

Result<int64_t> read_int(const gguf::File& f, const std::string& arch, const std::string& key,
                         bool required, int64_t dflt, int64_t lo, int64_t hi) {
    auto r = f.get_int(key);
    if (!r.ok()) return r.error();
    if (!r.value()) {
        if (required)
            return make_error(f.path() + ": missing metadata key " + key +
                              " (integer, required for architecture " + arch + ")");
        return dflt;
    }
    const int64_t v = *r.value();
    if (v < lo || v > hi)
        return make_error(f.path() + ": metadata " + key + " = " + std::to_string(v) +
                          ", expected a value in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
    return v;
}

Result<HybridParams> read_hybrid(const gguf::File& f, const ModelConfig& c) {
    HybridParams h;
    const std::string a = c.arch_name + ".";
    auto get = [&](const char* k, bool req, int64_t dflt, int64_t lo, int64_t hi,
                   int& out) -> Result<void> {
        auto r = read_int(f, c.arch_name, a + k, req, dflt, lo, hi);
        if (!r) return r.error();
        out = static_cast<int>(r.value());
        return {};
    };
    ZINC_TRY(get("ssm.conv_kernel", true, 0, 2, 16, h.d_conv));
    ZINC_TRY(get("ssm.state_size", true, 0, 1, 4096, h.head_k_dim));
    ZINC_TRY(get("ssm.group_count", true, 0, 1, 4096, h.n_k_heads));
    ZINC_TRY(get("ssm.time_step_rank", true, 0, 1, 4096, h.n_v_heads));
    ZINC_TRY(get("ssm.inner_size", true, 0, 1, 1 << 20, h.d_inner));
    ZINC_TRY(get("full_attention_interval", false, 4, 1, 4096, h.interval));
    ZINC_TRY(get("nextn_predict_layers", false, 0, 0, c.n_layer - 1, h.n_nextn));
    h.moe = c.arch_name == "qwen35moe";
    if (h.moe)
        ZINC_TRY(get("expert_shared_feed_forward_length", false, c.n_ff, 1, 1 << 20, h.n_ff_shexp));
    if (h.n_v_heads % h.n_k_heads != 0)
        return make_error(f.path() + ": metadata " + a + "ssm.time_step_rank = " +
                          std::to_string(h.n_v_heads) + ", expected a multiple of " + a +
                          "ssm.group_count (" + std::to_string(h.n_k_heads) + ")");
    if (h.d_inner != h.n_v_heads * h.head_k_dim)
        return make_error(f.path() + ": metadata " + a + "ssm.inner_size = " +
                          std::to_string(h.d_inner) + ", expected ssm.time_step_rank * " +
                          "ssm.state_size = " + std::to_string(h.n_v_heads * h.head_k_dim) +
                          " (head_v_dim = head_k_dim, as llama.cpp requires)");
    if (f.find("attention.recurrent_layers") || f.find(a + "attention.recurrent_layers"))
        return make_error(f.path() + ": metadata " + a +
                          "attention.recurrent_layers is not supported (the layer pattern "
                          "comes from full_attention_interval)");
    const gguf::Value* sec = f.find(a + "rope.dimension_sections");
    if (sec) {
        if (sec->type != gguf::ValueType::ARRAY || sec->arr.size() < 3 || sec->arr.size() > 4)
            return make_error(f.path() + ": metadata " + a +
                              "rope.dimension_sections: expected an array of 3 or 4 integers");
        for (size_t i = 0; i < sec->arr.size(); ++i) {
            auto v = sec->arr[i].as_int();
            if (!v || *v < 0 || *v > 4096)
                return make_error(f.path() + ": metadata " + a + "rope.dimension_sections[" +
                                  std::to_string(i) + "]: expected an integer in [0, 4096]");
            h.sections[i] = static_cast<int>(*v);
        }
        // ggml's IMROPE (ggml_mrope_cache_init): pair i is in sector i % sum(sections); sector s
        // takes the t/h/w position (all the token position for text) when s % 3 == 0 and
        // s < 3 * sections[0], == 1 and < 3 * sections[1], == 2 and < 3 * sections[2]; else
        // the 4th position, 0 for text.
        const int sect = h.sections[0] + h.sections[1] + h.sections[2] + h.sections[3];
        if (sect <= 0 || sect > c.n_rot / 2)
            return make_error(f.path() + ": metadata " + a + "rope.dimension_sections: sum " +
                              std::to_string(sect) +
                              ", expected in [1, rope.dimension_count / 2 = " +
                              std::to_string(c.n_rot / 2) + "]");
        for (int i = 0; i < c.n_rot / 2; ++i) {
            const int s = i % sect;
            const bool pos = (s % 3 == 0 && s < 3 * h.sections[0]) ||
                             (s % 3 == 1 && s < 3 * h.sections[1]) ||
                             (s % 3 == 2 && s < 3 * h.sections[2]);
            if (!pos)
                return make_error(f.path() + ": metadata " + a +
                                  "rope.dimension_sections puts rotary pair " + std::to_string(i) +
                                  " in the 4th section (position 0 for text): not supported");
        }
    }
    return h;
}

class Qwen35 : public model::ArchModel {
  public:
    Qwen35(ModelConfig cfg, HybridParams h) : ArchModel(std::move(cfg)), h_(h) {}
    int32_t n_nextn_layers() const override { return static_cast<int32_t>(nextn_.size()); }

    Result<void> bind(const gguf::File& file) {
        const ModelConfig& c = cfg_;
        model::WeightBinder b(file, c.arch_name, weights_);
        const int64_t e = c.n_embd;
        const int64_t hd = c.head_dim_k;
        tok_embd_ = b.require(tn::global(tn::kTokenEmbd), {e, c.n_vocab}, TypeClass::Matmul);
        output_norm_ = b.require(tn::global(tn::kOutputNorm), {e}, TypeClass::F32);
        output_ = b.optional(tn::global(tn::kOutput), {e, c.n_vocab}, TypeClass::Matmul);
        if (!output_) output_ = tok_embd_;
        const int64_t kd = h_.key_dim(), vd = h_.d_inner, nv = h_.n_v_heads;
        // The FFN of block il: dense, or (qwen35moe) router + experts + gated shared expert.
        auto bind_ffn = [&](int il, FfnWeights& d, MoeWeights& m) {
            if (!h_.moe) {
                d.gate = b.require(tn::layer(il, tn::kFfnGate), {e, c.n_ff}, TypeClass::Matmul);
                d.up = b.require(tn::layer(il, tn::kFfnUp), {e, c.n_ff}, TypeClass::Matmul);
                d.down = b.require(tn::layer(il, tn::kFfnDown), {c.n_ff, e}, TypeClass::Matmul);
                return;
            }
            const int64_t fs = h_.n_ff_shexp;
            m.experts = bind_experts(b, c, il, false);
            m.sh_gate = b.require(tn::layer(il, "ffn_gate_inp_shexp"), {e}, TypeClass::Matmul);
            m.sh.gate = b.require(tn::layer(il, "ffn_gate_shexp"), {e, fs}, TypeClass::Matmul);
            m.sh.up = b.require(tn::layer(il, "ffn_up_shexp"), {e, fs}, TypeClass::Matmul);
            m.sh.down = b.require(tn::layer(il, "ffn_down_shexp"), {fs, e}, TypeClass::Matmul);
        };
        // Block il's gated full attention (the trunk's attention layers and the NextN blocks).
        auto bind_attention = [&](int il, Layer& L) {
            L.wq = b.require(tn::layer(il, tn::kAttnQ), {e, 2 * c.q_dim()}, TypeClass::Matmul);
            L.wk = b.require(tn::layer(il, tn::kAttnK), {e, c.kv_dim_k()}, TypeClass::Matmul);
            L.wv = b.require(tn::layer(il, tn::kAttnV), {e, c.kv_dim_v()}, TypeClass::Matmul);
            L.wo = b.require(tn::layer(il, tn::kAttnOut), {c.attn_out_dim(), e}, TypeClass::Matmul);
            L.q_norm = b.require(tn::layer(il, tn::kAttnQNorm), {hd}, TypeClass::F32);
            L.k_norm = b.require(tn::layer(il, tn::kAttnKNorm), {hd}, TypeClass::F32);
        };
        layers_.resize(c.n_layer);
        for (int il = 0; il < c.n_layer; ++il) {
            Layer& L = layers_[il];
            L.attn_norm = b.require(tn::layer(il, tn::kAttnNorm), {e}, TypeClass::F32);
            L.post_norm = b.require(tn::layer(il, tn::kAttnPostNorm), {e}, TypeClass::F32);
            if (h_.recurrent(il)) {
                L.wqkv = b.require(tn::layer(il, "attn_qkv"), {e, 2 * kd + vd}, TypeClass::Matmul);
                L.wgate = b.require(tn::layer(il, "attn_gate"), {e, vd}, TypeClass::Matmul);
                L.conv = b.require(tn::layer(il, "ssm_conv1d"), {h_.d_conv, 2 * kd + vd},
                                   TypeClass::F32);
                L.dt_bias = b.require(tn::layer(il, "ssm_dt", "bias"), {nv}, TypeClass::F32);
                L.ssm_a = b.require("blk." + std::to_string(il) + ".ssm_a", {nv}, TypeClass::F32);
                L.wbeta = b.require(tn::layer(il, "ssm_beta"), {e, nv}, TypeClass::Matmul);
                L.walpha = b.require(tn::layer(il, "ssm_alpha"), {e, nv}, TypeClass::Matmul);
                L.ssm_norm =
                    b.require(tn::layer(il, "ssm_norm"), {h_.head_v_dim()}, TypeClass::F32);
                L.ssm_out = b.require(tn::layer(il, "ssm_out"), {vd, e}, TypeClass::Matmul);
            } else {
                bind_attention(il, L);
            }
            bind_ffn(il, L.ffn, L.moe);
            if (!b.status().ok()) break;
        }
        // The NextN / MTP blocks (a full-attention decoder block plus eh_proj, enorm, hnorm and
        // optional own embedding / head), for speculative decoding (build_nextn).
        for (int j = 0; j < h_.n_nextn && b.status().ok(); ++j) {
            const int il = c.n_layer + j;
            Nextn n;
            n.blk.attn_norm = b.require(tn::layer(il, tn::kAttnNorm), {e}, TypeClass::F32);
            n.blk.post_norm = b.require(tn::layer(il, tn::kAttnPostNorm), {e}, TypeClass::F32);
            bind_attention(il, n.blk);
            bind_ffn(il, n.blk.ffn, n.blk.moe);
            n.eh_proj = b.require(tn::layer(il, "nextn.eh_proj"), {2 * e, e}, TypeClass::Matmul);
            n.enorm = b.require(tn::layer(il, "nextn.enorm"), {e}, TypeClass::F32);
            n.hnorm = b.require(tn::layer(il, "nextn.hnorm"), {e}, TypeClass::F32);
            n.embed_tokens =
                b.optional(tn::layer(il, "nextn.embed_tokens"), {e, c.n_vocab}, TypeClass::Matmul);
            n.head = b.optional(tn::layer(il, "nextn.shared_head_head"), {e, c.n_vocab},
                                TypeClass::Matmul);
            n.head_norm = b.optional(tn::layer(il, "nextn.shared_head_norm"), {e}, TypeClass::F32);
            nextn_.push_back(n);
        }
        ZINC_TRY(b.status());
        program_ = build();
        if (!nextn_.empty()) nextn_program_ = build_nextn();
        return {};
    }

  private:
    /// qwen35moe's FFN: router, experts, and the shared expert with its per-row gate.
    struct MoeWeights {
        ExpertWeights experts;
        const Weight* sh_gate = nullptr;  // ffn_gate_inp_shexp (n_embd -> 1)
        FfnWeights sh;                    // the shared expert (n_ff_shexp wide)
    };
    struct Layer {
        const Weight* attn_norm = nullptr;
        const Weight* post_norm = nullptr;  // post_attention_norm: the FFN's input norm
        // DeltaNet layers
        const Weight* wqkv = nullptr;      // (n_embd -> 2 * key_dim + d_inner)
        const Weight* wgate = nullptr;     // (n_embd -> d_inner): z
        const Weight* conv = nullptr;      // (d_conv, conv_dim) f32
        const Weight* dt_bias = nullptr;   // (n_v_heads) f32
        const Weight* ssm_a = nullptr;     // (n_v_heads) f32: -exp(A_log)
        const Weight* wbeta = nullptr;     // (n_embd -> n_v_heads)
        const Weight* walpha = nullptr;    // (n_embd -> n_v_heads)
        const Weight* ssm_norm = nullptr;  // (head_v_dim) f32
        const Weight* ssm_out = nullptr;   // (d_inner -> n_embd)
        // attention layers
        const Weight* wq = nullptr;  // (n_embd -> n_head * 2 * head_dim): [q_h | gate_h] per head
        const Weight *wk = nullptr, *wv = nullptr, *wo = nullptr;
        const Weight *q_norm = nullptr, *k_norm = nullptr;
        FfnWeights ffn;  // dense (qwen35)
        MoeWeights moe;  // or qwen35moe's
    };
    /// One NextN / MTP block: a full-attention decoder block plus its input projection, norms
    /// and optional own embedding and head (its op list: build_nextn).
    struct Nextn {
        Layer blk;                        // the decoder block (attention + FFN weights)
        const Weight* eh_proj = nullptr;  // (2 * n_embd -> n_embd)
        const Weight *enorm = nullptr, *hnorm = nullptr;
        const Weight* embed_tokens = nullptr;  // optional (else token_embd)
        const Weight* head = nullptr;          // optional shared_head_head (else output)
        const Weight* head_norm = nullptr;     // optional shared_head_norm (else output_norm)
    };
    /// The activation tensors of one op list (the trunk's, or the NextN block's).
    struct Tensors {
        DecoderTensors t;   // x, xn, proj, q, k, v, attn, (gate, up), logits
        DecoderTensors ts;  // qwen35moe: t with gate/up the shared expert's
        Tid qkv, conv, z, o, beta, alpha, qg, agate;
        Tid router = model::kNoTensor, shexp = model::kNoTensor, shg = model::kNoTensor;
    };
    Tensors tensors(ProgramBuilder& b) const {
        const ModelConfig& c = cfg_;
        Tensors T;
        T.t = decoder_tensors(b, c, !h_.moe);
        T.qkv = b.tensor("qkv", h_.conv_dim());
        T.conv = b.tensor("conv", h_.conv_dim());
        T.z = b.tensor("z", h_.d_inner);
        T.o = b.tensor("o", h_.d_inner);
        T.beta = b.tensor("beta", h_.n_v_heads);
        T.alpha = b.tensor("alpha", h_.n_v_heads);
        T.qg = b.tensor("qg", 2 * int64_t{c.q_dim()});
        T.agate = b.tensor("agate", c.attn_out_dim());
        T.ts = T.t;
        if (h_.moe) {  // the router's logits, the shared expert's intermediates, output, gate
            T.router = b.tensor("router", c.n_expert);
            T.ts.gate = b.tensor("sh_gate", h_.n_ff_shexp);
            T.ts.up = b.tensor("sh_up", h_.n_ff_shexp);
            T.shexp = b.tensor("shexp", c.n_embd);
            T.shg = b.tensor("shexp_gate", 1);
        }
        return T;
    }

    /// One decoder block on T.t.x: the token mixer (DeltaNet layer rs, or gated attention over
    /// KV layer kv_layer), its residual, the FFN and its residual. `last`: KeepRows before the
    /// first residual (only the output rows matter from there).
    void block(ProgramBuilder& b, const Tensors& T, const Layer& L, int il, int kv_layer, int rs,
               bool last) const {
        const ModelConfig& c = cfg_;
        const DecoderTensors& t = T.t;
        b.set_layer(il);
        b.rms_norm(t.x, *L.attn_norm, c.rms_eps, t.xn, "attn_norm");
        if (L.wqkv) {
            delta_net_mixer(b, T, L, rs);
        } else {
            gated_attention(b, T, L, il, kv_layer);
        }
        if (last) b.keep_rows({t.x, t.proj});
        b.add(t.x, t.proj, "attn_residual");
        b.rms_norm(t.x, *L.post_norm, c.rms_eps, t.xn, "attn_post_norm");
        if (!h_.moe) {
            ffn_gated(b, c, L.ffn, Activation::SiLU, t, t.proj);
        } else {
            routed_experts(b, c, L.moe.experts, {model::MoeGating::SoftmaxTopK, true}, t.xn,
                           T.router, t.proj);
            ffn_gated(b, c, L.moe.sh, Activation::SiLU, T.ts, T.shexp, "ffn_shexp");
            b.matmul(t.xn, {{L.moe.sh_gate, nullptr, T.shg, "shared_expert_gate"}});
            b.sigmoid_mul(T.shexp, T.shg, "ffn_shexp_gated");
            b.add(t.proj, T.shexp, "ffn_out");
        }
        b.add(t.x, t.proj, "l_out");
    }

    void delta_net_mixer(ProgramBuilder& b, const Tensors& T, const Layer& L, int rs) const {
        const ModelConfig& c = cfg_;
        b.matmul(T.t.xn, {{L.wqkv, nullptr, T.qkv, "linear_attn_qkv_mixed"},
                          {L.wgate, nullptr, T.z, "z"},
                          {L.wbeta, nullptr, T.beta, "beta"}});
        b.matmul(T.t.xn, {{L.walpha, nullptr, T.alpha, "alpha"}});
        model::SsmConvP cp;
        cp.in = T.qkv;
        cp.w = L.conv;
        cp.rs_layer = rs;
        b.ssm_conv(T.qkv, cp, T.conv, "conv_output_silu");
        model::DeltaNetP dp;
        dp.qkv = T.conv;
        dp.beta = T.beta;
        dp.alpha = T.alpha;
        dp.dt_bias = L.dt_bias;
        dp.a = L.ssm_a;
        dp.rs_layer = rs;
        dp.n_k_heads = h_.n_k_heads;
        dp.n_v_heads = h_.n_v_heads;
        dp.head_k_dim = h_.head_k_dim;
        dp.head_v_dim = h_.head_v_dim();
        dp.eps = c.rms_eps;
        b.delta_net(dp, T.o, "attn_output");
        model::GatedRmsNormP gp;
        gp.z = T.z;
        gp.w = L.ssm_norm;
        gp.head_dim = h_.head_v_dim();
        gp.eps = c.rms_eps;
        b.gated_rms_norm(T.o, gp, "final_output");
        b.matmul(T.o, {{L.ssm_out, nullptr, T.t.proj, "linear_attn_out"}});
    }

    // Gated full attention of block il (RoPE as layer il) over KV layer kv_layer.
    void gated_attention(ProgramBuilder& b, const Tensors& T, const Layer& L, int il,
                         int kv_layer) const {
        const ModelConfig& c = cfg_;
        const DecoderTensors& t = T.t;
        b.matmul(t.xn, {{L.wq, nullptr, T.qg, "Qcur_full"},
                        {L.wk, nullptr, t.k, "Kcur"},
                        {L.wv, nullptr, t.v, "Vcur"}});
        b.split_gate(model::SplitGateP{T.qg, c.n_head, c.head_dim_k}, t.q, T.agate);
        // (NextN: the trunk's RoPE)
        const int rope_layer = il < c.n_layer ? il : c.n_layer - 1;
        b.rope_kv(t.q, t.k, t.v, rope_kv_params(c, rope_layer, kv_layer, L.q_norm, L.k_norm));
        model::AttentionP ap = attention_params(c, kv_layer);
        ap.q = t.q;
        b.attention(t.attn, ap, "attn_pregate");
        b.sigmoid_mul(t.attn, T.agate, "attn_gated");
        b.matmul(t.attn, {{L.wo, nullptr, t.proj, "attn_output"}});
    }

    model::Program build() const {
        const ModelConfig& c = cfg_;
        ProgramBuilder b;
        const Tensors T = tensors(b);
        b.embed(*tok_embd_, 1.0f, T.t.x, "inp_embd");
        int rs = 0;
        for (int il = 0; il < c.n_layer; ++il) {
            const Layer& L = layers_[il];
            block(b, T, L, il, il, rs, il == c.n_layer - 1);
            if (h_.recurrent(il)) ++rs;
        }
        b.mark_hidden(T.t.x);
        output_head(b, c, T.t, *output_norm_, *output_, 0.0f);
        return b.finish(c.n_layer, T.t.logits);
    }

    /// The first NextN/MTP block as its own op list (DeepSeek-V3 section 2.2's MTP module, as
    /// vLLM's qwen3_next_mtp.py and deepseek_mtp.py compute it): for the row at position i with
    /// h_i (Batch::hidden_in: the trunk's last hidden state, before output_norm) and token
    /// t_{i+1},
    ///   x = eh_proj [rms_norm(embed(t_{i+1})) * enorm ; rms_norm(h_i) * hnorm]  (embedding first)
    ///   x = the block (gated attention over its own KV layer 0, FFN), as a trunk attention layer
    ///   logits = head(rms_norm(x) * head_norm);  Program::hidden = x (the next draft's h)
    /// head_norm / head: shared_head_norm / shared_head_head, else output_norm / output.
    model::Program build_nextn() const {
        const ModelConfig& c = cfg_;
        const Nextn& n = nextn_.front();
        const int il = c.n_layer;  // its GGUF block index: blk.<n_layer>.*
        ProgramBuilder b;
        const Tensors T = tensors(b);
        const Tid e = b.tensor("e", c.n_embd);
        const Tid hh = b.tensor("h", c.n_embd);
        const Tid cat = b.tensor("eh", 2 * int64_t{c.n_embd});
        b.set_layer(il);
        b.embed(n.embed_tokens ? *n.embed_tokens : *tok_embd_, 1.0f, e, "nextn_inp_embd");
        b.rms_norm(e, *n.enorm, c.rms_eps, e, "nextn_enorm");
        b.input(hh, "nextn_hidden");
        b.rms_norm(hh, *n.hnorm, c.rms_eps, hh, "nextn_hnorm");
        b.concat(e, hh, cat, "nextn_eh");
        b.matmul(cat, {{n.eh_proj, nullptr, T.t.x, "nextn_eh_proj"}});
        block(b, T, n.blk, il, 0, 0, true);
        b.mark_hidden(T.t.x);
        output_head(b, c, T.t, n.head_norm ? *n.head_norm : *output_norm_,
                    n.head ? *n.head : *output_, 0.0f);
        return b.finish(c.n_layer + 1, T.t.logits);
    }

    HybridParams h_;
    const Weight* tok_embd_ = nullptr;
    const Weight* output_norm_ = nullptr;
    const Weight* output_ = nullptr;
    std::vector<Layer> layers_;
    std::vector<Nextn> nextn_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_qwen35(const gguf::File& file, ModelConfig cfg) {
    auto h = read_hybrid(file, cfg);
    if (!h) return h.error();
    // block_count counts the NextN blocks; the trunk is the layers before them.
    cfg.n_layer -= h.value().n_nextn;
    if (cfg.head_dim_k != cfg.head_dim_v)
        return make_error(file.path() + ": qwen35 needs attention.key_length == value_length (" +
                          std::to_string(cfg.head_dim_k) + " != " + std::to_string(cfg.head_dim_v) +
                          ")");
    if (h.value().moe) ZINC_TRY(check_moe_config(file, cfg));
    auto m = std::make_unique<Qwen35>(std::move(cfg), h.value());
    ZINC_TRY(m->bind(file));
    return std::unique_ptr<Model>(std::move(m));
}

Result<std::unique_ptr<Model>> make_qwen35moe(const gguf::File& file, ModelConfig cfg) {
    return make_qwen35(file, std::move(cfg));  // read_hybrid sets the MoE variant from the arch
}

}  // namespace zinc::models
