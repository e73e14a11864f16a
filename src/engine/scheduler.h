// zinc/engine/scheduler.h — builds each step: which sequences run and how many of their tokens,
// admission of waiting sequences (with prefix-cache lookup), KV block allocation, and
// preemption by recompute when blocks run out.
//
// One step (schedule) under a token budget of max_batch_tokens:
//   1. Running sequences, in policy order, each get their pending tokens (1 for a decode, the
//      rest of the prompt, cut to the remaining budget, for a prefill in progress: chunked
//      prefill). Blocks for the new positions are allocated; the block holding the first new
//      position is made private first (copy-on-write). When blocks run out, the policy picks a
//      victim among this sequence and the ones after it: the victim releases all its blocks and
//      goes back to waiting with n_computed = 0 (recompute; its tokens so far are kept, its
//      blocks often survive in the prefix cache). A preempted sequence never loses tokens.
//   2. If nothing was preempted, waiting sequences are admitted in policy order while a slot, the
//      budget and blocks for their first chunk remain. Admission first matches the longest chain
//      of the sequence's full blocks in the prefix cache and shares those blocks; when every
//      token is cached, the last one is recomputed (its logits are needed) in a private copy of
//      the last block.
// commit() then records the step's K/V as computed and offers newly full blocks to the cache.
// The scheduler never runs the model and never samples: engine.cpp does.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/block_manager.h"
#include "engine/policy.h"
#include "engine/sequence.h"

namespace zinc::engine {

struct SchedulerOptions {
    int32_t n_parallel = 4;          // most running sequences
    int32_t max_batch_tokens = 512;  // token budget of one step
};

struct ScheduledSeq {
    Sequence* seq = nullptr;
    int32_t n_tokens = 0;      // tokens [n_computed, n_computed + n_tokens) run this step
    bool want_logits = false;  // the chunk reaches the end of the sequence's tokens
};

struct StepPlan {
    std::vector<ScheduledSeq> seqs;    // in batch order
    int32_t n_tokens = 0;              // rows of the batch
    std::vector<Sequence*> preempted;  // sent back to waiting this step
    bool empty() const { return seqs.empty(); }
};

/// Prefix-cache counters, in blocks (EngineStats has the meaning of each).
struct PrefixCounters {
    uint64_t hits = 0, miss_cold = 0, miss_evicted = 0, miss_partial = 0, miss_disabled = 0;
    uint64_t preemptions = 0;
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
    void commit(const StepPlan& plan);

    const std::vector<Sequence*>& running() const { return running_; }
    const std::vector<Sequence*>& waiting() const { return waiting_; }
    bool idle() const { return running_.empty() && waiting_.empty(); }
    const PrefixCounters& counters() const { return counters_; }
    const BlockManager& blocks() const { return bm_; }

    /// ZINC_CHECK the block manager's invariants with ref counts against the block tables of
    /// all sequences, and the scheduler's own (slots, waiting sequences own no blocks, block
    /// tables cover what is computed, no block twice in one table).
    void check_invariants() const;

  private:
    bool reserve(Sequence& s, int32_t n);  // blocks for positions up to n_computed + n
    bool try_admit(Sequence& s, int32_t& budget, StepPlan& plan);
    void preempt(Sequence& s, StepPlan& plan);
    void ensure_hashes(Sequence& s, int32_t n_full);
    void insert_waiting(Sequence* s);
    void release_blocks(Sequence& s);

    SchedulerOptions opts_;
    BlockManager& bm_;
    SchedulingPolicy& policy_;
    std::function<void(int32_t, int32_t)> copy_block_;
    std::vector<Sequence*> running_;  // sorted by policy at each schedule()
    std::vector<Sequence*> waiting_;  // kept sorted by policy
    PrefixCounters counters_;
};

}  // namespace zinc::engine
