// zinc/engine/nextn_drafter.h — the NextN/MTP drafter: the target's own NextN block (DeepSeek-V3
// section 2.2's multi-token prediction module; Qwen 3.5's `nextn_predict_layers`) proposes the
// next tokens from the target's hidden state (docs/speculative.md, "NextN / MTP").
//
// The block's op list (ArchModel::nextn_program, models/qwen35.cpp) runs on a CPU-tier Runner of
// its own (RunnerOptions::nextn), whose KV pool holds the block's one attention layer: each
// sequence owns a fixed, contiguous range of its blocks (a slot). For the row at position i the
// block reads h_i (the target's hidden state there, observe_hidden) and t_{i+1}; its output
// predicts t_{i+2}. propose() first runs the positions whose h arrived since the last proposal
// (the block's KV history, kept), the last of them with the pending token, whose logits give
// the first draft token (argmax, lowest id on ties); each further draft token runs one more row
// with the previous draft token and the block's own output as h (chaining), at positions the
// next proposal overwrites. Drafts are greedy and deterministic (a point mass for verification).
//
// History: the engine sees h only for rows whose logits it computes, so a sequence's block
// history starts at its prompt's last position (the earlier prompt rows' h are dropped by the
// trunk's KeepRows); positions in the block are counted from there (RoPE is relative, so only
// rounding differs from absolute positions). A gap (a preempted sequence recomputed, a
// proposal skipped) starts the history again at the first position after it.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/drafter.h"
#include "util/result.h"

namespace zinc::model {
class Model;
}

namespace zinc::engine {

struct NextnDrafterOptions {
    int32_t n_ctx = 4096;  // positions per sequence (the target's context)
    int32_t n_seqs = 4;    // sequences drafted for at once (the engine's n_parallel; 1 for run)
    int n_threads = 0;     // CPU threads of the block's forward; 0: all
};

/// `model` must outlive the drafter. Errors: the model has no NextN block (the message names
/// `<arch>.nextn_predict_layers`), invalid options.
Result<std::unique_ptr<Drafter>> make_nextn_drafter(const model::Model& model,
                                                    const NextnDrafterOptions& opts);

}  // namespace zinc::engine
