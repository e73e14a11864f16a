// zinc/models/gemma4.cpp — Gemma 4 (Gemma 4 31B dense, 26B-A4B MoE), text decoder, as llama.cpp's
// LLM_ARCH_GEMMA4 (llama-cpp-python 0.3.36: models/gemma4.cpp, conversion/gemma.py).
//
//   x = token_embd[tokens] * sqrt(n_embd)
//   per layer il (sliding iff attention.sliding_window_pattern[il]):
//     h  = rms_norm(x) * attn_norm
//     q  = rope(rms_norm_per_head(Wq h) * q_norm)
//     k  = rope(rms_norm_per_head(Wk h) * k_norm)
//     v  = rms_norm_per_head(Wv h)            no weight; global layers without attn_v: v = Wk h
//     a  = Wo attention(q, K, V), scale 1      sliding: window attention.sliding_window
//     x  = x + rms_norm(a) * post_attention_norm                                   ffn_inp
//     dense layer:  f = W_down gelu_tanh(W_gate f') * W_up f',  f' = rms_norm(x) * ffn_norm
//     MoE layer (ffn_gate_inp present):
//       m = rms_norm(dense MLP of rms_norm(x) * ffn_norm) * post_ffw_norm_1        (shared)
//       l = ffn_gate_inp (rms_norm(x) / sqrt(n_embd) * ffn_gate_inp.scale)         router
//       e = experts(rms_norm(x) * pre_ffw_norm_2): softmax top-k, renormalised, GELU experts,
//           down output times ffn_down_exps.scale[e] when present
//       f = m + rms_norm(e) * post_ffw_norm_2
//     x  = (x + rms_norm(f) * post_ffw_norm) * layer_output_scale (when present)   l_out
//   logits = softcap(output(rms_norm(x) * output_norm))   (tied to token_embd when absent)
//
// Layer kinds differ in shape: sliding layers have attention.key_length_swa heads
// (rope.dimension_count_swa rotated, base rope.freq_base_swa, default 10000), global layers
// attention.key_length (rope.dimension_count, base rope.freq_base, rope_freqs.weight as
// per-pair divisors: the converter's "proportional" RoPE, 1e30 for the unrotated pairs);
// attention.head_count_kv may be a per-layer array (31B: 16 sliding / 4 global). The norms are
// used as stored (the converter adds no 1, unlike gemma3). Not supported, refused with the key:
// per-layer embeddings (embedding_length_per_layer_input > 0: E2B/E4B), shared-KV layers
// (attention.shared_kv_layers > 0), the fused attn_qkv projection.
#include <cmath>
#include <map>
#include <utility>
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

// The facts of the file that ModelConfig does not hold (llama.cpp's llama_model_gemma4 hparams).
struct Gemma4Keys {
    int32_t head_dim_swa = 0;  // attention.key_length_swa (== value_length_swa)
    int32_t n_rot_swa = 0;     // rope.dimension_count_swa (default rope.dimension_count)
};

Result<int64_t> int_key(const gguf::File& f, const std::string& key, bool required,
                        int64_t dflt, int64_t lo, int64_t hi) {
    auto r = f.get_int(key);
    if (!r.ok()) return r.error();
    if (!r.value()) {
        if (required)
            return make_error(f.path() + ": missing metadata key " + key +
                              " (integer, required for architecture gemma4)");
        return dflt;
    }
    if (*r.value() < lo || *r.value() > hi)
        return make_error(f.path() + ": metadata " + key + " = " + std::to_string(*r.value()) +
                          ", expected a value in [" + std::to_string(lo) + ", " +
                          std::to_string(hi) + "]");
    return *r.value();
}

// Reads the gemma4 keys into c (per-layer sliding pattern, window, head sizes, RoPE) and g.
Result<void> read_gemma4(const gguf::File& f, ModelConfig& c, Gemma4Keys& g) {
    const std::string a = c.arch_name + ".";
    {
        auto ple = int_key(f, a + "embedding_length_per_layer_input", true, 0, 0, 1 << 20);
        if (!ple.ok()) return ple.error();
        if (ple.value() != 0)
            return make_error(f.path() + ": metadata " + a + "embedding_length_per_layer_input = " +
                              std::to_string(ple.value()) +
                              ": per-layer embeddings (Gemma 4 E2B/E4B) are not supported "
                              "(expected 0)");
        auto shared = int_key(f, a + "attention.shared_kv_layers", false, 0, 0, c.n_layer);
        if (!shared.ok()) return shared.error();
        if (shared.value() != 0)
            return make_error(f.path() + ": metadata " + a + "attention.shared_kv_layers = " +
                              std::to_string(shared.value()) +
                              ": layers sharing another layer's KV cache are not supported "
                              "(expected 0)");
    }
    const std::string pat_key = a + "attention.sliding_window_pattern";
    const gguf::Value* pat = f.find(pat_key);
    if (!pat)
        return make_error(f.path() + ": missing metadata key " + pat_key +
                          " (array of block_count booleans, required for architecture gemma4)");
    if (pat->type != gguf::ValueType::ARRAY || pat->elem_type != gguf::ValueType::BOOL ||
        static_cast<int64_t>(pat->arr.size()) != c.n_layer)
        return make_error(f.path() + ": metadata " + pat_key + ": expected an array of " +
                          std::to_string(c.n_layer) + " booleans (one per layer), got " +
                          (pat->type == gguf::ValueType::ARRAY
                               ? std::to_string(pat->arr.size()) + " values of type " +
                                     std::string(gguf::value_type_name(pat->elem_type))
                               : "a " + std::string(gguf::value_type_name(pat->type))));
    c.layer_swa.assign(c.n_layer, 0);
    for (int il = 0; il < c.n_layer; ++il) c.layer_swa[il] = pat->arr[il].u != 0 ? 1 : 0;

    auto window = int_key(f, a + "attention.sliding_window", true, 0, 1, int64_t{1} << 30);
    if (!window.ok()) return window.error();
    c.sliding_window = static_cast<int32_t>(window.value());

    auto hk = int_key(f, a + "attention.key_length_swa", true, 0, 2, 65536);
    if (!hk.ok()) return hk.error();
    auto hv = int_key(f, a + "attention.value_length_swa", true, 0, 1, 65536);
    if (!hv.ok()) return hv.error();
    if (hk.value() != hv.value())
        return make_error(f.path() + ": metadata " + a + "attention.value_length_swa = " +
                          std::to_string(hv.value()) + ", expected attention.key_length_swa (" +
                          std::to_string(hk.value()) + "): Gemma 4 has K and V heads of one size");
    if (c.head_dim_k != c.head_dim_v)
        return make_error(f.path() + ": metadata " + a + "attention.value_length = " +
                          std::to_string(c.head_dim_v) + ", expected attention.key_length (" +
                          std::to_string(c.head_dim_k) + "): Gemma 4 has K and V heads of one size");
    g.head_dim_swa = static_cast<int32_t>(hk.value());
    auto rot = int_key(f, a + "rope.dimension_count_swa", false, c.n_rot, 2, g.head_dim_swa);
    if (!rot.ok()) return rot.error();
    if (rot.value() > g.head_dim_swa)  // absent: rope.dimension_count, llama.cpp's default
        return make_error(f.path() + ": metadata " + a + "rope.dimension_count_swa is absent and "
                          "its default rope.dimension_count = " + std::to_string(c.n_rot) +
                          " exceeds attention.key_length_swa = " +
                          std::to_string(g.head_dim_swa));
    if (rot.value() % 2 != 0)
        return make_error(f.path() + ": metadata " + a + "rope.dimension_count_swa = " +
                          std::to_string(rot.value()) + ", expected an even value");
    g.n_rot_swa = static_cast<int32_t>(rot.value());

    auto base = f.get_float(a + "rope.freq_base_swa");
    if (!base.ok()) return base.error();
    c.rope_freq_base_swa = base.value() ? static_cast<float>(*base.value()) : 10000.0f;
    if (!(c.rope_freq_base_swa > 0))
        return make_error(f.path() + ": metadata " + a + "rope.freq_base_swa must be positive");
    c.rope_freq_scale_swa = c.rope_freq_scale;
    c.attn_scale = 1.0f;  // Gemma 4's attention has no pre-softmax scaling (llama.cpp: 1.0)
    c.expert_weights_scale = 0.0f;  // llama.cpp's gemma4 graph ignores expert_weights_scale
    return {};
}

class Gemma4 : public model::ArchModel {
  public:
    Gemma4(ModelConfig cfg, Gemma4Keys g) : ArchModel(std::move(cfg)), g_(g) {}

    // Layer il's attention config: its KV heads, head size, rotated dims.
    ModelConfig layer_config(int il) const {
        ModelConfig l = cfg_;
        l.n_head_kv = cfg_.layer_n_head_kv.empty() ? cfg_.n_head_kv : cfg_.layer_n_head_kv[il];
        if (cfg_.is_swa(il)) {
            l.head_dim_k = l.head_dim_v = g_.head_dim_swa;
            l.n_rot = g_.n_rot_swa;
        }
        return l;
    }

    Result<void> bind(const gguf::File& file) {
        ModelConfig& c = cfg_;
        model::WeightBinder b(file, c.arch_name, weights_);
        const int64_t e = c.n_embd;
        if (file.find_tensor(tn::global(tn::kPerLayerTokenEmbd)))
            return make_error(file.path() + ": tensor " + tn::global(tn::kPerLayerTokenEmbd) +
                              ": per-layer embeddings (Gemma 4 E2B/E4B) are not supported");
        tok_embd_ = b.require(tn::global(tn::kTokenEmbd), {e, c.n_vocab}, TypeClass::Matmul);
        output_norm_ = b.require(tn::global(tn::kOutputNorm), {e}, TypeClass::F32);
        output_ = b.optional(tn::global(tn::kOutput), {e, c.n_vocab}, TypeClass::Matmul);
        if (!output_) output_ = tok_embd_;
        // the global layers' RoPE divisors (one tensor, every global layer's)
        bool any_global = false;
        for (int il = 0; il < c.n_layer; ++il) any_global = any_global || !c.is_swa(il);
        if (any_global)
            rope_freqs_ = b.require(tn::global(tn::kRopeFreqs), {c.head_dim_k / 2}, TypeClass::F32);
        layers_.resize(c.n_layer);
        c.layer_kv_k.resize(c.n_layer);
        c.layer_kv_v.resize(c.n_layer);
        for (int il = 0; il < c.n_layer; ++il) {
            const ModelConfig l = layer_config(il);
            c.layer_kv_k[il] = l.kv_dim_k();
            c.layer_kv_v[il] = l.kv_dim_v();
            if (file.find_tensor(tn::layer(il, tn::kAttnQkv)))
                return make_error(file.path() + ": tensor " + tn::layer(il, tn::kAttnQkv) +
                                  ": the fused Q/K/V projection is not supported (expected "
                                  "attn_q, attn_k and optionally attn_v)");
            Layer& L = layers_[il];
            L.attn_norm = b.require(tn::layer(il, tn::kAttnNorm), {e}, TypeClass::F32);
            L.attn.wq = b.require(tn::layer(il, tn::kAttnQ), {e, l.q_dim()}, TypeClass::Matmul);
            L.attn.wk = b.require(tn::layer(il, tn::kAttnK), {e, l.kv_dim_k()}, TypeClass::Matmul);
            // no attn_v (attention_k_eq_v): V is the K projection, before K's norm and RoPE
            L.attn.wv = b.optional(tn::layer(il, tn::kAttnV), {e, l.kv_dim_v()}, TypeClass::Matmul);
            if (!L.attn.wv) L.attn.wv = L.attn.wk;
            L.attn.wo =
                b.require(tn::layer(il, tn::kAttnOut), {l.attn_out_dim(), e}, TypeClass::Matmul);
            L.attn.q_norm = b.require(tn::layer(il, tn::kAttnQNorm), {l.head_dim_k}, TypeClass::F32);
            L.attn.k_norm = b.require(tn::layer(il, tn::kAttnKNorm), {l.head_dim_k}, TypeClass::F32);
            L.attn.v_norm = true;
            if (!c.is_swa(il)) L.attn.rope_freqs = rope_freqs_;
            L.post_attn_norm = b.require(tn::layer(il, tn::kAttnPostNorm), {e}, TypeClass::F32);
            L.ffn_norm = b.require(tn::layer(il, tn::kFfnNorm), {e}, TypeClass::F32);
            L.ffn.gate = b.require(tn::layer(il, tn::kFfnGate), {e, c.n_ff}, TypeClass::Matmul);
            L.ffn.up = b.require(tn::layer(il, tn::kFfnUp), {e, c.n_ff}, TypeClass::Matmul);
            L.ffn.down = b.require(tn::layer(il, tn::kFfnDown), {c.n_ff, e}, TypeClass::Matmul);
            L.post_ffn_norm = b.require(tn::layer(il, tn::kFfnPostNorm), {e}, TypeClass::F32);
            L.out_scale = b.optional(tn::layer(il, tn::kLayerOutScale), {1}, TypeClass::F32);
            if (file.find_tensor(tn::layer(il, tn::kFfnGateInp))) ZINC_TRY(bind_moe(b, file, il));
            if (!b.status().ok()) break;
        }
        ZINC_TRY(b.status());
        program_ = build();
        return {};
    }

  private:
    // The MoE half of layer il (llama.cpp creates it when ffn_gate_inp exists).
    Result<void> bind_moe(model::WeightBinder& b, const gguf::File& file, int il) {
        const ModelConfig& c = cfg_;
        ZINC_TRY(check_moe_config(file, c));  // names a missing or bad expert key
        const int64_t e = c.n_embd, ff = c.n_ff_exp, ne = c.n_expert;
        Layer& L = layers_[il];
        ExpertWeights& x = L.experts;
        x.router = b.require(tn::layer(il, tn::kFfnGateInp), {e, ne}, TypeClass::Matmul);
        L.router_scale = b.require(tn::layer(il, tn::kFfnGateInp, "scale"), {e}, TypeClass::F32);
        L.pre_norm_2 = b.require(tn::layer(il, tn::kFfnPreNorm2), {e}, TypeClass::F32);
        L.post_norm_1 = b.require(tn::layer(il, tn::kFfnPostNorm1), {e}, TypeClass::F32);
        L.post_norm_2 = b.require(tn::layer(il, tn::kFfnPostNorm2), {e}, TypeClass::F32);
        x.gate = b.optional(tn::layer(il, tn::kFfnGateUpExps), {e, 2 * ff, ne}, TypeClass::Matmul);
        if (x.gate) {
            x.up = x.gate;
            x.gate_up_fused = true;
        } else {
            x.gate = b.require(tn::layer(il, tn::kFfnGateExps), {e, ff, ne}, TypeClass::Matmul);
            x.up = b.require(tn::layer(il, tn::kFfnUpExps), {e, ff, ne}, TypeClass::Matmul);
        }
        x.down = b.require(tn::layer(il, tn::kFfnDownExps), {ff, e, ne}, TypeClass::Matmul);
        x.down_scale = b.optional(tn::layer(il, tn::kFfnDownExps, "scale"), {ne}, TypeClass::F32);
        L.moe = true;
        return {};
    }

    model::Program build() const {
        const ModelConfig& c = cfg_;
        ProgramBuilder b;
        const DecoderTensors t0 = decoder_tensors(b, layer_config(0));
        // one q/k/v/attn set per attention shape (sliding, global)
        std::map<std::pair<int, int>, DecoderTensors> shapes;
        bool any_moe = false;
        for (int il = 0; il < c.n_layer; ++il) {
            any_moe = any_moe || layers_[il].moe;
            const ModelConfig l = layer_config(il);
            const std::pair<int, int> key{l.n_head_kv, l.head_dim_k};
            if (shapes.count(key)) continue;
            DecoderTensors t = t0;
            if (!shapes.empty()) {
                const std::string s = "_" + std::to_string(l.n_head_kv) + "x" +
                                      std::to_string(l.head_dim_k);
                t.q = b.tensor("q" + s, l.q_dim());
                t.k = b.tensor("k" + s, l.kv_dim_k());
                t.v = b.tensor("v" + s, l.kv_dim_v());
                t.attn = b.tensor("attn" + s, l.attn_out_dim());
            }
            shapes.emplace(key, t);
        }
        Tid xn2 = model::kNoTensor, xr = model::kNoTensor, router = model::kNoTensor,
            moe = model::kNoTensor;
        if (any_moe) {
            xn2 = b.tensor("xn2", c.n_embd);    // the experts' normalised input
            xr = b.tensor("xr", c.n_embd);      // the router's input
            router = b.tensor("router", c.n_expert);
            moe = b.tensor("moe", c.n_embd);
        }
        const Tid h = t0.proj;
        b.embed(*tok_embd_, std::sqrt(static_cast<float>(c.n_embd)), t0.x, "inp_embd");
        for (int il = 0; il < c.n_layer; ++il) {
            const Layer& L = layers_[il];
            const ModelConfig l = layer_config(il);
            const DecoderTensors& t = shapes.at({l.n_head_kv, l.head_dim_k});
            b.set_layer(il);
            b.rms_norm(t.x, *L.attn_norm, c.rms_eps, t.xn);
            self_attention(b, l, il, L.attn, t, h);
            if (il == c.n_layer - 1) b.keep_rows({t.x, h});  // only the output rows from here
            b.rms_norm(h, *L.post_attn_norm, c.rms_eps, h);
            b.add(t.x, h, "ffn_inp");
            b.rms_norm(t.x, *L.ffn_norm, c.rms_eps, t.xn);
            ffn_gated(b, c, L.ffn, Activation::GeluTanh, t, h);
            if (L.moe) {
                b.rms_norm(h, *L.post_norm_1, c.rms_eps, h, "ffn_mlp");
                b.rms_norm(t.x, *L.pre_norm_2, c.rms_eps, xn2, "ffn_norm_2");
                b.rms_norm(t.x, *L.router_scale, c.rms_eps, xr, nullptr, true,
                           1.0f / std::sqrt(static_cast<float>(c.n_embd)));
                routed_experts(b, c, L.experts,
                               {model::MoeGating::SoftmaxTopK, true, model::GluAct::GeluTanh},
                               xn2, router, moe, xr);
                b.rms_norm(moe, *L.post_norm_2, c.rms_eps, moe, "ffn_moe");
                b.add(h, moe, "ffn_moe_combined");
            }
            b.rms_norm(h, *L.post_ffn_norm, c.rms_eps, h, "ffn_post_norm");
            b.add(t.x, h, L.out_scale ? nullptr : "l_out");
            if (L.out_scale) b.scale(t.x, *L.out_scale, "l_out");
        }
        output_head(b, c, t0, *output_norm_, *output_, c.final_logit_softcap);
        return b.finish(c.n_layer, t0.logits);
    }

    struct Layer {
        const Weight* attn_norm = nullptr;
        AttentionWeights attn;
        const Weight* post_attn_norm = nullptr;
        const Weight* ffn_norm = nullptr;
        FfnWeights ffn;  // the dense MLP (the shared expert of a MoE layer)
        const Weight* post_ffn_norm = nullptr;
        const Weight* out_scale = nullptr;  // (1) f32 or null
        bool moe = false;
        ExpertWeights experts;
        const Weight* router_scale = nullptr;  // ffn_gate_inp.scale (n_embd)
        const Weight* pre_norm_2 = nullptr;
        const Weight* post_norm_1 = nullptr;
        const Weight* post_norm_2 = nullptr;
    };
    Gemma4Keys g_;
    const Weight* tok_embd_ = nullptr;
    const Weight* output_norm_ = nullptr;
    const Weight* output_ = nullptr;
    const Weight* rope_freqs_ = nullptr;
    std::vector<Layer> layers_;
};

}  // namespace

Result<std::unique_ptr<Model>> make_gemma4(const gguf::File& file, ModelConfig cfg) {
    Gemma4Keys g;
    ZINC_TRY(read_gemma4(file, cfg, g));
    auto m = std::make_unique<Gemma4>(std::move(cfg), g);
    ZINC_TRY(m->bind(file));
    return std::unique_ptr<Model>(std::move(m));
}

}  // namespace zinc::models
