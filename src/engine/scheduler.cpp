// zinc/engine/scheduler.cpp — step planning, admission with prefix matching, preemption.
#include "engine/scheduler.h"

#include <algorithm>
#include <span>

#include "util/check.h"

namespace zinc::engine {

Scheduler::Scheduler(const SchedulerOptions& opts, BlockManager& blocks, SchedulingPolicy& policy,
                     std::function<void(int32_t, int32_t)> copy_block)
    : opts_(opts), bm_(blocks), policy_(policy), copy_block_(std::move(copy_block)) {
    ZINC_CHECK(opts.n_parallel > 0 && opts.max_batch_tokens > 0);
}

void Scheduler::insert_waiting(Sequence* s) {
    auto cmp = [this](const Sequence* a, const Sequence* b) { return policy_.before(*a, *b); };
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), s, cmp), s);
}

void Scheduler::add(Sequence* s) {
    ZINC_CHECK(s->state == SeqState::Waiting && s->blocks.empty() && s->n_computed == 0);
    insert_waiting(s);
}

void Scheduler::release_blocks(Sequence& s) {
    // Last block first: the prefix cache's LRU list then evicts a released chain from its tail,
    // keeping the shared beginnings longest.
    for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) bm_.release(*it);
    s.blocks.clear();
    s.n_computed = 0;
    s.n_blocks_registered = 0;
}

void Scheduler::remove(Sequence* s) {
    if (s->state == SeqState::Running) {
        running_.erase(std::find(running_.begin(), running_.end(), s));
        policy_.on_release(*s);
    } else if (s->state == SeqState::Waiting) {
        waiting_.erase(std::find(waiting_.begin(), waiting_.end(), s));
    }
    release_blocks(*s);
    s->state = SeqState::Finished;
}

void Scheduler::ensure_hashes(Sequence& s, int32_t n_full) {
    const int32_t bs = bm_.block_size();
    while (static_cast<int32_t>(s.block_hashes.size()) < n_full) {
        const size_t i = s.block_hashes.size();
        const uint64_t parent = i == 0 ? kRootHash : s.block_hashes[i - 1];
        s.block_hashes.push_back(chain_hash(
            parent, std::span<const int32_t>(s.tokens).subspan(i * bs, static_cast<size_t>(bs))));
    }
}

bool Scheduler::reserve(Sequence& s, int32_t n) {
    const int32_t bs = bm_.block_size();
    const int32_t end = s.n_computed + n;
    const int32_t need = (end + bs - 1) / bs;
    const int32_t n_new = std::max<int32_t>(0, need - static_cast<int32_t>(s.blocks.size()));
    const int32_t first = s.n_computed / bs;  // block holding the first new position
    const bool in_table = first < static_cast<int32_t>(s.blocks.size());
    const bool copy = in_table && (bm_.ref_count(s.blocks[first]) > 1 ||
                                   bm_.cache().is_registered(s.blocks[first]));
    if (bm_.n_available() < n_new + (copy ? 1 : 0)) return false;
    if (copy) {
        const int32_t b = bm_.make_writable(s.blocks[first], copy_block_);
        ZINC_CHECK(b >= 0);
        s.blocks[first] = b;
        s.n_blocks_registered = std::min(s.n_blocks_registered, first);
    }
    for (int32_t i = 0; i < n_new; ++i) {
        const int32_t b = bm_.allocate();
        ZINC_CHECK(b >= 0);
        s.blocks.push_back(b);
    }
    return true;
}

void Scheduler::preempt(Sequence& s, StepPlan& plan) {
    running_.erase(std::find(running_.begin(), running_.end(), &s));
    policy_.on_release(s);
    release_blocks(s);
    s.state = SeqState::Waiting;
    ++s.usage.preemptions;
    ++counters_.preemptions;
    insert_waiting(&s);
    plan.preempted.push_back(&s);
}

bool Scheduler::try_admit(Sequence& s, int32_t& budget, StepPlan& plan) {
    ZINC_CHECK(s.blocks.empty() && s.n_computed == 0);
    const int32_t bs = bm_.block_size();
    const int32_t n_tok = static_cast<int32_t>(s.tokens.size());
    const int32_t n_full = n_tok / bs;
    std::vector<int32_t> hits;
    if (bm_.prefix_cache_enabled()) {
        ensure_hashes(s, n_full);
        for (int32_t i = 0; i < n_full; ++i) {
            const uint64_t parent = i == 0 ? kRootHash : s.block_hashes[i - 1];
            const int32_t b =
                bm_.cache().lookup(s.block_hashes[i], parent,
                                   std::span<const int32_t>(s.tokens).subspan(
                                       static_cast<size_t>(i) * bs, static_cast<size_t>(bs)));
            if (b < 0) break;
            hits.push_back(b);
        }
    }
    // Every token cached: the last one is recomputed (its logits are needed) into a private
    // copy of the last block (copy-on-write; the cached original stays as it is). Without a
    // block to spare for the copy, the last block is not shared but recomputed whole.
    auto blocks_needed = [&](int32_t n_hit, int32_t& n_cached, int32_t& n) {
        n_cached = std::min(n_hit * bs, n_tok - 1);
        n = std::min(n_tok - n_cached, budget);
        const int32_t need = (n_cached + n + bs - 1) / bs;
        int32_t idle_hits = 0;
        for (int32_t i = 0; i < n_hit; ++i) idle_hits += bm_.ref_count(hits[i]) == 0 ? 1 : 0;
        const bool copy = n_hit * bs > n_cached;
        return std::max(0, need - n_hit) + (copy ? 1 : 0) + idle_hits;
    };
    int32_t n_hit = static_cast<int32_t>(hits.size());
    int32_t n_cached = 0, n = 0;
    if (bm_.n_available() < blocks_needed(n_hit, n_cached, n) && n_hit * bs == n_tok) {
        hits.pop_back();
        --n_hit;
    }
    if (bm_.n_available() < blocks_needed(n_hit, n_cached, n)) return false;
    const int32_t end = n_cached + n;

    for (int32_t b : hits) bm_.retain(b);
    s.blocks = hits;
    s.n_computed = n_cached;
    s.n_blocks_registered = n_hit;
    const bool ok = reserve(s, n);
    ZINC_CHECK(ok);

    if (!s.admitted_once) {
        s.admitted_once = true;
        s.usage.cached_prompt_tokens = n_cached;
        const int32_t n_partial = n_tok % bs != 0 ? 1 : 0;
        if (!bm_.prefix_cache_enabled()) {
            counters_.miss_disabled += static_cast<uint64_t>(n_full + n_partial);
        } else {
            counters_.hits += static_cast<uint64_t>(n_hit);
            counters_.miss_partial += static_cast<uint64_t>(n_partial);
            for (int32_t i = n_hit; i < n_full; ++i) {
                const uint64_t h = s.block_hashes[i];
                // Cached but unreachable (an earlier block of the chain was evicted) counts as
                // evicted too.
                if (bm_.cache().was_evicted(h) || bm_.cache().contains(h)) {
                    ++counters_.miss_evicted;
                } else {
                    ++counters_.miss_cold;
                }
            }
        }
    }

    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &s));
    s.state = SeqState::Running;
    running_.push_back(&s);
    policy_.on_admit(s);
    plan.seqs.push_back({&s, n, end == n_tok});
    plan.n_tokens += n;
    budget -= n;
    return true;
}

StepPlan Scheduler::schedule() {
    StepPlan plan;
    int32_t budget = opts_.max_batch_tokens;
    std::stable_sort(
        running_.begin(), running_.end(),
        [this](const Sequence* a, const Sequence* b) { return policy_.before(*a, *b); });
    for (size_t i = 0; i < running_.size() && budget > 0;) {
        Sequence* s = running_[i];
        const int32_t n = std::min(s->n_pending(), budget);
        ZINC_CHECK(n > 0);
        bool scheduled = false;
        while (true) {
            if (reserve(*s, n)) {
                scheduled = true;
                break;
            }
            const std::span<const Sequence* const> cand(running_.data() + i, running_.size() - i);
            const size_t v = policy_.pick_victim(cand);
            ZINC_CHECK(v < cand.size());
            Sequence* victim = running_[i + v];
            preempt(*victim, plan);
            if (victim == s) break;
        }
        if (!scheduled) continue;  // s went back to waiting; running_[i] is the next one
        plan.seqs.push_back({s, n, s->n_computed + n == static_cast<int32_t>(s->tokens.size())});
        plan.n_tokens += n;
        budget -= n;
        ++i;
    }
    if (plan.preempted.empty()) {
        while (!waiting_.empty() && budget > 0 &&
               static_cast<int32_t>(running_.size()) < opts_.n_parallel) {
            Sequence* w = waiting_.front();
            SchedulerLoad load;
            load.n_running = static_cast<int32_t>(running_.size());
            load.n_waiting = static_cast<int32_t>(waiting_.size());
            load.n_parallel = opts_.n_parallel;
            load.blocks_available = bm_.n_available();
            load.blocks_total = bm_.n_blocks();
            if (!policy_.may_admit(*w, load)) break;
            if (!try_admit(*w, budget, plan)) break;
        }
    }
    return plan;
}

void Scheduler::commit(const StepPlan& plan) {
    const int32_t bs = bm_.block_size();
    for (const ScheduledSeq& ss : plan.seqs) {
        Sequence& s = *ss.seq;
        s.n_computed += ss.n_tokens;
        ZINC_CHECK(s.n_computed <= static_cast<int32_t>(s.tokens.size()));
        const int32_t n_full = s.n_computed / bs;
        if (!bm_.prefix_cache_enabled()) {
            s.n_blocks_registered = n_full;
            continue;
        }
        ensure_hashes(s, n_full);
        for (int32_t i = s.n_blocks_registered; i < n_full; ++i) {
            const uint64_t parent = i == 0 ? kRootHash : s.block_hashes[i - 1];
            bm_.register_full(s.blocks[i], s.block_hashes[i], parent,
                              std::span<const int32_t>(s.tokens).subspan(
                                  static_cast<size_t>(i) * bs, static_cast<size_t>(bs)));
        }
        s.n_blocks_registered = std::max(s.n_blocks_registered, n_full);
    }
}

void Scheduler::check_invariants() const {
    const int32_t bs = bm_.block_size();
    std::vector<int32_t> owners(static_cast<size_t>(bm_.n_blocks()), 0);
    ZINC_CHECK(static_cast<int32_t>(running_.size()) <= opts_.n_parallel);
    for (const Sequence* s : running_) {
        ZINC_CHECK(s->state == SeqState::Running);
        ZINC_CHECK(s->n_computed >= 0 && s->n_computed <= static_cast<int32_t>(s->tokens.size()));
        ZINC_CHECK(static_cast<int32_t>(s->blocks.size()) * bs >= s->n_computed);
        ZINC_CHECK(static_cast<int32_t>(s->blocks.size()) <=
                   (static_cast<int32_t>(s->tokens.size()) + bs - 1) / bs);
        std::vector<int32_t> sorted = s->blocks;
        std::sort(sorted.begin(), sorted.end());
        ZINC_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
        for (int32_t b : s->blocks) ++owners[b];
    }
    for (const Sequence* s : waiting_) {
        ZINC_CHECK(s->state == SeqState::Waiting && s->blocks.empty() && s->n_computed == 0);
        ZINC_CHECK(std::find(running_.begin(), running_.end(), s) == running_.end());
    }
    bm_.check_invariants(owners);
}

}  // namespace zinc::engine
