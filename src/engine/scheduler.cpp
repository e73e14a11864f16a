// zinc/engine/scheduler.cpp — step planning, admission with prefix matching, preemption.
#include "engine/scheduler.h"

#include <algorithm>
#include <limits>
#include <span>

#include "util/check.h"

namespace zinc::engine {

namespace {

StepBudgetOptions budget_options(const SchedulerOptions& o) {
    StepBudgetOptions b;
    b.tpot_ms = o.tpot_target_ms;
    b.max_batch_tokens = o.max_batch_tokens;
    b.min_chunk = o.min_prefill_chunk;
    return b;
}

// Max-min fair split of `total` rows among demands (water-filling): everyone gets
// min(demand, level) for the largest level that fits; the rows left below the next level go one
// each to the unsatisfied ones in list (policy) order.
std::vector<int32_t> water_fill(const std::vector<int32_t>& demand, int32_t total) {
    std::vector<int32_t> share(demand.size(), 0);
    int64_t sum = 0;
    for (int32_t d : demand) sum += d;
    if (sum <= total) return demand;
    std::vector<int32_t> sorted = demand;
    std::sort(sorted.begin(), sorted.end());
    int64_t left = total;
    int64_t level = 0;
    size_t n_above = sorted.size();
    for (int32_t d : sorted) {
        const int64_t cost = (static_cast<int64_t>(d) - level) * static_cast<int64_t>(n_above);
        if (cost > left) break;
        left -= cost;
        level = d;
        --n_above;
    }
    level += n_above > 0 ? left / static_cast<int64_t>(n_above) : 0;
    int64_t used = 0;
    for (size_t i = 0; i < demand.size(); ++i) {
        share[i] = static_cast<int32_t>(std::min<int64_t>(demand[i], level));
        used += share[i];
    }
    for (size_t i = 0; i < demand.size() && used < total; ++i) {
        if (share[i] < demand[i]) {
            ++share[i];
            ++used;
        }
    }
    return share;
}

// Class-aware split: tier by tier, lowest first, each tier water-filled from what the tiers
// before it left; background-tier shares together at most bg_cap.
std::vector<int32_t> tiered_fill(const std::vector<int32_t>& demand,
                                 const std::vector<int32_t>& tier, int32_t total, int32_t bg_cap) {
    std::vector<int32_t> share(demand.size(), 0);
    std::vector<int32_t> tiers = tier;
    std::sort(tiers.begin(), tiers.end());
    tiers.erase(std::unique(tiers.begin(), tiers.end()), tiers.end());
    int32_t left = total;
    for (int32_t t : tiers) {
        const int32_t cap = t >= kPrefillTierBackground ? std::min(left, bg_cap) : left;
        if (cap <= 0) continue;
        std::vector<size_t> idx;
        std::vector<int32_t> d;
        for (size_t i = 0; i < demand.size(); ++i) {
            if (tier[i] != t) continue;
            idx.push_back(i);
            d.push_back(demand[i]);
        }
        const std::vector<int32_t> s = water_fill(d, cap);
        for (size_t k = 0; k < idx.size(); ++k) {
            share[idx[k]] = s[k];
            left -= s[k];
        }
    }
    return share;
}

}  // namespace

int32_t Scheduler::tier_of(const Sequence& s) const {
    return opts_.class_aware_prefill ? policy_.prefill_tier(s) : kPrefillTierNormal;
}

bool Scheduler::has_first_tier_prefill(const StepPlan& plan) const {
    return std::any_of(plan.seqs.begin(), plan.seqs.end(), [this](const ScheduledSeq& ss) {
        return !ss.decode && tier_of(*ss.seq) <= kPrefillTierFirst;
    });
}

int32_t Scheduler::background_left(const StepPlan& plan) const {
    if (!opts_.class_aware_prefill) return std::numeric_limits<int32_t>::max();
    if (guard_on() && has_first_tier_prefill(plan)) return 0;
    if (background_cap_ == std::numeric_limits<int32_t>::max()) return background_cap_;
    int32_t used = 0;
    for (const ScheduledSeq& ss : plan.seqs)
        if (!ss.decode && tier_of(*ss.seq) >= kPrefillTierBackground) used += ss.n_tokens;
    return std::max(0, background_cap_ - used);
}

void Scheduler::set_background_cap(const StepPlan& plan) {
    background_cap_ = opts_.background_prefill_chunk > 0 ? opts_.background_prefill_chunk
                                                         : std::numeric_limits<int32_t>::max();
    if (!guard_on() || first_tier_rows_ <= 0 || !budgeter_.fitted() || !policy_.first_tier_active())
        return;
    const double ms = opts_.interactive_guard * budgeter_.predict_ms(first_tier_rows_);
    const int32_t fit = std::max(0, budgeter_.rows_within(ms) - plan.n_tokens);
    background_cap_ = std::min(background_cap_, std::max(fit, opts_.min_prefill_chunk));
}

void Scheduler::defer_background_decodes(StepPlan& plan) {
    if (!guard_on() || !has_first_tier_prefill(plan)) return;
    const int32_t bs = bm_.block_size();
    auto deferred = [&](const ScheduledSeq& ss) {
        if (!ss.decode || tier_of(*ss.seq) < kPrefillTierBackground) return false;
        Sequence& s = *ss.seq;
        plan.n_tokens -= ss.n_tokens;
        plan.n_decode_rows -= ss.n_tokens;
        plan.n_draft_rows -= ss.n_draft;
        ++plan.n_deferred;
        s.planned_step = 0;
        // Blocks reserved for draft positions beyond its tokens go back (as accept_drafts);
        // the one for its pending token stays: it is in the table for the next step.
        const auto keep =
            static_cast<size_t>((static_cast<int32_t>(s.tokens.size()) + bs - 1) / bs);
        while (s.blocks.size() > keep) {
            bm_.release(s.blocks.back());
            s.blocks.pop_back();
        }
        return true;
    };
    std::erase_if(plan.seqs, deferred);
}

Scheduler::Scheduler(const SchedulerOptions& opts, BlockManager& blocks, SchedulingPolicy& policy,
                     std::function<void(int32_t, int32_t)> copy_block)
    : opts_(opts),
      bm_(blocks),
      policy_(policy),
      copy_block_(std::move(copy_block)),
      budgeter_(budget_options(opts)) {
    ZINC_CHECK(opts.n_parallel > 0 && opts.max_batch_tokens > 0 && opts.min_prefill_chunk > 0);
    for (int32_t i = opts.n_parallel - 1; i >= 0; --i) free_slots_.push_back(i);
}

void Scheduler::insert_waiting(Sequence* s) {
    auto cmp = [this](const Sequence* a, const Sequence* b) { return policy_.before(*a, *b); };
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), s, cmp), s);
}

void Scheduler::add(Sequence* s) {
    ZINC_CHECK(s->state == SeqState::Waiting && s->blocks.empty() && s->n_computed == 0);
    policy_.on_enqueue(*s);
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
        free_slots_.push_back(s->state_slot);
        s->state_slot = -1;
    } else if (s->state == SeqState::Waiting) {
        waiting_.erase(std::find(waiting_.begin(), waiting_.end(), s));
    }
    release_blocks(*s);
    if (s->state != SeqState::Finished) policy_.on_finish(*s);
    s->state = SeqState::Finished;
}

void Scheduler::ensure_hashes(Sequence& s, int32_t n_full) {
    const int32_t bs = bm_.block_size();
    while (static_cast<int32_t>(s.block_hashes.size()) < n_full) {
        const size_t i = s.block_hashes.size();
        const uint64_t parent = i == 0 ? s.hash_root : s.block_hashes[i - 1];
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
    free_slots_.push_back(s.state_slot);
    s.state_slot = -1;
    s.state = SeqState::Waiting;
    ++s.usage.preemptions;
    ++counters_.preemptions;
    insert_waiting(&s);
    plan.preempted.push_back(&s);
}

bool Scheduler::try_admit(Sequence& s, int32_t max_n, StepPlan& plan) {
    ZINC_CHECK(s.blocks.empty() && s.n_computed == 0);
    const int32_t bs = bm_.block_size();
    const int32_t n_tok = static_cast<int32_t>(s.tokens.size());
    const int32_t n_full = n_tok / bs;
    std::vector<int32_t> hits;
    if (bm_.prefix_cache_enabled()) {
        ensure_hashes(s, n_full);
        for (int32_t i = 0; i < n_full; ++i) {
            const uint64_t parent = i == 0 ? s.hash_root : s.block_hashes[i - 1];
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
        n = std::min(n_tok - n_cached, max_n);
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
    ZINC_CHECK(!free_slots_.empty() && s.state_slot < 0);  // running < n_parallel here
    s.state_slot = free_slots_.back();
    free_slots_.pop_back();
    s.state = SeqState::Running;
    running_.push_back(&s);
    policy_.on_admit(s);
    s.planned_step = step_;
    plan.seqs.push_back({&s, n, end == n_tok, false});
    plan.n_tokens += n;
    plan.n_prefill_rows += n;
    return true;
}

SchedulerLoad Scheduler::load() const {
    SchedulerLoad l;
    l.n_running = static_cast<int32_t>(running_.size());
    l.n_waiting = static_cast<int32_t>(waiting_.size());
    l.n_parallel = opts_.n_parallel;
    l.blocks_available = bm_.n_available();
    l.blocks_total = bm_.n_blocks();
    l.block_size = bm_.block_size();
    return l;
}

void Scheduler::sort_queues() {
    auto cmp = [this](const Sequence* a, const Sequence* b) { return policy_.before(*a, *b); };
    std::stable_sort(running_.begin(), running_.end(), cmp);
    std::stable_sort(waiting_.begin(), waiting_.end(), cmp);
}

bool Scheduler::reserve_or_preempt(size_t i, int32_t n, StepPlan& plan, bool& preempted_any) {
    Sequence* s = running_[i];
    while (!reserve(*s, n)) {
        std::vector<const Sequence*> cand{s};
        for (size_t j = i + 1; j < running_.size(); ++j)
            if (running_[j]->planned_step != step_) cand.push_back(running_[j]);
        const size_t v = policy_.pick_victim(cand);
        ZINC_CHECK(v < cand.size());
        Sequence* victim = const_cast<Sequence*>(cand[v]);
        preempt(*victim, plan);
        preempted_any = true;
        if (victim == s) return false;
    }
    return true;
}

// QoS: a waiting sequence that finds no slot, or too few blocks for its prompt, may take them
// from a running one the policy names (batch before standard, never interactive). At most one
// victim per waiting sequence and step for a slot; blocks while the policy names victims.
void Scheduler::preempt_for_admission(StepPlan& plan) {
    const int32_t bs = bm_.block_size();
    const std::vector<Sequence*> waiting = waiting_;
    for (Sequence* w : waiting) {
        if (w->state != SeqState::Waiting || !policy_.may_admit(*w, load())) continue;
        const int32_t need = (static_cast<int32_t>(w->tokens.size()) + bs - 1) / bs;
        for (size_t guard = running_.size(); guard > 0; --guard) {
            const bool no_slot = static_cast<int32_t>(running_.size()) >= opts_.n_parallel;
            if (!no_slot && bm_.n_available() >= need) break;
            const std::optional<size_t> v = policy_.preempt_for(
                *w, std::span<const Sequence* const>(
                        const_cast<const Sequence* const*>(running_.data()), running_.size()));
            if (!v) break;
            ZINC_CHECK(*v < running_.size());
            preempt(*running_[*v], plan);
            ++counters_.preemptions_qos;
        }
        // Later waiting sequences only get slots this one leaves.
        if (static_cast<int32_t>(running_.size()) >= opts_.n_parallel) break;
    }
}

void Scheduler::plan_prefills(int32_t left, bool admit, StepPlan& plan) {
    struct Cand {
        Sequence* s;
        int32_t demand;
        bool running;
    };
    std::vector<const Sequence*> tried;  // waiting sequences considered this step
    bool block_preempted = false;
    // Rounds: the running prefills and as many admissible waiting sequences as there are free
    // slots share the budget; when admissions fall through (the policy's limit was reached by
    // an earlier one of the round, or blocks do not fit), the next round offers what is left to
    // waiting sequences not tried yet.
    for (bool first = true; left > 0; first = false) {
        std::vector<Cand> cands;
        if (first) {
            for (Sequence* s : running_) {
                // Decodes had their turn (a held-back one waits for the next step).
                if (s->planned_step == step_ || s->is_decode()) continue;
                const int32_t d = std::min(s->n_pending(), policy_.prefill_allowance(*s));
                if (d <= 0) {
                    plan.held_back = true;
                    continue;
                }
                cands.push_back({s, d, true});
            }
        }
        if (admit && !block_preempted) {
            int32_t free_slots = opts_.n_parallel - static_cast<int32_t>(running_.size());
            for (Sequence* w : waiting_) {
                if (free_slots <= 0) break;
                if (std::find(tried.begin(), tried.end(), w) != tried.end()) continue;
                tried.push_back(w);
                if (!policy_.may_admit(*w, load())) {
                    plan.held_back = true;
                    continue;
                }
                const int32_t d =
                    std::min(static_cast<int32_t>(w->tokens.size()), policy_.prefill_allowance(*w));
                if (d <= 0) {
                    plan.held_back = true;
                    continue;
                }
                cands.push_back({w, d, false});
                --free_slots;
            }
        }
        if (cands.empty()) break;
        std::vector<int32_t> demand, tier;
        for (const Cand& c : cands) {
            demand.push_back(c.demand);
            tier.push_back(tier_of(*c.s));
        }
        // The interactive guard: a round with a first-tier candidate leaves batch nothing.
        const bool has_first =
            guard_on() && std::find(tier.begin(), tier.end(), kPrefillTierFirst) != tier.end();
        const std::vector<int32_t> share =
            tiered_fill(demand, tier, left, has_first ? 0 : background_left(plan));
        for (size_t k = 0; k < cands.size(); ++k) {
            Sequence* s = cands[k].s;
            if (share[k] <= 0) continue;
            if (cands[k].running) {
                if (s->state != SeqState::Running) continue;  // preempted for an earlier one
                const size_t i = static_cast<size_t>(
                    std::find(running_.begin(), running_.end(), s) - running_.begin());
                if (!reserve_or_preempt(i, share[k], plan, block_preempted)) continue;
                s->planned_step = step_;
                plan.seqs.push_back(
                    {s, share[k],
                     s->n_computed + share[k] == static_cast<int32_t>(s->tokens.size()), false});
                plan.n_tokens += share[k];
                plan.n_prefill_rows += share[k];
            } else {
                // No admission in a step that had to preempt for blocks (it would thrash); a
                // sequence whose blocks do not fit is skipped, the ones behind it still tried.
                if (block_preempted || s->state != SeqState::Waiting) continue;
                if (static_cast<int32_t>(running_.size()) >= opts_.n_parallel) break;
                // Asked again: an admission earlier in this round may have used a limit.
                if (!policy_.may_admit(*s, load())) {
                    plan.held_back = true;
                    continue;
                }
                try_admit(*s, share[k], plan);
            }
        }
        left = plan.budget - plan.n_tokens;
        if (static_cast<int32_t>(running_.size()) >= opts_.n_parallel) break;
    }
    // What a candidate could not use (a prefix hit, a skipped admission) goes to the others, in
    // tier, then policy order, without preempting (batch chunks still within their cap).
    int32_t rest = plan.budget - plan.n_tokens;
    std::vector<int32_t> tiers;
    for (const ScheduledSeq& ss : plan.seqs)
        if (!ss.decode) tiers.push_back(tier_of(*ss.seq));
    std::sort(tiers.begin(), tiers.end());
    tiers.erase(std::unique(tiers.begin(), tiers.end()), tiers.end());
    for (int32_t t : tiers) {
        for (ScheduledSeq& ss : plan.seqs) {
            if (rest <= 0) return;
            if (ss.decode || tier_of(*ss.seq) != t) continue;
            Sequence& s = *ss.seq;
            const int32_t allow = policy_.prefill_allowance(s);
            const int32_t want = std::min(s.n_pending(), allow);
            int32_t extra = std::min(rest, want - ss.n_tokens);
            if (t >= kPrefillTierBackground) extra = std::min(extra, background_left(plan));
            if (extra <= 0 || !reserve(s, ss.n_tokens + extra)) continue;
            ss.n_tokens += extra;
            ss.want_logits = s.n_computed + ss.n_tokens == static_cast<int32_t>(s.tokens.size());
            plan.n_tokens += extra;
            plan.n_prefill_rows += extra;
            rest -= extra;
        }
    }
}

StepPlan Scheduler::schedule() {
    StepPlan plan;
    ++step_;
    policy_.on_step_begin();
    sort_queues();
    preempt_for_admission(plan);

    // Decodes first, in policy order.
    int32_t n_dec = 0;
    for (const Sequence* s : running_) n_dec += s->is_decode() ? 1 : 0;
    plan.budget = budgeter_.budget(n_dec);
    // Draft rows (speculative decoding) take what the budget has beyond one row per decode,
    // leaving a prefill chunk's room when prompts are in progress or waiting.
    const bool prefills =
        !waiting_.empty() || std::any_of(running_.begin(), running_.end(),
                                         [](const Sequence* s) { return !s->is_decode(); });
    int32_t spare = std::max(0, plan.budget - n_dec - (prefills ? opts_.min_prefill_chunk : 0));
    bool block_preempted = false;
    for (size_t i = 0; i < running_.size() && plan.n_tokens < plan.budget;) {
        Sequence* s = running_[i];
        if (!s->is_decode()) {
            ++i;
            continue;
        }
        if (!policy_.may_decode(*s)) {
            plan.held_back = true;
            ++i;
            continue;
        }
        // Draft rows only where their blocks fit without preempting anyone.
        int32_t nd = std::min(static_cast<int32_t>(s->draft.size()), spare);
        if (nd > 0 && !reserve(*s, 1 + nd)) nd = 0;
        plan.n_draft_cut += static_cast<int32_t>(s->draft.size()) - nd;
        if (!reserve_or_preempt(i, 1 + nd, plan, block_preempted)) continue;  // running_[i]: next
        s->planned_step = step_;
        spare -= nd;
        plan.seqs.push_back({s, 1 + nd, true, true, nd});
        plan.n_tokens += 1 + nd;
        plan.n_decode_rows += 1 + nd;
        plan.n_draft_rows += nd;
        ++i;
    }
    // Then prefill chunks fill the rest of the budget.
    set_background_cap(plan);
    const int32_t left = plan.budget - plan.n_tokens;
    if (left > 0) plan_prefills(left, !block_preempted, plan);
    defer_background_decodes(plan);
    if (guard_on() && has_first_tier_prefill(plan)) first_tier_rows_ = plan.n_tokens;
    return plan;
}

void Scheduler::commit(const StepPlan& plan) {
    for (const ScheduledSeq& ss : plan.seqs) {
        Sequence& s = *ss.seq;
        policy_.on_served(s, ss.decode ? 0 : ss.n_tokens, ss.decode ? ss.n_tokens : 0);
        s.n_computed += ss.n_tokens - ss.n_draft;
        ZINC_CHECK(s.n_computed <= static_cast<int32_t>(s.tokens.size()));
        register_full_blocks(s);
    }
}

void Scheduler::register_full_blocks(Sequence& s) {
    const int32_t bs = bm_.block_size();
    const int32_t n_full = s.n_computed / bs;
    if (!bm_.prefix_cache_enabled()) {
        s.n_blocks_registered = n_full;
        return;
    }
    ensure_hashes(s, n_full);
    for (int32_t i = s.n_blocks_registered; i < n_full; ++i) {
        const uint64_t parent = i == 0 ? s.hash_root : s.block_hashes[i - 1];
        bm_.register_full(s.blocks[i], s.block_hashes[i], parent,
                          std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(i) * bs,
                                                                     static_cast<size_t>(bs)));
    }
    s.n_blocks_registered = std::max(s.n_blocks_registered, n_full);
}

void Scheduler::accept_drafts(Sequence& s, int32_t n_accepted) {
    ZINC_CHECK(s.state == SeqState::Running && n_accepted >= 0);
    s.n_computed += n_accepted;
    ZINC_CHECK(s.n_computed < static_cast<int32_t>(s.tokens.size()));
    // Blocks past the ones the tokens need held only rejected positions: back to the pool (they
    // were allocated this step, private and unindexed). Rejected slots inside a kept block are
    // beyond n_computed: never read, overwritten by the next step.
    const int32_t bs = bm_.block_size();
    const auto keep = static_cast<size_t>((static_cast<int32_t>(s.tokens.size()) + bs - 1) / bs);
    while (s.blocks.size() > keep) {
        bm_.release(s.blocks.back());
        s.blocks.pop_back();
    }
    // The prefix cache sees accepted tokens only: blocks fully below n_computed.
    register_full_blocks(s);
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
    // State slots: each running sequence holds a distinct one, the rest are free.
    std::vector<int32_t> slots = free_slots_;
    for (const Sequence* s : running_) slots.push_back(s->state_slot);
    std::sort(slots.begin(), slots.end());
    ZINC_CHECK(static_cast<int32_t>(slots.size()) == opts_.n_parallel);
    for (int32_t i = 0; i < opts_.n_parallel; ++i) ZINC_CHECK(slots[static_cast<size_t>(i)] == i);
    for (const Sequence* s : waiting_) {
        ZINC_CHECK(s->state_slot < 0);
        ZINC_CHECK(s->state == SeqState::Waiting && s->blocks.empty() && s->n_computed == 0);
        ZINC_CHECK(std::find(running_.begin(), running_.end(), s) == running_.end());
    }
    bm_.check_invariants(owners);
}

}  // namespace zinc::engine
