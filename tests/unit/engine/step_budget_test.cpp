// tests/unit/engine/step_budget_test.cpp — the StepBudgeter's cost model and budget, and the
// Scheduler's decodes-first composition, admission without head-of-line blocking and
// per-step re-ordering (engine/scheduler.h), with policies written for the test.
#include "engine/step_budget.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "engine/scheduler.h"

namespace ze = zinc::engine;

TEST(StepBudget, OffIsMaxBatchTokens) {
    ze::StepBudgeter b({0, 512, 16, 0.9});
    EXPECT_EQ(b.budget(3), 512);
    b.observe(50, 4, 100);
    EXPECT_EQ(b.budget(3), 512);
}

TEST(StepBudget, UnfittedIsMaxBatchTokens) {
    ze::StepBudgeter b({20, 512, 16, 0.9});
    EXPECT_FALSE(b.fitted());
    EXPECT_EQ(b.budget(0), 512);
}

TEST(StepBudget, FitsALinearCostAndInvertsIt) {
    ze::StepBudgeter b({12, 512, 16, 0.9});
    // step_ms = 2 + 0.1 * rows exactly.
    for (int rows : {4, 64, 200, 8, 300, 100, 30}) b.observe(2 + 0.1 * rows, 4, rows - 4);
    EXPECT_NEAR(b.intercept_ms(), 2.0, 1e-6);
    EXPECT_NEAR(b.ms_per_row(), 0.1, 1e-9);
    EXPECT_EQ(b.budget(4), 100);  // (12 - 2) / 0.1
}

TEST(StepBudget, ClampsToDecodesPlusMinChunkAndToTheCap) {
    ze::StepBudgeter b({5, 256, 16, 0.9});
    for (int rows : {10, 100, 50}) b.observe(1 + 1.0 * rows, rows, 0);  // 1 ms per row
    EXPECT_EQ(b.budget(0), 16);     // 4 rows would fit; min_chunk 16
    EXPECT_EQ(b.budget(40), 56);    // every decode plus min_chunk, whatever the target
    EXPECT_EQ(b.budget(300), 256);  // never past the hard cap
    ze::StepBudgeter fast({1000, 256, 16, 0.9});
    for (int rows : {10, 100, 50}) fast.observe(0.01 * rows, rows, 0);
    EXPECT_EQ(fast.budget(0), 256);
}

TEST(StepBudget, ProportionalWithoutSpreadAndFollowsChange) {
    ze::StepBudgeter b({30, 4096, 16, 0.5});
    for (int i = 0; i < 5; ++i) b.observe(20, 100, 0);  // one row count only: 0.2 ms/row
    EXPECT_DOUBLE_EQ(b.intercept_ms(), 0);
    EXPECT_NEAR(b.ms_per_row(), 0.2, 1e-12);
    EXPECT_EQ(b.budget(0), 150);
    for (int i = 0; i < 40; ++i) b.observe(40, 100, 0);  // rows got twice as dear
    EXPECT_NEAR(b.ms_per_row(), 0.4, 1e-6);
    EXPECT_EQ(b.budget(0), 75);
}

TEST(StepBudget, IgnoresEmptyAndNonFiniteSteps) {
    ze::StepBudgeter b({10, 512, 16, 0.9});
    b.observe(5, 0, 0);
    b.observe(-1, 3, 0);
    b.observe(std::numeric_limits<double>::infinity(), 3, 0);
    EXPECT_FALSE(b.fitted());
}

namespace {

struct Fixture {
    explicit Fixture(int n_parallel, int max_batch, int n_blocks = 512, int bs = 16,
                     ze::SchedulingPolicy* pol = nullptr)
        : bm(n_blocks, bs, true),
          fcfs(ze::make_fcfs_policy()),
          sched({n_parallel, max_batch}, bm, pol ? *pol : *fcfs, [](int32_t, int32_t) {}) {}
    ze::Sequence* add(int n_prompt, int max_tokens = 8, int salt = 0) {
        ze::RequestParams p;
        for (int i = 0; i < n_prompt; ++i) p.prompt.push_back((i * 7 + salt * 13 + 1) % 50);
        p.max_tokens = max_tokens;
        const ze::RequestId id = next++;
        seqs.push_back(std::make_unique<ze::Sequence>(id, id, p, nullptr));
        sched.add(seqs.back().get());
        return seqs.back().get();
    }
    // Run a step: commit and append a token to every sequence whose logits came back.
    ze::StepPlan step() {
        ze::StepPlan plan = sched.schedule();
        sched.commit(plan);
        for (const auto& ss : plan.seqs)
            if (ss.want_logits) ss.seq->tokens.push_back(3);
        sched.check_invariants();
        return plan;
    }
    int rows_of(const ze::StepPlan& p, const ze::Sequence* s) {
        for (const auto& ss : p.seqs)
            if (ss.seq == s) return ss.n_tokens;
        return 0;
    }
    ze::BlockManager bm;
    std::unique_ptr<ze::SchedulingPolicy> fcfs;
    ze::Scheduler sched;
    std::vector<std::unique_ptr<ze::Sequence>> seqs;
    ze::RequestId next = 1;
};

}  // namespace

// The issue-17 symptom: a 3000-token prompt in progress on a 4-slot server must not keep a short
// request that arrives later from being admitted and finishing its prompt in the next step.
TEST(SchedulerComposition, ShortRequestSharesTheStepWithALongPrefill) {
    Fixture f(4, 512);
    ze::Sequence* longp = f.add(3000);
    ze::StepPlan p1 = f.step();
    EXPECT_EQ(f.rows_of(p1, longp), 512);
    ze::Sequence* a = f.add(20, 8, 1);
    ze::Sequence* b = f.add(40, 8, 2);
    ze::StepPlan p2 = f.step();
    EXPECT_EQ(f.rows_of(p2, a), 20);  // whole prompt: first token after this step
    EXPECT_EQ(f.rows_of(p2, b), 40);
    EXPECT_EQ(f.rows_of(p2, longp), 512 - 60);  // the long one keeps the rest
    EXPECT_EQ(p2.n_tokens, 512);
    EXPECT_EQ(a->n_generated(), 1);
    // Next step: their decodes come first, the long prefill fills the rest.
    ze::StepPlan p3 = f.step();
    ASSERT_GE(p3.seqs.size(), 3u);
    EXPECT_TRUE(p3.seqs[0].decode);
    EXPECT_TRUE(p3.seqs[1].decode);
    EXPECT_EQ(p3.n_decode_rows, 2);
    EXPECT_EQ(p3.n_prefill_rows, 510);
}

TEST(SchedulerComposition, TwoLongPrefillsSplitTheBudgetEvenly) {
    Fixture f(4, 512);
    ze::Sequence* x = f.add(3000, 8, 1);
    ze::Sequence* y = f.add(3000, 8, 2);
    ze::StepPlan p = f.step();
    EXPECT_EQ(f.rows_of(p, x), 256);
    EXPECT_EQ(f.rows_of(p, y), 256);
}

TEST(SchedulerComposition, DecodesFirstUnderASmallBudget) {
    Fixture f(8, 6);
    std::vector<ze::Sequence*> d;
    for (int i = 0; i < 4; ++i) d.push_back(f.add(3, 50, i));
    f.step();  // 6 rows: two prompts whole, ...
    while (true) {
        int n_dec = 0;
        for (ze::Sequence* s : d) n_dec += s->is_decode() ? 1 : 0;
        if (n_dec == 4) break;
        f.step();
    }
    ze::Sequence* longp = f.add(100, 8, 9);
    for (int k = 0; k < 5; ++k) {
        ze::StepPlan p = f.step();
        EXPECT_EQ(p.n_decode_rows, 4) << "step " << k;
        EXPECT_EQ(f.rows_of(p, longp), 2) << "step " << k;
        EXPECT_EQ(p.n_tokens, 6);
        for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(p.seqs[i].decode);
    }
}

namespace {

// Refuses admission to the sequences in `refused`; orders by `rank` (lower first), then id.
class TestPolicy : public ze::SchedulingPolicy {
  public:
    std::map<ze::RequestId, int> rank;
    std::map<ze::RequestId, bool> refused;
    std::map<ze::RequestId, int32_t> allowance;
    std::map<ze::RequestId, int64_t> served;
    int steps_begun = 0;
    void on_step_begin() override { ++steps_begun; }
    bool before(const ze::Sequence& a, const ze::Sequence& b) const override {
        const int ra = rank.count(a.id) ? rank.at(a.id) : 0;
        const int rb = rank.count(b.id) ? rank.at(b.id) : 0;
        return ra != rb ? ra < rb : a.id < b.id;
    }
    bool may_admit(const ze::Sequence& s, const ze::SchedulerLoad&) const override {
        return !refused.count(s.id);
    }
    int32_t prefill_allowance(const ze::Sequence& s) const override {
        return allowance.count(s.id) ? allowance.at(s.id) : 1 << 30;
    }
    size_t pick_victim(std::span<const ze::Sequence* const> c) const override {
        return c.size() - 1;
    }
    void on_served(const ze::Sequence& s, int32_t p, int32_t d) override { served[s.id] += p + d; }
    const char* name() const override { return "test"; }
};

}  // namespace

TEST(SchedulerComposition, ARefusedSequenceDoesNotBlockThoseBehindIt) {
    TestPolicy pol;
    Fixture f(4, 512, 512, 16, &pol);
    pol.refused[1] = true;
    ze::Sequence* a = f.add(10);
    ze::Sequence* b = f.add(10, 8, 1);
    ze::StepPlan p = f.step();
    EXPECT_EQ(f.rows_of(p, a), 0);
    EXPECT_EQ(f.rows_of(p, b), 10);
    EXPECT_TRUE(p.held_back);
    EXPECT_EQ(a->state, ze::SeqState::Waiting);
    pol.refused.clear();
    p = f.step();
    EXPECT_EQ(f.rows_of(p, a), 10);
    EXPECT_EQ(pol.served[1], 10);
    EXPECT_EQ(pol.served[2], 11);
    EXPECT_GE(pol.steps_begun, 2);
}

TEST(SchedulerComposition, ABlockShortSequenceDoesNotBlockThoseBehindIt) {
    Fixture f(4, 512, 8, 16);        // 8 blocks of 16
    ze::Sequence* big = f.add(100);  // 7 blocks
    f.step();
    ze::Sequence* big2 = f.add(100, 8, 1);  // does not fit now
    ze::Sequence* small = f.add(10, 8, 2);  // fits
    ze::StepPlan p = f.step();
    EXPECT_EQ(big2->state, ze::SeqState::Waiting);
    EXPECT_EQ(f.rows_of(p, small), 10);
    EXPECT_EQ(f.rows_of(p, big), 1);
}

TEST(SchedulerComposition, WaitingOrderIsReEvaluatedEachStep) {
    TestPolicy pol;
    Fixture f(1, 512, 512, 16, &pol);
    ze::Sequence* a = f.add(10);
    ze::Sequence* b = f.add(10, 8, 1);
    ze::Sequence* c = f.add(10, 8, 2);
    ze::StepPlan p = f.step();
    EXPECT_EQ(f.rows_of(p, a), 10);
    f.sched.remove(a);
    pol.rank[3] = -1;  // c now goes before b, although both were queued in the other order
    p = f.step();
    EXPECT_EQ(f.rows_of(p, c), 10);
    EXPECT_EQ(b->state, ze::SeqState::Waiting);
}

TEST(SchedulerComposition, PrefillAllowanceCapsAChunkAndTheRestGoesToOthers) {
    TestPolicy pol;
    Fixture f(4, 100, 512, 16, &pol);
    pol.allowance[1] = 7;
    ze::Sequence* a = f.add(300);
    ze::Sequence* b = f.add(300, 8, 1);
    ze::StepPlan p = f.step();
    EXPECT_EQ(f.rows_of(p, a), 7);
    EXPECT_EQ(f.rows_of(p, b), 93);
    pol.allowance[1] = 0;  // held back entirely
    p = f.step();
    EXPECT_EQ(f.rows_of(p, a), 0);
    EXPECT_EQ(f.rows_of(p, b), 100);
    EXPECT_TRUE(p.held_back);
}

TEST(SchedulerComposition, TpotBudgetBoundsTheStep) {
    ze::BlockManager bm(512, 16, true);
    auto fcfs = ze::make_fcfs_policy();
    ze::SchedulerOptions o;
    o.n_parallel = 4;
    o.max_batch_tokens = 512;
    o.tpot_target_ms = 10;
    o.min_prefill_chunk = 8;
    ze::Scheduler sched(o, bm, *fcfs, [](int32_t, int32_t) {});
    for (int rows : {10, 200, 50}) sched.budgeter().observe(1 + 0.1 * rows, 0, rows);
    ze::RequestParams p;
    p.prompt.assign(1000, 5);
    p.max_tokens = 4;
    ze::Sequence s(1, 1, p, nullptr);
    sched.add(&s);
    const ze::StepPlan plan = sched.schedule();
    EXPECT_EQ(plan.budget, 90);
    EXPECT_EQ(plan.n_tokens, 90);
    EXPECT_EQ(plan.n_prefill_rows, 90);
    sched.remove(&s);
}

TEST(SchedulerComposition, CacheNamespacesDoNotShareBlocks) {
    Fixture f(4, 512);
    auto add_ns = [&](const char* ns, ze::RequestId id) {
        ze::RequestParams p;
        p.prompt.assign(64, 9);
        p.max_tokens = 2;
        p.cache_namespace = ns;
        f.seqs.push_back(std::make_unique<ze::Sequence>(id, id, p, nullptr));
        f.sched.add(f.seqs.back().get());
        return f.seqs.back().get();
    };
    ze::Sequence* a = add_ns("tenant:a", 101);
    f.step();
    f.sched.remove(a);
    ze::Sequence* b = add_ns("tenant:b", 102);
    f.step();
    EXPECT_EQ(b->usage.cached_prompt_tokens, 0);
    EXPECT_EQ(f.sched.counters().hits, 0u);
    f.sched.remove(b);
    ze::Sequence* a2 = add_ns("tenant:a", 103);
    f.step();
    EXPECT_EQ(a2->usage.cached_prompt_tokens, 63);
    EXPECT_EQ(f.sched.counters().hits, 4u);
}
