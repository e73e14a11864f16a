// zinc/backend/cpu/forward_state.h — what the CPU tier's executor works with.
//
// The CPU Runner owns one Workspace (a buffer per tensor of the model's op list, sized for
// max_batch_tokens rows, allocated once), the paged KV pool, the thread pool and the matmul
// scratch; a ForwardState bundles them with the rows of one step batch. A step's rows may come
// from many sequences; every per-row operation (norms, RoPE, K/V append) reads the row's own
// position and KV slot, the matmuls run over all rows at once, and attention reads each
// sequence's own blocks. All activation buffers are row-major (n_tokens, width).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/delta_net.h"
#include "backend/cpu/kv_pool.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/moe.h"
#include "backend/cpu/thread_pool.h"
#include "model/batch.h"
#include "model/ir.h"
#include "runtime/forward_hooks.h"

namespace zinc::cpu {

struct Workspace {
    Workspace(const model::Program& prog, int n_batch, int max_seq_len, int n_threads);
    int n_batch;
    std::vector<std::vector<float>> t;  // per Program tensor: (n_batch, width); logits: empty
    std::vector<float> rope_cs;         // (n_batch, n_rot)     cos/sin per row
    std::vector<float> scores;          // attention scratch (attention_scratch_floats)
    std::unordered_map<const model::Weight*, MatView> mats;  // every weight's matmul view
    MoeScratch moe;  // MoE ops' routing and expert buffers (sized at creation)
    const MatView& mat(const model::Weight* w) const { return mats.at(w); }
};

struct ForwardState {
    ThreadPool& pool;
    MatmulScratch& mm;
    KvPool& kv;
    Workspace& ws;
    const model::DumpFilter& dump;
    const int32_t* tokens = nullptr;          // (n_tokens) token id of each row
    const float* hidden_in = nullptr;         // (n_tokens, width) rows of an Input op, or null
    const int32_t* pos = nullptr;             // (n_tokens) position of each row in its sequence
    const int64_t* kv_slot = nullptr;         // (n_tokens) physical KV row each row's K/V goes to
    int n_tokens = 0;                         // rows still being computed (shrinks at KeepRows)
    std::span<const AttentionSeq> seqs = {};  // the rows of each sequence, in row order
    /// Rows whose logits are wanted, ascending; logits row i belongs to batch row out_rows[i].
    const int32_t* out_rows = nullptr;
    int n_out = 0;
    float* logits = nullptr;  // (n_out, n_vocab); nullptr when n_out == 0
    /// An embedding forward: every row is an output row (n_out == n_tokens, logits null), and
    /// execution stops after Program::embd_op, leaving the hidden state in ws.t[prog.embd].
    bool embeddings = false;
    int64_t dump_pos0 = 0;  // position of row 0 (for ZINC_DUMP lines)
    /// Optional (RunnerOptions::hooks): the executor counts each op it runs, captures the named
    /// intermediates for validation, and honours the debug/test switches there.
    runtime::ForwardHooks* hooks = nullptr;
    /// Recurrent models (Program::recurrent non-empty): the state pool, and the slot of each
    /// sequence of `seqs` (same order). nullptr otherwise.
    StatePool* rs = nullptr;
    const int32_t* seq_slot = nullptr;
};

/// Run the op list on the step batch in st: append every row's K/V to the pool and write the
/// logits of st.out_rows (or, with st.embeddings, stop at the embeddings' value). The caller (the
/// CPU Runner) has validated ids, positions and tables.
void execute(const model::Program& prog, ForwardState& st);
/// Run ops [begin, end) only (the tensor-parallel runner stops each shard at its AllReduce ops;
/// st carries the rows kept by KeepRows from one call to the next).
void execute_ops(const model::Program& prog, ForwardState& st, size_t begin, size_t end);

/// The CPU Runners' checks (backend/cpu/runner.cpp): a step batch against the options (ids in
/// [0, n_vocab), rows, positions, block tables), and the options themselves.
Result<void> validate_batch(const model::Batch& batch, const model::RunnerOptions& opts,
                            int32_t n_vocab);
Result<void> validate_options(const model::RunnerOptions& opts);
/// Positions an op list can embed: the rows of its smallest absolute position-embedding table
/// (AddEmbed by position: BERT), INT64_MAX when it has none.
int64_t position_limit(const model::Program& prog);
/// A step batch against the op list of model `arch` (both CPU Runners; `limit` is
/// position_limit(prog)): forward() (`embeddings` false) of an encoder, which has no LM head; a
/// sequence reaching past `limit`; Batch::hidden_out from an op list that marks no hidden state.
Result<void> validate_for_program(const model::Batch& batch, const model::Program& prog,
                                  const std::string& arch, int64_t limit, bool embeddings);

}  // namespace zinc::cpu
