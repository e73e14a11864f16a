// tests/unit/model/runner_test.cpp — the CPU Runner (model/batch.h) on the real models.
//
// Batch invariance, bit for bit: the logits of a sequence's rows are identical whether the
// sequence runs alone or in one batch with others (prefill chunks and decodes mixed), whatever
// physical blocks (shuffled, non-contiguous) and block size its KV lives in, and equal to the
// single-sequence Context's. This is what lets the engine promise that a request's greedy tokens
// do not depend on what else is batched. Also: the Runner's input validation and copy_block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/model.h"

namespace zm = zinc::model;

namespace {

struct Loaded {
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

// `name` under models/, or an absolute path.
const Loaded& load(const std::string& name) {
    static std::vector<std::pair<std::string, std::unique_ptr<Loaded>>> cache;
    for (auto& [n, l] : cache)
        if (n == name) return *l;
    auto l = std::make_unique<Loaded>();
    auto f = zinc::gguf::File::open(
        name.starts_with("/") ? name : std::string(ZINC_SOURCE_DIR) + "/models/" + name);
    if (f.ok()) {
        l->file = std::move(f.value());
        auto m = zm::Model::load(*l->file, {});
        if (m.ok()) l->model = std::move(m.value());
    }
    cache.emplace_back(name, std::move(l));
    return *cache.back().second;
}

std::vector<int32_t> tokens_of(int seed, int n, int32_t n_vocab) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::uniform_int_distribution<int32_t> d(10, n_vocab - 1);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = d(rng);
    return t;
}

struct Seq {
    std::vector<int32_t> tokens;  // prompt, then one decode token
    std::vector<int32_t> table;   // physical blocks
};

// Rows of logits of one forward, copied out.
using Rows = std::vector<std::vector<float>>;

Rows run(zm::Runner& r, const std::vector<const Seq*>& seqs, const std::vector<int>& pos0,
         const std::vector<int>& n_tok, int32_t n_vocab, bool all_logits) {
    std::vector<int32_t> toks;
    std::vector<zm::BatchSeq> bs;
    int n_out = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
        zm::BatchSeq b;
        b.row0 = static_cast<int32_t>(toks.size());
        b.n_tokens = n_tok[i];
        b.pos0 = pos0[i];
        b.block_table = seqs[i]->table;
        b.all_logits = all_logits;
        toks.insert(toks.end(), seqs[i]->tokens.begin() + pos0[i],
                    seqs[i]->tokens.begin() + pos0[i] + n_tok[i]);
        n_out += all_logits ? n_tok[i] : 1;
        bs.push_back(b);
    }
    std::vector<float> logits(static_cast<size_t>(n_out) * n_vocab);
    auto res = r.forward(zm::Batch{toks, bs}, logits.data());
    EXPECT_TRUE(res.ok()) << (res.ok() ? "" : res.error().message);
    Rows out;
    for (int i = 0; i < n_out; ++i) {
        out.emplace_back(logits.begin() + static_cast<ptrdiff_t>(i) * n_vocab,
                         logits.begin() + static_cast<ptrdiff_t>(i + 1) * n_vocab);
    }
    return out;
}

std::unique_ptr<zm::Runner> make_runner(const zm::Model& m, int block_size, int n_blocks) {
    zm::RunnerOptions o;
    o.n_blocks = n_blocks;
    o.block_size = block_size;
    o.max_batch_tokens = 256;
    o.max_seqs = 8;
    o.max_seq_len = 256;
    o.n_threads = 2;
    auto r = zm::Runner::create_cpu(m, o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::move(r.value()) : nullptr;
}

void batched_equals_alone(const std::string& model_name) {
    const Loaded& L = load(model_name);
    ASSERT_TRUE(L.model) << model_name << " missing";
    const zm::Model& m = *L.model;
    const int32_t nv = m.n_vocab();
    const int bs = 8, n_blocks = 64;
    // Five sequences; their blocks are a shuffled partition of the pool.
    const std::vector<int> lens = {1, 9, 17, 24, 40};
    std::vector<int32_t> perm(n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(5));
    std::vector<Seq> seqs(lens.size());
    size_t next = 0;
    for (size_t i = 0; i < lens.size(); ++i) {
        seqs[i].tokens = tokens_of(static_cast<int>(i) + 1, lens[i] + 1, nv);
        const int need = (lens[i] + 1 + bs - 1) / bs;
        seqs[i].table.assign(perm.begin() + next, perm.begin() + next + need);
        next += need;
    }
    // Alone: each sequence its prompt (all rows' logits), then its decode token.
    auto alone_r = make_runner(m, bs, n_blocks);
    std::vector<Rows> alone_prefill, alone_decode;
    for (const Seq& s : seqs) {
        const int n = static_cast<int>(s.tokens.size()) - 1;
        alone_prefill.push_back(run(*alone_r, {&s}, {0}, {n}, nv, true));
        alone_decode.push_back(run(*alone_r, {&s}, {n}, {1}, nv, false));
    }
    // Batched: a mixed step (seqs 0-1 prefill whole, 2-4 prefill all but their last 3 prompt
    // tokens), then a mixed step (2-4 finish their prompts while 0-1 decode), then all decode.
    auto batch_r = make_runner(m, bs, n_blocks);
    std::vector<const Seq*> all;
    for (const Seq& s : seqs) all.push_back(&s);
    std::vector<int> p0(seqs.size(), 0), nt(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
        const int n = static_cast<int>(seqs[i].tokens.size()) - 1;
        nt[i] = i < 2 ? n : n - 3;
    }
    const Rows step1 = run(*batch_r, all, p0, nt, nv, true);
    std::vector<const Seq*> s2 = {&seqs[2], &seqs[3], &seqs[4], &seqs[0], &seqs[1]};
    std::vector<int> p2, n2;
    for (size_t k = 0; k < s2.size(); ++k) {
        const int n = static_cast<int>(s2[k]->tokens.size()) - 1;
        p2.push_back(k < 3 ? n - 3 : n);
        n2.push_back(k < 3 ? 3 : 1);
    }
    const Rows step2 = run(*batch_r, s2, p2, n2, nv, true);

    size_t row = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
        for (int t = 0; t < nt[i]; ++t, ++row) {
            ASSERT_EQ(
                0, std::memcmp(step1[row].data(), alone_prefill[i][t].data(), sizeof(float) * nv))
                << model_name << " seq " << i << " prefill row " << t;
        }
    }
    row = 0;
    for (size_t k = 0; k < s2.size(); ++k) {
        const size_t i = k < 3 ? k + 2 : k - 3;
        for (int t = 0; t < n2[k]; ++t, ++row) {
            const std::vector<float>& want =
                k < 3 ? alone_prefill[i][static_cast<size_t>(p2[k] + t)] : alone_decode[i][0];
            ASSERT_EQ(0, std::memcmp(step2[row].data(), want.data(), sizeof(float) * nv))
                << model_name << " seq " << i << " step 2 row " << t;
        }
    }

    // And the Context (contiguous cache, another block size) gives the same bits.
    zm::ContextOptions co;
    co.n_ctx = 128;
    co.n_threads = 2;
    auto ctx = zm::Context::create(m, co);
    ASSERT_TRUE(ctx.ok());
    const Seq& s = seqs[4];
    const int n = static_cast<int>(s.tokens.size()) - 1;
    ASSERT_TRUE(ctx.value()->eval(std::span<const int32_t>(s.tokens.data(), n), true).ok());
    for (int t = 0; t < n; ++t) {
        ASSERT_EQ(
            0, std::memcmp(ctx.value()->logits(t), alone_prefill[4][t].data(), sizeof(float) * nv))
            << model_name << " context row " << t;
    }
}

}  // namespace

TEST(CpuRunner, BatchedEqualsAloneBitForBitSmolLM2) {
    batched_equals_alone("SmolLM2-135M-Instruct.Q4_1.gguf");
}

TEST(CpuRunner, BatchedEqualsAloneBitForBitGemma3) {
    batched_equals_alone("gemma-3-270m-q4_k_m.gguf");
}

// Any GGUF given by ZINC_TEST_MODEL (absolute path), e.g. the synthetic MoE model that
// tests/py/test_moe.py writes and runs this test on.
TEST(CpuRunner, BatchedEqualsAloneBitForBitEnvModel) {
    const char* path = std::getenv("ZINC_TEST_MODEL");
    if (!path || !*path) GTEST_SKIP() << "ZINC_TEST_MODEL not set (tests/py/test_moe.py sets it)";
    batched_equals_alone(path);
}

TEST(CpuRunner, CopyBlockCopiesEveryLayer) {
    const Loaded& L = load("SmolLM2-135M-Instruct.Q4_1.gguf");
    ASSERT_TRUE(L.model);
    const zm::Model& m = *L.model;
    const int32_t nv = m.n_vocab();
    auto r = make_runner(m, 4, 16);
    // Sequence A fills blocks {3, 5} with 8 tokens; copy both to {9, 2}; B = A's table after
    // the copy must give A's logits for a 9th token.
    Seq a{tokens_of(3, 9, nv), {3, 5, 7}};
    run(*r, {&a}, {0}, {8}, nv, false);
    const Rows want = run(*r, {&a}, {8}, {1}, nv, false);
    r->copy_block(3, 9);
    r->copy_block(5, 2);
    Seq b{a.tokens, {9, 2, 11}};
    const Rows got = run(*r, {&b}, {8}, {1}, nv, false);
    ASSERT_EQ(0, std::memcmp(got[0].data(), want[0].data(), sizeof(float) * nv));
}

TEST(CpuRunner, RejectsBadBatches) {
    const Loaded& L = load("SmolLM2-135M-Instruct.Q4_1.gguf");
    ASSERT_TRUE(L.model);
    const zm::Model& m = *L.model;
    auto r = make_runner(m, 16, 4);
    std::vector<float> logits(static_cast<size_t>(m.n_vocab()) * 4);
    const std::vector<int32_t> table = {0, 1};
    auto err = [&](std::vector<int32_t> toks, std::vector<zm::BatchSeq> seqs) {
        auto res = r->forward(zm::Batch{toks, seqs}, logits.data());
        return res.ok() ? std::string("ok") : res.error().message;
    };
    zm::BatchSeq s;
    s.n_tokens = 2;
    s.block_table = table;
    EXPECT_EQ(err({1, 2}, {s}), "ok");
    EXPECT_NE(err({1, m.n_vocab()}, {s}).find("token id"), std::string::npos);
    EXPECT_NE(err({}, {}).find("empty batch"), std::string::npos);
    EXPECT_NE(err(std::vector<int32_t>(257, 1), {s}).find("max_batch_tokens"), std::string::npos);
    zm::BatchSeq far = s;
    far.pos0 = 30;  // positions 30, 31 need 2 blocks: fine; 33 needs 3
    EXPECT_EQ(err({1, 2}, {far}), "ok");
    far.pos0 = 32;
    EXPECT_NE(err({1, 2}, {far}).find("block table has 2 blocks"), std::string::npos);
    far.pos0 = 255;
    EXPECT_NE(err({1, 2}, {far}).find("max_seq_len"), std::string::npos);
    const std::vector<int32_t> bad_table = {0, 7};
    zm::BatchSeq bad = s;
    bad.pos0 = 16;
    bad.block_table = bad_table;
    EXPECT_NE(err({1, 2}, {bad}).find("block id 7"), std::string::npos);
    zm::BatchSeq gap = s;
    gap.row0 = 1;
    EXPECT_NE(err({1, 2, 3}, {gap}).find("do not follow"), std::string::npos);
    EXPECT_NE(err({1, 2, 3}, {s}).find("cover 2 of 3 rows"), std::string::npos);
    std::vector<zm::BatchSeq> nine(9, s);
    for (int i = 0; i < 9; ++i) nine[i].row0 = 2 * i;
    EXPECT_NE(err(std::vector<int32_t>(18, 1), nine).find("max_seqs"), std::string::npos);
}

TEST(CpuRunner, CreateRejectsBadOptions) {
    const Loaded& L = load("SmolLM2-135M-Instruct.Q4_1.gguf");
    ASSERT_TRUE(L.model);
    zm::RunnerOptions o;
    o.n_blocks = 0;
    EXPECT_FALSE(zm::Runner::create_cpu(*L.model, o).ok());
    o.n_blocks = 4;
    o.block_size = 0;
    EXPECT_FALSE(zm::Runner::create_cpu(*L.model, o).ok());
    o.block_size = 16;
    o.max_seqs = 0;
    EXPECT_FALSE(zm::Runner::create_cpu(*L.model, o).ok());
    o.max_seqs = 4;
    o.n_threads = 1;
    auto r = zm::Runner::create_cpu(*L.model, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value()->tier(), "cpu");
    EXPECT_EQ(r.value()->kv_bytes(), L.model->kv_cache_bytes(4 * 16));
}
