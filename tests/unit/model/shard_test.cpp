// The tensor-parallel transform of the op list (model/shard.h) on the real models: what the
// shard programs contain, the precise refusals, and the N = 1 identity. The forward passes of
// N > 1 against the unsharded one are tests/py/test_tensor_parallel.py (tests/tools/tp_check).
#include "model/shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/tp_runner.h"
#include "gguf/gguf.h"
#include "model/arch_model.h"
#include "model/batch.h"
#include "model/model.h"

namespace zm = zinc::model;

namespace {

struct Loaded {
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

const zm::ArchModel* load(const std::string& name) {
    static std::vector<std::pair<std::string, std::unique_ptr<Loaded>>> cache;
    for (auto& [n, l] : cache)
        if (n == name) return dynamic_cast<const zm::ArchModel*>(l->model.get());
    auto l = std::make_unique<Loaded>();
    auto f = zinc::gguf::File::open(std::string(ZINC_SOURCE_DIR) + "/models/" + name);
    if (f.ok()) {
        l->file = std::move(f.value());
        auto m = zm::Model::load(*l->file, {});
        if (m.ok()) l->model = std::move(m.value());
    }
    cache.emplace_back(name, std::move(l));
    return dynamic_cast<const zm::ArchModel*>(cache.back().second->model.get());
}

const char* kSmol = "SmolLM2-135M-Instruct.Q4_1.gguf";          // 9 heads, 3 KV heads, n_ff 1536
const char* kGemma = "gemma-3-270m-q4_k_m.gguf";                // 4 heads, 1 KV head
const char* kQwen = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";  // 14 / 2, n_ff 4864

#define NEED(var, name)                    \
    const zm::ArchModel* var = load(name); \
    if (!var) GTEST_SKIP() << "models/" << name << " missing"

int count(const zm::Program& p, zm::OpKind k) {
    int n = 0;
    for (const zm::Op& op : p.ops) n += op.kind() == k;
    return n;
}

std::string error_of(const zm::ArchModel* m, int n) {
    auto r = zm::shard_program(m->program(), m->config(), n);
    return r.ok() ? std::string() : r.error().message;
}

}  // namespace

TEST(Shard, OneRankIsTheSourceWithIdentityReduces) {
    NEED(m, kSmol);
    const zm::Program& P = m->program();
    auto r = zm::shard_program(P, m->config(), 1);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const zm::ShardSet& s = *r.value();
    ASSERT_EQ(s.shards.size(), 1u);
    const zm::Program& S = s.shards[0].program;
    // Two AllReduce ops a layer (after attn_out and ffn_out), nothing else added.
    EXPECT_EQ(count(S, zm::OpKind::AllReduce), 2 * m->config().n_layer);
    EXPECT_EQ(S.ops.size(), P.ops.size() + 2u * m->config().n_layer);
    EXPECT_TRUE(s.views.empty());  // every weight is the source's
    EXPECT_EQ(s.copied_bytes, 0u);
    EXPECT_EQ(S.weights(), P.weights());
    for (size_t t = 0; t < P.tensors.size(); ++t) EXPECT_EQ(S.tensors[t].width, P.tensors[t].width);
    // The names move from the projections to the reduced values.
    for (size_t i = 0; i + 1 < S.ops.size(); ++i) {
        if (S.ops[i + 1].kind() != zm::OpKind::AllReduce) continue;
        EXPECT_EQ(S.ops[i].kind(), zm::OpKind::Matmul);
        EXPECT_EQ(S.ops[i].outs[0].name, nullptr);
        const std::string n = S.ops[i + 1].outs[0].name;
        EXPECT_TRUE(n == "attn_out" || n == "ffn_out") << n;
        EXPECT_EQ(S.ops[i + 1].as<zm::AllReduceP>().n_ranks, 1);
    }
}

TEST(Shard, ThreeRanksSplitHeadsFfnAndKv) {
    NEED(m, kSmol);
    const zm::ModelConfig& c = m->config();
    auto r = zm::shard_program(m->program(), c, 3);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const zm::ShardSet& s = *r.value();
    ASSERT_EQ(s.shards.size(), 3u);
    EXPECT_EQ(s.kv_replicas, 1);
    for (const zm::Shard& sh : s.shards) {
        const zm::Program& S = sh.program;
        EXPECT_EQ(sh.config.n_head, 3);
        EXPECT_EQ(sh.config.n_head_kv, 1);
        EXPECT_EQ(S.width(S.find("q")), 3 * c.head_dim_k);
        EXPECT_EQ(S.width(S.find("k")), 1 * c.head_dim_k);
        EXPECT_EQ(S.width(S.find("attn")), 3 * c.head_dim_v);
        EXPECT_EQ(S.width(S.find("gate")), c.n_ff / 3);
        EXPECT_EQ(S.width(S.find("x")), c.n_embd);  // the residual stream is replicated
        EXPECT_EQ(S.width(S.logits), c.n_vocab);
        for (const zm::Op& op : S.ops) {
            if (op.kind() == zm::OpKind::Attention) {
                EXPECT_EQ(op.as<zm::AttentionP>().n_head, 3);
                EXPECT_FALSE(op.outs[0].validate);  // kqv_out: a third of it
            }
            if (op.kind() == zm::OpKind::AllReduce) {
                EXPECT_EQ(op.as<zm::AllReduceP>().n_ranks, 3);
            }
        }
    }
    // Column slices of attn_output and ffn_down are copies: one whole matrix of each per layer
    // over the three ranks.
    uint64_t want = 0;
    for (const zm::Weight* w : m->program().weights())
        if (w->name.find("attn_output") != std::string::npos ||
            w->name.find("ffn_down") != std::string::npos)
            want += w->bytes();
    EXPECT_EQ(s.copied_bytes, want);
    // Rank 1's Q rows start 3 heads into the source matrix: a view, not a copy.
    const zm::Weight* q0 = nullptr;
    for (const zm::Weight* w : m->program().weights())
        if (w->name == "blk.0.attn_q.weight") q0 = w;
    ASSERT_NE(q0, nullptr);
    bool found = false;
    for (const zm::Weight& v : s.views) {
        if (v.name != "blk.0.attn_q.weight[tp1/3]") continue;
        found = true;
        EXPECT_EQ(v.data, q0->data + 3 * c.head_dim_k * q0->row_bytes);
        EXPECT_EQ(v.n_rows, 3 * c.head_dim_k);
    }
    EXPECT_TRUE(found);
}

TEST(Shard, KvHeadsReplicatedWhenRanksOutnumberThem) {
    NEED(m, kGemma);
    auto r = zm::shard_program(m->program(), m->config(), 4);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value()->kv_replicas, 4);
    for (const zm::Shard& sh : r.value()->shards) {
        EXPECT_EQ(sh.config.n_head, 1);
        EXPECT_EQ(sh.config.n_head_kv, 1);
    }
}

TEST(Shard, RefusalsNameTheModelsNumbers) {
    NEED(m, kSmol);
    EXPECT_EQ(error_of(m, 2),
              "tensor parallel 2: llama model has 9 attention heads and 3 KV heads; the ranks "
              "need whole heads: n_head % N == 0 and n_head_kv % N == 0 (or N a multiple of "
              "n_head_kv, each KV head then replicated on N / n_head_kv ranks)");
    EXPECT_NE(error_of(m, 4).find("9 attention heads and 3 KV heads"), std::string::npos);
    EXPECT_EQ(error_of(m, 0), "tensor parallel 0: the rank count must be in [1, 1024]");
    const zm::ArchModel* q = load(kQwen);
    if (!q) GTEST_SKIP() << "models/" << kQwen << " missing";
    // 4864 / 2 = 2432 columns: not a multiple of Q6_K's 256-element blocks.
    EXPECT_EQ(error_of(q, 2),
              "tensor parallel 2: op 10 (matmul, layer 0): blk.0.ffn_down.weight: rank 0 would "
              "take input columns [0, 2432) of this q6_K matrix (rows of 4864), not on its "
              "256-element block boundaries");
}

TEST(Shard, OneRankRunnerIsBitIdenticalToTheCpuRunner) {
    NEED(m, kSmol);
    zm::RunnerOptions ro;
    ro.n_blocks = 4;
    ro.max_batch_tokens = 32;
    ro.max_seqs = 1;
    ro.max_seq_len = 64;
    ro.n_threads = 2;
    auto a = zm::Runner::create_cpu(*m, ro);
    auto b = zinc::cpu::create_tensor_parallel_runner(*m, ro, 1);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(b.value()->tensor_parallel(), 1);
    EXPECT_EQ(b.value()->kv_bytes(), a.value()->kv_bytes());
    const std::vector<int32_t> toks = {1, 504, 3022, 314, 260, 1789, 30, 2};
    const std::vector<int32_t> table = {0, 1};
    const int32_t nv = m->config().n_vocab;
    for (int step = 0; step < 3; ++step) {
        zm::BatchSeq s;
        s.n_tokens = step == 0 ? 6 : 1;
        s.pos0 = step == 0 ? 0 : 5 + step;
        s.block_table = table;
        s.all_logits = true;
        std::vector<int32_t> t(toks.begin() + s.pos0, toks.begin() + s.pos0 + s.n_tokens);
        std::vector<zm::BatchSeq> seqs = {s};
        zm::Batch batch{t, seqs};
        std::vector<float> la(static_cast<size_t>(s.n_tokens) * nv), lb(la.size());
        ASSERT_TRUE(a.value()->forward(batch, la.data()).ok());
        ASSERT_TRUE(b.value()->forward(batch, lb.data()).ok());
        EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
    }
}

// The marks a caller reads after the forward carry over: the embeddings value (the output norm,
// its op renumbered past the 2 AllReduce ops a layer), the hidden state and the flags.
TEST(Shard, RankProgramsKeepTheEmbeddingsAndHiddenMarks) {
    NEED(m, kSmol);
    const zm::Program& P = m->program();
    ASSERT_GE(P.embd_op, 0);
    for (int n : {1, 3}) {
        auto r = zm::shard_program(P, m->config(), n);
        ASSERT_TRUE(r.ok()) << r.error().message;
        for (const zm::Shard& sh : r.value()->shards) {
            const zm::Program& S = sh.program;
            EXPECT_EQ(S.logits, P.logits);
            EXPECT_EQ(S.embd, P.embd);
            EXPECT_EQ(S.hidden, P.hidden);
            EXPECT_EQ(S.bidirectional, P.bidirectional);
            EXPECT_EQ(S.recurrent.size(), P.recurrent.size());
            ASSERT_EQ(S.embd_op, P.embd_op + 2 * m->config().n_layer) << "N = " << n;
            EXPECT_EQ(S.ops[S.embd_op].kind(), zm::OpKind::RmsNorm);  // result_norm
            EXPECT_TRUE(S.ops[S.embd_op].writes(S.embd));
            EXPECT_EQ(S.width(S.embd), m->config().n_embd);
        }
    }
}

// Embeddings through the one-rank runner: the CPU Runner's bits (the decoders at N > 1 are
// tests/py/test_tensor_parallel.py, tp_check --embed).
TEST(Shard, OneRankRunnerEmbeddingsAreBitIdenticalToTheCpuRunner) {
    NEED(m, kSmol);
    zm::RunnerOptions ro;
    ro.n_blocks = 4;
    ro.max_batch_tokens = 32;
    ro.max_seqs = 1;
    ro.max_seq_len = 64;
    ro.n_threads = 2;
    auto a = zm::Runner::create_cpu(*m, ro);
    auto b = zinc::cpu::create_tensor_parallel_runner(*m, ro, 1);
    ASSERT_TRUE(a.ok() && b.ok());
    const std::vector<int32_t> toks = {1, 504, 3022, 314, 260, 1789, 30, 2};
    const std::vector<int32_t> table = {0, 1};
    const int64_t w = m->config().n_embd;
    for (int chunk = 0; chunk < 2; ++chunk) {  // a causal input in two chunks
        zm::BatchSeq s;
        s.n_tokens = 4;
        s.pos0 = 4 * chunk;
        s.block_table = table;
        std::vector<int32_t> t(toks.begin() + s.pos0, toks.begin() + s.pos0 + s.n_tokens);
        std::vector<zm::BatchSeq> seqs = {s};
        zm::Batch batch{t, seqs};
        std::vector<float> ha(static_cast<size_t>(s.n_tokens * w)), hb(ha.size());
        auto ra = a.value()->forward_embed(batch, ha.data());
        auto rb = b.value()->forward_embed(batch, hb.data());
        ASSERT_TRUE(ra.ok()) << ra.error().message;
        ASSERT_TRUE(rb.ok()) << rb.error().message;
        EXPECT_EQ(0, std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(float)));
    }
    // Hidden rows (Batch::hidden_out) are not returned by this runner: an error, not ignored.
    std::vector<int32_t> t = {1};
    zm::BatchSeq s;
    s.n_tokens = 1;
    s.pos0 = 0;
    s.block_table = table;
    std::vector<zm::BatchSeq> seqs = {s};
    std::vector<float> logits(static_cast<size_t>(m->config().n_vocab)), hidden(w);
    zm::Batch batch{t, seqs};
    batch.hidden_out = hidden.data();
    EXPECT_EQ(b.value()->hidden_width(), 0);
    auto r = b.value()->forward(batch, logits.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "forward: the tensor-parallel runner does not return hidden states "
              "(Batch::hidden_out)");
}

TEST(Shard, TensorParallelRunnerRefusesWhatTheTransformRefuses) {
    NEED(m, kSmol);
    zm::RunnerOptions ro;
    ro.n_blocks = 4;
    auto r = zinc::cpu::create_tensor_parallel_runner(*m, ro, 2);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("9 attention heads and 3 KV heads"), std::string::npos);
}

// A device tier's fusions see through the one-rank AllReduce: the same fused steps as the
// source, and the reduced name (attn_out / ffn_out) is among the hidden ones.
TEST(Shard, OneRankFusesLikeTheSource) {
    NEED(m, kSmol);
    auto r = zm::shard_program(m->program(), m->config(), 1);
    ASSERT_TRUE(r.ok());
    zm::FusionOptions fo;
    fo.matmul_add = true;
    fo.add_rms_norm = true;
    const auto a = zm::schedule(m->program(), fo);
    const auto b = zm::schedule(r.value()->shards[0].program, fo);
    ASSERT_EQ(a.size(), b.size());
    int fused = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].fused.size(), b[i].fused.size()) << "step " << i;
        if (b[i].fused.empty()) continue;
        ++fused;
        bool named = false;
        for (const zm::Output& o : b[i].hidden)
            named |= std::string(o.name) == "attn_out" || std::string(o.name) == "ffn_out";
        EXPECT_TRUE(named) << "step " << i;
    }
    EXPECT_EQ(fused, 2 * m->config().n_layer);
}
