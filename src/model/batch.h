// zinc/model/batch.h — the step batch and the Runner that executes it (one per tier).
//
// A step batch is a flat list of token rows from any mix of sequences: prefill chunks and
// single-token decodes side by side (continuous batching with chunked prefill, as in Orca /
// vLLM). Each sequence's rows are contiguous and at consecutive positions. Its keys and values
// live in a paged KV cache (Kwon et al. 2023, "PagedAttention"): fixed-size blocks of
// `block_size` positions, every layer, addressed through the sequence's block table. Position p
// of a sequence lives in physical block block_table[p / block_size], slot p % block_size.
//
// The engine (engine/block_manager.h) decides which physical blocks a sequence owns; the Runner
// owns the storage of all blocks (host memory on the CPU tier, device memory on CUDA) and never
// allocates or frees blocks itself. Physical layout inside the Runner is its own business; the
// only contract is the logical one above plus copy_block() for copy-on-write.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace zinc::runtime {
class ForwardHooks;  // runtime/forward_hooks.h
}

namespace zinc::model {

class Model;

/// One sequence's slice of a step batch.
struct BatchSeq {
    int32_t row0 = 0;      // first row of this sequence in Batch::tokens
    int32_t n_tokens = 0;  // rows [row0, row0 + n_tokens) at positions pos0 .. pos0 + n_tokens - 1
    int32_t pos0 = 0;      // positions [0, pos0) are already in the KV cache
    /// Physical block ids covering positions [0, pos0 + n_tokens), in position order.
    std::span<const int32_t> block_table;
    bool want_logits = true;  // produce logits for this sequence's last row
    bool all_logits = false;  // produce logits for every row (implies want_logits)
    /// Recurrent (hybrid) models: the Runner's state slot of this sequence, in [0,
    /// RunnerOptions::n_state_slots), distinct within a batch. The slot's state must be at
    /// exactly pos0 (pos0 == 0 resets it): a recurrent state cannot be rewound past what
    /// keep_states kept, or shared, so prefix reuse is refused (docs/engine.md). Ignored by
    /// other models.
    int32_t state_slot = -1;
    /// Recurrent models: keep the state after every row of this slice (at most
    /// RunnerOptions::n_state_checkpoints rows), so Runner::rewind_state can put the state back
    /// at any of these positions (speculative decoding: the accepted boundary of a draft).
    /// Ignored by other models.
    bool keep_states = false;
};

/// A step batch. Sequences must not share a physical block that this step writes (the block
/// manager copies on write first); they may share blocks that are only read (a cached prefix).
struct Batch {
    std::span<const int32_t> tokens;  // (n_rows) token ids
    std::span<const BatchSeq> seqs;   // rows of seqs[i] follow those of seqs[i-1]
    /// Optional (Runner::hidden_width): receives Program::hidden, the trunk's last hidden
    /// state before the output norm, (n_embd) f32 per logits row, in the order of the logits
    /// rows (NextN/MTP drafting). nullptr (the default): not copied, nothing else changes.
    float* hidden_out = nullptr;
    /// The rows of a NextN program's Input op (RunnerOptions::nextn): (n_rows, n_embd) f32, one
    /// per batch row. Required there, ignored elsewhere.
    const float* hidden_in = nullptr;
};

struct RunnerOptions {
    int32_t n_blocks = 0;            // physical KV blocks to allocate
    int32_t block_size = 16;         // positions per block
    int32_t max_batch_tokens = 512;  // most rows in one forward (larger batches are an error)
    int32_t max_seqs = 16;           // most sequences in one forward
    int32_t max_seq_len = 4096;      // longest sequence (positions) the attention scratch allows
    /// Recurrent (hybrid) models: per-sequence state slots (conv + DeltaNet state of every
    /// recurrent layer, Model::recurrent_state_bytes() each), allocated once. 0: max_seqs.
    int32_t n_state_slots = 0;
    /// Recurrent models: rows per slot whose states BatchSeq::keep_states may keep (one state
    /// copy per row per slot: n_state_slots x this x recurrent_state_bytes(), allocated once).
    /// 0: none (a recurrent state then only moves forward). Runner::state_checkpoints() says
    /// what the Runner honours.
    int32_t n_state_checkpoints = 0;
    int n_threads = 0;  // CPU tier: 0 = all hardware threads
    /// A row's results must not depend on which other rows share the step (EngineOptions::
    /// batch_invariant). The CPU tier is batch-invariant always (docs/engine.md); a tier whose
    /// fast kernels are not must switch to ones that are when this is set.
    bool batch_invariant = false;
    /// Run the model's NextN/MTP block (its second op list, model/arch_model.h) instead of the
    /// trunk: every row also reads its Batch::hidden_in row, and the KV pool holds the block's
    /// one attention layer. CPU tier only; an error for a model without NextN layers.
    bool nextn = false;
    /// Optional (not owned, must outlive the Runner): the forward pass counts every op it runs
    /// here, captures named intermediates for validation and honours the runtime's debug/test
    /// switches (runtime/forward_hooks.h). nullptr: no accounting.
    runtime::ForwardHooks* hooks = nullptr;
};

/// Sampling settings of one logits row for Runner::forward_sample: engine/sampler.h's chain
/// (penalties -> top-k -> top-p -> min-p -> temperature -> draw) with its float arithmetic. The
/// host supplies the penalty window as distinct ids with counts, and the row's uniform draw
/// (engine::Sampler::device_row fills this from the sequence's own RNG).
struct RowSampling {
    float temperature = 0.0f;  // <= 0: greedy (argmax, lowest id on ties), the draw is unused
    int32_t top_k = 0;         // <= 0 or >= n_vocab: disabled
    float top_p = 1.0f;        // >= 1: disabled
    float min_p = 0.0f;        // <= 0: disabled
    float repeat_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
    std::span<const int32_t> penalty_ids;     // distinct token ids of the window, in [0, n_vocab)
    std::span<const int32_t> penalty_counts;  // occurrences of each (same length)
    double uniform = 0.0;                     // in [0, 1)
};

/// One row sampled by forward_sample.
struct SampledToken {
    int32_t id = 0;
    bool used_uniform = false;  // false: greedy, or no finite logit (id 0), as the CPU sampler
    float logprob = 0.0f;       // log-softmax of the raw logits at id (only when asked)
};

/// Executes step batches of one model on one tier. Not thread-safe: one caller (the engine's
/// step loop, or a Context) at a time.
class Runner {
  public:
    /// The CPU tier (the oracle). Errors: invalid options (non-positive sizes).
    static Result<std::unique_ptr<Runner>> create_cpu(const Model& model,
                                                      const RunnerOptions& opts);
    virtual ~Runner() = default;

    /// Run one step: append every row's K/V at its position and write logits into `logits`,
    /// (n_vocab) f32 per row, in batch order: all rows of a sequence with all_logits, the last
    /// row of one with want_logits, nothing for the others. Errors: a token id out of range, a
    /// block id out of range, a block table too short for pos0 + n_tokens, more rows or sequences
    /// than the options allow.
    virtual Result<void> forward(const Batch& batch, float* logits) = 0;

    /// Copy every layer's K/V of physical block src into dst (copy-on-write).
    virtual void copy_block(int32_t src, int32_t dst) = 0;

    virtual const RunnerOptions& options() const = 0;
    /// "cpu" or "cuda".
    virtual std::string tier() const = 0;
    /// Ranks the forward is split over (model/shard.h; --tensor-parallel N), 1 otherwise.
    virtual int tensor_parallel() const { return 1; }
    /// Bytes of KV storage for all blocks.
    virtual size_t kv_bytes() const = 0;
    /// Bytes of recurrent state for all slots (0 for attention-only models).
    virtual size_t state_bytes() const { return 0; }
    /// Rows per slot BatchSeq::keep_states can keep (RunnerOptions::n_state_checkpoints where
    /// the tier implements it; 0: a tier without recurrent state checkpoints, the default).
    virtual int32_t state_checkpoints() const { return 0; }
    /// The one place a recurrent state goes back (speculative decoding, docs/speculative.md):
    /// put `slot`'s state at position `pos`, which must be where it is (nothing to do) or a
    /// position the slot's last forward kept with keep_states (pos0 < pos <= pos0 + n_tokens);
    /// the next forward on the slot then starts at pos. Errors: pos not kept (the message says
    /// what is); a tier without checkpoints (the default).
    virtual Result<void> rewind_state(int32_t slot, int64_t pos) {
        (void)slot, (void)pos;
        return make_error("the " + tier() + " tier keeps no recurrent state checkpoints");
    }
    /// Whether this Runner computes the CPU tier's bits exactly (every intermediate and logit
    /// bit-identical to Runner::create_cpu's for the same batches): the CUDA tier in its default
    /// ZINC_EXACT=1 mode (docs/exactness.md). Validation against the CPU oracle is then bitwise
    /// (runtime/validator.h). The CPU tier is the reference itself; the checking Runner treats
    /// it as exact (runtime/checked_runner.cpp). Default false.
    virtual bool exact() const { return false; }

    /// An embedding forward (the /v1/embeddings path, engine/embedding_queue.h): every row of
    /// every sequence runs through the op list up to Program::embd (the output norm of a decoder,
    /// the last layer of an encoder; no LM head), and its hidden state is written to `hidden`,
    /// (n_rows, n_embd) f32 in batch order. K/V rows are appended as in forward(); want_logits
    /// and all_logits are ignored. A bidirectional model (Program::bidirectional) needs each
    /// sequence whole in one call: pos0 must be 0. Errors: as forward(); pos0 > 0 for a
    /// bidirectional model; a tier that does not compute embeddings (the default).
    virtual Result<void> forward_embed(const Batch& batch, float* hidden) {
        (void)batch, (void)hidden;
        return make_error("embeddings: the " + tier() + " tier does not compute embeddings");
    }

    /// Width (n_embd) of the Batch::hidden_out rows forward() fills (the CPU and CUDA tiers, for
    /// a model whose op list marks Program::hidden); 0, the default: this Runner does not fill
    /// them, and forward() with hidden_out is an error.
    virtual int64_t hidden_width() const { return 0; }

    /// Whether forward_sample is implemented (the CUDA tier samples on the device).
    virtual bool samples_on_device() const { return false; }
    /// forward(), with each logits row sampled where it was computed: only tokens (and, with
    /// want_logprob, the token's logprob) come back. rows[i] and out[i] belong to the i-th
    /// logits row forward() would write; no sequence may have all_logits. For the same logits
    /// and uniforms the tokens are engine::Sampler's (docs/cuda.md, "Sampling on the GPU").
    /// Errors: as forward(); rows.size() not the number of logits rows; unsupported tier.
    virtual Result<void> forward_sample(const Batch& batch, std::span<const RowSampling> rows,
                                        SampledToken* out, bool want_logprob) {
        (void)batch, (void)rows, (void)out, (void)want_logprob;
        return make_error("forward_sample: the " + tier() + " tier does not sample on its device");
    }
};

}  // namespace zinc::model
