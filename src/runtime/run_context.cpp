// zinc/runtime/run_context.cpp — the CLI's Context on the chosen tier.
#include "runtime/run_context.h"

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_tier.h"
#include "runtime/checked_runner.h"

namespace zinc::runtime {

Result<RunContext> create_run_context(const model::Model& model, const RunContextOptions& o) {
    auto ropts =
        runtime_options(o.tier_flag, o.device_flag, [](const char* k) { return std::getenv(k); });
    if (!ropts) return ropts.error();
    if (o.exact_flag) ropts.value().exact = true;
    ropts.value().tensor_parallel = o.tensor_parallel;
    if (o.n_ctx < 1) return make_error("context size " + std::to_string(o.n_ctx) + " < 1");
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.n_blocks = (o.n_ctx + ro.block_size - 1) / ro.block_size;
    ro.max_seq_len = ro.n_blocks * ro.block_size;
    ro.max_batch_tokens = std::max(1, std::min(o.n_batch, ro.max_seq_len));
    ro.max_seqs = 1;
    ro.n_threads = o.n_threads;
    const bool recurrent = model.recurrent_state_bytes() > 0;
    ro.n_state_checkpoints = recurrent ? o.n_state_checkpoints : 0;
    auto tr = create_tiered_runner(model, ro, ropts.value());
    if (!tr) return tr.error();
    if (tr->runner->state_checkpoints() < ro.n_state_checkpoints)
        return make_error("speculative decoding on " + model.arch_name() +
                          " (recurrent state) needs the state kept at every draft row, which the " +
                          tr->runner->tier() + " tier does not do (use --tier cpu)");
    RunContext rc;
    rc.evidence = tr->evidence;
    rc.choice = tr->choice;
    rc.device_memory = tr->device_memory;
    auto ctx = cuda::make_runner_context(std::move(tr->runner), o.n_ctx, model.n_vocab());
    if (!ctx) return ctx.error();
    rc.ctx = std::move(ctx.value());
    return rc;
}

}  // namespace zinc::runtime
