// tests/unit/engine/hybrid_engine_test.cpp — the qwen35 Gated DeltaNet hybrid through the
// Context, the CPU Runner and the engine: the per-sequence recurrent state (one slot per
// running sequence) gives each request the tokens it gets alone, under batching with sequences
// at different positions, chunked prefill, preemption (recompute from position 0) and with the
// prefix cache requested (disabled for recurrent models, counted as prefix_miss_disabled); bad
// slot use is a precise error. The model is a tiny qwen35 GGUF built in memory.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "collector.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/arch_model.h"
#include "model/batch.h"
#include "model/model.h"
#include "quant/quant.h"
#include "tiny_qwen35.h"

namespace ze = zinc::engine;
namespace zm = zinc::model;
using zinc::gguf::OwnedValue;
using zinc::quant::GgmlType;
using namespace zinc_test::tiny_qwen35;

namespace {

struct Tiny {
    std::vector<uint8_t> bytes;
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

const Tiny& tiny() {
    static Tiny* t = [] {
        auto* x = new Tiny;
        x->bytes = build_qwen35();
        auto f = zinc::gguf::File::from_buffer(x->bytes.data(), x->bytes.size(), "qwen35.gguf");
        EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
        x->file = std::move(f.value());
        auto m = zm::Model::load(*x->file, {});
        EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
        if (m.ok()) x->model = std::move(m.value());
        return x;
    }();
    return *t;
}

std::vector<int32_t> prompt_of(int seed, int n) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = static_cast<int32_t>(rng() % kVocab);
    return p;
}

int32_t argmax(const float* l) {
    return static_cast<int32_t>(std::max_element(l, l + kVocab) - l);
}

std::vector<int32_t> context_greedy(const std::vector<int32_t>& prompt, int n_gen, int n_batch) {
    zm::ContextOptions co;
    co.n_ctx = 512;
    co.n_threads = 2;
    co.n_batch = n_batch;
    auto ctx = zm::Context::create(*tiny().model, co);
    EXPECT_TRUE(ctx.ok());
    zm::Context& c = *ctx.value();
    EXPECT_TRUE(c.eval(prompt).ok());
    std::vector<int32_t> out;
    for (int i = 0; i < n_gen; ++i) {
        out.push_back(argmax(c.logits(-1)));
        if (i + 1 < n_gen) {
            EXPECT_TRUE(c.eval(std::span<const int32_t>(&out.back(), 1)).ok());
        }
    }
    return out;
}

using zinc::engine::test::Collector;

std::vector<std::vector<int32_t>> run_all(const ze::EngineOptions& o,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          int n_gen, ze::EngineStats* stats,
                                          std::vector<ze::FinishReason>* reasons = nullptr) {
    auto eng = ze::Engine::create(*tiny().model, o);
    EXPECT_TRUE(eng.ok()) << (eng.ok() ? "" : eng.error().message);
    if (!eng.ok()) return {};
    std::vector<std::unique_ptr<Collector>> cs;
    for (const auto& p : prompts) {
        cs.push_back(std::make_unique<Collector>());
        ze::RequestParams rp;
        rp.prompt = p;
        rp.max_tokens = n_gen;
        rp.ignore_eos = true;
        rp.sampling.temperature = 0.0f;
        EXPECT_TRUE(
            std::holds_alternative<ze::RequestId>(eng.value()->submit(rp, cs.back()->sink())));
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& c : cs) {
        EXPECT_TRUE(c->wait());
        if (reasons) {
            reasons->push_back(c->reason);
        } else {
            EXPECT_EQ(c->reason, ze::FinishReason::Length);
        }
        out.push_back(c->ids);
    }
    for (int i = 0; i < 200 && eng.value()->stats().slots_busy > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (stats) *stats = eng.value()->stats();
    return out;
}

// Mixed lengths, some longer than a 64-token DeltaNet chunk; pairs share a prefix.
std::vector<std::vector<int32_t>> prompts() {
    std::vector<std::vector<int32_t>> ps;
    const auto shared = prompt_of(99, 40);
    for (int i = 0; i < 6; ++i) {
        auto p = prompt_of(10 + i, 3 + 23 * i);
        if (i % 2 == 0) p.insert(p.begin(), shared.begin(), shared.end());
        ps.push_back(p);
    }
    return ps;
}

std::string load_error(const Bad& bad) {
    const std::vector<uint8_t> bytes = build_qwen35(bad);
    auto f = zinc::gguf::File::from_buffer(bytes.data(), bytes.size(), "bad.gguf");
    if (!f.ok()) return f.error().message;
    auto m = zm::Model::load(*f.value(), {});
    return m.ok() ? std::string("<loaded>") : m.error().message;
}

}  // namespace

TEST(HybridEngine, LoadErrorsNameTheKey) {
    Bad b;
    b.omit_key = "ssm.conv_kernel";
    EXPECT_EQ(load_error(b),
              "bad.gguf: missing metadata key qwen35.ssm.conv_kernel (integer, "
              "required for architecture qwen35)");
    b = Bad{};
    b.inner_size = 48;
    EXPECT_EQ(load_error(b),
              "bad.gguf: metadata qwen35.ssm.inner_size = 48, expected "
              "ssm.time_step_rank * ssm.state_size = 64 (head_v_dim = head_k_dim, "
              "as llama.cpp requires)");
    b = Bad{};
    b.n_v = 3;
    b.inner_size = 48;
    EXPECT_EQ(load_error(b),
              "bad.gguf: metadata qwen35.ssm.time_step_rank = 3, expected a "
              "multiple of qwen35.ssm.group_count (2)");
    b = Bad{};
    b.sections = {1, 1, 1, 1};  // pair 3 is in the 4th section: rotated by position 0 for text
    EXPECT_EQ(load_error(b),
              "bad.gguf: metadata qwen35.rope.dimension_sections puts rotary pair "
              "3 in the 4th section (position 0 for text): not supported");
    b = Bad{};
    b.sections = {4, 4, 4, 0};
    EXPECT_EQ(load_error(b),
              "bad.gguf: metadata qwen35.rope.dimension_sections: sum 12, expected "
              "in [1, rope.dimension_count / 2 = 4]");
}

TEST(HybridEngine, OpListOfADeltaNetAndAnAttentionLayer) {
    const auto* am = dynamic_cast<const zm::ArchModel*>(tiny().model.get());
    ASSERT_TRUE(am);
    const zm::Program& p = am->program();
    auto kinds = [&](int il) {
        std::string k;
        for (const zm::Op& op : p.ops)
            if (op.il == il) k += std::string(zm::op_kind_name(op.kind())) + " ";
        return k;
    };
    EXPECT_EQ(kinds(0),
              "rms_norm matmul matmul ssm_conv delta_net gated_rms_norm matmul add rms_norm "
              "matmul glu matmul add ");
    EXPECT_EQ(kinds(3),
              "rms_norm matmul split_gate rope_kv attention sigmoid_mul matmul keep_rows add "
              "rms_norm matmul glu matmul add ");
    ASSERT_EQ(p.recurrent.size(), 3u);  // layers 0, 1, 2
    EXPECT_EQ(p.recurrent[2].conv_floats, 3 * 128);
    EXPECT_EQ(p.recurrent[2].ssm_floats, 4 * 16 * 16);
}

TEST(HybridEngine, StateBytesAndChunkedPrefillBitIdentical) {
    const Tiny& t = tiny();
    ASSERT_TRUE(t.model);
    // 3 DeltaNet layers: conv (3 x 128) + S (4 heads x 16 x 16) floats each
    EXPECT_EQ(t.model->recurrent_state_bytes(), 3u * (3 * 128 + 4 * 16 * 16) * sizeof(float));
    const auto p = prompt_of(1, 150);
    EXPECT_EQ(context_greedy(p, 16, 512), context_greedy(p, 16, 7));
}

TEST(HybridEngine, ContextRefusesToRewindTheState) {
    zm::ContextOptions co;
    co.n_ctx = 64;
    auto ctx = zm::Context::create(*tiny().model, co);
    ASSERT_TRUE(ctx.ok());
    zm::Context& c = *ctx.value();
    const auto p = prompt_of(2, 10);
    ASSERT_TRUE(c.eval(p).ok());
    std::vector<float> first(c.logits(-1), c.logits(-1) + kVocab);
    c.truncate(5);
    auto r = c.eval(std::span<const int32_t>(p.data() + 5, 5));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("recurrent state of slot 0 is at position 10, the batch "
                                     "starts at 5"),
              std::string::npos)
        << r.error().message;
    c.truncate(0);
    ASSERT_TRUE(c.eval(p).ok());
    EXPECT_EQ(std::vector<float>(c.logits(-1), c.logits(-1) + kVocab), first);
}

TEST(HybridEngine, RunnerSlotErrors) {
    zm::RunnerOptions ro;
    ro.n_blocks = 8;
    ro.block_size = 16;
    ro.max_seqs = 2;
    ro.max_batch_tokens = 16;
    ro.max_seq_len = 128;
    auto runner = zm::Runner::create_cpu(*tiny().model, ro);
    ASSERT_TRUE(runner.ok());
    EXPECT_EQ(runner.value()->options().n_state_slots, 2);
    EXPECT_GT(runner.value()->state_bytes(), 0u);
    const std::vector<int32_t> toks = {1, 2, 3, 4};
    const std::vector<int32_t> t0 = {0}, t1 = {1};
    std::vector<float> logits(2 * kVocab);
    auto run = [&](int slot_a, int slot_b, int pos_b) {
        zm::BatchSeq s[2];
        s[0].row0 = 0, s[0].n_tokens = 2, s[0].pos0 = 0, s[0].block_table = t0;
        s[0].state_slot = slot_a;
        s[1].row0 = 2, s[1].n_tokens = 2, s[1].pos0 = pos_b, s[1].block_table = t1;
        s[1].state_slot = slot_b;
        return runner.value()->forward({toks, std::span<const zm::BatchSeq>(s, 2)}, logits.data());
    };
    auto msg = [](const zinc::Result<void>& r) {
        return r.ok() ? std::string() : r.error().message;
    };
    EXPECT_NE(msg(run(-1, 1, 0)).find("state slot -1 out of range [0, 2)"), std::string::npos);
    EXPECT_NE(msg(run(1, 1, 0)).find("state slot 1 is also sequence 0's"), std::string::npos);
    EXPECT_NE(msg(run(0, 1, 3)).find("slot 1 is at position 0, the batch starts at 3"),
              std::string::npos);
    EXPECT_TRUE(run(0, 1, 0).ok());
    EXPECT_TRUE(run(1, 0, 2).ok());  // slot 1 restarts at 0, slot 0 continues at 2
}

TEST(HybridEngine, BatchedInterleavedPreemptedEqualAlone) {
    const auto ps = prompts();
    const int n_gen = 12;
    std::vector<std::vector<int32_t>> expect;
    for (const auto& p : ps) expect.push_back(context_greedy(p, n_gen, 512));
    ze::EngineOptions o;
    o.n_parallel = 4;  // 6 requests on 4 slots: slots are reused
    o.n_ctx = 256;
    o.block_size = 16;
    o.max_batch_tokens = 48;  // chunked prefill next to decodes at other positions
    o.n_threads = 2;
    o.prefix_cache = true;  // requested; off for a recurrent model
    ze::EngineStats s;
    EXPECT_EQ(run_all(o, ps, n_gen, &s), expect);
    EXPECT_EQ(s.prefix_hits_blocks, 0u);
    EXPECT_GT(s.prefix_miss_disabled, 0u);
    // A pool too small for all: preemption recomputes the state from position 0.
    o.n_ctx = 160;
    o.n_kv_blocks = 12;  // one full sequence (10 blocks) + 2
    ze::EngineStats s2;
    EXPECT_EQ(run_all(o, ps, n_gen, &s2), expect);
    EXPECT_GT(s2.preemptions, 0u);
}

// ---- speculative decoding: the recurrent state rewound to the accepted boundary ----

namespace {

// Prompts with repetition (lookup finds drafts in them; the random model rejects most), and
// a random one, of mixed lengths.
std::vector<std::vector<int32_t>> spec_prompts() {
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < 5; ++i) {
        const auto unit = prompt_of(40 + i, 3 + i);
        std::vector<int32_t> p;
        for (int r = 0; r < 4 + i; ++r) p.insert(p.end(), unit.begin(), unit.end());
        ps.push_back(p);
    }
    ps.push_back(prompt_of(50, 30));
    return ps;
}

ze::EngineOptions spec_engine(int n_parallel) {
    ze::EngineOptions o;
    o.n_parallel = n_parallel;
    o.n_ctx = 128;
    o.block_size = 8;  // rejected drafts cross block boundaries
    o.max_batch_tokens = 64;
    o.n_threads = 2;
    o.drafter = ze::make_lookup_drafter();
    o.spec_max = 6;
    return o;
}

void expect_spec_exact(const ze::EngineOptions& o, const char* what) {
    const auto ps = spec_prompts();
    const int n_gen = 24;
    ze::EngineStats s;
    const auto got = run_all(o, ps, n_gen, &s);
    ASSERT_EQ(got.size(), ps.size()) << what;
    for (size_t i = 0; i < ps.size(); ++i)
        EXPECT_EQ(got[i], context_greedy(ps[i], n_gen, 512)) << what << ", request " << i;
    EXPECT_EQ(s.spec_drafter, "lookup");
    EXPECT_GT(s.spec_steps, 0u) << what;
    // Rejected drafts (the state had to go back) and accepted ones (it kept some draft rows).
    EXPECT_GT(s.spec_drafted, s.spec_accepted) << what;
    EXPECT_GT(s.spec_accepted, 0u) << what;
    EXPECT_EQ(s.kv_blocks_used, 0) << what;
}

}  // namespace

TEST(HybridSpec, LookupAloneBatchedPreemptedEqualsContext) {
    ASSERT_TRUE(tiny().model);
    expect_spec_exact(spec_engine(1), "alone");
    expect_spec_exact(spec_engine(4), "4 parallel");
    ze::EngineOptions o = spec_engine(4);
    o.n_ctx = 96;
    o.n_kv_blocks = 14;  // one full sequence (12 blocks) + 2: preemption by recompute
    ze::EngineStats s;
    const auto ps = spec_prompts();
    const auto got = run_all(o, ps, 24, &s);
    ASSERT_EQ(got.size(), ps.size());
    for (size_t i = 0; i < ps.size(); ++i)
        EXPECT_EQ(got[i], context_greedy(ps[i], 24, 512)) << "preempted, request " << i;
    EXPECT_GT(s.preemptions, 0u);
    EXPECT_GT(s.spec_drafted, s.spec_accepted);
}

// The control: the same requests with the rollback skipped (SpecFault::NoStateRollback) do not
// give the plain tokens: the first rejected draft leaves the state past the accepted boundary,
// and the next step is refused.
TEST(HybridSpec, WithoutTheRollbackRequestsFail) {
    ASSERT_TRUE(tiny().model);
    ze::EngineOptions o = spec_engine(4);
    o.spec_fault = ze::SpecFault::NoStateRollback;
    const auto ps = spec_prompts();
    std::vector<ze::FinishReason> reasons;
    const auto got = run_all(o, ps, 24, nullptr, &reasons);
    int n_error = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
        if (reasons[i] != ze::FinishReason::Error) continue;
        ++n_error;
        EXPECT_NE(got[i], context_greedy(ps[i], 24, 512));
    }
    EXPECT_GT(n_error, 0);
}

// The Context (zinc run --spec): an all-logits eval within n_state_checkpoints keeps the state
// of each row; truncate() into it gives bit for bit the logits of never having run the rest.
TEST(HybridSpec, ContextTruncatesIntoTheDraft) {
    const auto p = prompt_of(3, 12);
    zm::ContextOptions co;
    co.n_ctx = 64;
    co.n_threads = 2;
    auto plain = zm::Context::create(*tiny().model, co);
    co.n_state_checkpoints = 5;
    auto spec = zm::Context::create(*tiny().model, co);
    ASSERT_TRUE(plain.ok() && spec.ok());
    zm::Context& a = *plain.value();
    zm::Context& b = *spec.value();
    const std::vector<int32_t> draft = {p[8], 5, 6, 7, 8};  // the pending token and 4 drafts
    ASSERT_TRUE(a.eval(std::span<const int32_t>(p.data(), 8)).ok());
    ASSERT_TRUE(b.eval(std::span<const int32_t>(p.data(), 8)).ok());
    ASSERT_TRUE(a.eval(std::span<const int32_t>(draft.data(), 2)).ok());  // kept: 2 of 5 rows
    ASSERT_TRUE(b.eval(draft, true).ok());
    b.truncate(10);
    const int32_t next[1] = {9};
    ASSERT_TRUE(a.eval(next).ok());
    ASSERT_TRUE(b.eval(next).ok());
    EXPECT_EQ(std::vector<float>(a.logits(-1), a.logits(-1) + kVocab),
              std::vector<float>(b.logits(-1), b.logits(-1) + kVocab));
    // Truncating to n_past is a no-op.
    ASSERT_TRUE(b.eval(draft, true).ok());
    b.truncate(16);
    ASSERT_TRUE(b.eval(next).ok());
    // Before the kept rows: refused at the next eval, saying what was kept.
    ASSERT_TRUE(b.eval(draft, true).ok());  // positions 17..21
    b.truncate(16);
    auto r = b.eval(next);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "eval: recurrent state of slot 0: position 16 is not checkpointed (the state is at "
              "22, checkpoints cover (17, 22]; a recurrent state cannot be rewound further)");
    b.truncate(0);  // always possible: the state restarts
    ASSERT_TRUE(b.eval(p).ok());
}

TEST(HybridSpec, RunnerKeepStatesBounds) {
    zm::RunnerOptions ro;
    ro.n_blocks = 4;
    ro.block_size = 16;
    ro.max_seqs = 1;
    ro.max_batch_tokens = 16;
    ro.max_seq_len = 64;
    ro.n_state_checkpoints = 3;
    auto runner = zm::Runner::create_cpu(*tiny().model, ro);
    ASSERT_TRUE(runner.ok());
    zm::Runner& rn = *runner.value();
    EXPECT_EQ(rn.state_checkpoints(), 3);
    const std::vector<int32_t> toks = {1, 2, 3, 4}, t0 = {0};
    std::vector<float> logits(4 * kVocab);
    zm::BatchSeq s;
    s.n_tokens = 4, s.block_table = t0, s.state_slot = 0, s.keep_states = true;
    auto r = rn.forward({toks, std::span<const zm::BatchSeq>(&s, 1)}, logits.data());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "forward: sequence 0: keep_states for 4 rows, the state pool keeps at most 3 "
              "(RunnerOptions::n_state_checkpoints)");
    s.n_tokens = 3;
    ASSERT_TRUE(
        rn.forward({std::span<const int32_t>(toks.data(), 3), std::span<const zm::BatchSeq>(&s, 1)},
                   logits.data())
            .ok());
    EXPECT_TRUE(rn.rewind_state(0, 3).ok());  // where it is
    EXPECT_TRUE(rn.rewind_state(0, 1).ok());
    EXPECT_FALSE(rn.rewind_state(0, 2).ok());  // rows after the rewind were dropped
    EXPECT_EQ(rn.rewind_state(5, 1).error().message, "rewind_state: slot 5 out of range [0, 1)");
    // The engine refuses a tier without checkpoints for speculation on a hybrid model.
    ze::EngineOptions o = spec_engine(2);
    o.make_runner = [](const zm::RunnerOptions& x) -> zinc::Result<std::unique_ptr<zm::Runner>> {
        zm::RunnerOptions y = x;
        y.n_state_checkpoints = 0;
        return zm::Runner::create_cpu(*tiny().model, y);
    };
    auto e = ze::Engine::create(*tiny().model, o);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().message,
              "engine: speculative decoding on qwen35 (recurrent state) needs the state kept at "
              "each of a draft's 7 rows (1 + spec_max); this cpu tier Runner keeps 0 (the CPU "
              "and CUDA tiers' Runners keep RunnerOptions::n_state_checkpoints)");
}

TEST(HybridEngine, EmbeddingsRefused) {
    ASSERT_TRUE(tiny().model);
    ze::EngineOptions o;
    o.n_parallel = 1;
    o.n_ctx = 64;
    o.n_threads = 1;
    auto e = ze::Engine::create(*tiny().model, o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    auto r = e.value()->submit_embedding({{1, 2, 3}, zinc::model::Pooling::Mean, ""},
                                         [](ze::EmbeddingResult) {});
    ASSERT_TRUE(std::holds_alternative<ze::SubmitError>(r));
    EXPECT_EQ(std::get<ze::SubmitError>(r).kind, ze::SubmitErrorKind::InvalidRequest);
    EXPECT_NE(std::get<ze::SubmitError>(r).message.find("recurrent state"), std::string::npos);
}
