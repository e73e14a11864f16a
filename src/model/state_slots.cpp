// zinc/model/state_slots.cpp — the recurrent state slots' bookkeeping and checks
// (model/state_slots.h), shared by the CPU and CUDA Runners.
#include "model/state_slots.h"

#include <string>

#include "util/check.h"

namespace zinc::model {

StateSlots::StateSlots(int32_t n_slots, int32_t n_checkpoints) : n_ckpt_(n_checkpoints) {
    ZINC_CHECK(n_slots >= 0 && n_checkpoints >= 0 && n_checkpoints <= kMaxStateCheckpoints);
    const auto n = static_cast<size_t>(n_slots);
    pos_.assign(n, 0);
    ckpt_pos0_.assign(n, 0);
    ckpt_n_.assign(n, 0);
}

Result<void> StateSlots::check_options(int32_t n_checkpoints, std::string_view tier) {
    if (n_checkpoints >= 0 && n_checkpoints <= kMaxStateCheckpoints) return {};
    return make_error(std::string(tier) + " runner: n_state_checkpoints " +
                      std::to_string(n_checkpoints) + " out of range [0, " +
                      std::to_string(kMaxStateCheckpoints) + "]");
}

int64_t StateSlots::pos(int32_t slot) const {
    ZINC_CHECK(slot >= 0 && slot < n_slots());
    return pos_[static_cast<size_t>(slot)];
}

int32_t StateSlots::kept(int32_t slot) const {
    ZINC_CHECK(slot >= 0 && slot < n_slots());
    return ckpt_n_[static_cast<size_t>(slot)];
}

Result<void> StateSlots::check(const Batch& batch, std::string_view where) const {
    const int32_t n = n_slots();
    for (size_t si = 0; si < batch.seqs.size(); ++si) {
        const BatchSeq& s = batch.seqs[si];
        const std::string at = std::string(where) + "sequence " + std::to_string(si) + ": ";
        if (s.state_slot < 0 || s.state_slot >= n)
            return make_error(at + "state slot " + std::to_string(s.state_slot) +
                              " out of range [0, " + std::to_string(n) +
                              ") (a recurrent model needs one per sequence)");
        if (s.keep_states && s.n_tokens > n_ckpt_)
            return make_error(at + "keep_states for " + std::to_string(s.n_tokens) +
                              " rows, the state pool keeps at most " + std::to_string(n_ckpt_) +
                              " (RunnerOptions::n_state_checkpoints)");
        for (size_t sj = 0; sj < si; ++sj)
            if (batch.seqs[sj].state_slot == s.state_slot)
                return make_error(at + "state slot " + std::to_string(s.state_slot) +
                                  " is also sequence " + std::to_string(sj) + "'s");
        const int64_t p = pos_[static_cast<size_t>(s.state_slot)];
        if (s.pos0 != 0 && p != s.pos0)
            return make_error(
                at + "the recurrent state of slot " + std::to_string(s.state_slot) +
                " is at position " + std::to_string(p) + ", the batch starts at " +
                std::to_string(s.pos0) +
                " (a state goes back only by rewind_state into rows its last step kept; "
                "else restart at 0)");
    }
    return {};
}

void StateSlots::advance(int32_t slot, int64_t pos0, int32_t n_rows, bool keep) {
    ZINC_CHECK(slot >= 0 && slot < n_slots() && pos0 >= 0 && n_rows >= 1);
    ZINC_CHECK(!keep || n_rows <= n_ckpt_);
    const auto s = static_cast<size_t>(slot);
    pos_[s] = pos0 + n_rows;
    ckpt_pos0_[s] = pos0;
    ckpt_n_[s] = keep ? n_rows : 0;
}

Result<int32_t> StateSlots::rewind(int32_t slot, int64_t p) {
    if (slot < 0 || slot >= n_slots())
        return make_error("rewind_state: slot " + std::to_string(slot) + " out of range [0, " +
                          std::to_string(n_slots()) + ")");
    const auto s = static_cast<size_t>(slot);
    if (p == pos_[s]) return -1;
    const int64_t p0 = ckpt_pos0_[s], n = ckpt_n_[s];
    if (n == 0 || p <= p0 || p > p0 + n)
        return make_error("recurrent state of slot " + std::to_string(slot) + ": position " +
                          std::to_string(p) + " is not checkpointed (the state is at " +
                          std::to_string(pos_[s]) +
                          (n == 0 ? ", no checkpoints"
                                  : ", checkpoints cover (" + std::to_string(p0) + ", " +
                                        std::to_string(p0 + n) + "]") +
                          "; a recurrent state cannot be rewound further)");
    pos_[s] = p;
    ckpt_n_[s] = static_cast<int32_t>(p - p0);
    return static_cast<int32_t>(p - p0 - 1);
}

}  // namespace zinc::model
