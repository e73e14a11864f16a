// zinc/runtime/run_context.h — a one-sequence model::Context on the chosen tier, with its
// evidence: what `zinc --prompt`, `zinc chat` and `zinc bench` run on. The tier comes from
// --tier (passed in), else ZINC_TIER, else auto (runtime/tier.h); the other ZINC_* runtime
// switches are read here once. The Context is cuda::make_runner_context over the checked
// Runner (runtime/checked_runner.h): blocks 0..n-1 in order, chunks of at most n_batch rows.
#pragma once

#include <memory>
#include <string>

#include "model/model.h"
#include "runtime/checked_runner.h"
#include "runtime/evidence.h"
#include "runtime/tier.h"
#include "util/result.h"

namespace zinc::runtime {

struct RunContextOptions {
    int n_ctx = 4096;
    int n_threads = 0;
    int n_batch = 512;        // most rows in one forward
    std::string tier_flag;    // --tier value; empty: not given
    int device_flag = -1;     // -d/--device value; < 0: not given (then ZINC_DEVICE, else 0)
    bool exact_flag = false;  // --exact (else ZINC_EXACT): the CUDA tier computes the CPU's bits
    int tensor_parallel = 0;  // --tensor-parallel N (RuntimeOptions::tensor_parallel)
    /// Recurrent (hybrid) models: rows of one all-logits eval whose states are kept so the
    /// Context can truncate into them (speculative decoding: 1 + the longest draft;
    /// RunnerOptions::n_state_checkpoints). 0: none.
    int n_state_checkpoints = 0;
};

struct RunContext {
    std::unique_ptr<model::Context> ctx;
    std::shared_ptr<Evidence> evidence;
    TierChoice choice;           // the tier actually used and why (one line)
    DeviceMemory device_memory;  // what the Runner holds on the device (CUDA tier)
};

/// Errors (one line): a bad --tier / ZINC_* value, an explicit CUDA request that cannot be met,
/// Runner creation failures, state checkpoints asked of a tier that keeps none (hybrid models).
/// std::bad_alloc propagates (the caller reports the sizes).
Result<RunContext> create_run_context(const model::Model& model, const RunContextOptions& o);

}  // namespace zinc::runtime
