// zinc/backend/cuda/memory_estimate.cpp — the CUDA tier's device-memory estimate (cuda_tier.h
// device_bytes_needed): what the tier choice (runtime/tier.h), `zinc check` and create_runner's
// load-time check compare with a device's free memory. Plain C++ (no CUDA types), so it is the
// same number in every build and unit-tested without a device.
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/scratch_sizes.h"
#include "model/arch_model.h"

namespace zinc::cuda {

size_t device_bytes_needed(const model::Model& model, int n_ctx, int n_state_slots,
                           int n_state_checkpoints) {
    const auto* am = dynamic_cast<const model::ArchModel*>(&model);
    if (!am) return 0;
    const model::ModelConfig& c = am->config();
    size_t w = 0;  // every weight the op list uses, each once (a tied embedding too)
    for (const model::Weight* t : am->program().weights()) w += t->bytes();
    size_t n_kv_layers = 0;  // the layers that attend (hybrid models: not the recurrent ones)
    std::vector<bool> seen(static_cast<size_t>(c.n_layer), false);
    for (const model::Op& op : am->program().ops)
        if (op.kind() == model::OpKind::RopeKv) {
            const auto l = static_cast<size_t>(op.as<model::RopeKvP>().kv_layer);
            if (l < seen.size() && !seen[l]) seen[l] = true, ++n_kv_layers;
        }
    const size_t kv = static_cast<size_t>(n_ctx) * n_kv_layers * (c.kv_dim_k() + c.kv_dim_v()) * 2;
    // dequantized-weight scratch for prefill (largest matrix in f16) + activations (~64 MiB)
    const size_t largest = static_cast<size_t>(c.n_embd) * std::max(c.n_vocab, c.n_ff) * 2;
    // Recurrent state: per slot the state itself and n_state_checkpoints kept copies of it
    // (RunnerOptions::n_state_checkpoints, runner_recurrent.cpp's pools).
    const size_t state = model.recurrent_state_bytes() *
                         static_cast<size_t>(std::max(n_state_slots, 1)) *
                         (1 + static_cast<size_t>(std::max(n_state_checkpoints, 0)));
    return w + kv + state + largest + (64u << 20) + kMmqSplitFloats * sizeof(float);
}

size_t device_bytes_needed(const model::Model& model, const model::RunnerOptions& opts) {
    return device_bytes_needed(model, opts.n_blocks * opts.block_size,
                               opts.n_state_slots > 0 ? opts.n_state_slots : opts.max_seqs,
                               opts.n_state_checkpoints);
}

}  // namespace zinc::cuda
