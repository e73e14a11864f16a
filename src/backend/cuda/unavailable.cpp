// zinc/backend/cuda/unavailable.cpp — the CUDA tier's entry points in a build without CUDA
// (-DZINC_CUDA=OFF or no nvcc): every call reports why, so the CLI falls back to the CPU tier.
#include "backend/cuda/cuda_tier.h"

namespace zinc::cuda {

namespace {
const char* kWhy =
    "zinc was built without the CUDA tier (-DZINC_CUDA=OFF or no nvcc at build time)";
}

std::string version_string(int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string build_info() {
    return kWhy;
}

Probe probe() {
    Probe p;
    p.reason = kWhy;
    return p;
}

Result<std::unique_ptr<model::Runner>> create_runner(const model::Model&,
                                                     const model::RunnerOptions&,
                                                     const CudaOptions&) {
    return make_error(kWhy);
}

Result<void> forward_argmax(model::Runner&, const model::Batch&, int32_t*) {
    return make_error(kWhy);
}

RunnerStats runner_stats(const model::Runner&) {
    return {};
}

ExpertLoad expert_load(const model::Runner&) {
    return {};
}

}  // namespace zinc::cuda
