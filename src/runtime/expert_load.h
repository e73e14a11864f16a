// zinc/runtime/expert_load.h — how evenly a run spread its MoE routing over the experts.
//
// Input: per-layer slot counts (n_layers x n_expert, row-major by layer; a slot is one token's
// use of one expert), as the CUDA runner's RunnerStats::expert_load reports them. Dense layers
// (all zero) are skipped. Per MoE layer: the busiest and idlest expert's count over the mean
// (mean = the layer's slots / n_expert; a perfectly even spread gives 1 and 1), the coefficient
// of variation (population std / mean) and the experts never chosen. MoE routing on random
// weights is not a trained model's, so benchmarks state this next to their speed rows.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "util/result.h"

namespace zinc::runtime {

struct ExpertLoadSummary {
    int n_layers = 0;  // MoE layers (a non-zero row)
    int n_expert = 0;
    uint64_t slots = 0;              // all layers' slots
    double max_over_mean = 0;        // median over the layers
    double min_over_mean = 0;        // median over the layers
    double cv = 0;                   // median over the layers
    double worst_max_over_mean = 0;  // the largest over the layers
    int64_t unused = 0;              // (layer, expert) pairs with no slot
};

/// Summarise counts (n_layers x n_expert). Errors: n_expert < 1, or counts.size() not a multiple
/// of n_expert (the message gives both).
Result<ExpertLoadSummary> summarize_expert_load(std::span<const uint64_t> counts, int n_expert);

/// One line: "expert load | L MoE layers x E experts | S slots | max/mean a (worst b) | min/mean c
/// | CV d | u of L*E (layer, expert) pairs unused" (medians over the layers).
std::string format_expert_load(const ExpertLoadSummary& s);

}  // namespace zinc::runtime
