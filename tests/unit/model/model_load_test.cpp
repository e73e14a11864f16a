// tests/unit/model/model_load_test.cpp — Model::load / Context::eval edge behaviour on tiny
// synthetic GGUFs built in memory with gguf::Writer: the errors name the tensor or key, and the
// forward pass gives the same logits however the tokens are chunked or threaded.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/model.h"
#include "quant/quant.h"

using zinc::gguf::OwnedValue;
using zinc::gguf::Writer;
using zinc::quant::GgmlType;

namespace {

struct TinySpec {
    std::string arch = "llama";
    int n_layer = 2, n_embd = 64, n_head = 4, n_head_kv = 2, n_ff = 96, n_vocab = 40;
    // Overrides for negative tests.
    std::string skip_tensor;
    std::string bad_shape_tensor;
    std::string bad_type_tensor;
    bool omit_block_count = false;
    std::vector<std::pair<std::string, OwnedValue>> extra_kv;  // "<arch>." is prefixed
    GgmlType ffn_type = GgmlType::Q4_1;                        // ffn_gate's type
};

std::vector<uint8_t> tensor_bytes(GgmlType t, int64_t ne0, int64_t ne1, std::mt19937& rng, float sd,
                                  float mean = 0.0f) {
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> f(static_cast<size_t>(ne0 * ne1));
    for (float& v : f) v = d(rng);
    const size_t rb = zinc::quant::row_size(t, ne0);
    std::vector<uint8_t> out(rb * ne1);
    for (int64_t r = 0; r < ne1; ++r)
        zinc::quant::quantize_row(t, f.data() + r * ne0, out.data() + r * rb, ne0);
    return out;
}

std::vector<uint8_t> build(const TinySpec& s) {
    Writer w;
    w.add_kv("general.architecture", OwnedValue::string(s.arch));
    const std::string a = s.arch;
    if (!s.omit_block_count) w.add_kv(a + ".block_count", OwnedValue::u32(s.n_layer));
    w.add_kv(a + ".embedding_length", OwnedValue::u32(s.n_embd));
    w.add_kv(a + ".feed_forward_length", OwnedValue::u32(s.n_ff));
    w.add_kv(a + ".attention.head_count", OwnedValue::u32(s.n_head));
    w.add_kv(a + ".attention.head_count_kv", OwnedValue::u32(s.n_head_kv));
    w.add_kv(a + ".attention.layer_norm_rms_epsilon", OwnedValue::f32(1e-5f));
    w.add_kv(a + ".rope.freq_base", OwnedValue::f32(10000.0f));
    w.add_kv(a + ".context_length", OwnedValue::u32(256));
    for (const auto& [k, v] : s.extra_kv) w.add_kv(a + "." + k, v);
    std::mt19937 rng(42);
    const int hd = s.n_embd / s.n_head;
    auto add = [&](const std::string& name, int64_t ne0, int64_t ne1, GgmlType t, float sd,
                   float mean = 0.0f) {
        if (name == s.skip_tensor) return;
        if (name == s.bad_shape_tensor) ne0 += 32;
        if (name == s.bad_type_tensor) t = GgmlType::Q8_0;
        std::vector<int64_t> ne = {ne0};
        if (ne1 > 1 || t != GgmlType::F32) ne.push_back(ne1);
        w.add_tensor(name, ne, t, tensor_bytes(t, ne0, ne1, rng, sd, mean));
    };
    add("token_embd.weight", s.n_embd, s.n_vocab, GgmlType::Q8_0, 1.0f);
    add("output_norm.weight", s.n_embd, 1, GgmlType::F32, 0.1f, 1.0f);
    for (int il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        add(p + "attn_norm.weight", s.n_embd, 1, GgmlType::F32, 0.1f, 1.0f);
        add(p + "attn_q.weight", s.n_embd, s.n_head * hd, GgmlType::Q8_0, 0.2f);
        add(p + "attn_k.weight", s.n_embd, s.n_head_kv * hd, GgmlType::Q4_0, 0.2f);
        add(p + "attn_v.weight", s.n_embd, s.n_head_kv * hd, GgmlType::F16, 0.2f);
        add(p + "attn_output.weight", s.n_head * hd, s.n_embd, GgmlType::Q8_0, 0.2f);
        add(p + "ffn_norm.weight", s.n_embd, 1, GgmlType::F32, 0.1f, 1.0f);
        add(p + "ffn_gate.weight", s.n_embd, s.n_ff, s.ffn_type, 0.2f);
        add(p + "ffn_up.weight", s.n_embd, s.n_ff, GgmlType::Q5_0, 0.2f);
        add(p + "ffn_down.weight", s.n_ff, s.n_embd, GgmlType::Q8_0, 0.2f);
    }
    return w.serialize();
}

struct Loaded {
    std::vector<uint8_t> bytes;
    std::unique_ptr<zinc::gguf::File> file;
};

Loaded open_spec(const TinySpec& s) {
    Loaded l;
    l.bytes = build(s);
    auto f = zinc::gguf::File::from_buffer(l.bytes.data(), l.bytes.size(), "tiny.gguf");
    EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
    l.file = std::move(f.value());
    return l;
}

std::string load_error(const TinySpec& s) {
    Loaded l = open_spec(s);
    auto m = zinc::model::Model::load(*l.file, {});
    return m.ok() ? std::string("<loaded>") : m.error().message;
}

}  // namespace

TEST(ModelLoad, TinyLlamaLoadsWithConfigFromKeys) {
    Loaded l = open_spec(TinySpec{});
    auto m = zinc::model::Model::load(*l.file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto& c = m.value()->config();
    EXPECT_EQ(m.value()->arch_name(), "llama");
    EXPECT_EQ(c.n_layer, 2);
    EXPECT_EQ(c.head_dim_k, 16);
    EXPECT_EQ(c.n_vocab, 40);
    EXPECT_EQ(c.n_ctx_train, 256);
    EXPECT_EQ(c.rope_mode, zinc::cpu::RopeMode::Norm);
    EXPECT_FLOAT_EQ(c.attn_scale, 0.25f);
    // 2 layers x n_ctx 100 x (2 kv heads x 16) x (K + V) x 2 bytes
    EXPECT_EQ(m.value()->kv_cache_bytes(100), size_t(2) * 100 * 32 * 2 * 2);
}

TEST(ModelLoad, UnsupportedArchitectureIsNamedWithTheSupportedList) {
    TinySpec s;
    s.arch = "mamba";
    const std::string e = load_error(s);
    EXPECT_NE(e.find("unsupported architecture 'mamba'"), std::string::npos) << e;
    EXPECT_NE(e.find("llama, gemma3, gemma4, qwen2, qwen3"), std::string::npos) << e;
}

TEST(ModelLoad, MissingTensorIsNamed) {
    TinySpec s;
    s.skip_tensor = "blk.1.ffn_up.weight";
    const std::string e = load_error(s);
    EXPECT_NE(e.find("missing tensor blk.1.ffn_up.weight"), std::string::npos) << e;
}

TEST(ModelLoad, WrongShapeIsNamedWithExpectedShape) {
    TinySpec s;
    s.bad_shape_tensor = "blk.1.attn_q.weight";
    const std::string e = load_error(s);
    EXPECT_EQ(e, "blk.1.attn_q.weight: shape [96, 64], expected [64, 64]");
}

TEST(ModelLoad, WrongTypeIsNamed) {
    TinySpec s;
    s.bad_type_tensor = "blk.0.attn_norm.weight";
    const std::string e = load_error(s);
    EXPECT_NE(e.find("blk.0.attn_norm.weight: type q8_0 is not supported"), std::string::npos) << e;
}

TEST(ModelLoad, MissingHyperparameterIsNamed) {
    TinySpec s;
    s.omit_block_count = true;
    const std::string e = load_error(s);
    EXPECT_NE(e.find("missing metadata key llama.block_count"), std::string::npos) << e;
}

TEST(ModelLoad, QwenVariantsRequireTheirExtraTensors) {
    TinySpec s;
    s.arch = "qwen2";
    EXPECT_NE(load_error(s).find("missing tensor blk.0.attn_q.bias"), std::string::npos);
    s.arch = "qwen3";
    EXPECT_NE(load_error(s).find("missing tensor blk.0.attn_q_norm.weight"), std::string::npos);
}

class TinyContext : public ::testing::Test {
  protected:
    void SetUp() override {
        loaded_ = open_spec(TinySpec{});
        auto m = zinc::model::Model::load(*loaded_.file, {});
        ASSERT_TRUE(m.ok()) << m.error().message;
        model_ = std::move(m.value());
    }
    std::unique_ptr<zinc::model::Context> make(int n_ctx, int threads, int n_batch) {
        zinc::model::ContextOptions o;
        o.n_ctx = n_ctx;
        o.n_threads = threads;
        o.n_batch = n_batch;
        auto c = zinc::model::Context::create(*model_, o);
        EXPECT_TRUE(c.ok());
        return std::move(c.value());
    }
    Loaded loaded_;
    std::unique_ptr<zinc::model::Model> model_;
};

TEST_F(TinyContext, TokenOutOfRangeAndOverflowAreErrorsThatChangeNothing) {
    auto c = make(8, 1, 8);
    const std::vector<int32_t> bad = {1, 2, 40};
    auto r = c->eval(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("token id 40 at index 2 is out of range [0, 40)"),
              std::string::npos)
        << r.error().message;
    EXPECT_EQ(c->n_past(), 0);
    const std::vector<int32_t> neg = {-1};
    EXPECT_FALSE(c->eval(neg).ok());
    const std::vector<int32_t> six = {1, 2, 3, 4, 5, 6};
    ASSERT_TRUE(c->eval(six).ok());
    auto o = c->eval(std::vector<int32_t>{1, 2, 3});
    ASSERT_FALSE(o.ok());
    EXPECT_NE(o.error().message.find("context overflow"), std::string::npos) << o.error().message;
    EXPECT_EQ(c->n_past(), 6);
    EXPECT_TRUE(c->eval(std::vector<int32_t>{1, 2}).ok());
    EXPECT_EQ(c->n_past(), 8);
}

TEST_F(TinyContext, ChunkingThreadingAndDecodeGiveTheSameLogits) {
    const std::vector<int32_t> toks = {3, 17, 5, 39, 0, 22, 8, 8, 31, 2, 11};
    const int nv = model_->n_vocab();
    // Reference: one chunk, one thread, all logits.
    auto ref = make(32, 1, 64);
    ASSERT_TRUE(ref->eval(toks, true).ok());
    std::vector<float> want(toks.size() * nv);
    for (size_t i = 0; i < toks.size(); ++i) {
        std::copy(ref->logits(static_cast<int>(i)), ref->logits(static_cast<int>(i)) + nv,
                  want.begin() + i * nv);
    }
    for (float v : want) ASSERT_TRUE(std::isfinite(v));
    // Chunks of 3 tokens on 2 threads, all logits.
    auto chunked = make(32, 2, 3);
    ASSERT_TRUE(chunked->eval(toks, true).ok());
    for (size_t i = 0; i < toks.size(); ++i) {
        for (int v = 0; v < nv; ++v)
            ASSERT_EQ(chunked->logits(static_cast<int>(i))[v], want[i * nv + v]);
    }
    // Last-token logits only (the final layer then runs its FFN on one row), in chunks of 4.
    auto last_only = make(32, 2, 4);
    ASSERT_TRUE(last_only->eval(toks, false).ok());
    for (int v = 0; v < nv; ++v) {
        ASSERT_EQ(last_only->logits()[v], want[(toks.size() - 1) * nv + v]);
    }
    // One token at a time (decode path).
    auto dec = make(32, 2, 512);
    for (size_t i = 0; i < toks.size(); ++i) {
        ASSERT_TRUE(dec->eval(std::span<const int32_t>(&toks[i], 1)).ok());
        for (int v = 0; v < nv; ++v) ASSERT_EQ(dec->logits()[v], want[i * nv + v]) << "token " << i;
    }
    // truncate + re-eval reproduces the same logits.
    dec->truncate(5);
    ASSERT_TRUE(dec->eval(std::span<const int32_t>(&toks[5], 1)).ok());
    for (int v = 0; v < nv; ++v) ASSERT_EQ(dec->logits()[v], want[5 * nv + v]);
}

TEST(ModelLoad, Mxfp4TensorsLoad) {
    TinySpec s;
    s.ffn_type = GgmlType::MXFP4;
    Loaded l = open_spec(s);
    auto m = zinc::model::Model::load(*l.file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
}

// YaRN (gpt-oss: factor 32 over 4096 positions): the keys as llama.cpp reads them, the derived
// attn_factor, every layer's RoPE parameters; bad values are named.
TEST(ModelLoad, YarnRopeScalingIsRead) {
    TinySpec s;
    s.extra_kv.emplace_back("rope.scaling.type", OwnedValue::string("yarn"));
    s.extra_kv.emplace_back("rope.scaling.factor", OwnedValue::f32(32.0f));
    s.extra_kv.emplace_back("rope.scaling.original_context_length", OwnedValue::u32(4096));
    Loaded l = open_spec(s);
    auto m = zinc::model::Model::load(*l.file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto& c = m.value()->config();
    EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f / 32.0f);
    EXPECT_EQ(c.rope_ext_factor, 1.0f);
    EXPECT_EQ(c.n_ctx_orig_yarn, 4096);
    const float f = 32.0f;
    EXPECT_EQ(c.rope_attn_factor,
              (0.1f * 1.0f * std::log(f) + 1.0f) * (1.0f / (1.0f + 0.1f * std::log(f))));
    for (int il = 0; il < c.n_layer; ++il) {
        const auto r = c.rope(il);
        EXPECT_EQ(r.ext_factor, 1.0f);
        EXPECT_EQ(r.beta_fast, 32.0f);
        EXPECT_EQ(r.beta_slow, 1.0f);
        EXPECT_EQ(r.n_ctx_orig, 4096);
    }
}

TEST(ModelLoad, YarnBadValuesAreNamed) {
    auto err = [](std::string key, OwnedValue v) {
        TinySpec s;
        s.extra_kv.emplace_back("rope.scaling.type", OwnedValue::string("yarn"));
        s.extra_kv.emplace_back("rope.scaling.factor", OwnedValue::f32(32.0f));
        s.extra_kv.emplace_back(std::move(key), std::move(v));
        return load_error(s);
    };
    std::string e = err("rope.scaling.yarn_beta_fast", OwnedValue::f32(-1.0f));
    EXPECT_NE(e.find("llama.rope.scaling.yarn_beta_fast = -1"), std::string::npos) << e;
    EXPECT_NE(e.find("expected a finite value >= 0"), std::string::npos) << e;
    e = err("rope.scaling.yarn_log_multiplier", OwnedValue::f32(0.1f));
    EXPECT_NE(e.find("llama.rope.scaling.yarn_log_multiplier"), std::string::npos) << e;
    EXPECT_NE(e.find("is not supported"), std::string::npos) << e;
    e = err("rope.scaling.original_context_length", OwnedValue::u32(0));
    EXPECT_NE(
        e.find("llama.rope.scaling.original_context_length = 0, expected a value in [1, 2^30]"),
        std::string::npos)
        << e;
    e = err("rope.scaling.attn_factor", OwnedValue::f32(0.0f));
    EXPECT_NE(e.find("llama.rope.scaling.attn_factor = 0"), std::string::npos) << e;
    TinySpec s;
    s.extra_kv.emplace_back("rope.scaling.type", OwnedValue::string("longrope"));
    e = load_error(s);
    EXPECT_NE(e.find("is not supported (supported: none, linear, yarn)"), std::string::npos) << e;
}
