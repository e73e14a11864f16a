// zinc/backend/cpu/tp_runner.h — the CPU tier split over N tensor-parallel ranks
// (`--tensor-parallel N --tier cpu`): a correctness mode, not a speed mode.
//
// The model's op list is sharded (model/shard.h); each rank has its own activation workspace
// and its own, narrower KV pool (its heads). One forward runs the N rank programs in lockstep
// on one thread pool: every rank up to its next AllReduce op, then the partial sums are added
// in rank order (rank 0 + rank 1 + ...) and the sum is copied back to every rank, then on to
// the next AllReduce. Only rank 0 runs the output head (it is replicated: every rank would
// compute the same logits). This is what N GPUs with NCCL compute, with the sum in one fixed
// order; at N = 1 it is bit-identical to the plain CPU Runner. Embeddings (forward_embed) are
// the same step stopped at the rank programs' embd_op, rank 0's replicated Program::embd rows.
#pragma once

#include <memory>

#include "model/batch.h"
#include "model/model.h"
#include "model/shard.h"
#include "util/result.h"

namespace zinc::cpu {

/// Errors: those of model::shard_program (head counts, block boundaries) and of the options.
Result<std::unique_ptr<model::Runner>> create_tensor_parallel_runner(
    const model::Model& model, const model::RunnerOptions& opts, int n_ranks);
/// The same over shards already made by model::shard_program for `model` (tests alter them to
/// check that a dropped rank or a misplaced slice is caught).
Result<std::unique_ptr<model::Runner>> create_tensor_parallel_runner(
    const model::Model& model, const model::RunnerOptions& opts,
    std::unique_ptr<model::ShardSet> shards);

}  // namespace zinc::cpu
