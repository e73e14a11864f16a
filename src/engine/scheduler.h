// zinc/engine/scheduler.h — builds each step: which sequences run and how many of their tokens,
// admission of waiting sequences (with prefix-cache lookup), KV block allocation, and
// preemption by recompute when blocks run out.
//
// One step (schedule), at a step boundary:
//   0. The policy refreshes its state (on_step_begin); running and waiting sequences are
//      re-sorted in its order. For each waiting sequence that finds no slot or too few blocks,
//      the policy may name a running one to preempt (preempt_for: QoS classes).
//   1. The step's row budget comes from the StepBudgeter (engine/step_budget.h): max_batch_tokens,
//      or, with a TPOT target, what the fitted cost model says fits in the target (never fewer
//      than the decodes plus min_chunk).
//   2. Decodes first: every running sequence with one pending token gets its row (and, with
//      speculative decoding, a row per draft token while the budget has rows beyond one per
//      decode and some prefill room; draft rows never preempt), in policy order (the policy may
//      hold one back: may_decode, token buckets). Blocks for the new positions are allocated; the
//      block holding the first new position is made private first (copy-on-write). When blocks run
//      out, the policy picks a victim among this sequence and the unscheduled ones after it: the
//      victim releases all its blocks and goes back to waiting with n_computed = 0 (recompute; its
//      tokens so far are kept, its blocks often survive in the prefix cache). A preempted sequence
//      never loses tokens.
//   3. Prefill chunks fill the rest: running prefills, then (unless a block shortage preempted
//      something this step) waiting sequences in policy order while slots remain; one that the
//      policy refuses or whose blocks do not fit is skipped, not waited on (no head-of-line
//      blocking). The remaining budget goes to the policy's prefill tiers in order (interactive,
//      then standard, then batch: class-aware chunks; a lower tier gets only what the higher ones
//      leave, and batch chunks together at most background_prefill_chunk rows a step, so a step
//      that an interactive request arrives during stays short); within a tier it is split
//      max-min fairly (water-filling), each capped by the policy's prefill_allowance, so a long
//      prompt in progress never holds a short new one back for more than its share: both run in
//      the same step (chunked prefill). What a candidate cannot use goes to the others in tier,
//      then policy order. Admission first matches the
//      longest chain of the sequence's full blocks in the prefix cache (in the sequence's cache
//      namespace) and shares those blocks; when every token is cached, the last one is
//      recomputed (its logits are needed) in a private copy of the last block.
//   Each running sequence holds one state slot of n_parallel (Sequence::state_slot, the Runner's
//   recurrent state of hybrid models; unused by others), taken at admission and given back at
//   preemption or removal; a re-admitted sequence restarts at position 0, so its state is
//   recomputed with its K/V.
// commit() then records the step's K/V as computed and offers newly full blocks to the cache.
// The scheduler never runs the model and never samples: engine.cpp does.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "engine/block_manager.h"
#include "engine/policy.h"
#include "engine/sequence.h"
#include "engine/step_budget.h"

namespace zinc::engine {

struct SchedulerOptions {
    int32_t n_parallel = 4;          // most running sequences
    int32_t max_batch_tokens = 512;  // hard cap: rows the Runner takes in one step
    /// Target step duration (= time per output token of a running stream), ms; 0: off, the
    /// budget is max_batch_tokens (see engine/step_budget.h).
    double tpot_target_ms = 0;
    int32_t min_prefill_chunk = 16;  // prefill rows a step may always add to its decodes
    /// Class-aware prefill chunks (step 3 above): the budget left after the decodes goes to the
    /// policy's prefill tiers in order (SchedulingPolicy::prefill_tier: interactive first), and
    /// background-tier (batch) chunks together take at most background_prefill_chunk rows of a
    /// step (0: no cap). false: one tier, every candidate alike (the rule before issue 16).
    bool class_aware_prefill = true;
    int32_t background_prefill_chunk = 128;
    /// Interactive guard (with class_aware_prefill; 0: off), so that an interactive prompt's
    /// TTFT under a batch flood stays near its idle TTFT, the step it waits for plus its own:
    /// (1) a step that carries a first-tier prefill chunk carries no background-tier rows (batch
    /// prefill gets none, batch decodes are deferred to the next step: StepPlan::n_deferred);
    /// (2) while the policy says first-tier work is active (first_tier_active), a step without
    /// it gives background-tier prefill at most the rows that keep the step, by the
    /// StepBudgeter's cost model, within interactive_guard x the modelled duration of the last
    /// step that carried first-tier prefill (never fewer than min_prefill_chunk rows, so batch
    /// prefill always progresses; decodes are never cut by this rule). An interactive prompt
    /// arriving in such a step then waits at most ~(1 + interactive_guard) x its own step.
    double interactive_guard = 0.5;
};

struct ScheduledSeq {
    Sequence* seq = nullptr;
    int32_t n_tokens = 0;      // tokens [n_computed, n_computed + n_tokens) run this step
    bool want_logits = false;  // the chunk reaches the end of the sequence's tokens
    bool decode = false;       // a decode row (else prompt or recompute rows: prefill)
    /// Decode with a draft: the last n_draft of the n_tokens rows are Sequence::draft[0, n_draft)
    /// (speculative decoding; their K/V is written, but only accepted ones become computed).
    int32_t n_draft = 0;
};

struct StepPlan {
    std::vector<ScheduledSeq> seqs;    // in batch order: decodes, then prefill chunks
    int32_t n_tokens = 0;              // rows of the batch
    int32_t n_decode_rows = 0;         // of which decode rows
    int32_t n_prefill_rows = 0;        // and prefill rows
    int32_t n_draft_rows = 0;          // of the decode rows, draft rows
    int32_t n_draft_cut = 0;           // draft tokens the budget or the KV pool left out
    int32_t budget = 0;                // the row budget this step was planned under
    std::vector<Sequence*> preempted;  // sent back to waiting this step
    /// Background-tier decodes left out because the step carries first-tier prefill (the
    /// interactive guard, SchedulerOptions::interactive_guard); they run next step.
    int32_t n_deferred = 0;
    /// The policy held a sequence back (rate limit, quota): an empty plan is not a deadlock.
    bool held_back = false;
    bool empty() const { return seqs.empty(); }
};

/// Prefix-cache counters, in blocks (EngineStats has the meaning of each), and preemptions.
struct PrefixCounters {
    uint64_t hits = 0, miss_cold = 0, miss_evicted = 0, miss_partial = 0, miss_disabled = 0;
    uint64_t preemptions = 0;      // all preemptions
    uint64_t preemptions_qos = 0;  // of which for admission of a higher class (preempt_for)
};

class Scheduler {
  public:
    /// copy_block(src, dst): the Runner's copy-on-write copy.
    Scheduler(const SchedulerOptions& opts, BlockManager& blocks, SchedulingPolicy& policy,
              std::function<void(int32_t, int32_t)> copy_block);

    /// Queue a new sequence (state Waiting, no blocks).
    void add(Sequence* s);
    /// Drop a sequence (finished or cancelled): release its blocks, state Finished.
    void remove(Sequence* s);
    /// Plan the next step (allocating the blocks it writes).
    StepPlan schedule();
    /// The planned step ran: advance n_computed and register newly full blocks in the cache.
    /// Draft rows are not computed yet: see accept_drafts.
    void commit(const StepPlan& plan);
    /// After commit, `n_accepted` of s's draft rows were kept (their tokens are now in
    /// s.tokens, followed by the next pending token): they become computed, newly full blocks go
    /// to the prefix cache, and blocks holding only rejected positions are released.
    void accept_drafts(Sequence& s, int32_t n_accepted);

    const std::vector<Sequence*>& running() const { return running_; }
    const std::vector<Sequence*>& waiting() const { return waiting_; }
    bool idle() const { return running_.empty() && waiting_.empty(); }
    const PrefixCounters& counters() const { return counters_; }
    const BlockManager& blocks() const { return bm_; }
    /// The step budget's cost model: the engine reports each step's duration here.
    StepBudgeter& budgeter() { return budgeter_; }
    const StepBudgeter& budgeter() const { return budgeter_; }

    /// ZINC_CHECK the block manager's invariants with ref counts against the block tables of
    /// all sequences, and the scheduler's own (slots, waiting sequences own no blocks, block
    /// tables cover what is computed, no block twice in one table).
    void check_invariants() const;

  private:
    bool reserve(Sequence& s, int32_t n);  // blocks for positions up to n_computed + n
    /// Admit waiting s with a first chunk of at most max_n rows; false (nothing changed) when
    /// its blocks do not fit.
    bool try_admit(Sequence& s, int32_t max_n, StepPlan& plan);
    /// reserve(running_[i], n), preempting the policy's victims among running_[i] and the
    /// unplanned ones after it while blocks are short; false when running_[i] itself went.
    bool reserve_or_preempt(size_t i, int32_t n, StepPlan& plan, bool& preempted_any);
    void preempt_for_admission(StepPlan& plan);
    void plan_prefills(int32_t left, bool admit, StepPlan& plan);
    /// s's prefill tier (the policy's with class_aware_prefill, else one tier for all).
    int32_t tier_of(const Sequence& s) const;
    /// Background-tier prefill rows plan may still take (this step's cap less what it holds;
    /// 0 with the interactive guard once plan holds a first-tier prefill chunk).
    int32_t background_left(const StepPlan& plan) const;
    bool guard_on() const { return opts_.class_aware_prefill && opts_.interactive_guard > 0; }
    bool has_first_tier_prefill(const StepPlan& plan) const;
    /// The interactive guard's two rules (SchedulerOptions::interactive_guard): this step's
    /// background-tier cap, set after the decodes; the deferral of background decodes.
    void set_background_cap(const StepPlan& plan);
    void defer_background_decodes(StepPlan& plan);
    void sort_queues();
    SchedulerLoad load() const;
    void preempt(Sequence& s, StepPlan& plan);
    void ensure_hashes(Sequence& s, int32_t n_full);
    void insert_waiting(Sequence* s);
    void release_blocks(Sequence& s);
    void register_full_blocks(Sequence& s);

    SchedulerOptions opts_;
    BlockManager& bm_;
    SchedulingPolicy& policy_;
    std::function<void(int32_t, int32_t)> copy_block_;
    StepBudgeter budgeter_;
    std::vector<Sequence*> running_;  // sorted by policy at each schedule()
    std::vector<Sequence*> waiting_;  // kept sorted by policy
    /// State slots [0, n_parallel) not held by a running sequence (Sequence::state_slot): the
    /// Runner's recurrent state of hybrid models, one per running sequence.
    std::vector<int32_t> free_slots_;
    PrefixCounters counters_;
    uint64_t step_ = 0;  // schedule() calls (Sequence::planned_step)
    /// Background-tier prefill rows this step may take in all (set_background_cap).
    int32_t background_cap_ = std::numeric_limits<int32_t>::max();
    /// Rows of the last step that carried first-tier prefill (0: none yet): the guard's yardstick.
    int32_t first_tier_rows_ = 0;
};

}  // namespace zinc::engine
