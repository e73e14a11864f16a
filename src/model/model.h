// zinc/model/model.h — a loaded model and the per-sequence inference context (the CPU tier).
//
// Model::load reads hyperparameters (model/config.h) and binds every weight declaratively by
// name, shape and allowed types; a mismatch is an Error naming the tensor. Weights stay in the
// GGUF mapping, quantized. Context runs one sequence: it owns a CPU Runner (model/batch.h) whose
// paged f16 KV pool holds n_ctx positions under one fixed, contiguous block table, and runs each
// chunk of tokens as a one-sequence step batch. Many sequences at once: engine/engine.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace zinc::gguf {
class File;
}

namespace zinc::model {

struct ModelConfig;  // model/config.h
class Runner;        // model/batch.h

struct LoadOptions {
    int n_threads = 0;  // 0 = all hardware threads
};

class Model {
  public:
    /// Errors: unsupported general.architecture, missing/invalid hyperparameters, a missing
    /// tensor, or a tensor whose shape or type does not match what the architecture expects.
    static Result<std::unique_ptr<Model>> load(const gguf::File& file, const LoadOptions& opts);
    virtual ~Model() = default;
    virtual const ModelConfig& config() const = 0;
    virtual std::string arch_name() const = 0;
    /// Bytes of the f16 KV cache for n_ctx positions (for --check memory fit).
    virtual size_t kv_cache_bytes(int n_ctx) const = 0;
    virtual int32_t n_vocab() const = 0;
    virtual int32_t n_ctx_train() const = 0;
    /// Recurrent (hybrid) models: bytes of conv + DeltaNet state one sequence needs, whatever
    /// its length (0: attention only). The engine gives each running sequence one slot.
    virtual size_t recurrent_state_bytes() const { return 0; }
    /// false for an encoder (bert): it computes embeddings only (Runner::forward_embed), and
    /// generation requests are refused.
    virtual bool has_lm_head() const { return true; }
    /// Attention in both directions (bert): a sequence's embedding needs it whole in one forward.
    virtual bool bidirectional() const { return false; }
    /// NextN / MTP blocks the file carries after the trunk (<arch>.nextn_predict_layers; bound,
    /// not run by the forward pass); 0 for architectures without them.
    virtual int32_t n_nextn_layers() const { return 0; }
    /// The pooling the file names (<arch>.pooling_type: 1 mean, 2 cls, 3 last; model/pooling.h),
    /// or -1 / 0 when it names none.
    virtual int32_t pooling_type() const { return -1; }
};

struct ContextOptions {
    int n_ctx = 4096;   // KV capacity in positions
    int n_threads = 0;  // 0 = all hardware threads
    int n_batch = 512;  // max tokens per forward chunk (larger evals are split)
    /// Recurrent (hybrid) models: an all-logits eval of up to this many tokens keeps the state
    /// after each, so truncate() can go back into it (speculative decoding: 1 + the longest
    /// draft). 0: a recurrent state only moves forward (truncate to a middle position fails the
    /// next eval). RunnerOptions::n_state_checkpoints.
    int n_state_checkpoints = 0;
};

class Context {
  public:
    static Result<std::unique_ptr<Context>> create(const Model& model, const ContextOptions& opts);
    /// A Context over any Runner (model/batch.h), e.g. the CUDA tier's: one sequence owning the
    /// Runner's blocks 0..n_blocks-1 in order, evaluated in chunks of max_batch_tokens. Error:
    /// the Runner's blocks hold fewer than n_ctx positions.
    static Result<std::unique_ptr<Context>> over_runner(std::unique_ptr<Runner> runner, int n_ctx,
                                                        int32_t n_vocab);
    virtual ~Context() = default;

    /// Run the forward pass for `tokens` at positions n_past() .. n_past()+n-1, appending to the
    /// KV cache. Errors: a token id out of range, or the context would overflow n_ctx.
    /// Logits of the last token are always available afterwards; with all_logits, every
    /// token's logits are kept (logits(i) for i in [0, n)).
    virtual Result<void> eval(std::span<const int32_t> tokens, bool all_logits = false) = 0;
    /// (n_vocab) f32 logits of the i-th token of the last eval (-1 = last token).
    virtual const float* logits(int i = -1) const = 0;
    /// NextN drafting: from the next eval on, keep the trunk's hidden state before the output
    /// norm (Program::hidden, n_embd f32) of every row whose logits are kept; hidden(i) as
    /// logits(i). Error: the Runner does not return it (Runner::hidden_width: the CPU and CUDA
    /// tiers, not the tensor-parallel runners).
    virtual Result<void> keep_hidden() = 0;
    /// (n_embd) f32 hidden state of the i-th token of the last eval (-1 = last); keep_hidden().
    virtual const float* hidden(int i = -1) const = 0;
    virtual int n_past() const = 0;
    virtual int n_ctx() const = 0;
    /// Drop positions >= n (n <= n_past); reset() is truncate(0). A recurrent model's state
    /// goes back too when the last eval kept it at n (an all-logits eval within
    /// n_state_checkpoints tokens, Runner::rewind_state); otherwise the next eval fails, saying
    /// why (truncate(0) always works: the state restarts).
    virtual void truncate(int n) = 0;
    void reset() { truncate(0); }
};

}  // namespace zinc::model
