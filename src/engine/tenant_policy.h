// zinc/engine/tenant_policy.h — the multi-tenant scheduling policy: QoS classes, VTC weighted
// fair share by tokens served, per-tenant limits on running sequences and KV blocks, prefill and
// decode token buckets, and preemption of lower classes for interactive requests.
//
// Order (before): class first (interactive, standard, batch), then, between tenants of one class,
// the tenant's virtual token counter (VTC, Sheng et al., OSDI '24): every row a step serves adds
// 1 / weight to its tenant's counter, and the backlogged tenant with the smallest counter goes
// first. A tenant that becomes backlogged again after being idle for more than kLiftGrace (a
// closed-loop client's round trip between one request and the next is not idleness) has its
// counter lifted to the smallest counter of the backlogged tenants, so idle time banks no
// credit; an idle tenant's share goes to
// the others (work-conserving: nothing is held back for it). Within a tenant: arrival order.
// Between two continuously backlogged tenants of one class the service gap is bounded (VTC's
// theorem; tests/unit/engine/tenant_policy_test.cpp measures it).
//
// Limits (0 = none), all enforced by the scheduler through this interface:
//   max_concurrent  running sequences of the tenant (may_admit);
//   max_kv_blocks   KV blocks the tenant's running sequences may hold, counted at their worst
//                   case ceil((prompt + max_tokens) / block_size) from admission, so the tenant
//                   never holds more whatever they generate (may_admit);
//   prefill / decode tokens per second: token buckets of capacity rate * burst_s (at least one
//                   token), refilled at each step boundary; prefill_allowance is the bucket's
//                   whole tokens, may_decode needs one token per decode row. Rows a step served
//                   are charged after it (on_served); the prefill bucket may go into debt by at
//                   most one step's chunks and then holds the tenant back until it refills, so
//                   over any window T the tenant is served at most rate * T + capacity + one
//                   step's prefill rows.
// Interactive guard (first_tier_active): while an interactive tenant is active, the scheduler
// keeps batch-class prefill chunks short (engine/scheduler.h, SchedulerOptions::interactive_guard).
// Preemption (preempt_for): only for an interactive sequence, only of a batch one, else a
// standard one (the latest in order), never of an interactive one; the victim is recomputed
// later (engine/scheduler.h), its output unchanged at temperature 0.
// Sequences name their tenant in RequestParams::tenant; an unknown tenant gets the spec of the
// tenant "default" (or, without one, standard class, weight 1, no limits). configure() may be
// called from any thread (a config reload); it applies from the next step and keeps each tenant's
// counters. Every method locks one mutex: stats are read from HTTP threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/policy.h"

namespace zinc::engine {

enum class QosClass : int32_t { Interactive = 0, Standard = 1, Batch = 2 };

/// Idle time (seconds) after which a returning tenant's counter is lifted.
inline constexpr double kLiftGrace = 0.5;
/// first_tier_active(): an interactive tenant counts as active for this long (seconds) after its
/// last sequence finished, so that a chat user's think time between one message and the next
/// (tens of seconds) keeps the guard up: a shorter window leaves the first message after a
/// pause to the unguarded step (measured: docs/benchmarks.md, "Interactive guard").
inline constexpr double kInteractiveWindow = 30.0;
const char* to_string(QosClass c);
std::optional<QosClass> parse_qos_class(std::string_view s);

struct TenantSchedSpec {
    std::string id;
    QosClass qos = QosClass::Standard;
    double weight = 1.0;              // fair-share weight, > 0
    int32_t max_concurrent = 0;       // running sequences; 0: no limit
    int32_t max_kv_blocks = 0;        // KV blocks held (worst case); 0: no limit
    double prefill_tokens_per_s = 0;  // 0: no limit
    double decode_tokens_per_s = 0;   // 0: no limit
    double burst_s = 1.0;             // token bucket capacity in seconds of its rate
};

/// What snapshot() reports per tenant.
struct TenantSchedState {
    std::string id;
    QosClass qos = QosClass::Standard;
    double weight = 1.0;
    double vtc = 0;                              // virtual counter: rows served / weight (lifted)
    uint64_t prefill_rows = 0, decode_rows = 0;  // rows served
    int32_t running = 0;                         // sequences running
    int32_t backlog = 0;                         // sequences queued or running
    int32_t kv_blocks_reserved = 0;              // worst-case blocks of its running sequences
};

class TenantPolicy : public SchedulingPolicy {
  public:
    /// clock: monotonic seconds (tests pass their own); empty: std::chrono::steady_clock.
    TenantPolicy(std::vector<TenantSchedSpec> tenants, int32_t block_size,
                 std::function<double()> clock = {});

    /// Replace the tenant specs (any thread); counters of tenants that stay are kept.
    void configure(std::vector<TenantSchedSpec> tenants);
    /// Per tenant seen so far, by id (any thread).
    std::vector<TenantSchedState> snapshot() const;
    /// Worst-case KV blocks of s: ceil((prompt + max_tokens) / block_size).
    static int32_t worst_case_blocks(const Sequence& s, int32_t block_size);

    void on_step_begin() override;
    bool before(const Sequence& a, const Sequence& b) const override;
    bool may_admit(const Sequence& s, const SchedulerLoad& load) const override;
    bool may_decode(const Sequence& s) const override;
    int32_t prefill_allowance(const Sequence& s) const override;
    /// Interactive: first tier; standard: normal; batch: background (chunks capped per step).
    int32_t prefill_tier(const Sequence& s) const override;
    /// An interactive tenant has sequences queued or running, or had within kInteractiveWindow.
    bool first_tier_active() const override;
    size_t pick_victim(std::span<const Sequence* const> candidates) const override;
    std::optional<size_t> preempt_for(const Sequence& w,
                                      std::span<const Sequence* const> running) const override;
    void on_enqueue(const Sequence& s) override;
    void on_finish(const Sequence& s) override;
    void on_admit(const Sequence& s) override;
    void on_release(const Sequence& s) override;
    void on_served(const Sequence& s, int32_t n_prefill, int32_t n_decode) override;
    /// The prefill bucket's whole tokens, as prefill_allowance; the rows are charged to it and
    /// counted as served prefill rows (the virtual counter too), as on_served's.
    int32_t embedding_allowance(const std::string& tenant) const override;
    void on_embedding_served(const std::string& tenant, int32_t rows) override;
    const char* name() const override { return "tenant-vtc"; }

  private:
    struct Tenant {
        TenantSchedSpec spec;
        double vtc = 0;
        double bucket_prefill = 0, bucket_decode = 0;
        double decode_reserved = 0;  // decode tokens promised this step (may_decode)
        uint64_t prefill_rows = 0, decode_rows = 0;
        int32_t running = 0, backlog = 0, blocks = 0;
        double idle_since = -1e300;  // clock when the backlog last fell to 0
    };
    Tenant& of(const Sequence& s) const;                    // mu_ held
    Tenant& of_id(const std::string& id) const;             // mu_ held
    TenantSchedSpec spec_for(const std::string& id) const;  // mu_ held
    static void fill(Tenant& t, double dt);
    static double capacity(double rate, double burst_s);

    mutable std::mutex mu_;
    std::map<std::string, TenantSchedSpec> specs_;
    mutable std::map<std::string, Tenant> tenants_;
    int32_t block_size_;
    std::function<double()> clock_;
    double last_refill_ = 0;
};

}  // namespace zinc::engine
