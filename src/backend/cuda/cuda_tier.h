// zinc/backend/cuda/cuda_tier.h — the public face of the CUDA tier: device probing, tier choice,
// and the CUDA model::Runner. This header has no CUDA types, so the CLI and tests include it in
// every build; with -DZINC_CUDA=OFF (or no nvcc) the same functions exist and report "built
// without CUDA" (unavailable.cpp).
//
// The Runner follows model/batch.h exactly: step batches of token rows from several sequences
// over a paged KV cache (f16, device memory), logits per sequence. See docs/cuda.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/batch.h"
#include "model/model.h"
#include "model/shard.h"
#include "util/result.h"

namespace zinc::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    size_t mem_total = 0;  // bytes
    size_t mem_free = 0;   // bytes, at probe time
    int n_sm = 0;
};

struct Probe {
    bool built = false;               // compiled with the CUDA tier
    std::string reason;               // why no device is usable (empty when devices is non-empty)
    int driver_version = 0;           // e.g. 13000 (CUDA 13.0); 0 when there is no driver
    int runtime_version = 0;          // the runtime zinc was built against
    std::vector<DeviceInfo> devices;  // usable devices (compute capability >= 7.0 ... 9.x)
};

/// Look for CUDA devices. Never fails: problems land in Probe::reason as one line.
Probe probe();

/// "13.0" from 13000.
std::string version_string(int v);

/// One line on this build's CUDA tier, for `zinc --version`, without looking for devices:
/// "CUDA tier built with the CUDA 13.0 runtime, kernels for compute capability 9.x", or in a
/// build without CUDA the reason every entry point gives ("zinc was built without the CUDA
/// tier ...").
std::string build_info();

struct CudaOptions {
    int device = 0;  // -d N
    /// The kernels: 1 exact (every matrix product by the dmmv_exact kernels, the CPU tier's bits,
    /// docs/exactness.md; also what RunnerOptions::batch_invariant selects), 0 fast (the default:
    /// dmmv / mmq / cuBLAS, held to agreement with the CPU tier, docs/cuda.md), -1: ZINC_EXACT
    /// (1 or 0; unset: fast), for programs that build a runner without the CLI's --exact.
    int exact = -1;
    /// Tensor parallel (model/shard.h): this runner executes shards->shards[rank].program
    /// instead of the model's own op list. Only N = 1 is run today (one device, the one-rank
    /// AllReduce ops are identities); null: the model's op list.
    std::shared_ptr<const model::ShardSet> shards;
    int rank = 0;
};

/// The CUDA Runner for `model` (any architecture of src/models: it executes the model's op list,
/// model/ir.h).
/// Uploads the weights (still quantized) and allocates opts.n_blocks KV blocks on the device.
/// Errors (one line): no usable device, a bad device index, a tensor type without a CUDA
/// kernel, or out of device memory (with the sizes).
Result<std::unique_ptr<model::Runner>> create_runner(const model::Model& model,
                                                     const model::RunnerOptions& opts,
                                                     const CudaOptions& copts);

/// Greedy decode without logits crossing to the host: for a Runner from create_runner, run the
/// step and write the argmax token of each logits row (the rows forward() would write) into
/// `tokens` (host). Errors as forward(); an error if `runner` is not a CUDA runner.
Result<void> forward_argmax(model::Runner& runner, const model::Batch& batch, int32_t* tokens);

/// Device bytes (an estimate, memory_estimate.cpp) the weights, a KV cache of n_ctx positions,
/// (hybrid models) the recurrent state of n_state_slots slots with n_state_checkpoints kept
/// copies each (RunnerOptions::n_state_checkpoints), and the runner's scratch need: for
/// `zinc check`, the tier choice and the load-time memory check. The same number in a build
/// without CUDA. 0 for a model that is not a zinc architecture model.
size_t device_bytes_needed(const model::Model& model, int n_ctx, int n_state_slots = 1,
                           int n_state_checkpoints = 0);
/// The same for a Runner created with `opts`: n_blocks x block_size positions, n_state_slots
/// slots (0: max_seqs, as the Runner allocates) and n_state_checkpoints.
size_t device_bytes_needed(const model::Model& model, const model::RunnerOptions& opts);

/// Per-step counters of a CUDA runner (for perf notes): kernel launches issued by the host in
/// the last forward (0 when a CUDA graph was replayed), graph replays so far, host microseconds
/// spent in the last forward call up to the sync; and the device memory it holds (bytes):
/// weights as uploaded, the KV pool, and scratch (every other allocation of the runner's own:
/// activations, RoPE tables, dequantized-weight and split-K scratch; not cuBLAS's workspace nor
/// the sampler's buffers, made on first use).
struct RunnerStats {
    int launches_last_step = 0;
    int64_t graph_replays = 0;
    int64_t graph_captures = 0;
    double host_us_last_step = 0;
    size_t weight_bytes = 0, kv_bytes = 0, scratch_bytes = 0;
};
RunnerStats runner_stats(const model::Runner& runner);

/// MoE models: the slots routed to each expert since the runner was made (every prefill and
/// decode step; a slot is one token's use of one expert), counts (n_layers x n_expert) row-major
/// by layer index, zeros for dense layers (runtime/expert_load.h summarises them). Empty for a
/// dense model or a runner of another tier. Synchronises the runner's stream: not for the step
/// path.
struct ExpertLoad {
    std::vector<uint64_t> counts;
    int n_expert = 0;
};
ExpertLoad expert_load(const model::Runner& runner);

/// A Context (model/model.h) over any Runner: one sequence, a contiguous block table of
/// ceil(n_ctx / block_size) blocks, chunks of at most max_batch_tokens. Lets `zinc --prompt`
/// run on the CUDA tier through the same interface as the CPU Context.
Result<std::unique_ptr<model::Context>> make_runner_context(std::unique_ptr<model::Runner> runner,
                                                            int n_ctx, int32_t n_vocab);

}  // namespace zinc::cuda
