// zinc/engine/policy.h — the scheduling policy: admission, ordering and preemption in one small
// interface, so the step loop (engine/scheduler.h) never hard-codes who goes first.
//
// The scheduler asks the policy three things each step:
//   order      — before(a, b): a gets resources before b. Running sequences are scheduled (and
//                waiting ones admitted) in this order; a sequence is only preempted for one
//                that comes before it (or for itself).
//   admission  — may_admit(s, load): may waiting sequence s start now? (slots and KV blocks are
//                checked by the scheduler; a policy adds its own limits, e.g. per-tenant quotas)
//   preemption — pick_victim(candidates): which running sequence gives its blocks back when
//                blocks run out (it is recomputed later).
// on_admit / on_release let a stateful policy keep per-tenant or per-class accounting.
// FCFS is the default. Tenants, quotas and QoS classes are new implementations of this
// interface (RequestParams carries tenant and priority for them); none exists yet.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace zinc::engine {

struct Sequence;

/// What the scheduler knows when it asks may_admit.
struct SchedulerLoad {
    int32_t n_running = 0;
    int32_t n_waiting = 0;
    int32_t n_parallel = 0;        // slots
    int32_t blocks_available = 0;  // free + cached
    int32_t blocks_total = 0;
};

class SchedulingPolicy {
  public:
    virtual ~SchedulingPolicy() = default;
    /// Strict weak order: true when a should be served before b.
    virtual bool before(const Sequence& a, const Sequence& b) const = 0;
    /// Whether waiting sequence s may be admitted now (beyond slots and blocks).
    virtual bool may_admit(const Sequence& s, const SchedulerLoad& load) const = 0;
    /// Index into candidates (running sequences sorted by before(), all of them eligible) of the
    /// one to preempt. candidates is never empty.
    virtual size_t pick_victim(std::span<const Sequence* const> candidates) const = 0;
    virtual void on_admit(const Sequence&) {}
    virtual void on_release(const Sequence&) {}
    virtual const char* name() const = 0;
};

/// First come, first served: order by submission; admit whenever a slot and blocks are free;
/// preempt the most recently submitted (the last candidate), as vLLM does.
std::unique_ptr<SchedulingPolicy> make_fcfs_policy();

}  // namespace zinc::engine
