// zinc/engine/embedding_step.h — embedding requests inside the engine (/v1/embeddings).
//
// An embedding request is a prefill with no decode: its tokens run through the model up to the
// pooled hidden state (model::Runner::forward_embed) and the result is one pooled, L2-normalised
// vector (model/pooling.h). It goes through the Engine like generation (one step thread owns the
// Runner and the KV blocks; no second Runner, no lock held across a forward): between generation
// steps the step loop runs one embedding step, which packs waiting embedding jobs into one batch
// of at most max_batch_tokens rows and max_seqs sequences, with KV blocks taken from the same
// BlockManager and released when a job ends (never offered to the prefix cache: every row's
// hidden state is needed, so no prefix may be skipped). A causal model's long input is run in
// chunks over several steps, keeping its blocks in between; a bidirectional model's input must
// fit one step (Engine::submit_embedding refuses longer ones). So an embedding never stalls
// decoding by more than one bounded step.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine.h"
#include "engine/policy.h"
#include "model/batch.h"

namespace zinc::engine {

struct EmbeddingJob {
    RequestId id = 0;
    EmbeddingParams params;
    EmbeddingSink sink;
    int32_t n_done = 0;           // tokens whose hidden rows are in `hidden`
    std::vector<int32_t> blocks;  // KV blocks held (positions [0, n_done + next chunk))
    std::vector<float> hidden;    // (n_done, n_embd) hidden states so far
};

struct EmbeddingStepOptions {
    int32_t max_rows = 512;      // rows of one step (EngineOptions::max_batch_tokens)
    int32_t max_seqs = 16;       // sequences of one step (the Runner's max_seqs)
    int32_t n_embd = 0;          // width of a hidden row
    bool bidirectional = false;  // each job whole in one step (model::Program::bidirectional)
};

/// What one embedding step did.
struct EmbeddingStepResult {
    int32_t rows = 0;        // rows computed
    bool held_back = false;  // a job waits for its tenant's prefill bucket (not for KV blocks)
};

/// Run one embedding step over the front of `jobs`: every job that fits (a causal job may take a
/// chunk of what is left, at most its tenant's allowance from `policy`; a bidirectional one runs
/// whole once its tenant has any allowance, the bucket going into debt as a prefill chunk's may)
/// gets its rows computed and charged to its tenant (SchedulingPolicy::on_embedding_served);
/// finished jobs (and failed ones) get their sink called and are removed, with their blocks
/// released. rows 0 without held_back: the first job could not get its KV blocks (it waits for
/// generation to release some).
EmbeddingStepResult run_embedding_step(std::deque<EmbeddingJob>& jobs, model::Runner& runner,
                                       BlockManager& bm, SchedulingPolicy& policy,
                                       const EmbeddingStepOptions& opts);

/// Release a job's blocks and deliver `error` to its sink (cancellation, shutdown).
void fail_embedding(EmbeddingJob& job, BlockManager& bm, const std::string& error);

}  // namespace zinc::engine
