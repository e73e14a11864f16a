// tests/unit/engine/scheduler_test.cpp — the Scheduler with a fake model, randomised.
//
// The fake "KV" of a position is a value that depends on the sequence's tokens up to and
// including it (a rolling hash); a step writes each scheduled row's value into the physical slot
// of its block table and checks that every earlier position of the sequence reads back the
// right value (so a wrongly shared, overwritten, evicted or uncopied block is caught, as real
// attention would read wrong K/V). The fake "sampler" derives the next token from that value,
// so each sequence's tokens are fixed by its prompt alone: any scheduling (batching, chunking,
// prefix hits, preemption, cancellations of others) must reproduce them. After every step:
// the token budget, slots, the batch.h write contract (a written block has one owner and is not
// in the prefix cache), and all BlockManager / Scheduler invariants; at the end every block is
// free or cached.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

namespace ze = zinc::engine;

namespace {

uint64_t roll(uint64_t h, int32_t t) {
    h ^= static_cast<uint64_t>(t) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}
// Value of position p of `tokens`: a hash of tokens[0..p].
uint64_t kv_value(const std::vector<int32_t>& tokens, int p) {
    uint64_t h = 1;
    for (int i = 0; i <= p; ++i) h = roll(h, tokens[i]);
    return h;
}
int32_t fake_sample(uint64_t v) {
    return static_cast<int32_t>((v >> 17) % 50);
}

// What the sequence must generate, computed without any scheduler.
std::vector<int32_t> reference(std::vector<int32_t> tokens, int n_gen) {
    std::vector<int32_t> out;
    for (int i = 0; i < n_gen; ++i) {
        const int32_t t = fake_sample(kv_value(tokens, static_cast<int>(tokens.size()) - 1));
        out.push_back(t);
        tokens.push_back(t);
    }
    return out;
}

struct Config {
    int n_blocks, block_size, n_parallel, budget;
    bool cache;
    int n_requests;
    int cancel_permille;  // chance per step that a random live request is cancelled
};

struct Outcome {
    uint64_t preemptions = 0, hits = 0;
    int finished = 0, cancelled = 0;
};

Outcome simulate(const Config& cfg, unsigned seed) {
    std::mt19937 rng(seed);
    ze::BlockManager bm(cfg.n_blocks, cfg.block_size, cfg.cache);
    auto policy = ze::make_fcfs_policy();
    std::vector<uint64_t> kv(static_cast<size_t>(cfg.n_blocks) * cfg.block_size, 0);
    auto copy = [&](int32_t src, int32_t dst) {
        std::copy_n(kv.begin() + static_cast<ptrdiff_t>(src) * cfg.block_size, cfg.block_size,
                    kv.begin() + static_cast<ptrdiff_t>(dst) * cfg.block_size);
    };
    ze::Scheduler sched({cfg.n_parallel, cfg.budget}, bm, *policy, copy);
    const int n_ctx = (cfg.n_blocks / 2) * cfg.block_size;  // two sequences always fit
    // Prompts: one of three shared stems (often a whole number of blocks) plus a random tail.
    std::vector<std::vector<int32_t>> stems;
    for (int s = 0; s < 3; ++s) {
        std::vector<int32_t> st(static_cast<size_t>(cfg.block_size * (s + 1) + (s == 2 ? 1 : 0)));
        for (auto& t : st) t = static_cast<int32_t>(rng() % 50);
        stems.push_back(st);
    }
    std::map<ze::RequestId, std::unique_ptr<ze::Sequence>> live;
    std::map<ze::RequestId, std::vector<int32_t>> expect;
    Outcome out;
    ze::RequestId next_id = 1;
    int submitted = 0;
    for (int step = 0; step < 20000 && (submitted < cfg.n_requests || !live.empty()); ++step) {
        // Arrivals.
        while (submitted < cfg.n_requests && rng() % 3 == 0) {
            ze::RequestParams p;
            p.prompt = stems[rng() % stems.size()];
            const int tail = static_cast<int>(rng() % 3 == 0 ? 0 : rng() % (cfg.block_size + 3));
            for (int i = 0; i < tail; ++i) p.prompt.push_back(static_cast<int32_t>(rng() % 50));
            const int room = n_ctx - static_cast<int>(p.prompt.size());
            if (room < 1) continue;
            p.max_tokens = 1 + static_cast<int>(rng() % std::min(room, 3 * cfg.block_size));
            expect[next_id] = reference(p.prompt, p.max_tokens);
            auto s = std::make_unique<ze::Sequence>(next_id, next_id, std::move(p), nullptr);
            sched.add(s.get());
            live[next_id++] = std::move(s);
            ++submitted;
        }
        // Cancellations.
        if (!live.empty() && static_cast<int>(rng() % 1000) < cfg.cancel_permille) {
            auto it = live.begin();
            std::advance(it, rng() % live.size());
            sched.remove(it->second.get());
            expect.erase(it->first);
            live.erase(it);
            ++out.cancelled;
        }
        sched.check_invariants();
        if (sched.idle()) continue;

        const ze::StepPlan plan = sched.schedule();
        EXPECT_FALSE(plan.empty()) << "no progress at step " << step;
        if (plan.empty()) break;
        EXPECT_LE(plan.n_tokens, cfg.budget);
        EXPECT_LE(static_cast<int>(sched.running().size()), cfg.n_parallel);
        int rows = 0;
        std::set<int32_t> written;
        for (const ze::ScheduledSeq& ss : plan.seqs) {
            const ze::Sequence& s = *ss.seq;
            EXPECT_EQ(s.state, ze::SeqState::Running);
            EXPECT_GE(ss.n_tokens, 1);
            rows += ss.n_tokens;
            const int end = s.n_computed + ss.n_tokens;
            EXPECT_EQ(ss.want_logits, end == static_cast<int>(s.tokens.size()));
            EXPECT_GE(static_cast<int>(s.blocks.size()) * cfg.block_size, end);
            // Reads: every computed position holds this sequence's value.
            for (int p = 0; p < s.n_computed; ++p) {
                const int32_t b = s.blocks[p / cfg.block_size];
                const uint64_t got =
                    kv[static_cast<size_t>(b) * cfg.block_size + p % cfg.block_size];
                if (got != kv_value(s.tokens, p)) {
                    ADD_FAILURE() << "wrong KV: seed " << seed << " step " << step << " request "
                                  << s.id << " pos " << p;
                    return out;
                }
            }
            // Writes: private, unindexed blocks, each written by one sequence only.
            for (int p = s.n_computed; p < end; ++p) {
                const int32_t b = s.blocks[p / cfg.block_size];
                EXPECT_EQ(bm.ref_count(b), 1);
                EXPECT_FALSE(bm.cache().is_registered(b));
                if (p == s.n_computed || p % cfg.block_size == 0) {
                    EXPECT_TRUE(written.insert(b).second) << "block " << b << " written twice";
                }
                kv[static_cast<size_t>(b) * cfg.block_size + p % cfg.block_size] =
                    kv_value(s.tokens, p);
            }
        }
        EXPECT_EQ(rows, plan.n_tokens);
        for (ze::Sequence* s : plan.preempted) EXPECT_EQ(s->state, ze::SeqState::Waiting);
        sched.commit(plan);
        for (const ze::ScheduledSeq& ss : plan.seqs) {
            if (!ss.want_logits) continue;
            ze::Sequence& s = *ss.seq;
            s.tokens.push_back(
                fake_sample(kv_value(s.tokens, static_cast<int>(s.tokens.size()) - 1)));
            if (s.n_generated() >= s.params.max_tokens) {
                const std::vector<int32_t> got(s.tokens.begin() + s.n_prompt, s.tokens.end());
                EXPECT_EQ(got, expect[s.id]) << "seed " << seed << " request " << s.id;
                const ze::RequestId id = s.id;
                sched.remove(&s);
                live.erase(id);
                expect.erase(id);
                ++out.finished;
            }
        }
        sched.check_invariants();
    }
    EXPECT_TRUE(live.empty()) << "requests left unfinished (seed " << seed << ")";
    EXPECT_TRUE(sched.idle());
    sched.check_invariants();
    EXPECT_EQ(bm.n_used(), 0);
    EXPECT_EQ(bm.n_free() + bm.n_cached(), cfg.n_blocks);
    out.preemptions = sched.counters().preemptions;
    out.hits = sched.counters().hits;
    return out;
}

}  // namespace

TEST(Scheduler, RandomisedRoomyPoolCacheOn) {
    Outcome total;
    for (unsigned seed = 1; seed <= 12; ++seed) {
        const Outcome o = simulate({64, 4, 6, 16, true, 40, 20}, seed);
        total.hits += o.hits;
        total.finished += o.finished;
    }
    EXPECT_GT(total.hits, 0u);  // shared stems do hit the cache
    EXPECT_GT(total.finished, 300);
}

TEST(Scheduler, RandomisedTinyPoolPreempts) {
    for (const bool cache : {true, false}) {
        uint64_t preemptions = 0;
        for (unsigned seed = 1; seed <= 12; ++seed) {
            preemptions += simulate({12, 4, 8, 32, cache, 30, 10}, seed).preemptions;
        }
        EXPECT_GT(preemptions, 0u) << "cache " << cache;
    }
}

TEST(Scheduler, RandomisedBlockSizesAndBudgets) {
    for (int bs : {1, 3, 16}) {
        for (int budget : {1, 5, 64}) {
            for (unsigned seed = 1; seed <= 3; ++seed) {
                simulate({bs == 16 ? 12 : 40, bs, 4, budget, seed % 2 == 1, 15, 30}, seed);
            }
        }
    }
}

TEST(Scheduler, FullPrefixHitRecomputesLastTokenInAPrivateCopy) {
    ze::BlockManager bm(8, 4, true);
    auto policy = ze::make_fcfs_policy();
    std::vector<std::pair<int32_t, int32_t>> copies;
    ze::Scheduler sched({4, 64}, bm, *policy,
                        [&](int32_t s, int32_t d) { copies.emplace_back(s, d); });
    ze::RequestParams p;
    p.prompt = {1, 2, 3, 4, 5, 6, 7, 8};  // two full blocks
    p.max_tokens = 4;
    ze::Sequence a(1, 1, p, nullptr), b(2, 2, p, nullptr);
    sched.add(&a);
    ze::StepPlan s1 = sched.schedule();
    ASSERT_EQ(s1.seqs.size(), 1u);
    EXPECT_EQ(s1.seqs[0].n_tokens, 8);
    sched.commit(s1);
    a.tokens.push_back(9);  // a keeps running and owns both full blocks
    sched.add(&b);
    ze::StepPlan s2 = sched.schedule();
    ASSERT_EQ(s2.seqs.size(), 2u);
    EXPECT_EQ(s2.seqs[1].seq, &b);
    EXPECT_EQ(s2.seqs[1].n_tokens, 1);  // only the last prompt token runs
    EXPECT_EQ(b.n_computed, 7);
    EXPECT_EQ(b.usage.cached_prompt_tokens, 7);
    EXPECT_EQ(b.blocks[0], a.blocks[0]);  // shared
    EXPECT_NE(b.blocks[1], a.blocks[1]);  // copied before the write
    ASSERT_EQ(copies.size(), 1u);
    EXPECT_EQ(copies[0], std::make_pair(a.blocks[1], b.blocks[1]));
    EXPECT_EQ(sched.counters().hits, 2u);
    sched.check_invariants();
    sched.commit(s2);
    sched.remove(&a);
    sched.remove(&b);
    sched.check_invariants();
    EXPECT_EQ(bm.n_used(), 0);
}

TEST(Scheduler, FullHitWithoutASpareBlockRecomputesTheLastBlock) {
    ze::BlockManager bm(2, 4, true);  // exactly one 8-token sequence
    auto policy = ze::make_fcfs_policy();
    int copies = 0;
    ze::Scheduler sched({2, 64}, bm, *policy, [&](int32_t, int32_t) { ++copies; });
    ze::RequestParams p;
    p.prompt = {1, 2, 3, 4, 5, 6, 7, 8};
    p.max_tokens = 1;
    ze::Sequence a(1, 1, p, nullptr), b(2, 2, p, nullptr);
    sched.add(&a);
    const ze::StepPlan s1 = sched.schedule();
    sched.commit(s1);
    sched.remove(&a);  // both blocks now cached
    EXPECT_EQ(bm.n_cached(), 2);
    sched.add(&b);
    const ze::StepPlan s2 = sched.schedule();
    ASSERT_EQ(s2.seqs.size(), 1u);
    EXPECT_EQ(b.n_computed, 4);  // first block shared, second recomputed in place of a copy
    EXPECT_EQ(s2.seqs[0].n_tokens, 4);
    EXPECT_EQ(b.usage.cached_prompt_tokens, 4);
    EXPECT_EQ(copies, 0);
    sched.check_invariants();
    sched.commit(s2);
    sched.remove(&b);
    sched.check_invariants();
    EXPECT_EQ(bm.n_used(), 0);
}
