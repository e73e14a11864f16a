// tests/unit/model/bert_test.cpp — the bert architecture (models/bert.cpp) on a tiny f32 BERT
// built in memory: its op list, its load errors, forward_embed against a float64 forward pass
// written here from the BERT paper's equations (not from the CPU kernels), the Runner's refusals,
// and embedding requests through the Engine (engine/embedding_step.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/tp_runner.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/arch_model.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/pooling.h"
#include "model/shard.h"

namespace zm = zinc::model;
namespace ze = zinc::engine;
using zinc::gguf::OwnedValue;
using zinc::gguf::Writer;
using zinc::quant::GgmlType;

namespace {

constexpr int kLayers = 2, kEmbd = 32, kHeads = 4, kFf = 48, kVocab = 20, kCtx = 24, kTypes = 2;
constexpr float kEps = 1e-12f;

using Mat = std::vector<float>;  // row-major (rows, cols) as ggml stores (ne1 rows of ne0)

struct TinyBert {
    std::vector<uint8_t> bytes;
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
    // The weights, for the reference.
    Mat tok, types, pos, en_w, en_b;
    struct Layer {
        Mat wq, bq, wk, bk, wv, bv, wo, bo, an_w, an_b, up, bup, down, bdown, on_w, on_b;
    };
    std::vector<Layer> L;
};

std::unique_ptr<TinyBert> make_bert(const std::string& skip = "", bool causal_key = true,
                                    bool causal = false) {
    auto t = std::make_unique<TinyBert>();
    Writer w;
    w.add_kv("general.architecture", OwnedValue::string("bert"));
    w.add_kv("bert.block_count", OwnedValue::u32(kLayers));
    w.add_kv("bert.embedding_length", OwnedValue::u32(kEmbd));
    w.add_kv("bert.feed_forward_length", OwnedValue::u32(kFf));
    w.add_kv("bert.attention.head_count", OwnedValue::u32(kHeads));
    w.add_kv("bert.attention.layer_norm_epsilon", OwnedValue::f32(kEps));
    w.add_kv("bert.context_length", OwnedValue::u32(kCtx));
    if (causal_key) w.add_kv("bert.attention.causal", OwnedValue::boolean(causal));
    w.add_kv("bert.pooling_type", OwnedValue::u32(1));
    std::mt19937 rng(7);
    auto add = [&](const std::string& name, int64_t ne0, int64_t ne1, float sd, float mean = 0) {
        std::normal_distribution<float> d(mean, sd);
        Mat m(static_cast<size_t>(ne0 * ne1));
        for (float& v : m) v = d(rng);
        if (name == skip) return m;
        std::vector<uint8_t> b(m.size() * 4);
        std::memcpy(b.data(), m.data(), b.size());
        std::vector<int64_t> ne = {ne0};
        if (ne1 > 1) ne.push_back(ne1);
        w.add_tensor(name, ne, GgmlType::F32, std::move(b));
        return m;
    };
    t->tok = add("token_embd.weight", kEmbd, kVocab, 1.0f);
    t->types = add("token_types.weight", kEmbd, kTypes, 0.5f);
    t->pos = add("position_embd.weight", kEmbd, kCtx, 0.5f);
    t->en_w = add("token_embd_norm.weight", kEmbd, 1, 0.1f, 1.0f);
    t->en_b = add("token_embd_norm.bias", kEmbd, 1, 0.1f);
    for (int il = 0; il < kLayers; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        TinyBert::Layer l;
        l.wq = add(p + "attn_q.weight", kEmbd, kEmbd, 0.3f);
        l.bq = add(p + "attn_q.bias", kEmbd, 1, 0.1f);
        l.wk = add(p + "attn_k.weight", kEmbd, kEmbd, 0.3f);
        l.bk = add(p + "attn_k.bias", kEmbd, 1, 0.1f);
        l.wv = add(p + "attn_v.weight", kEmbd, kEmbd, 0.3f);
        l.bv = add(p + "attn_v.bias", kEmbd, 1, 0.1f);
        l.wo = add(p + "attn_output.weight", kEmbd, kEmbd, 0.3f);
        l.bo = add(p + "attn_output.bias", kEmbd, 1, 0.1f);
        l.an_w = add(p + "attn_output_norm.weight", kEmbd, 1, 0.1f, 1.0f);
        l.an_b = add(p + "attn_output_norm.bias", kEmbd, 1, 0.1f);
        l.up = add(p + "ffn_up.weight", kEmbd, kFf, 0.3f);
        l.bup = add(p + "ffn_up.bias", kFf, 1, 0.1f);
        l.down = add(p + "ffn_down.weight", kFf, kEmbd, 0.3f);
        l.bdown = add(p + "ffn_down.bias", kEmbd, 1, 0.1f);
        l.on_w = add(p + "layer_output_norm.weight", kEmbd, 1, 0.1f, 1.0f);
        l.on_b = add(p + "layer_output_norm.bias", kEmbd, 1, 0.1f);
        t->L.push_back(std::move(l));
    }
    t->bytes = w.serialize();
    auto f = zinc::gguf::File::from_buffer(t->bytes.data(), t->bytes.size(), "tiny-bert.gguf");
    EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
    t->file = std::move(f.value());
    return t;
}

using Vec = std::vector<double>;

// y = W x + b, W (out rows of `in` columns).
Vec linear(const Mat& W, const Mat& b, const Vec& x, int out) {
    const int in = static_cast<int>(x.size());
    Vec y(out);
    for (int o = 0; o < out; ++o) {
        double s = b[o];
        for (int i = 0; i < in; ++i) s += double(W[o * in + i]) * x[i];
        y[o] = s;
    }
    return y;
}

Vec layer_norm(const Vec& x, const Mat& w, const Mat& b) {
    double m = 0, v = 0;
    for (double a : x) m += a;
    m /= x.size();
    for (double a : x) v += (a - m) * (a - m);
    v /= x.size();
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - m) / std::sqrt(v + kEps) * w[i] + b[i];
    return y;
}

// The float64 BERT forward of one sequence (token type 0, positions 0..n-1), last-layer rows.
std::vector<Vec> reference(const TinyBert& t, const std::vector<int32_t>& ids) {
    const int n = static_cast<int>(ids.size()), hd = kEmbd / kHeads;
    std::vector<Vec> x(n, Vec(kEmbd));
    for (int r = 0; r < n; ++r) {
        for (int i = 0; i < kEmbd; ++i)
            x[r][i] = double(t.tok[ids[r] * kEmbd + i]) + t.types[i] + t.pos[r * kEmbd + i];
        x[r] = layer_norm(x[r], t.en_w, t.en_b);
    }
    for (const auto& l : t.L) {
        std::vector<Vec> q(n), k(n), v(n);
        for (int r = 0; r < n; ++r) {
            q[r] = linear(l.wq, l.bq, x[r], kEmbd);
            k[r] = linear(l.wk, l.bk, x[r], kEmbd);
            v[r] = linear(l.wv, l.bv, x[r], kEmbd);
        }
        for (int r = 0; r < n; ++r) {
            Vec att(kEmbd, 0.0);
            for (int h = 0; h < kHeads; ++h) {
                Vec s(n);
                double mx = -1e300, sum = 0;
                for (int j = 0; j < n; ++j) {  // every position: bidirectional
                    double d = 0;
                    for (int i = 0; i < hd; ++i) d += q[r][h * hd + i] * k[j][h * hd + i];
                    s[j] = d / std::sqrt(double(hd));
                    mx = std::max(mx, s[j]);
                }
                for (double& e : s) sum += (e = std::exp(e - mx));
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][h * hd + i];
            }
            Vec a = linear(l.wo, l.bo, att, kEmbd);
            for (int i = 0; i < kEmbd; ++i) a[i] += x[r][i];
            const Vec h1 = layer_norm(a, l.an_w, l.an_b);
            Vec u = linear(l.up, l.bup, h1, kFf);
            for (double& e : u) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
            Vec f = linear(l.down, l.bdown, u, kEmbd);
            for (int i = 0; i < kEmbd; ++i) f[i] += h1[i];
            x[r] = layer_norm(f, l.on_w, l.on_b);
        }
    }
    return x;
}

zm::RunnerOptions runner_options(int n_blocks) {
    zm::RunnerOptions o;
    o.n_blocks = n_blocks;
    o.block_size = 4;
    o.max_batch_tokens = 32;
    o.max_seqs = 4;
    o.max_seq_len = 64;
    o.n_threads = 2;
    return o;
}

std::unique_ptr<zm::Runner> runner_for(const zm::Model& m, int n_blocks = 8) {
    auto r = zm::Runner::create_cpu(m, runner_options(n_blocks));
    EXPECT_TRUE(r.ok());
    return std::move(r.value());
}

// --tensor-parallel n on the CPU tier (backend/cpu/tp_runner.h).
std::unique_ptr<zm::Runner> tp_runner_for(const zm::Model& m, int n, int n_blocks = 8) {
    auto r = zinc::cpu::create_tensor_parallel_runner(m, runner_options(n_blocks), n);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r.value()) : nullptr;
}

}  // namespace

TEST(Bert, LoadsAsAnEncoderWithItsOpList) {
    auto t = make_bert();
    auto m = zm::Model::load(*t->file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_FALSE(m.value()->has_lm_head());
    EXPECT_TRUE(m.value()->bidirectional());
    EXPECT_EQ(m.value()->pooling_type(), 1);
    EXPECT_FLOAT_EQ(m.value()->config().norm_eps, kEps);
    const auto& P = dynamic_cast<const zm::ArchModel&>(*m.value()).program();
    using K = zm::OpKind;
    std::vector<K> head, layer;
    for (const zm::Op& op : P.ops)
        (op.il < 0 ? head : op.il == 0 ? layer : head).push_back(op.kind());
    EXPECT_EQ(std::vector<K>(head.begin(), head.begin() + 4),
              (std::vector<K>{K::Embed, K::AddEmbed, K::AddEmbed, K::LayerNorm}));
    EXPECT_EQ(layer,
              (std::vector<K>{K::Matmul, K::RopeKv, K::Attention, K::Matmul, K::Add, K::LayerNorm,
                              K::Matmul, K::Gelu, K::Matmul, K::Add, K::LayerNorm}));
    EXPECT_EQ(P.logits, zm::kNoTensor);
    EXPECT_EQ(P.embd_op, static_cast<int>(P.ops.size()) - 1);
    EXPECT_TRUE(P.bidirectional);
    for (const zm::Op& op : P.ops) {
        if (op.kind() == K::Attention) {
            EXPECT_FALSE(op.as<zm::AttentionP>().causal);
        }
    }
    EXPECT_NE(P.describe().find("layer_norm"), std::string::npos);
}

TEST(Bert, LoadErrorsNameTheKeyOrTensor) {
    for (bool key : {false, true}) {  // causal absent, or true
        auto t = make_bert("", key, true);
        auto m = zm::Model::load(*t->file, {});
        ASSERT_FALSE(m.ok());
        EXPECT_NE(m.error().message.find("bert.attention.causal"), std::string::npos)
            << m.error().message;
    }
    auto t = make_bert("blk.1.layer_output_norm.bias");
    auto m = zm::Model::load(*t->file, {});
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().message.find("missing tensor blk.1.layer_output_norm.bias"),
              std::string::npos)
        << m.error().message;
}

TEST(Bert, ForwardEmbedMatchesFloat64AndIsIndependentOfTheBatch) {
    auto t = make_bert();
    auto m = zm::Model::load(*t->file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto runner = runner_for(*m.value());
    const std::vector<int32_t> a = {2, 7, 7, 19, 0, 11, 5, 3, 14}, b = {4, 1, 18};
    std::vector<int32_t> tokens = a;
    tokens.insert(tokens.end(), b.begin(), b.end());
    const int32_t ta[3] = {5, 0, 2}, tb[1] = {6};  // physical blocks, in position order
    const zm::BatchSeq seqs[2] = {{0, 9, 0, ta, false, false, -1}, {9, 3, 0, tb, false, false, -1}};
    std::vector<float> hidden(12 * kEmbd);
    ASSERT_TRUE(runner->forward_embed({tokens, seqs}, hidden.data()).ok());
    const auto ra = reference(*t, a), rb = reference(*t, b);
    for (int r = 0; r < 12; ++r) {
        const auto& ref = r < 9 ? ra[r] : rb[r - 9];
        for (int i = 0; i < kEmbd; ++i)
            ASSERT_NEAR(hidden[r * kEmbd + i], ref[i], 5e-3 * (1 + std::abs(ref[i])))
                << "row " << r << " i " << i;
    }
    // Sequence b alone (other blocks, one sequence) gives the same bits.
    std::vector<float> alone(3 * kEmbd);
    const zm::BatchSeq one[1] = {{0, 3, 0, ta, false, false, -1}};
    ASSERT_TRUE(runner->forward_embed({b, one}, alone.data()).ok());
    EXPECT_EQ(0, std::memcmp(alone.data(), hidden.data() + 9 * kEmbd, alone.size() * 4));
    // Pooling: mean of the rows, unit norm.
    const auto e = zm::pool_normalized(hidden.data(), 9, kEmbd, zm::Pooling::Mean);
    double n2 = 0;
    for (float x : e) n2 += double(x) * x;
    EXPECT_NEAR(n2, 1.0, 1e-6);
}

TEST(Bert, RunnerRefusesLogitsAChunkedSequenceAndPositionsPastTheTable) {
    auto t = make_bert();
    auto m = zm::Model::load(*t->file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto runner = runner_for(*m.value(), 16);
    const std::vector<int32_t> toks = {1, 2, 3};
    const int32_t tbl[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<float> out(64 * kEmbd);
    const zm::BatchSeq s0[1] = {{0, 3, 0, tbl, true, false, -1}};
    auto r = runner->forward({toks, s0}, out.data());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("embedding model (no LM head)"), std::string::npos);
    const zm::BatchSeq s1[1] = {{0, 3, 4, tbl, false, false, -1}};
    r = runner->forward_embed({toks, s1}, out.data());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("whole, from position 0"), std::string::npos)
        << r.error().message;
    std::vector<int32_t> many(kCtx + 1, 5);
    const zm::BatchSeq s2[1] = {{0, kCtx + 1, 0, tbl, false, false, -1}};
    r = runner->forward_embed({many, s2}, out.data());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("position embeddings cover 24 positions"), std::string::npos)
        << r.error().message;
}

// The shard transform keeps the embeddings mark (model/shard.h): the last layer's output norm,
// renumbered past the AllReduce ops, and the bidirectional flag.
TEST(Bert, ShardProgramsKeepTheEmbeddingsMark) {
    auto t = make_bert();
    auto m = zm::Model::load(*t->file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto& am = dynamic_cast<const zm::ArchModel&>(*m.value());
    const zm::Program& P = am.program();
    auto set = zm::shard_program(P, am.config(), 2);
    ASSERT_TRUE(set.ok()) << set.error().message;
    for (const zm::Shard& sh : set.value()->shards) {
        const zm::Program& S = sh.program;
        EXPECT_EQ(S.embd, P.embd);
        EXPECT_TRUE(S.bidirectional);
        // One AllReduce a layer (attn_out; the GELU FFN is replicated) before the last norm.
        ASSERT_EQ(S.embd_op, P.embd_op + kLayers);
        EXPECT_EQ(S.ops[S.embd_op].kind(), zm::OpKind::LayerNorm);
        EXPECT_TRUE(S.ops[S.embd_op].writes(S.embd));
        EXPECT_EQ(S.width(S.embd), kEmbd);  // replicated: whole on every rank
    }
}

// --tensor-parallel N: the rank programs summed at each AllReduce give the unsharded
// embeddings. N = 1 is the same arithmetic (bit for bit); at N = 2 and 4 (heads split 2 + 2,
// 1 + 1 + 1 + 1) only the order of attn_out's partial sums changes (f32 weights: no activation
// packing; Q/K/V are whole output rows, the same dot products, so K/V are the same bits): max |d|
// measured 2.0e-5 (N = 2) and 1.9e-5 (N = 4) over values up to 2.9, so the bar is 1e-4, and a
// rank's partial sums dropped must exceed 1e-2.
TEST(Bert, TensorParallelEmbeddingsEqualTheUnshardedOnes) {
    auto t = make_bert();
    auto m = zm::Model::load(*t->file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    const std::vector<int32_t> tokens = {2, 7, 7, 19, 0, 11, 5, 3, 14, 4, 1, 18};
    const int32_t ta[3] = {5, 0, 2}, tb[1] = {6};
    const zm::BatchSeq seqs[2] = {{0, 9, 0, ta, false, false, -1}, {9, 3, 0, tb, false, false, -1}};
    std::vector<float> want(12 * kEmbd);
    ASSERT_TRUE(runner_for(*m.value())->forward_embed({tokens, seqs}, want.data()).ok());
    for (int n : {1, 2, 4}) {
        auto tp = tp_runner_for(*m.value(), n);
        ASSERT_TRUE(tp);
        EXPECT_EQ(tp->tensor_parallel(), n);
        std::vector<float> got(want.size(), -1.0f);
        const auto r = tp->forward_embed({tokens, seqs}, got.data());
        ASSERT_TRUE(r.ok()) << "N = " << n << ": " << r.error().message;
        if (n == 1) {
            EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
            continue;
        }
        double max_d = 0;
        for (size_t i = 0; i < want.size(); ++i)
            max_d = std::max(max_d, double(std::fabs(got[i] - want[i])));
        EXPECT_LE(max_d, 1e-4) << "N = " << n;
    }
    // The comparison can fail: rank 1's attn_output columns zeroed (its partial sums dropped).
    const auto& am = dynamic_cast<const zm::ArchModel&>(*m.value());
    auto set = zm::shard_program(am.program(), am.config(), 2);
    ASSERT_TRUE(set.ok());
    int zeroed = 0;
    for (zm::Weight& v : set.value()->views) {
        if (v.name.find("attn_output.weight[tp1/2]") == std::string::npos) continue;
        std::memset(const_cast<uint8_t*>(v.data), 0, v.bytes());  // a ShardSet copy
        ++zeroed;
    }
    ASSERT_EQ(zeroed, kLayers);
    auto bad = zinc::cpu::create_tensor_parallel_runner(*m.value(), runner_options(8),
                                                        std::move(set.value()));
    ASSERT_TRUE(bad.ok());
    std::vector<float> got(want.size());
    ASSERT_TRUE(bad.value()->forward_embed({tokens, seqs}, got.data()).ok());
    double max_d = 0;
    for (size_t i = 0; i < want.size(); ++i)
        max_d = std::max(max_d, double(std::fabs(got[i] - want[i])));
    EXPECT_GT(max_d, 1e-2);
}

// The tensor-parallel runner refuses what the CPU Runner refuses, with the same messages.
TEST(Bert, TensorParallelRunnerRefusesLogitsAChunkedSequenceAndPositionsPastTheTable) {
    auto t = make_bert();
    auto m = zm::Model::load(*t->file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto tp = tp_runner_for(*m.value(), 2, 16);
    ASSERT_TRUE(tp);
    const std::vector<int32_t> toks = {1, 2, 3};
    const int32_t tbl[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<float> out(64 * kEmbd);
    const zm::BatchSeq s0[1] = {{0, 3, 0, tbl, true, false, -1}};
    auto r = tp->forward({toks, s0}, out.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "forward: bert is an embedding model (no LM head): it computes embeddings only, "
              "not logits");
    const zm::BatchSeq s1[1] = {{0, 3, 4, tbl, false, false, -1}};
    r = tp->forward_embed({toks, s1}, out.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "embeddings: sequence 0 starts at position 4, but bert attends in both directions: "
              "a sequence must be computed whole, from position 0, in one forward");
    std::vector<int32_t> many(kCtx + 1, 5);
    const zm::BatchSeq s2[1] = {{0, kCtx + 1, 0, tbl, false, false, -1}};
    r = tp->forward_embed({many, s2}, out.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "forward: sequence 0 reaches position 25, but bert's position embeddings cover 24 "
              "positions");
}

TEST(Bert, EngineComputesEmbeddingsAndRefusesGeneration) {
    auto t = make_bert();
    auto m = zm::Model::load(*t->file, {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    ze::EngineOptions o;
    o.n_parallel = 2;
    o.n_ctx = kCtx;
    o.block_size = 4;
    o.max_batch_tokens = 16;
    o.n_threads = 2;
    auto eng = ze::Engine::create(*m.value(), o);
    ASSERT_TRUE(eng.ok()) << eng.error().message;
    ze::Engine& e = *eng.value();
    // Generation: refused, naming the route to use.
    ze::RequestParams gp;
    gp.prompt = {1, 2};
    auto g = e.submit(gp, [](const ze::Event&) {});
    ASSERT_TRUE(std::holds_alternative<ze::SubmitError>(g));
    EXPECT_NE(std::get<ze::SubmitError>(g).message.find("/v1/embeddings"), std::string::npos);
    // Three inputs at once (packed into steps of 16 rows), each equal to the reference.
    const std::vector<std::vector<int32_t>> inputs = {
        {2, 7, 7, 19, 0, 11, 5, 3, 14}, {4, 1, 18}, {9, 9, 9, 9, 9, 9, 9, 9}};
    std::vector<std::promise<ze::EmbeddingResult>> done(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
        auto r = e.submit_embedding(
            {inputs[i], zm::Pooling::Mean, ""},
            [&done, i](ze::EmbeddingResult res) { done[i].set_value(std::move(res)); });
        ASSERT_TRUE(std::holds_alternative<ze::RequestId>(r));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
        auto f = done[i].get_future();
        ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
        const ze::EmbeddingResult res = f.get();
        ASSERT_TRUE(res.error.empty()) << res.error;
        const auto ref = reference(*t, inputs[i]);
        std::vector<double> mean(kEmbd, 0.0);
        for (const auto& row : ref)
            for (int k = 0; k < kEmbd; ++k) mean[k] += row[k] / ref.size();
        double n = 0;
        for (double x : mean) n += x * x;
        for (int k = 0; k < kEmbd; ++k)
            EXPECT_NEAR(res.embedding[k], mean[k] / std::sqrt(n), 2e-3) << i << " " << k;
        EXPECT_EQ(res.n_tokens, static_cast<int32_t>(inputs[i].size()));
    }
    // Refusals: empty, an id out of range, longer than one step (bidirectional), than n_ctx.
    auto refused = [&](std::vector<int32_t> toks) {
        auto r = e.submit_embedding({std::move(toks), zm::Pooling::Mean, ""},
                                    [](ze::EmbeddingResult) {});
        EXPECT_TRUE(std::holds_alternative<ze::SubmitError>(r));
        return std::holds_alternative<ze::SubmitError>(r) ? std::get<ze::SubmitError>(r)
                                                          : ze::SubmitError{};
    };
    EXPECT_EQ(refused({}).kind, ze::SubmitErrorKind::InvalidRequest);
    EXPECT_NE(refused({1, kVocab}).message.find("out of range"), std::string::npos);
    const auto step = refused(std::vector<int32_t>(17, 1));
    EXPECT_EQ(step.kind, ze::SubmitErrorKind::ContextLength);
    EXPECT_NE(step.message.find("must fit one step"), std::string::npos) << step.message;
    EXPECT_EQ(refused(std::vector<int32_t>(kCtx + 1, 1)).kind, ze::SubmitErrorKind::ContextLength);
    // Every KV block came back.
    const auto st = e.stats();
    EXPECT_EQ(st.kv_blocks_used, 0);
}
