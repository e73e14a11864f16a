// zinc/runtime/checked_runner.h — the one way the CLI and the server build a Runner: pick the
// tier (runtime/tier.h), give the Runner its ForwardHooks (op counts, debug switches), and wrap
// it so every step lands in the run's Evidence and, with ZINC_VALIDATE=N, the first N steps are
// checked against the CPU oracle.
//
// Validation: a second Runner on the CPU tier (the oracle, no debug switches) runs the same
// step batches. For each of the first N steps both capture their named intermediates (inp_embd,
// per layer Qcur .. l_out, docs/runtime.md) and logits ("result_output"), and
// runtime/validator.h compares them: bitwise when the serving Runner is exact() (the CUDA tier
// with ZINC_EXACT=1, or the CPU tier), against the relative-error thresholds otherwise; the
// evidence records which ("validation": "bitwise" / "tolerance"). After N clean steps the oracle is released (trust
// promotion) and only the finiteness of the logits is checked. A failure names step, layer and
// op; with ZINC_VALIDATE_STRICT=1 the failing step's logits are replaced by the oracle's and
// every later step runs on the oracle (each counted as a cpu_fallback of op "forward"). A
// non-finite result after promotion cannot fall back (the oracle is gone): with strict it is
// an error, otherwise a counted failure.
#pragma once

#include <memory>
#include <string>

#include "model/batch.h"
#include "model/model.h"
#include "runtime/evidence.h"
#include "runtime/tier.h"

namespace zinc::runtime {

/// Device memory the serving Runner took when it was created (CUDA tier; cuda::RunnerStats).
struct DeviceMemory {
    bool on_device = false;  // false: the CPU tier (nothing on a device)
    size_t weight_bytes = 0, kv_bytes = 0, scratch_bytes = 0;
};
/// {"weight_bytes": W, "kv_bytes": K, "scratch_bytes": S, "total_bytes": T}, or null off-device
/// (`zinc bench --json`, /health).
std::string device_memory_json(const DeviceMemory& m);

struct TieredRunner {
    std::unique_ptr<model::Runner> runner;  // the checked Runner (tier() says the serving tier)
    std::shared_ptr<Evidence> evidence;     // shared with /health, /metrics, the CLI line
    TierChoice choice;
    DeviceMemory device_memory;
};

/// Choose the tier for `ropts` (probing CUDA), create the serving Runner with `ro` and hooks,
/// the CPU oracle when validate_steps > 0, and the checking wrapper. When auto picked CUDA but
/// the CUDA Runner cannot be created (a tensor type without a kernel, ...) the CPU tier is used
/// and the reason says so. Errors: an explicit --tier cuda that cannot be met, Runner errors.
Result<TieredRunner> create_tiered_runner(const model::Model& model, const model::RunnerOptions& ro,
                                          const RuntimeOptions& ropts);

/// Same with the tier already chosen (tests; the server after its own probe).
Result<TieredRunner> create_tiered_runner(const model::Model& model, const model::RunnerOptions& ro,
                                          const RuntimeOptions& ropts, const TierChoice& choice);

}  // namespace zinc::runtime
