// zinc/runtime/validator.h — compare one step's named intermediates of the serving tier with
// the CPU oracle's, in execution order, and name the first op whose output is off.
//
// Metric: relative L2 error |a - b|_2 / max(|b|_2, 1e-6) per intermediate (all rows), against
// Thresholds::logits for "result_output" and Thresholds::residual for the rest; any non-finite
// value on the serving side fails. With Thresholds::bitwise (an exact serving tier) every value
// must carry the oracle's bits instead: one differing bit fails, and the failure says how many
// values differ (and their relative error). Intermediates the serving tier does not expose, or exposes
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

/// The op whose output intermediate `name` is ("blk.3.Vcur" -> "attn_v matmul", "blk.3.kqv_out"
/// -> "attention (rope_kv, attention)", "blk.3.ffn_inp" -> "attention residual add"). Names
/// whose input intermediate (the one produced just before them in the layer: kqv_out before
/// attn_out, attn_out before ffn_inp, ffn_up before ffn_glu, ffn_glu before ffn_out, ffn_out
/// before l_out) was not compared get the span of ops since the last compared one instead, when
/// `input_compared` is false ("blk.3.l_out" -> "ffn block (norm, gate/up, glu, down, residual
/// add)"). The execution order of a layer: attn_norm, Qcur Kcur Vcur, kqv_out, attn_out,
/// ffn_inp, ffn_norm, ffn_gate ffn_up, ffn_glu, ffn_out, l_out.
std::string producing_op(std::string_view name, bool input_compared = true);

StepComparison compare_step(uint64_t step, const std::vector<Captured>& serving,
                            const std::vector<Captured>& oracle, const Thresholds& tol,
                            int n_layer);

/// True when every value is finite.
bool all_finite(const float* x, size_t n);

}  // namespace zinc::runtime
