// tests/unit/engine/tenant_policy_test.cpp — the multi-tenant policy (engine/tenant_policy.h)
// driving the real Scheduler with a fake model: weighted fair share between backlogged
// tenants (against FCFS on the same load, which must fail the same bounds), work conservation,
// the preemption order of QoS classes, and each per-tenant limit.
#include "engine/tenant_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"

namespace ze = zinc::engine;

namespace {

struct Sim {
    Sim(ze::SchedulingPolicy& pol, int n_parallel, int budget, int n_blocks = 4096)
        : bm(n_blocks, 16, true), sched({n_parallel, budget}, bm, pol, [](int32_t, int32_t) {}) {}
    ze::Sequence* add(const std::string& tenant, int n_prompt, int max_tokens) {
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
    // One step: rows served per tenant are added to `served`; finished sequences removed.
    ze::StepPlan step() {
        ze::StepPlan plan = sched.schedule();
        for (const auto& ss : plan.seqs) served[ss.seq->params.tenant] += ss.n_tokens;
        sched.commit(plan);
        std::vector<ze::Sequence*> done;
        for (const auto& ss : plan.seqs) {
            if (!ss.want_logits) continue;
            ss.seq->tokens.push_back(7);
            if (ss.seq->n_generated() >= ss.seq->params.max_tokens) done.push_back(ss.seq);
        }
        for (ze::Sequence* s : done) {
            ++finished[s->params.tenant];
            const ze::RequestId id = s->id;
            sched.remove(s);
            live.erase(id);
        }
        sched.check_invariants();
        return plan;
    }
    int backlog(const std::string& t) const {
        int n = 0;
        for (const auto& [id, s] : live) n += s->params.tenant == t ? 1 : 0;
        return n;
    }
    int running(const std::string& t) const {
        int n = 0;
        for (const ze::Sequence* s : sched.running()) n += s->params.tenant == t ? 1 : 0;
        return n;
    }
    ze::BlockManager bm;
    ze::Scheduler sched;
    std::map<ze::RequestId, std::unique_ptr<ze::Sequence>> live;
    std::map<std::string, int64_t> served, finished;
    ze::RequestId next = 1;
};

ze::TenantSchedSpec spec(const std::string& id, double weight = 1,
                         ze::QosClass q = ze::QosClass::Standard) {
    ze::TenantSchedSpec s;
    s.id = id;
    s.weight = weight;
    s.qos = q;
    return s;
}

// Both tenants backlogged from the start (a's requests all queued first): served rows over the
// run and over every window of 200 steps while both are backlogged, b / a.
struct Split {
    double whole = 0, worst_window = 0;
};
Split run_two(ze::SchedulingPolicy& pol) {
    Sim sim(pol, 6, 64);
    for (int i = 0; i < 150; ++i) sim.add("a", 16, 16);
    for (int i = 0; i < 150; ++i) sim.add("b", 16, 16);
    std::map<std::string, int64_t> mark;
    Split out;
    out.worst_window = 0;
    double worst_err = -1;
    int steps = 0;
    while (sim.backlog("a") > 0 && sim.backlog("b") > 0) {
        sim.step();
        if (++steps % 200 == 0) {
            const double a = static_cast<double>(sim.served["a"] - mark["a"]);
            const double b = static_cast<double>(sim.served["b"] - mark["b"]);
            const double r = a > 0 ? b / a : 1e9;
            if (std::abs(r - 2) > worst_err) {
                worst_err = std::abs(r - 2);
                out.worst_window = r;
            }
            mark = sim.served;
        }
    }
    out.whole = static_cast<double>(sim.served["b"]) / std::max<int64_t>(1, sim.served["a"]);
    return out;
}

}  // namespace

TEST(TenantPolicy, WeightedFairShareOneToTwo) {
    ze::TenantPolicy vtc({spec("a", 1), spec("b", 2)}, 16);
    const Split s = run_two(vtc);
    EXPECT_NEAR(s.whole, 2.0, 0.2) << "served b / a";
    EXPECT_NEAR(s.worst_window, 2.0, 0.2) << "worst 200-step window";
    // The same load under FCFS: a's requests came first, b is starved.
    auto fcfs = ze::make_fcfs_policy();
    const Split f = run_two(*fcfs);
    EXPECT_LT(f.whole, 0.5);
}

TEST(TenantPolicy, EqualWeightsServiceGapWithinVtcBound) {
    // Equal weights, a's 100 requests queued before b's: while both are backlogged, the gap
    // in rows served stays within VTC's bound, here (slots x request rows) + one step budget.
    auto gap_of = [](ze::SchedulingPolicy& pol) {
        Sim sim(pol, 4, 32);
        for (int i = 0; i < 100; ++i) sim.add("a", 12, 12);
        for (int i = 0; i < 100; ++i) sim.add("b", 12, 12);
        int64_t worst = 0;
        while (sim.backlog("a") > 0 && sim.backlog("b") > 0) {
            sim.step();
            worst = std::max(worst, std::abs(sim.served["a"] - sim.served["b"]));
        }
        return worst;
    };
    const int64_t bound = 4 * (12 + 12) + 32;
    ze::TenantPolicy vtc({spec("a"), spec("b")}, 16);
    EXPECT_LE(gap_of(vtc), bound);
    auto fcfs = ze::make_fcfs_policy();
    EXPECT_GT(gap_of(*fcfs), 10 * bound);
}

TEST(TenantPolicy, WorkConservingWhenATenantIsIdle) {
    // b (weight 10) is configured but sends nothing: a gets every slot, and finishes in as few
    // steps as under FCFS.
    auto steps_for = [](ze::SchedulingPolicy& pol) {
        Sim sim(pol, 4, 64);
        for (int i = 0; i < 40; ++i) sim.add("a", 20, 10);
        int steps = 0, full = 0;
        while (!sim.live.empty()) {
            const int backlog = sim.backlog("a");
            const ze::StepPlan p = sim.step();
            ++steps;
            full += static_cast<int>(p.seqs.size()) == std::min(4, backlog) ? 1 : 0;
        }
        EXPECT_EQ(full, steps);
        return steps;
    };
    ze::TenantPolicy vtc({spec("a"), spec("b", 10)}, 16);
    auto fcfs = ze::make_fcfs_policy();
    EXPECT_EQ(steps_for(vtc), steps_for(*fcfs));
}

TEST(TenantPolicy, ReturningTenantIsLiftedNotCredited) {
    ze::TenantPolicy vtc({spec("a"), spec("b")}, 16);
    Sim sim(vtc, 2, 64);
    for (int i = 0; i < 20; ++i) sim.add("a", 16, 16);
    for (int i = 0; i < 40; ++i) sim.step();
    const int64_t a_before = sim.served["a"];
    ASSERT_GT(a_before, 150);
    // b arrives after a long idle time: it does not get a's 150+ rows of credit all at once;
    // from here both share (b is not served alone until it catches up).
    for (int i = 0; i < 20; ++i) sim.add("b", 16, 16);
    for (int i = 0; i < 60; ++i) sim.step();
    const int64_t a_gain = sim.served["a"] - a_before, b_gain = sim.served["b"];
    EXPECT_GT(a_gain, b_gain / 3) << "a starved after b's return: b was credited its idle time";
}

TEST(TenantPolicy, InteractivePreemptsBatchFirstThenStandardNeverInteractive) {
    ze::TenantPolicy pol({spec("bat", 1, ze::QosClass::Batch), spec("std"),
                          spec("int", 1, ze::QosClass::Interactive)},
                         16);
    Sim sim(pol, 3, 256);
    ze::Sequence* b1 = sim.add("bat", 16, 100);
    ze::Sequence* b2 = sim.add("bat", 16, 100);
    ze::Sequence* s1 = sim.add("std", 16, 100);
    sim.step();
    ASSERT_EQ(sim.sched.running().size(), 3u);
    ze::Sequence* i1 = sim.add("int", 8, 100);
    ze::StepPlan p = sim.step();
    ASSERT_EQ(p.preempted.size(), 1u);
    EXPECT_EQ(p.preempted[0], b2);  // the later batch one
    EXPECT_EQ(i1->state, ze::SeqState::Running);
    ze::Sequence* i2 = sim.add("int", 8, 100);
    p = sim.step();
    ASSERT_EQ(p.preempted.size(), 1u);
    EXPECT_EQ(p.preempted[0], b1);
    sim.add("int", 8, 100);
    p = sim.step();
    ASSERT_EQ(p.preempted.size(), 1u);
    EXPECT_EQ(p.preempted[0], s1);
    ze::Sequence* i4 = sim.add("int", 8, 100);
    p = sim.step();
    EXPECT_TRUE(p.preempted.empty()) << "an interactive request was preempted";
    EXPECT_EQ(i4->state, ze::SeqState::Waiting);
    EXPECT_EQ(i2->state, ze::SeqState::Running);
    EXPECT_EQ(sim.sched.counters().preemptions_qos, 3u);
    // Everything still finishes, the preempted ones after recompute with all their tokens.
    for (int k = 0; k < 2000 && !sim.live.empty(); ++k) sim.step();
    EXPECT_TRUE(sim.live.empty());
    EXPECT_EQ(sim.finished["bat"], 2);
    EXPECT_EQ(sim.finished["std"], 1);
    EXPECT_EQ(sim.finished["int"], 4);
}

TEST(TenantPolicy, StandardDoesNotPreempt) {
    ze::TenantPolicy pol({spec("bat", 1, ze::QosClass::Batch), spec("std")}, 16);
    Sim sim(pol, 1, 64);
    sim.add("bat", 16, 50);
    sim.step();
    ze::Sequence* s = sim.add("std", 8, 5);
    const ze::StepPlan p = sim.step();
    EXPECT_TRUE(p.preempted.empty());
    EXPECT_EQ(s->state, ze::SeqState::Waiting);
}

TEST(TenantPolicy, MaxConcurrentLimitsOnlyThatTenant) {
    ze::TenantSchedSpec a = spec("a");
    a.max_concurrent = 1;
    ze::TenantPolicy pol({a, spec("b")}, 16);
    Sim sim(pol, 4, 256);
    for (int i = 0; i < 3; ++i) sim.add("a", 8, 20);
    for (int i = 0; i < 3; ++i) sim.add("b", 8, 20);
    for (int k = 0; k < 200 && !sim.live.empty(); ++k) {
        sim.step();
        EXPECT_LE(sim.running("a"), 1);
        if (k == 0) {
            EXPECT_EQ(sim.running("b"), 3);  // b is not blocked behind a's queue
        }
    }
    EXPECT_TRUE(sim.live.empty());
}

TEST(TenantPolicy, MaxKvBlocksCountsWorstCase) {
    ze::TenantSchedSpec a = spec("a");
    a.max_kv_blocks = 5;  // each request: ceil((20 + 12) / 16) = 2 blocks worst case
    ze::TenantPolicy pol({a, spec("b")}, 16);
    Sim sim(pol, 8, 256);
    for (int i = 0; i < 6; ++i) sim.add("a", 20, 12);
    sim.add("b", 20, 12);
    for (int k = 0; k < 300 && !sim.live.empty(); ++k) {
        sim.step();
        EXPECT_LE(sim.running("a"), 2);
        int held = 0;
        for (const ze::Sequence* s : sim.sched.running())
            if (s->params.tenant == "a") held += static_cast<int>(s->blocks.size());
        EXPECT_LE(held, 5);
    }
    EXPECT_TRUE(sim.live.empty());
    for (const auto& st : pol.snapshot()) EXPECT_EQ(st.kv_blocks_reserved, 0) << st.id;
}

TEST(TenantPolicy, PrefillTokenBucket) {
    double now = 0;
    ze::TenantSchedSpec a = spec("a");
    a.prefill_tokens_per_s = 100;
    a.burst_s = 1;
    ze::TenantPolicy pol({a, spec("b")}, 16, [&] { return now; });
    Sim sim(pol, 4, 512);
    ze::Sequence* x = sim.add("a", 400, 2);
    ze::Sequence* y = sim.add("b", 400, 100);
    ze::StepPlan p = sim.step();
    int rows_x = 0, rows_y = 0;
    for (const auto& ss : p.seqs) (ss.seq == x ? rows_x : rows_y) += ss.n_tokens;
    EXPECT_EQ(rows_x, 100);  // the bucket's capacity
    EXPECT_EQ(rows_y, 400);  // b is not limited and takes the rest
    p = sim.step();          // no time passed: a is held back
    EXPECT_TRUE(p.held_back);
    EXPECT_TRUE(p.seqs.size() == 1 && p.seqs[0].seq == y && p.seqs[0].decode);
    now = 0.5;
    p = sim.step();
    ASSERT_EQ(p.seqs.size(), 2u);
    for (const auto& ss : p.seqs)
        if (ss.seq == x) {
            EXPECT_EQ(ss.n_tokens, 50);
        }
    // Over 3 s in 10 ms steps, a is served at most rate * T + capacity.
    for (int k = 0; k < 300; ++k) {
        now += 0.01;
        sim.step();
    }
    EXPECT_LE(sim.served["a"], static_cast<int64_t>(100 * now + 100 + 2));
}

// Embedding rows (engine/embedding_step.h) draw on the same prefill bucket and count as the
// tenant's served prefill rows and virtual counter; a tenant without a rate is not limited.
TEST(TenantPolicy, EmbeddingRowsAreThePrefillBuckets) {
    double now = 0;
    ze::TenantSchedSpec a = spec("a");
    a.prefill_tokens_per_s = 100;
    a.burst_s = 1;
    ze::TenantPolicy pol({a, spec("b")}, 16, [&] { return now; });
    pol.on_step_begin();
    EXPECT_EQ(pol.embedding_allowance("a"), 100);
    EXPECT_EQ(pol.embedding_allowance("b"), std::numeric_limits<int32_t>::max());
    pol.on_embedding_served("a", 70);
    pol.on_embedding_served("b", 500);
    EXPECT_EQ(pol.embedding_allowance("a"), 30);
    pol.on_embedding_served("a", 30);
    EXPECT_EQ(pol.embedding_allowance("a"), 0);  // held back until it refills
    now = 0.25;
    pol.on_step_begin();
    EXPECT_EQ(pol.embedding_allowance("a"), 25);
    // A prompt of the same tenant sees the same bucket.
    Sim sim(pol, 4, 512);
    ze::Sequence* x = sim.add("a", 400, 2);
    const ze::StepPlan p = sim.step();
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].seq, x);
    EXPECT_EQ(p.seqs[0].n_tokens, 25);
    uint64_t rows_a = 0, rows_b = 0;
    double vtc_a = 0;
    for (const auto& st : pol.snapshot()) {
        if (st.id == "a") rows_a = st.prefill_rows, vtc_a = st.vtc;
        if (st.id == "b") rows_b = st.prefill_rows;
    }
    EXPECT_EQ(rows_a, 125u);  // 100 embedding rows + 25 prompt rows
    EXPECT_EQ(rows_b, 500u);
    EXPECT_DOUBLE_EQ(vtc_a, 125.0);
}

TEST(TenantPolicy, DecodeTokenBucket) {
    double now = 0;
    ze::TenantSchedSpec a = spec("a");
    a.decode_tokens_per_s = 10;
    a.burst_s = 0.2;  // capacity 2 tokens
    ze::TenantPolicy pol({a}, 16, [&] { return now; });
    Sim sim(pol, 4, 512);
    for (int i = 0; i < 4; ++i) sim.add("a", 4, 1000);
    sim.step();  // prefills (first tokens sampled)
    const int64_t after_prefill = sim.served["a"];
    ze::StepPlan p = sim.step();
    EXPECT_EQ(p.n_decode_rows, 2);  // only two tokens in the bucket
    p = sim.step();
    EXPECT_EQ(p.n_decode_rows, 0);
    EXPECT_TRUE(p.held_back);
    for (int k = 0; k < 100; ++k) {
        now += 0.05;
        sim.step();
    }
    // 5 s at 10 tokens/s, plus the bucket's 2.
    const int64_t decoded = sim.served["a"] - after_prefill;
    EXPECT_LE(decoded, 10 * 5 + 2);
    EXPECT_GE(decoded, 10 * 5 - 2);
}

TEST(TenantPolicy, ReconfigureKeepsCountersAndAppliesLimits) {
    ze::TenantPolicy pol({spec("a"), spec("b")}, 16);
    Sim sim(pol, 4, 256);
    for (int i = 0; i < 4; ++i) sim.add("a", 8, 50);
    sim.step();
    EXPECT_EQ(sim.running("a"), 4);
    ze::TenantSchedSpec a = spec("a");
    a.max_concurrent = 1;
    pol.configure({a, spec("b")});
    double vtc_before = 0;
    for (const auto& st : pol.snapshot())
        if (st.id == "a") vtc_before = st.vtc;
    EXPECT_GT(vtc_before, 0);
    for (int i = 0; i < 2; ++i) sim.add("a", 8, 5);
    sim.step();
    EXPECT_EQ(sim.running("a"), 4);  // running ones are not evicted by a reload ...
    bool drained = false;            // the four admitted before the reload have finished
    for (int k = 0; k < 200 && !sim.live.empty(); ++k) {
        sim.step();
        drained = drained || sim.finished["a"] >= 4;
        if (drained) {
            EXPECT_LE(sim.running("a"), 1);
        }
    }
    EXPECT_TRUE(sim.live.empty());  // ... and the new ones ran one at a time to the end
}

TEST(TenantPolicy, QosClassNames) {
    EXPECT_EQ(ze::parse_qos_class("interactive"), ze::QosClass::Interactive);
    EXPECT_EQ(ze::parse_qos_class("batch"), ze::QosClass::Batch);
    EXPECT_EQ(ze::parse_qos_class("standard"), ze::QosClass::Standard);
    EXPECT_FALSE(ze::parse_qos_class("Batch"));
    EXPECT_STREQ(ze::to_string(ze::QosClass::Interactive), "interactive");
}

// Closed loop, as a live server sees it: each tenant has 4 clients that send the next request
// when one ends; 4 slots. Weight 2 must still get about twice the rows.
TEST(TenantPolicy, WeightedFairShareClosedLoop) {
    ze::TenantPolicy vtc({spec("a", 1), spec("b", 2)}, 16);
    Sim sim(vtc, 4, 512);
    for (int i = 0; i < 4; ++i) {
        sim.add("a", 10, 32);
        sim.add("b", 10, 32);
    }
    std::map<std::string, int64_t> fin;
    for (int k = 0; k < 3000; ++k) {
        sim.step();
        for (const char* t : {"a", "b"})
            while (fin[t] < sim.finished[t]) {
                ++fin[t];
                sim.add(t, 10, 32);
            }
    }
    const double r = static_cast<double>(sim.served["b"]) / sim.served["a"];
    EXPECT_NEAR(r, 2.0, 0.2) << "a " << sim.served["a"] << " b " << sim.served["b"];
}

namespace {

// Closed loop as bench/tenancy.py (d) drives a live server: `clients` per tenant, each sending
// its next request `delay` steps after the last one ended; 4 slots. Per step: whether every
// slot was used while a sequence waited (a non-work-conserving policy leaves one idle), and
// the rows and sequences each step carried.
struct Composition {
    int steps = 0, steps_with_idle_slot = 0;
    int64_t seqs = 0, rows = 0, decode_rows = 0, finished = 0;
};
Composition closed_loop(ze::SchedulingPolicy& pol, const std::map<std::string, int>& clients,
                        int delay, int n_steps) {
    Sim sim(pol, 4, 512);
    for (const auto& [t, n] : clients)
        for (int i = 0; i < n; ++i) sim.add(t, 12, 16);
    std::map<std::string, int64_t> seen;
    std::vector<std::pair<int, std::string>> due;  // (step, tenant) of the next requests
    Composition c;
    for (int k = 0; k < n_steps; ++k) {
        for (auto it = due.begin(); it != due.end();) {
            if (it->first > k) {
                ++it;
                continue;
            }
            sim.add(it->second, 12, 16);
            it = due.erase(it);
        }
        const int live = static_cast<int>(sim.live.size());
        const ze::StepPlan p = sim.step();
        ++c.steps;
        if (static_cast<int>(p.seqs.size()) < std::min(4, live)) ++c.steps_with_idle_slot;
        c.seqs += static_cast<int64_t>(p.seqs.size());
        c.rows += p.n_tokens;
        c.decode_rows += p.n_decode_rows;
        for (const auto& [t, n] : clients)
            while (seen[t] < sim.finished[t]) {
                ++seen[t];
                due.push_back({k + 1 + delay, t});
            }
    }
    for (const auto& [t, n] : sim.finished) c.finished += n;
    return c;
}

}  // namespace

// Issue 16 item 6(d): fair share costs no throughput. Both tenants backlogged (8 clients each,
// weights 1:2): every step as full as FCFS's on the same load, no slot idle while a sequence
// waits. Then b (weight 2) has only 2 clients, fewer than its share of the 4 slots: a, over its
// share, still gets every slot b leaves (work-conserving), so again FCFS's steps.
TEST(TenantPolicy, BackloggedStepsAsFullAsFcfs) {
    for (const std::map<std::string, int>& clients :
         {std::map<std::string, int>{{"a", 8}, {"b", 8}}, {{"a", 8}, {"b", 2}}}) {
        for (int delay : {0, 3}) {
            ze::TenantPolicy vtc({spec("a", 1), spec("b", 2)}, 16);
            auto fcfs = ze::make_fcfs_policy();
            const Composition v = closed_loop(vtc, clients, delay, 800);
            const Composition f = closed_loop(*fcfs, clients, delay, 800);
            const std::string what =
                "b clients " + std::to_string(clients.at("b")) + ", delay " + std::to_string(delay);
            EXPECT_EQ(v.steps_with_idle_slot, 0) << what;
            EXPECT_EQ(f.steps_with_idle_slot, 0) << what;
            EXPECT_EQ(v.seqs, f.seqs) << what << ": sequences per step differ from FCFS";
            EXPECT_EQ(v.rows, f.rows) << what;
            EXPECT_EQ(v.decode_rows, f.decode_rows) << what;
            EXPECT_EQ(v.finished, f.finished) << what << ": requests finished differ from FCFS";
        }
    }
}
