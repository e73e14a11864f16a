// zinc/cli/synth.cpp — `zinc synth`: write a GGUF with a real model's shapes, tensor types and
// metadata and seeded random weights, for GPU tests and benchmarks of models we cannot ship.
//
//   zinc synth --arch llama --preset llama3-8b --type q4_k_m --seed 1 -o llama3-8b.q4_k_m.gguf
//
// The tokenizer metadata is copied from SmolLM2 (or --vocab-from FILE); when the preset's vocabulary
// is larger (Llama 3: 128256), the token list is padded with unused control tokens
// "<|synth_pad_N|>" so token_embd/output keep the real model's exact shape. Weights have mean 0
// and standard deviation s = 1/sqrt(fan_in) for projections and 3/sqrt(n_embd) for embeddings /
// LM head (logits with a spread, so greedy decoding has margins), norms 1 + N(0, 0.1). Q8_0,
// Q4_0, Q4_K and Q6_K tensors are written as random blocks directly (codes and scales drawn to
// that standard deviation, direct_row); BF16/F32 tensors, and every tensor with --from-floats,
// are ~N(0, s) float rows (Irwin-Hall sums, fill_row) quantized with quant::quantize_row. Rows
// are generated in parallel and each depends only on (seed, tensor name, row), so the file is
// identical for any thread count; the file is streamed (header, then each tensor generated while
// the previous one is written), so memory holds two tensors, not the model.
//
// Type recipes (--type): q4_k_m as llama.cpp's Q4_K_M (Q4_K, with Q6_K for output.weight and for
// attn_v / ffn_down of the layers llama.cpp's use_more_bits picks); q4_0 (Q4_0, output Q6_K);
// q8_0; bf16. Norms are always F32. gpt-oss presets: experts MXFP4 (quantized from random float
// rows), every other matrix Q8_0, for each quantized --type (as the published gpt-oss files).
// gemma4 presets: the per-layer shapes and keys of gemma4_tensors / gemma4_keys; rows that are
// not whole K-quant blocks (704, 2112 wide) are Q8_0.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "cli/cli.h"
#include "cli/default_model.h"
#include "cli/synth_random.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace zinc::cli {
namespace {

using quant::GgmlType;

struct Preset {
    const char* name;
    const char* arch;  // llama, qwen3, gemma3, qwen35
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_vocab;  // 0: the tokenizer's
    int n_ctx;
    float rope_base, eps;
    bool tied;
    int sliding_window;     // gemma3
    float rope_scale_linear;  // 0: none
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // qwen3moe, gpt-oss (0: dense)
    float yarn_factor = 0.f;  // gpt-oss: rope.scaling.type yarn with this factor (0: none)
    int yarn_orig_ctx = 0;    // and rope.scaling.original_context_length
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
    // Qwen3.5-9B: the model card (32 layers = 8 x (3 Gated DeltaNet + 1 gated attention), hidden
    // 4096, FFN 12288, attention 16 Q / 4 KV heads of 256, RoPE on 64 dims, DeltaNet 32 V / 16
    // QK heads of 128, vocab 248320 padded, MTP), its HF config.json text_config (rope_theta 1e7,
    // mrope_section [11, 11, 10], rms_norm_eps 1e-6, conv kernel 4, untied) and llama.cpp's
    // qwen35 loader for the GGUF keys; block_count 33 = 32 + 1 NextN block.
    {"qwen3.5-9b", "qwen35", 4096, 32, 16, 4, 256, 12288, 248320, 262144, 10000000.f, 1e-6f,
     false, 0, 0},
    // The same structure, tiny: 3 DeltaNet + 1 attention layer, 2 QK / 4 V DeltaNet heads (the
    // repeat of q/k heads is exercised), a NextN block, tied embeddings.
    {"qwen35-tiny", "qwen35", 256, 4, 4, 2, 64, 512, 0, 2048, 10000000.f, 1e-6f, true, 0, 0},
    // Qwen3.6-35B-A3B, from its model card: 40 layers = 10 x (3 Gated DeltaNet + 1 gated
    // attention), hidden 2048, attention 16 Q / 2 KV heads of 256, RoPE on 64 dims, DeltaNet 32 V
    // / 16 QK heads of 128, 256 experts (8 routed + 1 shared) of width 512, vocab 248320 padded,
    // one MTP block; RoPE base, sections, norm eps and untied head as Qwen3.5-9B's (not checked
    // against its config.json here).
    {"qwen3.6-35b-a3b", "qwen35moe", 2048, 40, 16, 2, 256, 512, 248320, 262144, 10000000.f, 1e-6f,
     false, 0, 0, 256, 8, 512},
    // qwen35moe's structure, tiny: the qwen35-tiny layers with 8 experts (top 2, width 128) and a
    // shared expert of width 128 (expert_shared_feed_forward_length) in every block, NextN too.
    {"qwen35moe-tiny", "qwen35moe", 256, 4, 4, 2, 64, 512, 0, 2048, 10000000.f, 1e-6f, true, 0,
     0, 8, 2, 128},
    // Qwen3-30B-A3B (config.json: moe_intermediate_size 768, 128 experts, 8 per token)
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 128, 6144, 151936, 40960, 1000000.f, 1e-6f,
     false, 0, 0, 128, 8, 768},
    {"qwen3moe-tiny", "qwen3moe", 256, 4, 8, 2, 64, 768, 0, 2048, 1000000.f, 1e-6f, false, 0, 0,
     16, 4, 256},
    // gpt-oss-20b (config.json: hidden 2880, 24 layers, 64 heads of 64, 8 KV heads, 32 experts,
    // 4 per token, intermediate 2880, sliding window 128 on even layers, rope_theta 150000, YaRN
    // factor 32 over 4096 positions, vocab 201088, untied)
    {"gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 64, 2880, 201088, 131072, 150000.f, 1e-5f, false,
     128, 0, 32, 4, 2880, 32.f, 4096},
    // The same structure, tiny: Q wider than the residual stream (8 x 64 over 256), a window of
    // 16 and YaRN over 512 positions, so that short prompts exercise both.
    {"gpt-oss-tiny", "gpt-oss", 256, 4, 8, 2, 64, 256, 0, 4096, 150000.f, 1e-5f, false, 16, 0, 8,
     2, 256, 8.f, 512},
    // Gemma 4 31B (config.json text_config: hidden 5376, 60 layers, 32 heads, sliding layers
    // 16 KV heads of 256, every 6th layer global with 4 KV heads of 512 and K = V, FFN 21504,
    // sliding window 1024, rope_theta 1e6 global / 1e4 sliding, partial rotary 0.25 on global
    // layers, rms_norm_eps 1e-6, final_logit_softcapping 30, vocab 262144, tied); the global
    // side is in kGemma4 below. head_count_kv / head_dim here are the sliding layers'.
    {"gemma4-31b", "gemma4", 5376, 60, 32, 16, 256, 21504, 262144, 262144, 1000000.f, 1e-6f,
     true, 1024, 0},
    // Gemma 4 26B-A4B: hidden 2816, 30 layers, 16 heads, sliding 8 KV heads of 256, global 2 of
    // 512 (K = V), the dense MLP (shared expert) 2112 wide, 128 experts of 704, top 8, in every
    // layer; window, RoPE, norms, soft-cap and vocabulary as the 31B.
    {"gemma4-26b-a4b", "gemma4", 2816, 30, 16, 8, 256, 2112, 262144, 262144, 1000000.f, 1e-6f,
     true, 1024, 0, 128, 8, 704},
    // The same structures, tiny: 6 layers with a global layer every 3rd (two globals), sliding
    // 2 KV heads of 64, global 1 of 128 with K = V, window 16 so short prompts cross it. Untied:
    // with random tied embeddings every position's top logit is its own input token (the
    // embedding dominates the residual), which makes greedy decoding a repeat.
    {"gemma4-tiny", "gemma4", 256, 6, 4, 2, 64, 512, 0, 2048, 1000000.f, 1e-6f, false, 16, 0},
    {"gemma4-moe-tiny", "gemma4", 256, 6, 4, 2, 64, 256, 0, 2048, 1000000.f, 1e-6f, false, 16,
     0, 8, 2, 128},
};

// The gemma4 side of its presets (llama.cpp's gemma4 keys and converter): a global layer every
// `period` layers (the last of each period), its head size and KV heads, RoPE on a quarter of
// its pairs (partial_rotary_factor 0.25: rope_freqs.weight 1 for the rotated pairs, 1e30 for the
// rest), the sliding layers' RoPE base, the final soft-cap; no attn_v on global layers (K = V).
struct Gemma4Shape {
    const char* preset;
    int period, head_dim_global, n_head_kv_global;
    float rotary_global, rope_base_swa, softcap;
};
const Gemma4Shape kGemma4[] = {
    {"gemma4-31b", 6, 512, 4, 0.25f, 10000.f, 30.f},
    {"gemma4-26b-a4b", 6, 512, 2, 0.25f, 10000.f, 30.f},
    {"gemma4-tiny", 3, 128, 1, 0.25f, 10000.f, 30.f},
    {"gemma4-moe-tiny", 3, 128, 1, 0.25f, 10000.f, 30.f},
};
const Gemma4Shape* gemma4_shape(const std::string& preset) {
    for (const auto& g : kGemma4)
        if (preset == g.preset) return &g;
    return nullptr;
}

// The Gated DeltaNet side of the qwen35 presets (GGUF keys <arch>.ssm.*, llama.cpp's names).
struct HybridShape {
    const char* preset;
    int d_conv, head_k_dim, n_k_heads, n_v_heads, interval, n_rot, n_nextn;
    int sections[4];
};
const HybridShape kHybrid[] = {
    {"qwen3.5-9b", 4, 128, 16, 32, 4, 64, 1, {11, 11, 10, 0}},
    {"qwen35-tiny", 4, 64, 2, 4, 4, 16, 1, {3, 3, 2, 0}},
    {"qwen35moe-tiny", 4, 64, 2, 4, 4, 16, 1, {3, 3, 2, 0}},
    {"qwen3.6-35b-a3b", 4, 128, 16, 32, 4, 64, 1, {11, 11, 10, 0}},
};
const HybridShape* hybrid_shape(const std::string& preset) {
    for (const auto& h : kHybrid)
        if (preset == h.preset) return &h;
    return nullptr;
}

// One tensor of the file, generated when it is written.
struct TensorPlan {
    std::string name;
    int64_t ne0 = 0, ne1 = 0;  // ne1: all rows (ne[1] * ne[2] of a 3-D expert tensor)
    GgmlType type = GgmlType::F32;
    float mean = 0.f, sigma = 0.f;
    std::vector<float> values;  // F32 tensors with fixed values (rope_freqs), else empty
    size_t bytes() const { return quant::row_size(type, ne0) * static_cast<size_t>(ne1); }
};

struct Synth {
    gguf::Writer w;
    uint64_t seed = 0;
    int n_threads = 1;
    bool from_floats = false;
    size_t bytes = 0;
    std::vector<TensorPlan> plan;

    void tensor(const std::string& name, int64_t ne0, int64_t ne1, GgmlType t, float mean,
                float sigma, int64_t ne2 = 1) {
        // rows that are no whole number of the type's blocks (Gemma 4's 704- and 2112-wide
        // FFN rows in K-quants) fall back to Q8_0 (32-element blocks), as llama.cpp's quantizer
        // falls back to a legacy type
        if (ne0 % quant::type_traits(t).block_size != 0) t = GgmlType::Q8_0;
        plan.push_back(TensorPlan{name, ne0, ne1 * ne2, t, mean, sigma, {}});
        std::vector<int64_t> ne = {ne0};
        if (ne1 > 1 || ne2 > 1) ne.push_back(ne1);
        if (ne2 > 1) ne.push_back(ne2);
        w.add_tensor_info(name, ne, t);
        bytes += plan.back().bytes();
    }

    // Rows of `p` into data, in parallel; each row depends only on (seed, name, row).
    void generate(const TensorPlan& p, uint8_t* data) const {
        const size_t rs = quant::row_size(p.type, p.ne0);
        const uint64_t ts = seed * 0x9e3779b97f4a7c15ull ^ hash_str(p.name);
        const bool direct = !from_floats && p.mean == 0.f && direct_type(p.type);
        const int nt = static_cast<int>(std::min<int64_t>(n_threads, p.ne1));
        std::vector<std::thread> pool;
        for (int ti = 0; ti < nt; ++ti) {
            pool.emplace_back([&, ti] {
                std::vector<float> buf(direct ? 0 : static_cast<size_t>(p.ne0));
                const int64_t r0 = p.ne1 * ti / nt, r1 = p.ne1 * (ti + 1) / nt;
                for (int64_t r = r0; r < r1; ++r) {
                    uint8_t* dst = data + static_cast<size_t>(r) * rs;
                    if (direct) {
                        Rng g{ts ^ (static_cast<uint64_t>(r) * 0xd1b54a32d192ed03ull)};
                        direct_row(p.type, g, p.sigma, dst, p.ne0);
                        continue;
                    }
                    if (!p.values.empty()) {
                        std::memcpy(dst, p.values.data() + r * p.ne0, rs);
                        continue;
                    }
                    fill_row(ts, r, p.mean, p.sigma, buf.data(), p.ne0);
                    if (p.type == GgmlType::F32) std::memcpy(dst, buf.data(), rs);
                    else quant::quantize_row(p.type, buf.data(), dst, p.ne0);
                }
            });
        }
        for (auto& th : pool) th.join();
    }

    // Header, then each tensor generated while the previous one is written.
    Result<void> write(const std::string& path) const {
        std::FILE* fp = std::fopen(path.c_str(), "wb");
        if (!fp) return make_error(path + ": cannot create: " + std::strerror(errno));
        const std::vector<uint8_t> hdr = w.serialize_header();
        std::atomic<bool> ok = std::fwrite(hdr.data(), 1, hdr.size(), fp) == hdr.size();
        std::vector<uint8_t> buf[2];
        std::thread writer;
        const uint8_t zeros[64] = {};
        for (size_t i = 0; i < plan.size() && ok; ++i) {
            std::vector<uint8_t>& b = buf[i % 2];
            b.resize(plan[i].bytes());
            generate(plan[i], b.data());
            if (writer.joinable()) writer.join();
            writer = std::thread([&, i] {
                const std::vector<uint8_t>& d = buf[i % 2];
                const size_t pad = w.padding_after(d.size());
                if (std::fwrite(d.data(), 1, d.size(), fp) != d.size() ||
                    std::fwrite(zeros, 1, pad, fp) != pad)
                    ok = false;
            });
        }
        if (writer.joinable()) writer.join();
        const bool close_ok = std::fclose(fp) == 0;
        if (!ok || !close_ok) return make_error(path + ": write failed (disk full?)");
        return {};
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

// qwen35 layers (llama.cpp's llama_model_qwen35::load_arch_tensors): DeltaNet layers il with
// (il + 1) % interval != 0, gated attention (joint Q + gate: 2 * q_dim rows) otherwise, then the
// NextN blocks. ssm_a is -exp(A_log) < 0 (a decay below 1): drawn around -1; ssm_dt.bias ~ 0.
void qwen35_tensors(Synth& s, const Preset& p, const HybridShape& hy, GgmlType base,
                    GgmlType more) {
    const int64_t E = p.n_embd, F = p.n_ff;
    const int64_t qd = static_cast<int64_t>(p.n_head) * p.head_dim;
    const int64_t kvd = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
    const int64_t kd = static_cast<int64_t>(hy.n_k_heads) * hy.head_k_dim;
    const int64_t vd = static_cast<int64_t>(hy.n_v_heads) * hy.head_k_dim;
    const float si = 1.0f / std::sqrt(static_cast<float>(E));
    const int n_all = p.n_layer + hy.n_nextn;
    auto attention = [&](const std::string& b, GgmlType vt) {
        s.tensor(b + "attn_q.weight", E, 2 * qd, base, 0.f, si);
        s.tensor(b + "attn_k.weight", E, kvd, base, 0.f, si);
        s.tensor(b + "attn_v.weight", E, kvd, vt, 0.f, si);
        s.tensor(b + "attn_output.weight", qd, E, base, 0.f, 1.0f / std::sqrt(static_cast<float>(qd)));
        s.tensor(b + "attn_q_norm.weight", p.head_dim, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "attn_k_norm.weight", p.head_dim, 1, GgmlType::F32, 1.f, 0.1f);
    };
    for (int il = 0; il < n_all; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const GgmlType vt = use_more_bits(il, p.n_layer) ? more : base;
        s.tensor(b + "attn_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "post_attention_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        if (il < p.n_layer && (il + 1) % hy.interval != 0) {
            s.tensor(b + "attn_qkv.weight", E, 2 * kd + vd, base, 0.f, si);
            s.tensor(b + "attn_gate.weight", E, vd, base, 0.f, si);
            s.tensor(b + "ssm_conv1d.weight", hy.d_conv, 2 * kd + vd, GgmlType::F32, 0.f, 0.5f);
            s.tensor(b + "ssm_dt.bias", hy.n_v_heads, 1, GgmlType::F32, 0.f, 0.5f);
            s.tensor(b + "ssm_a", hy.n_v_heads, 1, GgmlType::F32, -1.f, 0.2f);
            s.tensor(b + "ssm_beta.weight", E, hy.n_v_heads, base, 0.f, si);
            s.tensor(b + "ssm_alpha.weight", E, hy.n_v_heads, base, 0.f, si);
            s.tensor(b + "ssm_norm.weight", hy.head_k_dim, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "ssm_out.weight", vd, E, vt, 0.f, 1.0f / std::sqrt(static_cast<float>(vd)));
        } else {
            attention(b, vt);
        }
        if (p.n_expert > 0) {  // qwen35moe: router, experts, the gated shared expert (width F)
            const int64_t X = p.n_expert, FX = p.n_ff_exp;
            s.tensor(b + "ffn_gate_inp.weight", E, X, GgmlType::F32, 0.f, si);
            s.tensor(b + "ffn_gate_exps.weight", E, FX, base, 0.f, si, X);
            s.tensor(b + "ffn_up_exps.weight", E, FX, base, 0.f, si, X);
            s.tensor(b + "ffn_down_exps.weight", FX, E, vt, 0.f,
                     1.0f / std::sqrt(static_cast<float>(FX)), X);
            s.tensor(b + "ffn_gate_inp_shexp.weight", E, 1, GgmlType::F32, 0.f, si);
            s.tensor(b + "ffn_gate_shexp.weight", E, FX, base, 0.f, si);
            s.tensor(b + "ffn_up_shexp.weight", E, FX, base, 0.f, si);
            s.tensor(b + "ffn_down_shexp.weight", FX, E, vt, 0.f,
                     1.0f / std::sqrt(static_cast<float>(FX)));
        } else {
            s.tensor(b + "ffn_gate.weight", E, F, base, 0.f, si);
            s.tensor(b + "ffn_up.weight", E, F, base, 0.f, si);
            s.tensor(b + "ffn_down.weight", F, E, vt, 0.f, 1.0f / std::sqrt(static_cast<float>(F)));
        }
        if (il >= p.n_layer) {  // NextN: eh_proj (2 E -> E), the norms of its two inputs
            s.tensor(b + "nextn.eh_proj.weight", 2 * E, E, base, 0.f,
                     1.0f / std::sqrt(static_cast<float>(2 * E)));
            s.tensor(b + "nextn.enorm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "nextn.hnorm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        }
    }
}

// gemma4 layers (llama.cpp's llama_model_gemma4::load_arch_tensors): per-layer attention shape
// (sliding: the preset's heads; global: kGemma4's, no attn_v), the dense MLP, the norms, the
// layer scalar; in MoE presets every layer also has the router (f32, with its input scale), the
// fused gate_up experts, the down experts with their per-expert scale and the three extra norms.
// The router weights have sd 1 (not 1/sqrt(n_embd)): its input is scaled by 1/sqrt(n_embd), so
// the logits spread as a trained router's do and top-k is not decided by noise.
void gemma4_tensors(Synth& s, const Preset& p, const Gemma4Shape& g, GgmlType base,
                    GgmlType more) {
    const int64_t E = p.n_embd, F = p.n_ff;
    const float si = 1.0f / std::sqrt(static_cast<float>(E));
    const int64_t hg = g.head_dim_global;
    const int n_rot_pairs = static_cast<int>(hg * g.rotary_global / 2);
    TensorPlan rf{"rope_freqs.weight", hg / 2, 1, GgmlType::F32, 0.f, 0.f, {}};
    for (int64_t i = 0; i < hg / 2; ++i) rf.values.push_back(i < n_rot_pairs ? 1.0f : 1e30f);
    s.plan.push_back(rf);
    s.w.add_tensor_info(rf.name, {hg / 2}, GgmlType::F32);
    s.bytes += rf.bytes();
    for (int il = 0; il < p.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const bool global = (il + 1) % g.period == 0;
        const int64_t hd = global ? hg : p.head_dim;
        const int64_t qd = static_cast<int64_t>(p.n_head) * hd;
        const int64_t kvd = (global ? g.n_head_kv_global : p.n_head_kv) * hd;
        const GgmlType vt = use_more_bits(il, p.n_layer) ? more : base;
        s.tensor(b + "attn_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "attn_q.weight", E, qd, base, 0.f, si);
        s.tensor(b + "attn_k.weight", E, kvd, base, 0.f, si);
        if (!global) s.tensor(b + "attn_v.weight", E, kvd, vt, 0.f, si);
        s.tensor(b + "attn_output.weight", qd, E, base, 0.f, 1.0f / std::sqrt(static_cast<float>(qd)));
        s.tensor(b + "attn_q_norm.weight", hd, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "attn_k_norm.weight", hd, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "post_attention_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "ffn_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "ffn_gate.weight", E, F, base, 0.f, si);
        s.tensor(b + "ffn_up.weight", E, F, base, 0.f, si);
        s.tensor(b + "ffn_down.weight", F, E, vt, 0.f, 1.0f / std::sqrt(static_cast<float>(F)));
        s.tensor(b + "post_ffw_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "layer_output_scale.weight", 1, 1, GgmlType::F32, 1.f, 0.1f);
        if (p.n_expert > 0) {
            const int64_t X = p.n_expert, FX = p.n_ff_exp;
            s.tensor(b + "ffn_gate_inp.weight", E, X, GgmlType::F32, 0.f, 1.0f);
            s.tensor(b + "ffn_gate_inp.scale", E, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "pre_ffw_norm_2.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "post_ffw_norm_1.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "post_ffw_norm_2.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "ffn_gate_up_exps.weight", E, 2 * FX, base, 0.f, si, X);
            s.tensor(b + "ffn_down_exps.weight", FX, E, vt, 0.f,
                     1.0f / std::sqrt(static_cast<float>(FX)), X);
            s.tensor(b + "ffn_down_exps.scale", X, 1, GgmlType::F32, 1.f, 0.1f);
        }
    }
}

// The gemma4 keys (llama.cpp's gemma4 loader and conversion/gemma.py), the per-layer arrays
// included.
void gemma4_keys(Synth& s, const std::string& a, const Preset& p, const Gemma4Shape& g,
                 float softcap) {
    using gguf::OwnedValue;
    std::vector<OwnedValue> kv, swa;
    for (int il = 0; il < p.n_layer; ++il) {
        const bool global = (il + 1) % g.period == 0;
        kv.push_back(OwnedValue::u32(global ? g.n_head_kv_global : p.n_head_kv));
        swa.push_back(OwnedValue::boolean(!global));
    }
    s.w.add_kv(a + ".attention.head_count_kv",
               OwnedValue::array(gguf::ValueType::UINT32, std::move(kv)));
    s.w.add_kv(a + ".attention.sliding_window_pattern",
               OwnedValue::array(gguf::ValueType::BOOL, std::move(swa)));
    s.w.add_kv(a + ".attention.key_length", OwnedValue::u32(g.head_dim_global));
    s.w.add_kv(a + ".attention.value_length", OwnedValue::u32(g.head_dim_global));
    s.w.add_kv(a + ".attention.key_length_swa", OwnedValue::u32(p.head_dim));
    s.w.add_kv(a + ".attention.value_length_swa", OwnedValue::u32(p.head_dim));
    s.w.add_kv(a + ".rope.dimension_count", OwnedValue::u32(g.head_dim_global));
    s.w.add_kv(a + ".rope.dimension_count_swa", OwnedValue::u32(p.head_dim));
    s.w.add_kv(a + ".rope.freq_base_swa", OwnedValue::f32(g.rope_base_swa));
    s.w.add_kv(a + ".attention.shared_kv_layers", OwnedValue::u32(0));
    s.w.add_kv(a + ".embedding_length_per_layer_input", OwnedValue::u32(0));
    s.w.add_kv(a + ".final_logit_softcapping", OwnedValue::f32(softcap > 0 ? softcap : g.softcap));
}

struct Opts {
    std::string arch, preset, type = "q4_k_m", out, vocab_from;
    uint64_t seed = 1;
    int n_threads = 0;
    bool from_floats = false;
    float final_softcap = 0.f, attn_softcap = 0.f;  // 0: key not written
};

int synth(const Opts& o) {
    {  // the output path is bad input: say so before generating gigabytes
        const size_t slash = o.out.find_last_of('/');
        const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : o.out.substr(0, slash));
        if (::access(dir.c_str(), W_OK) != 0)
            return report_error("-o " + o.out + ": cannot create: directory " + dir + ": " +
                                std::strerror(errno));
    }
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
    } else if (o.type == "f32") {  // no activation packing: exact-arithmetic checks (shard tests)
        base = out_t = more = GgmlType::F32, ftype = 0;
    } else {
        return report_error("--type " + o.type +
                            ": unknown (one of q4_k_m, q4_0, q8_0, bf16, f32)");
    }
    // gpt-oss: experts in MXFP4 (as the published files), the other matrices in Q8_0 for every
    // quantized --type (its 2880-wide rows are not a multiple of the K-quants' 256).
    const bool oss = std::string(p->arch) == "gpt-oss";
    GgmlType exp_t = base;
    if (oss && base != GgmlType::BF16 && base != GgmlType::F32) {
        exp_t = GgmlType::MXFP4;
        base = out_t = more = GgmlType::Q8_0;
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
    s.from_floats = o.from_floats;
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
    const HybridShape* hy = hybrid_shape(o.preset);
    // qwen35: block_count includes the NextN blocks
    s.w.add_kv(a + ".block_count", OwnedValue::u32(p->n_layer + (hy ? hy->n_nextn : 0)));
    s.w.add_kv(a + ".feed_forward_length", OwnedValue::u32(p->n_ff));
    s.w.add_kv(a + ".attention.head_count", OwnedValue::u32(p->n_head));
    const Gemma4Shape* g4 = gemma4_shape(o.preset);
    if (g4) gemma4_keys(s, a, *p, *g4, o.final_softcap);
    else s.w.add_kv(a + ".attention.head_count_kv", OwnedValue::u32(p->n_head_kv));
    s.w.add_kv(a + ".attention.layer_norm_rms_epsilon", OwnedValue::f32(p->eps));
    s.w.add_kv(a + ".rope.freq_base", OwnedValue::f32(p->rope_base));
    s.w.add_kv(a + ".vocab_size", OwnedValue::u32(n_vocab));
    if (hy) {
        s.w.add_kv(a + ".nextn_predict_layers", OwnedValue::u32(hy->n_nextn));
        s.w.add_kv(a + ".ssm.conv_kernel", OwnedValue::u32(hy->d_conv));
        s.w.add_kv(a + ".ssm.state_size", OwnedValue::u32(hy->head_k_dim));
        s.w.add_kv(a + ".ssm.group_count", OwnedValue::u32(hy->n_k_heads));
        s.w.add_kv(a + ".ssm.time_step_rank", OwnedValue::u32(hy->n_v_heads));
        s.w.add_kv(a + ".ssm.inner_size", OwnedValue::u32(hy->n_v_heads * hy->head_k_dim));
        s.w.add_kv(a + ".full_attention_interval", OwnedValue::u32(hy->interval));
        s.w.add_kv(a + ".rope.dimension_count", OwnedValue::u32(hy->n_rot));
        OwnedValue sec;
        sec.type = gguf::ValueType::ARRAY;
        sec.elem_type = gguf::ValueType::INT32;
        for (int v : hy->sections) sec.arr.push_back(OwnedValue::i32(v));
        s.w.add_kv(a + ".rope.dimension_sections", std::move(sec));
    }
    if (a == "llama") {
        s.w.add_kv(a + ".rope.dimension_count", OwnedValue::u32(p->head_dim));
    } else if (!g4) {
        s.w.add_kv(a + ".attention.key_length", OwnedValue::u32(p->head_dim));
        s.w.add_kv(a + ".attention.value_length", OwnedValue::u32(p->head_dim));
    }
    if (a == "qwen35moe")
        s.w.add_kv(a + ".expert_shared_feed_forward_length", OwnedValue::u32(p->n_ff_exp));
    if (p->n_expert > 0) {
        s.w.add_kv(a + ".expert_count", OwnedValue::u32(p->n_expert));
        s.w.add_kv(a + ".expert_used_count", OwnedValue::u32(p->n_expert_used));
        s.w.add_kv(a + ".expert_feed_forward_length", OwnedValue::u32(p->n_ff_exp));
    }
    if (p->sliding_window > 0)
        s.w.add_kv(a + ".attention.sliding_window", OwnedValue::u32(p->sliding_window));
    if (o.final_softcap > 0 && !g4)  // gemma4: the preset's unless given (gemma4_keys)
        s.w.add_kv(a + ".final_logit_softcapping", OwnedValue::f32(o.final_softcap));
    if (o.attn_softcap > 0)
        s.w.add_kv(a + ".attn_logit_softcapping", OwnedValue::f32(o.attn_softcap));
    if (p->yarn_factor > 0) {
        s.w.add_kv(a + ".rope.scaling.type", OwnedValue::string("yarn"));
        s.w.add_kv(a + ".rope.scaling.factor", OwnedValue::f32(p->yarn_factor));
        s.w.add_kv(a + ".rope.scaling.original_context_length", OwnedValue::u32(p->yarn_orig_ctx));
    }
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
    const GgmlType emb_t = o.type == "q4_k_m" && !oss ? GgmlType::Q4_K : base;
    s.tensor("token_embd.weight", E, V, p->tied ? out_t : emb_t, 0.f, se);
    s.tensor("output_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
    if (!p->tied) s.tensor("output.weight", E, V, out_t, 0.f, se);
    const bool gemma = a == "gemma3", qk_norm = a != "llama" && !oss;
    if (hy) qwen35_tensors(s, *p, *hy, base, more);
    if (g4) gemma4_tensors(s, *p, *g4, base, more);
    for (int il = 0; il < (hy || g4 ? 0 : p->n_layer); ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const GgmlType vt = use_more_bits(il, p->n_layer) ? more : base;
        const float si = 1.0f / std::sqrt(static_cast<float>(E));
        s.tensor(b + "attn_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "attn_q.weight", E, qd, base, 0.f, si);
        s.tensor(b + "attn_k.weight", E, kvd, base, 0.f, si);
        s.tensor(b + "attn_v.weight", E, kvd, vt, 0.f, si);
        s.tensor(b + "attn_output.weight", qd, E, base, 0.f, 1.0f / std::sqrt(static_cast<float>(qd)));
        if (oss) {  // llama.cpp's openai-moe tensors: biases, sinks, post-attention norm, experts
            const int64_t X = p->n_expert, FX = p->n_ff_exp;
            s.tensor(b + "attn_q.bias", qd, 1, GgmlType::F32, 0.f, 0.1f);
            s.tensor(b + "attn_k.bias", kvd, 1, GgmlType::F32, 0.f, 0.1f);
            s.tensor(b + "attn_v.bias", kvd, 1, GgmlType::F32, 0.f, 0.1f);
            s.tensor(b + "attn_output.bias", E, 1, GgmlType::F32, 0.f, 0.1f);
            s.tensor(b + "attn_sinks.weight", p->n_head, 1, GgmlType::F32, 0.f, 1.0f);
            s.tensor(b + "post_attention_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "ffn_gate_inp.weight", E, X, GgmlType::F32, 0.f, si);
            s.tensor(b + "ffn_gate_inp.bias", X, 1, GgmlType::F32, 0.f, 0.5f);
            s.tensor(b + "ffn_gate_exps.weight", E, FX, exp_t, 0.f, si, X);
            s.tensor(b + "ffn_up_exps.weight", E, FX, exp_t, 0.f, si, X);
            s.tensor(b + "ffn_down_exps.weight", FX, E, exp_t, 0.f,
                     1.0f / std::sqrt(static_cast<float>(FX)), X);
            s.tensor(b + "ffn_gate_exps.bias", FX, X, GgmlType::F32, 0.f, 0.1f);
            s.tensor(b + "ffn_up_exps.bias", FX, X, GgmlType::F32, 0.f, 0.1f);
            s.tensor(b + "ffn_down_exps.bias", E, X, GgmlType::F32, 0.f, 0.1f);
            continue;
        }
        if (qk_norm) {
            s.tensor(b + "attn_q_norm.weight", p->head_dim, 1, GgmlType::F32, 1.f, 0.1f);
            s.tensor(b + "attn_k_norm.weight", p->head_dim, 1, GgmlType::F32, 1.f, 0.1f);
        }
        if (gemma) s.tensor(b + "post_attention_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        s.tensor(b + "ffn_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
        if (p->n_expert > 0) {
            // The router stays f32 (llama.cpp's quantizer never quantizes ffn_gate_inp); the
            // experts are 3-D, down as ffn_down (Q6_K on use_more_bits layers in q4_k_m).
            const int64_t X = p->n_expert, FX = p->n_ff_exp;
            s.tensor(b + "ffn_gate_inp.weight", E, X, GgmlType::F32, 0.f, si);
            s.tensor(b + "ffn_gate_exps.weight", E, FX, base, 0.f, si, X);
            s.tensor(b + "ffn_up_exps.weight", E, FX, base, 0.f, si, X);
            s.tensor(b + "ffn_down_exps.weight", FX, E, vt, 0.f,
                     1.0f / std::sqrt(static_cast<float>(FX)), X);
            continue;
        }
        s.tensor(b + "ffn_gate.weight", E, F, base, 0.f, si);
        s.tensor(b + "ffn_up.weight", E, F, base, 0.f, si);
        s.tensor(b + "ffn_down.weight", F, E, vt, 0.f, 1.0f / std::sqrt(static_cast<float>(F)));
        if (gemma) s.tensor(b + "post_ffw_norm.weight", E, 1, GgmlType::F32, 1.f, 0.1f);
    }
    if (auto r = s.write(o.out); !r) return report_error(r.error().message, kExitFailure);
    const double t_all = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "zinc synth: %s (%s, %s, seed %llu): %lld layers, vocab %lld, %.1f MiB of "
                 "weights (%s) generated and written in %.1f s (%d threads)\n",
                 o.out.c_str(), o.preset.c_str(), o.type.c_str(),
                 static_cast<unsigned long long>(o.seed), static_cast<long long>(p->n_layer),
                 static_cast<long long>(V), s.bytes / 1048576.0,
                 o.from_floats ? "quantized from random floats" : "random blocks", t_all,
                 s.n_threads);
    return kExitOk;
}

}  // namespace

int synth_main(int argc, char** argv) {
    Opts o;
    CLI::App app{"zinc synth: write a GGUF with a real model's shapes and seeded random weights",
                 "zinc synth"};
    std::string presets;
    for (const auto& q : kPresets) presets += std::string(presets.empty() ? "" : ", ") + q.name;
    app.add_option("--arch", o.arch,
                   "llama, qwen3, qwen3moe, gemma3, gemma4, qwen35, qwen35moe or gpt-oss (must match "
                   "the preset)");
    app.add_option("--preset", o.preset, "shape preset: " + presets)->required();
    app.add_option("--type", o.type, "q4_k_m, q4_0, q8_0, bf16 or f32")->capture_default_str();
    app.add_option("--seed", o.seed, "random seed")->capture_default_str();
    app.add_option("-o,--output", o.out, "output GGUF file")->required();
    app.add_option("--vocab-from", o.vocab_from,
                   "GGUF whose tokenizer to copy (default: SmolLM2-135M-Instruct)");
    app.add_flag("--from-floats", o.from_floats,
                 "quantize random float rows (the slow path) instead of writing random blocks");
    app.add_option("--final-logit-softcap", o.final_softcap,
                   "write <arch>.final_logit_softcapping (Gemma 2 style: cap * tanh(logit / cap))");
    app.add_option("--attn-logit-softcap", o.attn_softcap,
                   "write <arch>.attn_logit_softcapping");
    app.add_option("-t,--threads", o.n_threads, "threads; 0: all hardware threads")
        ->capture_default_str();
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    return synth(o);
}

}  // namespace zinc::cli
