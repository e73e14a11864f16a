// zinc/engine/policy.h — the scheduling policy: admission, ordering, rate limits and preemption
// in one small interface, so the step loop (engine/scheduler.h) never hard-codes who goes first.
//
// The scheduler asks the policy, at each step boundary (schedule()):
//   on_step_begin — first: refresh time-based state (token buckets) and re-rank; the running and
//                waiting lists are then re-sorted with before(), so waiting order is re-evaluated
//                every step, not only when a request arrives.
//   order      — before(a, b): a gets resources before b. Decodes, then prefill chunks, are
//                scheduled and waiting sequences admitted in this order; a sequence is only
//                preempted for one that comes before it (or for itself).
//   admission  — may_admit(s, load): may waiting sequence s start now? (slots and KV blocks are
//                checked by the scheduler; a policy adds its own limits, e.g. per-tenant quotas).
//                A refusal skips s only: the sequences behind it are still considered (no
//                head-of-line blocking).
//   rates      — may_decode(s): may running s take its decode token this step; and
//                prefill_allowance(s): at most how many prompt rows s may run this step (token
//                buckets). A sequence held back stays as it is (blocks kept) and is asked again
//                next step.
//   preemption — pick_victim(candidates): which running sequence gives its blocks back when
//                blocks run out (it is recomputed later); preempt_for(w, running): a running
//                sequence to preempt so that waiting w can be admitted when no slot or too few
//                blocks are left (QoS classes: batch for interactive), or none.
// on_enqueue / on_finish / on_admit / on_release / on_served let a stateful policy keep per-tenant
// accounting: on_served gets the rows of each sequence in each step that ran (prefill rows and
// decode rows), the basis of VTC-style counters of tokens served. FCFS (make_fcfs_policy) is the
// default; engine/tenant_policy.h is the multi-tenant one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace zinc::engine {

struct Sequence;

/// What the scheduler knows when it asks may_admit.
struct SchedulerLoad {
    int32_t n_running = 0;
    int32_t n_waiting = 0;
    int32_t n_parallel = 0;        // slots
    int32_t blocks_available = 0;  // free + cached
    int32_t blocks_total = 0;
    int32_t block_size = 16;
};

/// Prefill tiers (SchedulingPolicy::prefill_tier), first served first.
inline constexpr int32_t kPrefillTierFirst = 0;       // interactive
inline constexpr int32_t kPrefillTierNormal = 1;      // standard
inline constexpr int32_t kPrefillTierBackground = 2;  // batch: chunks capped per step

class SchedulingPolicy {
  public:
    virtual ~SchedulingPolicy() = default;
    /// Called first in every schedule() (on the step thread).
    virtual void on_step_begin() {}
    /// Strict weak order: true when a should be served before b.
    virtual bool before(const Sequence& a, const Sequence& b) const = 0;
    /// Whether waiting sequence s may be admitted now (beyond slots and blocks).
    virtual bool may_admit(const Sequence& s, const SchedulerLoad& load) const = 0;
    /// Whether running sequence s (all of whose tokens but the last are computed) may run its
    /// decode row this step.
    virtual bool may_decode(const Sequence&) const { return true; }
    /// Most prompt rows s (running or being admitted) may run this step; 0 holds it back.
    virtual int32_t prefill_allowance(const Sequence&) const {
        return std::numeric_limits<int32_t>::max();
    }
    /// Prefill tier of s for class-aware chunks (engine/scheduler.h, step 3): a tier's prefill
    /// chunks take the step's budget before those of higher tiers; kPrefillTierBackground
    /// chunks are capped per step. FCFS: every sequence kPrefillTierNormal (one tier).
    virtual int32_t prefill_tier(const Sequence&) const { return kPrefillTierNormal; }
    /// Whether first-tier (interactive) work is queued or running now, or may arrive any moment
    /// (a first-tier tenant had work a moment ago): the scheduler then keeps background-tier
    /// prefill short (SchedulerOptions::interactive_guard). FCFS: never.
    virtual bool first_tier_active() const { return false; }
    /// Index into candidates (running sequences sorted by before(), all of them eligible) of the
    /// one to preempt. candidates is never empty.
    virtual size_t pick_victim(std::span<const Sequence* const> candidates) const = 0;
    /// Index into running (sorted by before()) of a sequence to preempt so that waiting w can be
    /// admitted, or nullopt (the default: never preempt for admission).
    virtual std::optional<size_t> preempt_for(const Sequence& /*w*/,
                                              std::span<const Sequence* const> /*running*/) const {
        return std::nullopt;
    }
    /// s was queued (Scheduler::add; not called again when a preempted sequence re-queues).
    virtual void on_enqueue(const Sequence&) {}
    /// s left the scheduler for good (finished or cancelled; Scheduler::remove), any state.
    virtual void on_finish(const Sequence&) {}
    virtual void on_admit(const Sequence&) {}
    virtual void on_release(const Sequence&) {}
    /// A committed step ran n_prefill prompt (or recomputed) rows and n_decode decode rows of s.
    virtual void on_served(const Sequence&, int32_t /*n_prefill*/, int32_t /*n_decode*/) {}
    /// Embedding inputs (engine/embedding_step.h) are prompt rows of their tenant
    /// (EmbeddingParams::tenant): how many of its rows may run now (0 holds its jobs back), and
    /// the rows an embedding step ran for it, charged as prefill rows.
    virtual int32_t embedding_allowance(const std::string& /*tenant*/) const {
        return std::numeric_limits<int32_t>::max();
    }
    virtual void on_embedding_served(const std::string& /*tenant*/, int32_t /*rows*/) {}
    virtual const char* name() const = 0;
};

/// First come, first served: order by submission; admit whenever a slot and blocks are free;
/// preempt the most recently submitted (the last candidate), as vLLM does.
std::unique_ptr<SchedulingPolicy> make_fcfs_policy();

}  // namespace zinc::engine
