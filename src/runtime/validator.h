// zinc/runtime/validator.h — compare one step's named intermediates of the serving tier with
// the CPU oracle's, in execution order, and name the first op whose output is off.
//
// Metric: relative L2 error |a - b|_2 / max(|b|_2, 1e-6) per intermediate (all rows), against
// Thresholds::logits for "result_output" and Thresholds::residual for the rest; any non-finite
// value on the serving side fails. Intermediates the serving tier does not expose, or exposes
// with another row count (the last layer before the output rows are gathered), are not
// compared — but every per-layer l_out of layers 0 .. n_layer-2 must be compared, or the step
// fails as "missing", so a tier that captures nothing cannot pass.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/forward_hooks.h"
#include "runtime/tier.h"

namespace zinc::runtime {

struct StepComparison {
    bool ok = true;
    int n_compared = 0;
    double worst_rel = 0.0;  // largest relative error among compared intermediates
    std::string worst_name;  // and its name
    std::string failure;     // "step S layer L op O: NAME rel err E > tol T" when !ok
};

/// The op whose output intermediate `name` is ("blk.3.attn_out" -> "attn_output matmul").
std::string producing_op(std::string_view name);

StepComparison compare_step(uint64_t step, const std::vector<Captured>& serving,
                            const std::vector<Captured>& oracle, const Thresholds& tol,
                            int n_layer);

/// True when every value is finite.
bool all_finite(const float* x, size_t n);

}  // namespace zinc::runtime
