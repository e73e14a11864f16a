// zinc/model/forward_state.h — internal: what an architecture's forward pass works with.
//
// The CPU Runner owns one Workspace (activation buffers sized for max_batch_tokens rows,
// allocated once), the paged KV pool, the thread pool and the matmul scratch; a ForwardState
// bundles them with the rows of one step batch. A step's rows may come from many sequences;
// every per-row operation (norms, RoPE, K/V append) reads the row's own position and KV slot,
// the matmuls run over all rows at once, and attention reads each sequence's own blocks. All
// activation buffers are row-major (n_tokens, width).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/thread_pool.h"
#include "model/config.h"
#include "model/kv_pool.h"
#include "runtime/forward_hooks.h"

namespace zinc::model {

struct Workspace {
    Workspace(const ModelConfig& cfg, int n_batch, int max_seq_len, int n_threads);
    int n_batch;
    std::vector<float> x;        // (n_batch, n_embd)    residual stream
    std::vector<float> xn;       // (n_batch, n_embd)    normalised input of a block
    std::vector<float> proj;     // (n_batch, n_embd)    output of attention / FFN projection
    std::vector<float> q;        // (n_batch, q_dim)
    std::vector<float> k;        // (n_batch, kv_dim_k)
    std::vector<float> v;        // (n_batch, kv_dim_v)
    std::vector<float> attn;     // (n_batch, n_head * head_dim_v)
    std::vector<float> gate;     // (n_batch, n_ff)
    std::vector<float> up;       // (n_batch, n_ff)
    std::vector<float> rope_cs;  // (n_batch, n_rot)     cos/sin per row
    std::vector<float> scores;   // (n_threads, n_head / n_head_kv, max_seq_len) attention probs
};

/// ZINC_DUMP=<name> (e.g. "blk.3.attn_out"): print that intermediate to stderr for diffing.
/// Read once when the Runner (or Context) is created.
struct DumpFilter {
    std::string name;  // empty: dumping off
    bool wants(std::string_view n) const { return !name.empty() && (name == n || name == "all"); }
};

struct ForwardState {
    cpu::ThreadPool& pool;
    cpu::MatmulScratch& mm;
    KvPool& kv;
    Workspace& ws;
    const DumpFilter& dump;
    const int32_t* tokens = nullptr;   // (n_tokens) token id of each row
    const int32_t* pos = nullptr;      // (n_tokens) position of each row in its sequence
    const int64_t* kv_slot = nullptr;  // (n_tokens) physical KV row each row's K/V goes to
    int n_tokens = 0;                  // rows still being computed (shrinks in the last layer)
    std::span<const cpu::AttentionSeq> seqs = {};  // the rows of each sequence, in row order
    /// Rows whose logits are wanted, ascending; logits row i belongs to batch row out_rows[i].
    const int32_t* out_rows = nullptr;
    int n_out = 0;
    float* logits = nullptr;  // (n_out, n_vocab); nullptr when n_out == 0
    int64_t dump_pos0 = 0;    // position of row 0 (for ZINC_DUMP lines)
    /// Optional (RunnerOptions::hooks): each block counts the ops it runs, dump() points
    /// capture intermediates for validation, and the debug/test switches are honoured there.
    runtime::ForwardHooks* hooks = nullptr;
};

}  // namespace zinc::model
