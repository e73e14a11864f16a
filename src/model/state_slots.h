// zinc/model/state_slots.h — the host-side bookkeeping of a Runner's recurrent state slots
// (hybrid models: model/batch.h BatchSeq::state_slot and keep_states, Runner::rewind_state):
// the position each slot's state is at, the checkpoints its last step kept, and the rules a
// step batch and a rewind must pass, with their error messages.
//
// One definition for every tier: the CPU tier's cpu::StatePool and the CUDA runner each hold a
// StateSlots beside the states themselves (host, resp. device memory), so both tiers accept and
// refuse the same batches and rewinds with the same messages. No backend types here: the tier
// copies the states, this class only says which ones.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/batch.h"
#include "util/result.h"

namespace zinc::model {

/// Most rows per slot a Runner keeps states of (the range of RunnerOptions::n_state_checkpoints).
inline constexpr int32_t kMaxStateCheckpoints = 1024;

/// Per slot: the position its state is at (how many positions it has consumed) and the rows of
/// the last step on it whose states were kept (checkpoint row i holds the state at pos0 + i + 1,
/// pos0 the step's first position). A new slot is at position 0 with no checkpoints.
class StateSlots {
  public:
    /// n_slots >= 0, n_checkpoints in [0, kMaxStateCheckpoints] (ZINC_CHECK: the Runner's
    /// options are checked first, check_options).
    StateSlots(int32_t n_slots, int32_t n_checkpoints);

    /// RunnerOptions::n_state_checkpoints in [0, kMaxStateCheckpoints]. Error "<tier> runner:
    /// n_state_checkpoints V out of range [0, 1024]" (tier: "cpu", "cuda").
    static Result<void> check_options(int32_t n_checkpoints, std::string_view tier);

    int32_t n_slots() const { return static_cast<int32_t>(pos_.size()); }
    int32_t n_checkpoints() const { return n_ckpt_; }
    /// The slot's position (slot in range: ZINC_CHECK).
    int64_t pos(int32_t slot) const;
    /// Rows whose states the slot's last step kept (0: none).
    int32_t kept(int32_t slot) const;

    /// A step's sequences against the slots, sequence by sequence; each message starts with
    /// `where` ("forward: ", "cuda forward: ") and "sequence I: ". Errors, in this order:
    ///   state slot S out of range [0, N) (a recurrent model needs one per sequence);
    ///   keep_states for R rows, the state pool keeps at most C (RunnerOptions::...);
    ///   state slot S is also sequence J's (slots are distinct within a batch);
    ///   the recurrent state of slot S is at position P, the batch starts at Q (pos0 must be 0,
    ///   which resets the slot, or exactly where its state is; rewind() moves it back).
    Result<void> check(const Batch& batch, std::string_view where) const;

    /// Record a step that ran n_rows >= 1 rows on the slot from pos0 (as check() allowed): the
    /// slot is then at pos0 + n_rows; with keep (BatchSeq::keep_states, n_rows <=
    /// n_checkpoints()) its checkpoints cover (pos0, pos0 + n_rows], otherwise it has none.
    void advance(int32_t slot, int64_t pos0, int32_t n_rows, bool keep);

    /// The rewind rule (Runner::rewind_state): put the slot at position p, which must be where
    /// it is (nothing to copy: returns -1) or a position its last step kept, pos0 < p <= pos0 +
    /// n (returns the checkpoint row p - pos0 - 1, whose states the tier copies back). The slot
    /// is then at p and keeps the checkpoints up to p (later ones held rejected rows). Errors:
    /// "rewind_state: slot S out of range [0, N)"; "recurrent state of slot S: position P is not
    /// checkpointed (the state is at A, no checkpoints | checkpoints cover (B, E]; a recurrent
    /// state cannot be rewound further)".
    Result<int32_t> rewind(int32_t slot, int64_t p);

  private:
    int32_t n_ckpt_;
    std::vector<int64_t> pos_;        // (n_slots)
    std::vector<int64_t> ckpt_pos0_;  // (n_slots) the position before checkpoint row 0
    std::vector<int32_t> ckpt_n_;     // (n_slots) rows kept (0: none)
};

}  // namespace zinc::model
