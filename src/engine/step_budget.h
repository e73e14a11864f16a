// zinc/engine/step_budget.h — how many batch rows the next step may carry so that it lasts about
// a target time per output token (TPOT): the scheduler's per-step token budget (Sarathi-Serve's
// "stall-free" budget), from a cost model fitted online to the steps that ran.
//
// Model: step_ms ~= a + b * n_rows, by least squares over the observed steps with exponential
// forgetting (each new step weighs 1, earlier ones decay by `decay` per step), so it follows a
// change of load (longer contexts make rows dearer). With too little spread in n_rows for a
// slope, it is proportional (a = 0, b = mean ms / mean rows). budget(n_decodes) is the largest n
// with a + b * n <= tpot_ms, clamped to [n_decodes + min_chunk, max_batch_tokens]: every running
// decode always gets its token (a step never drops a stream to meet the target) and some prefill
// always progresses (no starvation of new prompts). tpot_ms 0 turns it off: the budget is
// max_batch_tokens, today's behaviour. Backend-neutral: only durations and row counts go in.
#pragma once

#include <cstdint>

namespace zinc::engine {

struct StepBudgetOptions {
    double tpot_ms = 0;              // target step duration; 0: off (budget = max_batch_tokens)
    int32_t max_batch_tokens = 512;  // hard cap: rows the Runner takes in one forward
    int32_t min_chunk = 16;          // prefill rows always allowed beyond the decodes
    double decay = 0.97;             // weight of the history per new observation, in (0, 1)
};

class StepBudgeter {
  public:
    explicit StepBudgeter(const StepBudgetOptions& opts);

    /// This step's row budget when n_decodes running sequences each need one decode row.
    int32_t budget(int32_t n_decodes) const;
    /// The model's duration (ms) of a step of n_rows rows, a + b * n_rows; 0 before any step.
    double predict_ms(int32_t n_rows) const;
    /// Most rows a step may carry to last at most `ms` by the model (0 when the intercept alone
    /// exceeds it), capped at max_batch_tokens; max_batch_tokens before any step was observed.
    int32_t rows_within(double ms) const;
    /// A step ran: n_decode_rows + n_prefill_rows rows in `ms` milliseconds (the forward).
    void observe(double ms, int32_t n_decode_rows, int32_t n_prefill_rows);

    /// Whether at least one step was observed (before that the budget is max_batch_tokens).
    bool fitted() const { return sw_ > 0; }
    double intercept_ms() const { return a_; }  // a of the model
    double ms_per_row() const { return b_; }    // b of the model
    const StepBudgetOptions& options() const { return opts_; }

  private:
    void refit();

    StepBudgetOptions opts_;
    double sw_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;  // decayed weighted sums
    double a_ = 0, b_ = 0;
};

}  // namespace zinc::engine
