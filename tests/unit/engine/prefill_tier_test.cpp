// tests/unit/engine/prefill_tier_test.cpp — class-aware prefill chunks (engine/scheduler.h, step
// 3; SchedulerOptions::class_aware_prefill): with the tenant policy, interactive prefill takes
// the budget first, standard next, batch what is left and at most background_prefill_chunk rows
// a step; decodes still come first. Each composition is also checked with the rule switched off,
// where it must differ (the old equal water-filling), and FCFS must plan the same either way.
// The interactive guard (SchedulerOptions::interactive_guard): a step with interactive prefill
// carries no batch rows, and batch chunks stay short while an interactive tenant is active;
// each rule is checked against the guard switched off.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "engine/tenant_policy.h"

namespace ze = zinc::engine;

namespace {

struct Sim {
    Sim(ze::SchedulingPolicy& pol, bool class_aware, int budget = 512, int bg_cap = 128,
        double guard = 0.5)
        : bm(4096, 16, false),
          sched(opts(class_aware, budget, bg_cap, guard), bm, pol, [](int32_t, int32_t) {}) {}
    static ze::SchedulerOptions opts(bool class_aware, int budget, int bg_cap, double guard) {
        ze::SchedulerOptions o;
        o.n_parallel = 8;
        o.max_batch_tokens = budget;
        o.class_aware_prefill = class_aware;
        o.background_prefill_chunk = bg_cap;
        o.interactive_guard = guard;
        return o;
    }
    // The step cost model as if every step had cost 1 ms + 1 ms a row.
    void fit_cost_model() {
        for (int rows : {1, 8, 32, 64, 128, 256}) sched.budgeter().observe(1.0 + rows, rows, 0);
    }
    ze::Sequence* add(const std::string& tenant, int n_prompt, int max_tokens = 4) {
        ze::RequestParams p;
        const int salt = static_cast<int>(next);
        for (int i = 0; i < n_prompt; ++i) p.prompt.push_back((i * 31 + salt * 17) % 1000);
        p.max_tokens = max_tokens;
        p.tenant = tenant;
        const ze::RequestId id = next++;
        live[id] = std::make_unique<ze::Sequence>(id, id, p, nullptr);
        sched.add(live[id].get());
        return live[id].get();
    }
    // One step; returns prefill rows per tenant and counts decode rows in `decodes`.
    std::map<std::string, int> step() {
        ze::StepPlan plan = sched.schedule();
        deferred = plan.n_deferred;
        std::map<std::string, int> rows;
        decodes = 0;
        for (const auto& ss : plan.seqs) {
            if (ss.decode) {
                ++decodes;
            } else {
                rows[ss.seq->params.tenant] += ss.n_tokens;
            }
        }
        EXPECT_LE(plan.n_tokens, plan.budget);
        sched.commit(plan);
        for (const auto& ss : plan.seqs)
            if (ss.want_logits) ss.seq->tokens.push_back(7);
        sched.check_invariants();
        return rows;
    }
    ze::BlockManager bm;
    ze::Scheduler sched;
    std::map<ze::RequestId, std::unique_ptr<ze::Sequence>> live;
    ze::RequestId next = 1;
    int decodes = 0;
    int deferred = 0;
};

ze::TenantSchedSpec spec(const std::string& id, ze::QosClass q) {
    ze::TenantSchedSpec s;
    s.id = id;
    s.qos = q;
    return s;
}

std::vector<ze::TenantSchedSpec> classes() {
    return {spec("i", ze::QosClass::Interactive), spec("s", ze::QosClass::Standard),
            spec("b", ze::QosClass::Batch)};
}

}  // namespace

TEST(PrefillTier, InteractivePromptTakesTheBudgetBeforeBatchChunks) {
    for (bool on : {true, false}) {
        ze::TenantPolicy pol(classes(), 16);
        Sim sim(pol, on, 512, 128, /*guard=*/0);
        sim.add("b", 1000);
        sim.add("b", 1000);
        const auto first = sim.step();
        // Alone, batch prefill is capped at 128 rows a step with the rule on, 512 without.
        EXPECT_EQ(first.at("b"), on ? 128 : 512) << "class-aware " << on;
        sim.add("i", 300);
        const auto second = sim.step();
        if (on) {
            EXPECT_EQ(second.at("i"), 300);  // the whole prompt in one chunk
            EXPECT_EQ(second.at("b"), 128);  // batch gets what is left, up to its cap
        } else {
            // Equal water-filling: 512 / 3 each (170 for the last one), a second step is needed.
            EXPECT_LT(second.at("i"), 300);
            EXPECT_EQ(second.at("i"), 170);
        }
    }
}

TEST(PrefillTier, TiersFillInClassOrderAndBatchOnlyGetsTheRest) {
    ze::TenantPolicy pol(classes(), 16);
    Sim sim(pol, true, 512, 128);
    sim.add("b", 900);
    sim.add("s", 900);
    sim.add("i", 200);
    auto r = sim.step();
    EXPECT_EQ(r["i"], 200);  // interactive: all it needs
    EXPECT_EQ(r["s"], 312);  // standard: the rest of the budget
    EXPECT_EQ(r["b"], 0);    // batch: nothing was left
    r = sim.step();          // the interactive one decodes now (decodes first)
    EXPECT_EQ(sim.decodes, 1);
    EXPECT_EQ(r["s"], 511);
    EXPECT_EQ(r["b"], 0);
    r = sim.step();  // standard finishes its 77 rows; batch takes up to its cap of what is left
    EXPECT_EQ(r["s"], 77);
    EXPECT_EQ(r["b"], 128);
}

TEST(PrefillTier, UncappedBatchUsesLeftoverBudget) {
    ze::TenantPolicy pol(classes(), 16);
    Sim sim(pol, true, 512, 0, /*guard=*/0);  // no cap: batch takes all that is left
    sim.add("b", 1000);
    sim.add("i", 100);
    const auto r = sim.step();
    EXPECT_EQ(r.at("i"), 100);
    EXPECT_EQ(r.at("b"), 412);
}

TEST(PrefillTier, FcfsPlansTheSameWithTheRuleOnOrOff) {
    std::vector<std::vector<std::map<std::string, int>>> runs;
    for (bool on : {true, false}) {
        auto pol = ze::make_fcfs_policy();
        Sim sim(*pol, on);
        sim.add("b", 1000);
        sim.add("i", 300);
        sim.add("s", 50);
        std::vector<std::map<std::string, int>> steps;
        for (int k = 0; k < 5; ++k) steps.push_back(sim.step());
        runs.push_back(steps);
    }
    EXPECT_EQ(runs[0], runs[1]);
}

TEST(InteractiveGuard, AStepWithInteractivePrefillCarriesNoBatchRows) {
    for (double guard : {0.5, 0.0}) {
        ze::TenantPolicy pol(classes(), 16);
        Sim sim(pol, true, 512, 128, guard);
        ze::Sequence* a = sim.add("b", 20, 8);  // decodes from the second step on
        sim.add("b", 1000);
        auto r = sim.step();
        EXPECT_EQ(r.at("b"), 128);  // 20 + 108: the cap
        r = sim.step();
        EXPECT_EQ(sim.decodes, 1);  // a's decode
        sim.add("i", 40);
        r = sim.step();
        EXPECT_EQ(r.at("i"), 40) << "guard " << guard;
        if (guard > 0) {
            // Nothing of batch's: no prefill chunk, a's decode deferred to the next step.
            EXPECT_EQ(r.count("b"), 0u);
            EXPECT_EQ(sim.decodes, 0);
            EXPECT_EQ(sim.deferred, 1);
        } else {
            EXPECT_EQ(r.at("b"), 128);
            EXPECT_EQ(sim.decodes, 1);
            EXPECT_EQ(sim.deferred, 0);
        }
        const int32_t n_gen = a->n_generated();
        r = sim.step();  // a's deferred decode runs now, beside i's first decode
        EXPECT_EQ(sim.decodes, 2);
        EXPECT_EQ(sim.deferred, 0);
        EXPECT_EQ(a->n_generated(), n_gen + 1);
    }
}

TEST(InteractiveGuard, BatchChunksStayShortWhileAnInteractiveTenantIsActive) {
    for (double guard : {0.5, 0.0}) {
        double now = 100;
        ze::TenantPolicy pol(classes(), 16, [&] { return now; });
        Sim sim(pol, true, 512, 128, guard);
        sim.fit_cost_model();  // 1 ms + 1 ms a row
        ze::Sequence* i = sim.add("i", 40, 3);
        auto r = sim.step();
        EXPECT_EQ(r.at("i"), 40);  // its step: 40 rows, modelled 41 ms
        sim.add("b", 1000);
        r = sim.step();
        // Guard: the step within 0.5 x 41 ms = 20.5 ms -> 19 rows, of which 1 is i's decode.
        EXPECT_EQ(sim.decodes, 1);
        EXPECT_EQ(r.at("b"), guard > 0 ? 18 : 128) << "guard " << guard;
        sim.step();
        sim.sched.remove(i);                // i finished (the engine removes a finished sequence)
        now += ze::kInteractiveWindow - 1;  // within the window after i's end: still guarded
        r = sim.step();
        EXPECT_EQ(r.at("b"), guard > 0 ? 19 : 128);
        now += 2;  // the interactive tenant has been quiet for longer: the cap is back
        r = sim.step();
        EXPECT_EQ(r.at("b"), 128);
    }
}

TEST(InteractiveGuard, BatchPrefillNeverFallsBelowMinPrefillChunk) {
    double now = 100;
    ze::TenantPolicy pol(classes(), 16, [&] { return now; });
    Sim sim(pol, true, 512, 128, 0.05);  // 0.05 x 41 ms: 1 row, less than the decode
    sim.fit_cost_model();
    sim.add("i", 40, 50);
    sim.step();
    sim.add("b", 1000);
    const auto r = sim.step();
    EXPECT_EQ(sim.decodes, 1);
    EXPECT_EQ(r.at("b"), 16);  // SchedulerOptions::min_prefill_chunk
}

TEST(InteractiveGuard, DeferredDraftRowsGiveTheirBlocksBack) {
    ze::TenantPolicy pol(classes(), 16);
    Sim sim(pol, true, 512, 128, 0.5);
    ze::Sequence* a = sim.add("b", 15, 8);  // 15 + 1 generated: block 0 full
    sim.step();
    ASSERT_TRUE(a->is_decode());
    ASSERT_EQ(a->tokens.size(), 16u);
    a->draft = {1, 2, 3, 4};  // positions 16..19: a second block while planned
    sim.add("i", 40);
    sim.step();  // check_invariants: a holds no block past its tokens
    EXPECT_EQ(sim.deferred, 1);
    EXPECT_EQ(a->blocks.size(), 1u);
}
