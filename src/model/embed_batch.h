// zinc/model/embed_batch.h — the rules an embedding forward's batch must pass
// (Runner::forward_embed, model/batch.h), one definition for every tier, so the CPU and CUDA
// tiers refuse the same batches with the same messages.
#pragma once

#include <string_view>

#include "model/batch.h"
#include "model/ir.h"
#include "util/result.h"

namespace zinc::model {

/// Checks an embedding forward of `prog` (the op list of model `arch`) on `batch` into `hidden`
/// before any row runs; the batch's own rules (token and block ids, row ranges) are the tier's
/// forward() checks. Errors (prefix "embeddings: "): the op list marks no embeddings value
/// (Program::embd_op < 0: a NextN block); a bidirectional model
/// (Program::bidirectional) given a sequence with pos0 > 0 (its sequence must run whole, from
/// position 0, in one forward); `hidden` null.
Result<void> check_embed_batch(const Program& prog, std::string_view arch, const Batch& batch,
                               const float* hidden);

}  // namespace zinc::model
