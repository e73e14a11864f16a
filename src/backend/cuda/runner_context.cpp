// zinc/backend/cuda/runner_context.cpp — the CUDA tier's Context: model::Context::over_runner
// (one sequence over any Runner), so the CLI's generate loop runs unchanged on the CUDA tier.
#include "backend/cuda/cuda_tier.h"
#include "model/batch.h"
#include "model/model.h"

namespace zinc::cuda {

Result<std::unique_ptr<model::Context>> make_runner_context(std::unique_ptr<model::Runner> runner,
                                                            int n_ctx, int32_t n_vocab) {
    return model::Context::over_runner(std::move(runner), n_ctx, n_vocab);
}

}  // namespace zinc::cuda
