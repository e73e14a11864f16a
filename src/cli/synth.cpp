// zinc/cli/synth.cpp — `zinc synth`: write a GGUF with a real model's shapes, tensor types and
// metadata and seeded random weights, for GPU tests and benchmarks of models we cannot ship.
//
//   zinc synth --arch llama --preset llama3-8b --type q4_k_m --seed 1 -o llama3-8b.q4_k_m.gguf
//
// The tokenizer metadata is copied from SmolLM2 (or --vocab-from FILE); when the preset's vocabulary
// is larger (Llama 3: 128256), the token list is padded with unused control tokens
// "<|synth_pad_N|>" so token_embd/output keep the real model's exact shape. Weights are ~N(0, s)
// (Irwin-Hall sums, fill_row) with s = 1/sqrt(fan_in) for projections and 3/sqrt(n_embd) for embeddings / LM head (logits
// with a spread, so greedy decoding has margins), norms 1 + N(0, 0.1); quantized row by row
// with zinc's own quantizer (quant::quantize_row), in parallel over rows. Each row's values
// depend only on (seed, tensor name, row), so the file is identical for any thread count.
//
// Type recipes (--type): q4_k_m as llama.cpp's Q4_K_M (Q4_K, with Q6_K for output.weight and for
// attn_v / ffn_down of the layers llama.cpp's use_more_bits picks); q4_0 (Q4_0, output Q6_K);
// q8_0; bf16. Norms are always F32.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "cli/default_model.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace zinc::cli {
namespace {

using quant::GgmlType;

struct Preset {
    const char* name;
    const char* arch;  // llama, qwen3, gemma3
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_vocab;  // 0: the tokenizer's
    int n_ctx;
    float rope_base, eps;
    bool tied;
    int sliding_window;     // gemma3
    float rope_scale_linear;  // 0: none
};

// Shapes from the models' published configs (config.json / llama.cpp's GGUF metadata).
const Preset kPresets[] = {
    {"llama3-8b", "llama", 4096, 32, 32, 8, 128, 14336, 128256, 8192, 500000.f, 1e-5f, false, 0, 0},
    {"llama-tiny", "llama", 256, 4, 4, 2, 64, 768, 0, 2048, 10000.f, 1e-5f, false, 0, 0},
    // Llama-3-8B's matrices, 4 layers (kernel profiling at an eighth of the synthesis time)
    {"llama3-8b-4l", "llama", 4096, 4, 32, 8, 128, 14336, 128256, 8192, 500000.f, 1e-5f, false, 0, 0},
    // Llama 3's vocabulary (tokenizer padded to 128256) on a tiny body
    {"llama3-tiny", "llama", 256, 2, 4, 2, 64, 768, 128256, 2048, 500000.f, 1e-5f, false, 0, 0},
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1000000.f, 1e-6f, false, 0, 0},
    {"qwen3-tiny", "qwen3", 256, 4, 8, 2, 64, 768, 0, 2048, 1000000.f, 1e-6f, true, 0, 0},
    {"gemma3-12b", "gemma3", 3840, 48, 16, 8, 256, 15360, 262144, 131072, 1000000.f, 1e-6f, true,
     1024, 8.f},
    {"gemma3-tiny", "gemma3", 256, 7, 4, 1, 64, 768, 0, 2048, 1000000.f, 1e-6f, true, 32, 0},
};

uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
uint64_t hash_str(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

// Row r of a tensor: n values ~ N(mean, sigma), from (seed, name, r) only. Each value is the
// Irwin-Hall sum of four 16-bit uniforms, standardized (|z| <= 3.46): cheap and close enough to
// Gaussian for synthetic weights.
void fill_row(uint64_t tensor_seed, int64_t r, float mean, float sigma, float* out, int64_t n) {
    uint64_t s = tensor_seed ^ (static_cast<uint64_t>(r) * 0xd1b54a32d192ed03ull);
    constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(12 / 4) per 16-bit unit
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = splitmix(s);
        const uint32_t sum = static_cast<uint32_t>(v & 0xffff) + static_cast<uint32_t>((v >> 16) & 0xffff) +
                             static_cast<uint32_t>((v >> 32) & 0xffff) + static_cast<uint32_t>(v >> 48);
        out[i] = mean + sigma * (static_cast<float>(sum) - 131070.0f) * kScale;
    }
}

struct Synth {
    gguf::Writer w;
    uint64_t seed = 0;
    int n_threads = 1;
    size_t bytes = 0;

    void tensor(const std::string& name, int64_t ne0, int64_t ne1, GgmlType t, float mean,
                float sigma) {
        const size_t rs = quant::row_size(t, ne0);
        std::vector<uint8_t> data(rs * static_cast<size_t>(ne1));
        const uint64_t ts = seed * 0x9e3779b97f4a7c15ull ^ hash_str(name);
        const int nt = static_cast<int>(std::min<int64_t>(n_threads, ne1));
        std::vector<std::thread> pool;
        for (int ti = 0; ti < nt; ++ti) {
            pool.emplace_back([&, ti] {
                std::vector<float> buf(static_cast<size_t>(ne0));
                for (int64_t r = ti; r < ne1; r += nt) {
                    fill_row(ts, r, mean, sigma, buf.data(), ne0);
                    uint8_t* dst = data.data() + static_cast<size_t>(r) * rs;
                    if (t == GgmlType::F32) std::memcpy(dst, buf.data(), rs);
                    else quant::quantize_row(t, buf.data(), dst, ne0);
                }
            });
        }
        for (auto& th : pool) th.join();
        bytes += data.size();
        std::vector<int64_t> ne = {ne0};
        if (ne1 > 1) ne.push_back(ne1);
        w.add_tensor(name, ne, t, std::move(data));
    }
};

gguf::OwnedValue own(const gguf::Value& v) {
    using gguf::OwnedValue;
    using gguf::ValueType;
    OwnedValue o;
    o.type = v.type;
    o.u = v.u;
    o.i = v.i;
    o.f = v.f;
    o.str = std::string(v.str);
    o.elem_type = v.elem_type;
    for (const auto& e : v.arr) o.arr.push_back(own(e));
    return o;
}

// llama.cpp's use_more_bits (llama-quant.cpp): the layers Q4_K_M gives Q6_K attn_v/ffn_down.
bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

struct Opts {
    std::string arch, preset, type = "q4_k_m", out, vocab_from;
    uint64_t seed = 1;
    int n_threads = 0;
};

int synth(const Opts& o) {
    const Preset* p = nullptr;
    for (const auto& q : kPresets)
        if (o.preset == q.name) p = &q;
    std::string names;
    for (const auto& q : kPresets) names += std::string(names.empty() ? "" : ", ") + q.name;
    if (!p) return report_error("--preset " + o.preset + ": unknown (one of " + names + ")");
    if (!o.arch.empty() && o.arch != p->arch)
        return report_error("--arch " + o.arch + " does not match preset " + o.preset + " (arch " +
                            p->arch + ")");
    GgmlType base, out_t, more;
    uint32_t ftype;
    if (o.type == "q4_k_m") {
        base = GgmlType::Q4_K, out_t = GgmlType::Q6_K, more = GgmlType::Q6_K, ftype = 15;
    } else if (o.type == "q4_0") {
        base = GgmlType::Q4_0, out_t = GgmlType::Q6_K, more = GgmlType::Q4_0, ftype = 2;
    } else if (o.type == "q8_0") {
        base = out_t = more = GgmlType::Q8_0, ftype = 7;
    } else if (o.type == "bf16") {
        base = out_t = more = GgmlType::BF16, ftype = 32;
    } else {
        return report_error("--type " + o.type + ": unknown (one of q4_k_m, q4_0, q8_0, bf16)");
    }
    std::string vocab_path = o.vocab_from.empty() ? find_default_model() : o.vocab_from;
    if (vocab_path.empty())
        return report_error("no tokenizer source: pass --vocab-from FILE (a GGUF with a "
                            "tokenizer), or fetch the default model (scripts/fetch-models)");
    auto vf = gguf::File::open(vocab_path);
    if (!vf) return report_error(vf.error().message);
    const gguf::File& src = *vf.value();
    const gguf::Value* toks = src.find("tokenizer.ggml.tokens");
    if (!toks || toks->type != gguf::ValueType::ARRAY)
        return report_error(vocab_path + ": no tokenizer.ggml.tokens array");
    const int n_tok = static_cast<int>(toks->arr.size());
    const int n_vocab = p->n_vocab > 0 ? p->n_vocab : n_tok;
    if (n_vocab < n_tok)
        return report_error("preset " + o.preset + " has a vocabulary of " +
                            std::to_string(n_vocab) + ", smaller than the tokenizer's " +
                            std::to_string(n_tok));

    const auto t0 = std::chrono::steady_clock::now();
    Synth s;
    s.seed = o.seed;
    s.n_threads = o.n_threads > 0 ? o.n_threads
                                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    using gguf::OwnedValue;
    const std::string a = p->arch;
    s.w.add_kv("general.architecture", OwnedValue::string(a));
    s.w.add_kv("general.name", OwnedValue::string("zinc synth " + o.preset + " " + o.type +
                                                  " seed " + std::to_string(o.seed)));
    s.w.add_kv("general.file_type", OwnedValue::u32(ftype));
    s.w.add_kv("general.quantization_version", OwnedValue::u32(2));
    s.w.add_kv(a + ".context_length", OwnedValue::u32(p->n_ctx));
    s.w.add_kv(a + ".embedding_length", OwnedValue::u32(p->n_embd));
    s.w.add_kv(a + ".block_count", OwnedValue::u32(p->n_layer));
    s.w.add_kv(a + ".feed_forward_length", OwnedValue::u32(p->n_ff));
    s.w.add_kv(a + ".attention.head_count", OwnedValue::u32(p->n_head));
    s.w.add_kv(a + ".attention.head_count_kv", OwnedValue::u32(p->n_head_kv));
    s.w.add_kv(a + ".attention.layer_norm_rms_epsilon", OwnedValue::f32(p->eps));
    s.w.add_kv(a + ".rope.freq_base", OwnedValue::f32(p->rope_base));
    s.w.add_kv(a + ".vocab_size", OwnedValue::u32(n_vocab));
    if (a == "llama") {
        s.w.add_kv(a + ".rope.dimension_count", OwnedValue::u32(p->head_dim));
    } else {
        s.w.add_kv(a + ".attention.key_length", OwnedValue::u32(p->head_dim));
        s.w.add_kv(a + ".attention.value_length", OwnedValue::u32(p->head_dim));
    }
    if (p->sliding_window > 0)
        s.w.add_kv(a + ".attention.sliding_window", OwnedValue::u32(p->sliding_window));
    if (p->rope_scale_linear > 0) {
        s.w.add_kv(a + ".rope.scaling.type", OwnedValue::string("linear"));
        s.w.add_kv(a + ".rope.scaling.factor", OwnedValue::f32(p->rope_scale_linear));
    }
    // Tokenizer: every tokenizer.* key of the source, the token list padded to n_vocab.
    for (const auto& [k, v] : src.metadata()) {
        if (k.substr(0, 10) != "tokenizer.") continue;
        OwnedValue ov = own(v);
        const int pad = n_vocab - n_tok;
        if (pad > 0 && k == "tokenizer.ggml.tokens") {
            for (int i = 0; i < pad; ++i) ov.arr.push_back(OwnedValue::string("<|synth_pad_" + std::to_string(i) + "|>"));
        } else if (pad > 0 && k == "tokenizer.ggml.token_type") {
            for (int i = 0; i < pad; ++i) {
                OwnedValue t = ov.arr.empty() ? OwnedValue::i32(3) : ov.arr.back();
                t.i = 3;  // CONTROL
                t.u = 3;
                ov.arr.push_back(t);
            }
        } else if (pad > 0 && k == "tokenizer.ggml.scores") {
            for (int i = 0; i < pad; ++i) ov.arr.push_back(OwnedValue::f32(-1e9f));
        }
        s.w.add_kv(std::string(k), std::move(ov));
    }

    const int64_t E = p->n_embd, F = p->n_ff, V = n_vocab;
    const int64_t qd = static_cast<int64_t>(p->n_head) * p->head_dim;
    const int64_t kvd = static_cast<int64_t>(p->n_head_kv) * p->head_dim;
    const float se = 3.0f / std::sqrt(static_cast<float>(E));
    const GgmlType emb_t = o.type == "q4_k_m" ? GgmlType::Q4_K : base;
    s.tensor("token_embd.weight", E, V, p->tied ? out_t : emb_t, 0.f, se);
    s.tensor("output_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
    if (!p->tied) s.tensor("output.weight", E, V, out_t, 0.f, se);
    const bool gemma = a == "gemma3", qk_norm = a != "llama";
    for (int il = 0; il < p->n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const GgmlType vt = use_more_bits(il, p->n_layer) ? more : base;
        const float si = 1.0f / std::sqrt(static_cast<float>(E));
        s.tensor(b + "attn_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "attn_q.weight", E, qd, base, 0.f, si);
        s.tensor(b + "attn_k.weight", E, kvd, base, 0.f, si);
        s.tensor(b + "attn_v.weight", E, kvd, vt, 0.f, si);
        s.tensor(b + "attn_output.weight", qd, E, base, 0.f, 1.0f / std::sqrt(static_cast<float>(qd)));
        if (qk_norm) {
            s.tensor(b + "attn_q_norm.weight", p->head_dim, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "attn_k_norm.weight", p->head_dim, 1, GgmlType::F32, 1.f, 0.1f);
        }
        if (gemma) s.tensor(b + "post_attention_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "ffn_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "ffn_gate.weight", E, F, base, 0.f, si);
        s.tensor(b + "ffn_up.weight", E, F, base, 0.f, si);
        s.tensor(b + "ffn_down.weight", F, E, vt, 0.f, 1.0f / std::sqrt(static_cast<float>(F)));
        if (gemma) s.tensor(b + "post_ffw_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
    }
    const double t_gen = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (auto r = s.w.write_file(o.out); !r) return report_error(r.error().message, kExitFailure);
    const double t_all = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "zinc synth: %s (%s, %s, seed %llu): %lld layers, vocab %lld, %.1f MiB of "
                 "weights in %.1f s (%d threads), written in %.1f s\n",
                 o.out.c_str(), o.preset.c_str(), o.type.c_str(),
                 static_cast<unsigned long long>(o.seed), static_cast<long long>(p->n_layer),
                 static_cast<long long>(V), s.bytes / 1048576.0, t_gen, s.n_threads, t_all);
    return kExitOk;
}

}  // namespace

int synth_main(int argc, char** argv) {
    Opts o;
    CLI::App app{"zinc synth: write a GGUF with a real model's shapes and seeded random weights",
                 "zinc synth"};
    std::string presets;
    for (const auto& q : kPresets) presets += std::string(presets.empty() ? "" : ", ") + q.name;
    app.add_option("--arch", o.arch, "llama, qwen3 or gemma3 (must match the preset)");
    app.add_option("--preset", o.preset, "shape preset: " + presets)->required();
    app.add_option("--type", o.type, "q4_k_m, q4_0, q8_0 or bf16")->capture_default_str();
    app.add_option("--seed", o.seed, "random seed")->capture_default_str();
    app.add_option("-o,--output", o.out, "output GGUF file")->required();
    app.add_option("--vocab-from", o.vocab_from,
                   "GGUF whose tokenizer to copy (default: SmolLM2-135M-Instruct)");
    app.add_option("-t,--threads", o.n_threads, "threads; 0: all hardware threads")
        ->capture_default_str();
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    return synth(o);
}

}  // namespace zinc::cli
