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
// are bound and kept (Model::n_nextn_layers() counts them) for speculative decoding; the forward
// pass does not run them, as llama.cpp's main graph does not.
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
                L.wq = b.require(tn::layer(il, tn::kAttnQ), {e, 2 * c.q_dim()}, TypeClass::Matmul);
                L.wk = b.require(tn::layer(il, tn::kAttnK), {e, c.kv_dim_k()}, TypeClass::Matmul);
                L.wv = b.require(tn::layer(il, tn::kAttnV), {e, c.kv_dim_v()}, TypeClass::Matmul);
                L.wo = b.require(tn::layer(il, tn::kAttnOut), {c.attn_out_dim(), e},
                                 TypeClass::Matmul);
                L.q_norm = b.require(tn::layer(il, tn::kAttnQNorm), {hd}, TypeClass::F32);
                L.k_norm = b.require(tn::layer(il, tn::kAttnKNorm), {hd}, TypeClass::F32);
            }
            bind_ffn(il, L.ffn, L.moe);
            if (!b.status().ok()) break;
        }
        // The NextN / MTP blocks (a full-attention decoder block plus eh_proj, enorm, hnorm and
        // optional own embedding / head), kept for speculative decoding.
        for (int j = 0; j < h_.n_nextn && b.status().ok(); ++j) {
            const int il = c.n_layer + j;
            Nextn n;
            n.attn_norm = b.require(tn::layer(il, tn::kAttnNorm), {e}, TypeClass::F32);
            n.post_norm = b.require(tn::layer(il, tn::kAttnPostNorm), {e}, TypeClass::F32);
            n.wq = b.require(tn::layer(il, tn::kAttnQ), {e, 2 * c.q_dim()}, TypeClass::Matmul);
            n.wk = b.require(tn::layer(il, tn::kAttnK), {e, c.kv_dim_k()}, TypeClass::Matmul);
            n.wv = b.require(tn::layer(il, tn::kAttnV), {e, c.kv_dim_v()}, TypeClass::Matmul);
            n.wo = b.require(tn::layer(il, tn::kAttnOut), {c.attn_out_dim(), e}, TypeClass::Matmul);
            n.q_norm = b.require(tn::layer(il, tn::kAttnQNorm), {hd}, TypeClass::F32);
            n.k_norm = b.require(tn::layer(il, tn::kAttnKNorm), {hd}, TypeClass::F32);
            bind_ffn(il, n.ffn, n.moe);
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
        return {};
    }

  private:
    /// qwen35moe's FFN: router, experts, and the shared expert with its per-row gate.
    struct MoeWeights {
        ExpertWeights experts;
        const Weight* sh_gate = nullptr;  // ffn_gate_inp_shexp (n_embd -> 1)
        FfnWeights sh;                    // the shared expert (n_ff_shexp wide)
    };
    model::Program build() const {
        const ModelConfig& c = cfg_;
        ProgramBuilder b;
        const DecoderTensors t = decoder_tensors(b, c, !h_.moe);
        const Tid qkv = b.tensor("qkv", h_.conv_dim());
        const Tid conv = b.tensor("conv", h_.conv_dim());
        const Tid z = b.tensor("z", h_.d_inner);
        const Tid o = b.tensor("o", h_.d_inner);
        const Tid beta = b.tensor("beta", h_.n_v_heads);
        const Tid alpha = b.tensor("alpha", h_.n_v_heads);
        const Tid qg = b.tensor("qg", 2 * int64_t{c.q_dim()});
        const Tid agate = b.tensor("agate", c.attn_out_dim());
        // qwen35moe: the router's logits, the shared expert's intermediates, output and gate
        DecoderTensors ts = t;
        Tid router = model::kNoTensor, shexp = model::kNoTensor, shg = model::kNoTensor;
        if (h_.moe) {
            router = b.tensor("router", c.n_expert);
            ts.gate = b.tensor("sh_gate", h_.n_ff_shexp);
            ts.up = b.tensor("sh_up", h_.n_ff_shexp);
            shexp = b.tensor("shexp", c.n_embd);
            shg = b.tensor("shexp_gate", 1);
        }
        b.embed(*tok_embd_, 1.0f, t.x, "inp_embd");
        int rs = 0;
        for (int il = 0; il < c.n_layer; ++il) {
            const Layer& L = layers_[il];
            b.set_layer(il);
            b.rms_norm(t.x, *L.attn_norm, c.rms_eps, t.xn, "attn_norm");
            if (h_.recurrent(il)) {
                b.matmul(t.xn, {{L.wqkv, nullptr, qkv, "linear_attn_qkv_mixed"},
                                {L.wgate, nullptr, z, "z"},
                                {L.wbeta, nullptr, beta, "beta"}});
                b.matmul(t.xn, {{L.walpha, nullptr, alpha, "alpha"}});
                model::SsmConvP cp;
                cp.in = qkv;
                cp.w = L.conv;
                cp.rs_layer = rs;
                b.ssm_conv(qkv, cp, conv, "conv_output_silu");
                model::DeltaNetP dp;
                dp.qkv = conv;
                dp.beta = beta;
                dp.alpha = alpha;
                dp.dt_bias = L.dt_bias;
                dp.a = L.ssm_a;
                dp.rs_layer = rs;
                dp.n_k_heads = h_.n_k_heads;
                dp.n_v_heads = h_.n_v_heads;
                dp.head_k_dim = h_.head_k_dim;
                dp.head_v_dim = h_.head_v_dim();
                dp.eps = c.rms_eps;
                b.delta_net(dp, o, "attn_output");
                model::GatedRmsNormP gp;
                gp.z = z;
                gp.w = L.ssm_norm;
                gp.head_dim = h_.head_v_dim();
                gp.eps = c.rms_eps;
                b.gated_rms_norm(o, gp, "final_output");
                b.matmul(o, {{L.ssm_out, nullptr, t.proj, "linear_attn_out"}});
                ++rs;
            } else {
                b.matmul(t.xn, {{L.wq, nullptr, qg, "Qcur_full"},
                                {L.wk, nullptr, t.k, "Kcur"},
                                {L.wv, nullptr, t.v, "Vcur"}});
                b.split_gate(model::SplitGateP{qg, c.n_head, c.head_dim_k}, t.q, agate);
                model::RopeKvP r;
                r.q_norm = L.q_norm;
                r.k_norm = L.k_norm;
                r.rope = c.rope(il);
                r.kv_layer = il;
                r.n_head = c.n_head;
                r.n_head_kv = c.n_head_kv;
                r.head_dim_k = c.head_dim_k;
                r.head_dim_v = c.head_dim_v;
                r.eps = c.rms_eps;
                b.rope_kv(t.q, t.k, t.v, r);
                model::AttentionP ap;
                ap.q = t.q;
                ap.kv_layer = il;
                ap.n_head = c.n_head;
                ap.n_head_kv = c.n_head_kv;
                ap.head_dim_k = c.head_dim_k;
                ap.head_dim_v = c.head_dim_v;
                ap.scale = c.attn_scale;
                b.attention(t.attn, ap, "attn_pregate");
                b.sigmoid_mul(t.attn, agate, "attn_gated");
                b.matmul(t.attn, {{L.wo, nullptr, t.proj, "attn_output"}});
            }
            if (il == c.n_layer - 1) b.keep_rows({t.x, t.proj});  // only the output rows now
            b.add(t.x, t.proj, "attn_residual");
            b.rms_norm(t.x, *L.post_norm, c.rms_eps, t.xn, "attn_post_norm");
            if (!h_.moe) {
                ffn_gated(b, c, L.ffn, Activation::SiLU, t, t.proj);
            } else {
                routed_experts(b, c, L.moe.experts, {model::MoeGating::SoftmaxTopK, true}, t.xn,
                               router, t.proj);
                ffn_gated(b, c, L.moe.sh, Activation::SiLU, ts, shexp);
                b.matmul(t.xn, {{L.moe.sh_gate, nullptr, shg, "shared_expert_gate"}});
                b.sigmoid_mul(shexp, shg, "ffn_shexp_gated");
                b.add(t.proj, shexp, "ffn_out");
            }
            b.add(t.x, t.proj, "l_out");
        }
        output_head(b, c, t, *output_norm_, *output_, 0.0f);
        return b.finish(c.n_layer, t.logits);
    }

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
    /// One NextN / MTP block (not executed by the forward pass).
    struct Nextn {
        const Weight *attn_norm = nullptr, *post_norm = nullptr;
        const Weight *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
        const Weight *q_norm = nullptr, *k_norm = nullptr;
        FfnWeights ffn;
        MoeWeights moe;
        const Weight* eh_proj = nullptr;  // (2 * n_embd -> n_embd)
        const Weight *enorm = nullptr, *hnorm = nullptr;
        const Weight* embed_tokens = nullptr;  // optional (else token_embd)
        const Weight* head = nullptr;          // optional shared_head_head (else output)
        const Weight* head_norm = nullptr;     // optional shared_head_norm (else output_norm)
    };
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
