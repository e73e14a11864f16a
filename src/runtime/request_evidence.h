// zinc/runtime/request_evidence.h — evidence per request: what the steps one request took part
// in really did, attributed to it (issue 6 item 2, "per run and per request").
//
// The server's engine runs many requests in one step batch, and the forward pass counts ops per
// step (runtime/forward_hooks.h): one matmul call serves every row of the step. So a request's
// share of a step has to be defined; we keep two views, both integers:
//
// * `share`: every counter of the step (ops per device and op, weight bytes, activation bytes)
//   split over the step's sequences in proportion to their rows (largest remainder, ties to the
//   earlier sequence of the batch), so the shares of one step sum exactly to the step's counts
//   and the sum over all requests equals the process counters (runtime/evidence.h).
// * `step_totals`: the full counts of every step the request took part in ("work of the steps
//   this request was part of"); shared with the requests batched beside it, so these sum to more
//   than the process counters whenever requests overlap. A request that ran alone has
//   share == step_totals.
//
// Exact per request (not shared, not split): `steps` (forward calls it had rows in), its rows
// (`prompt_rows` at prompt positions, `generated_rows` at generated positions, both counted again
// after a preemption recompute), and the events of its steps: CPU fallbacks with op names,
// validated steps and their failures, finiteness checks, shortcuts. These are "during its
// steps": a fallback of a step is reported by every request of that step.
//
// Header-only apart from the JSON rendering (in evidence.cpp), so the engine (zinc_model)
// can keep these without a link dependency on zinc_runtime. Documented in docs/runtime.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/forward_hooks.h"

namespace zinc::runtime {

/// What one step (one Runner::forward of the serving Runner) did, as runtime::Evidence recorded
/// it; read by the engine right after the forward returned (Evidence::last_step).
struct StepRecord {
    uint64_t index = 0;        // 1-based step number of the Runner's Evidence (0: none recorded)
    std::string tier = "cpu";  // the tier the step was meant for: "cpu" or "cuda"
    OpTally ops;               // the serving tier's ops of the step (CPU fallbacks counted on cpu)
    std::vector<std::string> fallbacks;  // one entry per op execution moved to the CPU (op name)
    std::vector<std::string> shortcuts;  // shortcuts the forward pass took (what)
    bool validated = false;              // compared against the CPU oracle (ZINC_VALIDATE)
    bool validation_failed = false;
    bool finiteness_checked = false;  // after trust promotion: logits checked for finiteness
    bool finiteness_failed = false;
};

struct RequestEvidence {
    std::string execution_tier;   // "cpu", "cuda", "cuda+cpu" (a fallback in one of its steps)
    uint64_t steps = 0;           // steps it had rows in
    uint64_t prompt_rows = 0;     // rows at prompt positions (the cached prefix is not run)
    uint64_t generated_rows = 0;  // rows at generated positions (tokens fed back to the model)
    OpTally share;                // its row share of each step's counts (sums to the process)
    OpTally step_totals;          // full counts of the steps it took part in (shared)
    uint64_t cpu_fallback = 0;    // fallbacks during its steps
    std::map<std::string, uint64_t> fallback_ops;
    uint64_t validated_steps = 0;      // its steps compared against the CPU oracle
    uint64_t validation_failures = 0;  // of those (and of the finiteness checks), failed
    uint64_t finiteness_checks = 0;
    bool shortcut_free = true;
    std::map<std::string, uint64_t> shortcuts;

    /// Add one step: the step's record, this request's row share of it and its rows.
    void add_step(const StepRecord& s, const OpTally& row_share, uint64_t n_prompt_rows,
                  uint64_t n_generated_rows) {
        ++steps;
        prompt_rows += n_prompt_rows;
        generated_rows += n_generated_rows;
        share += row_share;
        step_totals += s.ops;
        for (const auto& f : s.fallbacks) {
            ++cpu_fallback;
            ++fallback_ops[f];
        }
        for (const auto& w : s.shortcuts) {
            ++shortcuts[w];
            shortcut_free = false;
        }
        if (s.validated) ++validated_steps;
        if (s.finiteness_checked) ++finiteness_checks;
        if (s.validation_failed || s.finiteness_failed) ++validation_failures;
        const std::string tier = s.fallbacks.empty() || s.tier == "cpu" ? s.tier : s.tier + "+cpu";
        merge_tier(tier);
    }

    /// Merge another request's evidence (the choices of one API request). Steps two choices
    /// shared count twice in `steps` and `step_totals`; the row shares stay exact.
    RequestEvidence& operator+=(const RequestEvidence& o) {
        steps += o.steps;
        prompt_rows += o.prompt_rows;
        generated_rows += o.generated_rows;
        share += o.share;
        step_totals += o.step_totals;
        cpu_fallback += o.cpu_fallback;
        for (const auto& [k, v] : o.fallback_ops) fallback_ops[k] += v;
        validated_steps += o.validated_steps;
        validation_failures += o.validation_failures;
        finiteness_checks += o.finiteness_checks;
        shortcut_free = shortcut_free && o.shortcut_free;
        for (const auto& [k, v] : o.shortcuts) shortcuts[k] += v;
        if (!o.execution_tier.empty()) merge_tier(o.execution_tier);
        return *this;
    }

  private:
    // "cuda" + "cuda+cpu" -> "cuda+cpu"; the first tier seen otherwise.
    void merge_tier(const std::string& t) {
        if (execution_tier.empty() || t.size() > execution_tier.size()) execution_tier = t;
    }
};

/// Each counter of `t` split over sequences in proportion to `rows` (largest remainder; ties go
/// to the earlier sequence): the parts sum exactly to `t`. All rows 0: everything to part 0.
inline std::vector<OpTally> split_by_rows(const OpTally& t, std::span<const uint64_t> rows) {
    std::vector<OpTally> out(rows.size());
    if (rows.empty()) return out;
    unsigned __int128 total = 0;
    for (uint64_t r : rows) total += r;
    std::vector<uint64_t> rem(rows.size());
    std::vector<size_t> order(rows.size());
    auto split = [&](uint64_t v, auto&& part) {  // part(i) -> uint64_t& of out[i]
        if (total == 0) {
            part(0) += v;
            return;
        }
        uint64_t given = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            const unsigned __int128 x = static_cast<unsigned __int128>(v) * rows[i];
            const auto q = static_cast<uint64_t>(x / total);
            rem[i] = static_cast<uint64_t>(x % total);
            part(i) += q;
            given += q;
            order[i] = i;
        }
        uint64_t left = v - given;  // < rows.size()
        if (left == 0) return;
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return rem[a] > rem[b]; });
        for (size_t j = 0; left > 0; ++j, --left) part(order[j]) += 1;
    };
    for (int d = 0; d < kNumDevices; ++d) {
        for (int k = 0; k < kNumOps; ++k)
            split(t.ops[d][k], [&](size_t i) -> uint64_t& { return out[i].ops[d][k]; });
        split(t.weight_bytes[d], [&](size_t i) -> uint64_t& { return out[i].weight_bytes[d]; });
        split(t.act_bytes[d], [&](size_t i) -> uint64_t& { return out[i].act_bytes[d]; });
    }
    return out;
}

/// One-line JSON object: execution_tier, steps, prompt_rows, generated_rows, "attribution" (a
/// short statement of the rule above), "devices" (the row share per device: ops, weight_bytes,
/// act_bytes, by_op), "step_totals" (same shape), cpu_fallback, fallback_ops, validated_steps,
/// validation_failures, finiteness_checks, shortcut_free, shortcuts.
std::string request_evidence_json(const RequestEvidence& e);

}  // namespace zinc::runtime
