// zinc/model/config.cpp — hyperparameters from GGUF metadata, validated.
#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "gguf/gguf.h"
#include "model/tensor_names.h"

namespace zinc::model {
namespace {

class KeyReader {
  public:
    KeyReader(const gguf::File& f, std::string_view arch) : f_(f), arch_(arch) {}

    std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

    // Integer key; Error when absent and required, or present with a non-integer type.
    Result<std::optional<int64_t>> get_int(std::string_view suffix) const {
        return f_.get_int(key(suffix));
    }
    Result<int64_t> require_int(std::string_view suffix) const {
        auto r = f_.get_int(key(suffix));
        if (!r.ok()) return r.error();
        if (!r.value()) {
            return make_error(f_.path() + ": missing metadata key " + key(suffix) +
                              " (integer, required for architecture " + arch_ + ")");
        }
        return *r.value();
    }
    Result<std::optional<double>> get_float(std::string_view suffix) const {
        return f_.get_float(key(suffix));
    }
    const gguf::File& file() const { return f_; }

  private:
    const gguf::File& f_;
    std::string arch_;
};

Error bad(const gguf::File& f, const std::string& key, int64_t v, const std::string& expected) {
    return make_error(f.path() + ": metadata " + key + " = " + std::to_string(v) + ", expected " +
                      expected);
}

// YaRN's parameters as llama.cpp derives them (llama-model.cpp load_hparams, llama-context.cpp):
// n_ctx_orig = rope.scaling.original_context_length (default context_length); ext_factor 1
// (rope.scaling.yarn_ext_factor may override it); beta_fast 32 / beta_slow 1 (yarn_beta_fast /
// yarn_beta_slow may override them; llama.cpp itself reads those keys for grok only); with
// factor = 1 / freq_scale and ext_factor != 0, attn_factor = (0.1 ln(factor) + 1) (1 if factor
// <= 1) times 1 / (1 + 0.1 ln(factor)) (cancelling the factor rope_yarn applies), times
// rope.scaling.attn_factor. rope.scaling.yarn_log_multiplier (DeepSeek's mscale_all_dim) is
// refused: it changes attn_factor in ways no supported architecture needs.
Result<void> read_yarn(const gguf::File& file, const KeyReader& k, ModelConfig& c) {
    c.n_ctx_orig_yarn = c.n_ctx_train;
    auto orig = k.get_int("rope.scaling.original_context_length");
    if (!orig.ok()) return orig.error();
    if (orig.value()) {
        if (*orig.value() < 1 || *orig.value() > (int64_t{1} << 30))
            return bad(file, k.key("rope.scaling.original_context_length"), *orig.value(),
                       "a value in [1, 2^30]");
        c.n_ctx_orig_yarn = static_cast<int32_t>(*orig.value());
    }
    float ext = 1.0f;
    for (auto [suffix, dst] : {std::pair{"rope.scaling.yarn_ext_factor", &ext},
                               std::pair{"rope.scaling.yarn_beta_fast", &c.yarn_beta_fast},
                               std::pair{"rope.scaling.yarn_beta_slow", &c.yarn_beta_slow}}) {
        auto v = k.get_float(suffix);
        if (!v.ok()) return v.error();
        if (!v.value()) continue;
        if (!std::isfinite(*v.value()) || *v.value() < 0)
            return make_error(file.path() + ": metadata " + k.key(suffix) + " = " +
                              std::to_string(*v.value()) + ", expected a finite value >= 0");
        *dst = static_cast<float>(*v.value());
    }
    auto log_mul = k.get_float("rope.scaling.yarn_log_multiplier");
    if (!log_mul.ok()) return log_mul.error();
    if (log_mul.value() && *log_mul.value() != 0.0)
        return make_error(file.path() + ": metadata " + k.key("rope.scaling.yarn_log_multiplier") +
                          " = " + std::to_string(*log_mul.value()) +
                          " is not supported (expected 0 or absent)");
    float rope_attn = 1.0f;
    auto af = k.get_float("rope.scaling.attn_factor");
    if (!af.ok()) return af.error();
    if (af.value()) {
        if (!(std::isfinite(*af.value()) && *af.value() > 0))
            return make_error(file.path() + ": metadata " + k.key("rope.scaling.attn_factor") +
                              " = " + std::to_string(*af.value()) + ", expected a positive value");
        rope_attn = static_cast<float>(*af.value());
    }
    c.rope_ext_factor = ext;
    float attn = 1.0f;
    if (ext != 0.0f) {
        const float factor = 1.0f / c.rope_freq_scale;
        attn = factor <= 1.0f ? 1.0f : 0.1f * 1.0f * std::log(factor) + 1.0f;
        attn *= 1.0f / (1.0f + 0.1f * std::log(factor));
    }
    c.rope_attn_factor = attn * rope_attn;
    return {};
}

}  // namespace

RopeParams ModelConfig::rope(int il) const {
    RopeParams p;
    p.n_rot = n_rot;
    p.mode = rope_mode;
    p.freq_base = is_swa(il) ? rope_freq_base_swa : rope_freq_base;
    p.freq_scale = is_swa(il) ? rope_freq_scale_swa : rope_freq_scale;
    p.ext_factor = rope_ext_factor;
    p.attn_factor = rope_attn_factor;
    p.beta_fast = yarn_beta_fast;
    p.beta_slow = yarn_beta_slow;
    p.n_ctx_orig = n_ctx_orig_yarn;
    return p;
}

Result<ModelConfig> read_config(const gguf::File& file, const ArchInfo& info) {
    ModelConfig c;
    c.arch = info.arch;
    c.arch_name = std::string(info.name);
    c.rope_mode = info.rope_mode;
    const KeyReader k(file, info.name);
    constexpr int64_t kMaxDim = 1 << 20;

    auto read_dim = [&](std::string_view suffix, int32_t& out, int64_t lo,
                        int64_t hi) -> Result<void> {
        auto r = k.require_int(suffix);
        if (!r.ok()) return r.error();
        if (r.value() < lo || r.value() > hi) {
            return bad(file, k.key(suffix), r.value(),
                       "a value in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        }
        out = static_cast<int32_t>(r.value());
        return {};
    };
    auto read_opt_dim = [&](std::string_view suffix, int32_t& out, int32_t dflt, int64_t lo,
                            int64_t hi) -> Result<void> {
        auto r = k.get_int(suffix);
        if (!r.ok()) return r.error();
        if (!r.value()) {
            out = dflt;
            return {};
        }
        const int64_t v = *r.value();
        if (v < lo || v > hi) {
            return bad(file, k.key(suffix), v,
                       "a value in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        }
        out = static_cast<int32_t>(v);
        return {};
    };

    ZINC_TRY(read_dim("block_count", c.n_layer, 1, 4096));
    ZINC_TRY(read_dim("embedding_length", c.n_embd, 1, kMaxDim));
    ZINC_TRY(read_dim("feed_forward_length", c.n_ff, 1, kMaxDim));
    ZINC_TRY(read_dim("attention.head_count", c.n_head, 1, 4096));
    // head_count_kv: a scalar, or llama.cpp's per-layer array (get_key_or_arr; gemma4 writes
    // one when its sliding and global layers differ). Uniform arrays read as the scalar.
    if (const gguf::Value* hkv = file.find(k.key("attention.head_count_kv"));
        hkv && hkv->type == gguf::ValueType::ARRAY) {
        if (static_cast<int64_t>(hkv->arr.size()) != c.n_layer)
            return make_error(file.path() + ": metadata " + k.key("attention.head_count_kv") +
                              ": array of " + std::to_string(hkv->arr.size()) +
                              " values, expected block_count = " + std::to_string(c.n_layer));
        std::vector<int32_t> per(hkv->arr.size());
        for (size_t il = 0; il < per.size(); ++il) {
            const auto v = hkv->arr[il].as_int();
            if (!v || *v < 1 || *v > c.n_head || c.n_head % *v != 0)
                return make_error(file.path() + ": metadata " + k.key("attention.head_count_kv") +
                                  "[" + std::to_string(il) + "]: expected a divisor of "
                                  "attention.head_count (" + std::to_string(c.n_head) + ")");
            per[il] = static_cast<int32_t>(*v);
        }
        c.n_head_kv = per[0];
        if (std::any_of(per.begin(), per.end(), [&](int32_t v) { return v != per[0]; })) {
            if (info.arch != Arch::Gemma4)
                return make_error(file.path() + ": metadata " + k.key("attention.head_count_kv") +
                                  ": per-layer values differ, which architecture " + c.arch_name +
                                  " does not support (expected one value for every layer)");
            c.layer_n_head_kv = std::move(per);
        }
    } else {
        ZINC_TRY(read_opt_dim("attention.head_count_kv", c.n_head_kv, c.n_head, 1, c.n_head));
    }
    if (c.n_head % c.n_head_kv != 0) {
        return bad(file, k.key("attention.head_count_kv"), c.n_head_kv,
                   "a divisor of attention.head_count (" + std::to_string(c.n_head) + ")");
    }
    auto key_length = k.get_int("attention.key_length");
    if (!key_length.ok()) return key_length.error();
    if (c.n_embd % c.n_head != 0 && !key_length.value().has_value()) {
        return bad(file, k.key("embedding_length"), c.n_embd,
                   "a multiple of attention.head_count when attention.key_length is absent");
    }
    ZINC_TRY(read_opt_dim("attention.key_length", c.head_dim_k, c.n_embd / c.n_head, 2, 65536));
    ZINC_TRY(read_opt_dim("attention.value_length", c.head_dim_v, c.head_dim_k, 1, 65536));
    ZINC_TRY(read_opt_dim("context_length", c.n_ctx_train, 4096, 1, int64_t(1) << 30));
    ZINC_TRY(read_opt_dim("rope.dimension_count", c.n_rot, c.head_dim_k, 2, c.head_dim_k));
    if (c.n_rot % 2 != 0) return bad(file, k.key("rope.dimension_count"), c.n_rot, "an even value");

    auto ln_eps = k.get_float("attention.layer_norm_epsilon");
    if (!ln_eps.ok()) return ln_eps.error();
    if (ln_eps.value()) {
        if (!(*ln_eps.value() > 0 && *ln_eps.value() < 1))
            return make_error(file.path() + ": metadata " + k.key("attention.layer_norm_epsilon") +
                              " = " + std::to_string(*ln_eps.value()) +
                              ", expected a value in (0, 1)");
        c.norm_eps = static_cast<float>(*ln_eps.value());
    }
    auto causal = file.get_bool(k.key("attention.causal"));
    if (!causal.ok()) return causal.error();
    if (causal.value()) c.causal = *causal.value();
    ZINC_TRY(read_opt_dim("pooling_type", c.pooling_type, -1, 0, 3));
    auto eps = k.get_float("attention.layer_norm_rms_epsilon");
    if (!eps.ok()) return eps.error();
    // A LayerNorm model (bert) has no RMS epsilon: rms_eps keeps its default, unused.
    if (!eps.value() && !ln_eps.value()) {
        return make_error(file.path() + ": missing metadata key " +
                          k.key("attention.layer_norm_rms_epsilon") +
                          " (float, required for architecture " + c.arch_name + ")");
    }
    if (eps.value() && !(*eps.value() > 0 && *eps.value() < 1)) {
        return make_error(file.path() + ": metadata " + k.key("attention.layer_norm_rms_epsilon") +
                          " = " + std::to_string(*eps.value()) + ", expected a value in (0, 1)");
    }
    if (eps.value()) c.rms_eps = static_cast<float>(*eps.value());

    auto base = k.get_float("rope.freq_base");
    if (!base.ok()) return base.error();
    c.rope_freq_base = base.value() ? static_cast<float>(*base.value()) : 10000.0f;
    if (!(c.rope_freq_base > 0)) {
        return make_error(file.path() + ": metadata " + k.key("rope.freq_base") +
                          " must be positive");
    }
    // RoPE scaling: "linear" + rope.scaling.factor (or the older rope.scale_linear), or "yarn"
    // (read_yarn). Other scaling types (longrope) are not supported.
    auto scaling = file.get_string(k.key("rope.scaling.type"));
    if (!scaling.ok()) return scaling.error();
    if (scaling.value() && *scaling.value() != "none" && *scaling.value() != "linear" &&
        *scaling.value() != "yarn") {
        return make_error(file.path() + ": metadata " + k.key("rope.scaling.type") + " = \"" +
                          std::string(*scaling.value()) +
                          "\" is not supported (supported: none, linear, yarn)");
    }
    auto factor = k.get_float("rope.scaling.factor");
    if (!factor.ok()) return factor.error();
    if (!factor.value()) {
        factor = k.get_float("rope.scale_linear");
        if (!factor.ok()) return factor.error();
    }
    if (factor.value() && *factor.value() != 0.0 &&
        !(scaling.value() && *scaling.value() == "none")) {
        if (!(*factor.value() > 0)) {
            return make_error(file.path() + ": metadata " + k.key("rope.scaling.factor") +
                              " must be positive");
        }
        c.rope_freq_scale = static_cast<float>(1.0 / *factor.value());
    }
    if (scaling.value() && *scaling.value() == "yarn") ZINC_TRY(read_yarn(file, k, c));
    c.rope_freq_base_swa = info.rope_freq_base_swa > 0 ? info.rope_freq_base_swa : c.rope_freq_base;
    c.rope_freq_scale_swa = info.rope_freq_base_swa > 0 ? 1.0f : c.rope_freq_scale;

    if (info.swa_pattern > 0) {
        auto sw = k.get_int("attention.sliding_window");
        if (!sw.ok()) return sw.error();
        if (sw.value() && *sw.value() > 0) {
            c.sliding_window = static_cast<int32_t>(std::min<int64_t>(*sw.value(), 1 << 30));
            c.layer_swa.assign(c.n_layer, 0);
            for (int il = 0; il < c.n_layer; ++il) {
                c.layer_swa[il] = (il + 1) % info.swa_pattern != 0 ? 1 : 0;
            }
        }
    }
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
    if (c.arch_name.rfind("gemma", 0) == 0) {
        for (auto [suffix, dst] : {std::pair{"final_logit_softcapping", &c.final_logit_softcap},
                                   std::pair{"attn_logit_softcapping", &c.attn_logit_softcap}}) {
            auto cap = k.get_float(suffix);
            if (!cap.ok()) return cap.error();
            if (!cap.value()) continue;
            if (!(*cap.value() >= 0 && *cap.value() < 1e30)) {
                return make_error(file.path() + ": metadata " + k.key(suffix) + " = " +
                                  std::to_string(*cap.value()) +
                                  ", expected a finite value >= 0 (0: no soft-cap)");
            }
            *dst = static_cast<float>(*cap.value());
        }
    }

    ZINC_TRY(read_opt_dim("expert_count", c.n_expert, 0, 0, 4096));
    ZINC_TRY(read_opt_dim("expert_used_count", c.n_expert_used, 0, 0, 4096));
    if (c.n_expert > 0 && c.n_expert_used > c.n_expert) {
        return bad(file, k.key("expert_used_count"), c.n_expert_used,
                   "at most expert_count (" + std::to_string(c.n_expert) + ")");
    }
    ZINC_TRY(read_opt_dim("expert_feed_forward_length", c.n_ff_exp, 0, 0, kMaxDim));
    {
        auto ws = k.get_float("expert_weights_scale");
        if (!ws.ok()) return ws.error();
        if (ws.value()) {
            if (!(*ws.value() >= 0 && *ws.value() < 1e6)) {
                return make_error(file.path() + ": metadata " + k.key("expert_weights_scale") +
                                  " = " + std::to_string(*ws.value()) +
                                  ", expected a finite value >= 0");
            }
            c.expert_weights_scale = static_cast<float>(*ws.value());
        }
    }

    const gguf::TensorInfo* emb = file.find_tensor(tn::global(tn::kTokenEmbd));
    if (!emb) {
        return make_error(file.path() + ": missing tensor " + tn::global(tn::kTokenEmbd) +
                          " (required by architecture " + c.arch_name + ")");
    }
    if (emb->ne[1] < 1 || emb->ne[1] > (int64_t(1) << 24)) {
        return make_error(file.path() + ": tensor " + tn::global(tn::kTokenEmbd) + " has " +
                          std::to_string(emb->ne[1]) + " rows, expected a vocabulary size");
    }
    c.n_vocab = static_cast<int32_t>(emb->ne[1]);
    return c;
}

}  // namespace zinc::model
