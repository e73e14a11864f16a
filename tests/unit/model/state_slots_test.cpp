// tests/unit/model/state_slots_test.cpp — model::StateSlots (model/state_slots.h), the recurrent
// state slots' bookkeeping and checks shared by the CPU and CUDA Runners: every error of a step
// batch's check (each message whole: what, where, what was expected), the options' range, the
// positions and checkpoints advance() records, and the rewind rule with each of its errors.
#include "model/state_slots.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "model/batch.h"

namespace zm = zinc::model;

namespace {

// A batch of sequences given as (state slot, pos0, n_tokens, keep_states), rows in this order.
struct Seqs {
    std::vector<zm::BatchSeq> seqs;
    std::vector<int32_t> tokens;
    Seqs(std::initializer_list<std::tuple<int32_t, int32_t, int32_t, bool>> l) {
        int32_t row = 0;
        for (auto [slot, pos0, n, keep] : l) {
            zm::BatchSeq s;
            s.row0 = row, s.n_tokens = n, s.pos0 = pos0, s.state_slot = slot, s.keep_states = keep;
            seqs.push_back(s);
            row += n;
        }
        tokens.assign(static_cast<size_t>(row), 1);
    }
    zm::Batch batch() const { return {tokens, seqs}; }
};

std::string check_msg(const zm::StateSlots& st, const Seqs& s, const char* where = "forward: ") {
    const zinc::Result<void> r = st.check(s.batch(), where);
    return r.ok() ? "ok" : r.error().message;
}

std::string rewind_msg(zm::StateSlots& st, int32_t slot, int64_t p) {
    const zinc::Result<int32_t> r = st.rewind(slot, p);
    return r.ok() ? "row " + std::to_string(r.value()) : r.error().message;
}

}  // namespace

TEST(StateSlots, OptionsRange) {
    EXPECT_TRUE(zm::StateSlots::check_options(0, "cpu").ok());
    EXPECT_TRUE(zm::StateSlots::check_options(zm::kMaxStateCheckpoints, "cuda").ok());
    EXPECT_EQ(zm::StateSlots::check_options(-1, "cpu").error().message,
              "cpu runner: n_state_checkpoints -1 out of range [0, 1024]");
    EXPECT_EQ(zm::StateSlots::check_options(1025, "cuda").error().message,
              "cuda runner: n_state_checkpoints 1025 out of range [0, 1024]");
}

TEST(StateSlots, NewSlotsAreAtZeroWithoutCheckpoints) {
    const zm::StateSlots st(3, 4);
    EXPECT_EQ(st.n_slots(), 3);
    EXPECT_EQ(st.n_checkpoints(), 4);
    for (int32_t s = 0; s < 3; ++s) {
        EXPECT_EQ(st.pos(s), 0);
        EXPECT_EQ(st.kept(s), 0);
    }
}

TEST(StateSlots, BatchCheckErrors) {
    zm::StateSlots st(2, 3);
    EXPECT_EQ(check_msg(st, {{-1, 0, 2, false}}),
              "forward: sequence 0: state slot -1 out of range [0, 2) (a recurrent model needs "
              "one per sequence)");
    EXPECT_EQ(check_msg(st, {{0, 0, 1, false}, {2, 0, 1, false}}, "cuda forward: "),
              "cuda forward: sequence 1: state slot 2 out of range [0, 2) (a recurrent model "
              "needs one per sequence)");
    EXPECT_EQ(check_msg(st, {{1, 0, 4, true}}),
              "forward: sequence 0: keep_states for 4 rows, the state pool keeps at most 3 "
              "(RunnerOptions::n_state_checkpoints)");
    EXPECT_EQ(check_msg(st, {{1, 0, 2, false}, {1, 0, 2, false}}),
              "forward: sequence 1: state slot 1 is also sequence 0's");
    EXPECT_EQ(check_msg(st, {{0, 0, 1, false}, {1, 3, 2, false}}),
              "forward: sequence 1: the recurrent state of slot 1 is at position 0, the batch "
              "starts at 3 (a state goes back only by rewind_state into rows its last step kept; "
              "else restart at 0)");
    // A pool without checkpoints refuses keep_states at any length.
    const zm::StateSlots none(1, 0);
    EXPECT_EQ(check_msg(none, {{0, 0, 1, true}}),
              "forward: sequence 0: keep_states for 1 rows, the state pool keeps at most 0 "
              "(RunnerOptions::n_state_checkpoints)");
    // Accepted: distinct slots, keep_states up to the pool's rows, each at 0 or where it is.
    EXPECT_EQ(check_msg(st, {{1, 0, 3, true}, {0, 0, 5, false}}), "ok");
    st.advance(0, 0, 5, false);
    EXPECT_EQ(check_msg(st, {{0, 5, 1, false}, {1, 0, 2, false}}), "ok");
    EXPECT_EQ(check_msg(st, {{0, 0, 2, false}}), "ok");  // pos0 0 restarts any slot
    EXPECT_EQ(check_msg(st, {{0, 4, 1, false}}),
              "forward: sequence 0: the recurrent state of slot 0 is at position 5, the batch "
              "starts at 4 (a state goes back only by rewind_state into rows its last step kept; "
              "else restart at 0)");
}

TEST(StateSlots, AdvanceRecordsPositionAndCheckpoints) {
    zm::StateSlots st(2, 4);
    st.advance(1, 0, 7, false);
    EXPECT_EQ(st.pos(1), 7);
    EXPECT_EQ(st.kept(1), 0);
    st.advance(1, 7, 4, true);
    EXPECT_EQ(st.pos(1), 11);
    EXPECT_EQ(st.kept(1), 4);
    EXPECT_EQ(st.pos(0), 0);      // the other slot is untouched
    st.advance(1, 11, 1, false);  // a step without keep drops them
    EXPECT_EQ(st.pos(1), 12);
    EXPECT_EQ(st.kept(1), 0);
}

TEST(StateSlots, RewindRuleAndErrors) {
    zm::StateSlots st(2, 4);
    EXPECT_EQ(rewind_msg(st, -1, 0), "rewind_state: slot -1 out of range [0, 2)");
    EXPECT_EQ(rewind_msg(st, 2, 0), "rewind_state: slot 2 out of range [0, 2)");
    EXPECT_EQ(rewind_msg(st, 0, 0), "row -1");  // where it is: nothing to copy
    EXPECT_EQ(rewind_msg(st, 0, 1),
              "recurrent state of slot 0: position 1 is not checkpointed (the state is at 0, no "
              "checkpoints; a recurrent state cannot be rewound further)");
    st.advance(0, 0, 6, false);
    st.advance(0, 6, 4, true);  // checkpoints at positions 7, 8, 9, 10
    EXPECT_EQ(rewind_msg(st, 0, 6),
              "recurrent state of slot 0: position 6 is not checkpointed (the state is at 10, "
              "checkpoints cover (6, 10]; a recurrent state cannot be rewound further)");
    EXPECT_EQ(rewind_msg(st, 0, 11),
              "recurrent state of slot 0: position 11 is not checkpointed (the state is at 10, "
              "checkpoints cover (6, 10]; a recurrent state cannot be rewound further)");
    EXPECT_EQ(rewind_msg(st, 0, 10), "row -1");  // the draft accepted whole
    EXPECT_EQ(st.kept(0), 4);
    EXPECT_EQ(rewind_msg(st, 0, 8), "row 1");  // the state after the second kept row
    EXPECT_EQ(st.pos(0), 8);
    EXPECT_EQ(st.kept(0), 2);
    // Rows after the rewind held rejected tokens: gone.
    EXPECT_EQ(rewind_msg(st, 0, 9),
              "recurrent state of slot 0: position 9 is not checkpointed (the state is at 8, "
              "checkpoints cover (6, 8]; a recurrent state cannot be rewound further)");
    EXPECT_EQ(rewind_msg(st, 0, 7), "row 0");
    EXPECT_EQ(st.pos(0), 7);
    EXPECT_EQ(rewind_msg(st, 0, 7), "row -1");
    // The next step continues at the rewound position.
    zm::BatchSeq s;
    s.n_tokens = 1, s.pos0 = 7, s.state_slot = 0;
    const std::vector<int32_t> tok = {1};
    EXPECT_TRUE(st.check({tok, std::span<const zm::BatchSeq>(&s, 1)}, "forward: ").ok());
    EXPECT_EQ(st.pos(1), 0);  // the other slot never moved
}
