// zinc/engine/step_budget.cpp — see step_budget.h.
#include "engine/step_budget.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace zinc::engine {

StepBudgeter::StepBudgeter(const StepBudgetOptions& opts) : opts_(opts) {
    ZINC_CHECK(opts.max_batch_tokens > 0 && opts.min_chunk >= 1 && opts.tpot_ms >= 0);
    ZINC_CHECK(opts.decay > 0 && opts.decay < 1);
}

void StepBudgeter::observe(double ms, int32_t n_decode_rows, int32_t n_prefill_rows) {
    const double x = static_cast<double>(n_decode_rows) + n_prefill_rows;
    if (x <= 0 || !std::isfinite(ms) || ms < 0) return;
    const double d = opts_.decay;
    sw_ = sw_ * d + 1;
    sx_ = sx_ * d + x;
    sy_ = sy_ * d + ms;
    sxx_ = sxx_ * d + x * x;
    sxy_ = sxy_ * d + x * ms;
    refit();
}

void StepBudgeter::refit() {
    const double mx = sx_ / sw_, my = sy_ / sw_;
    const double var = sxx_ / sw_ - mx * mx;
    // A slope needs rows that vary: a spread of at least one row (standard deviation) and a
    // positive slope and intercept; otherwise the proportional model through the origin.
    if (var >= 1.0) {
        const double b = (sxy_ / sw_ - mx * my) / var;
        const double a = my - b * mx;
        if (b > 0 && a >= 0) {
            a_ = a;
            b_ = b;
            return;
        }
    }
    a_ = 0;
    b_ = my / mx;
}

double StepBudgeter::predict_ms(int32_t n_rows) const {
    return fitted() ? a_ + b_ * n_rows : 0.0;
}

int32_t StepBudgeter::rows_within(double ms) const {
    const int32_t cap = opts_.max_batch_tokens;
    if (!fitted() || b_ <= 0) return cap;
    const double n = std::floor((ms - a_) / b_ + 1e-9);
    return n >= cap ? cap : n <= 0 ? 0 : static_cast<int32_t>(n);
}

int32_t StepBudgeter::budget(int32_t n_decodes) const {
    const int32_t cap = opts_.max_batch_tokens;
    if (opts_.tpot_ms <= 0 || !fitted() || b_ <= 0) return cap;
    const int32_t lo = static_cast<int32_t>(
        std::min<int64_t>(cap, static_cast<int64_t>(std::max(n_decodes, 0)) + opts_.min_chunk));
    return std::clamp(rows_within(opts_.tpot_ms), lo, cap);
}

}  // namespace zinc::engine
