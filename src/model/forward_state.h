// zinc/model/forward_state.h — internal: what an architecture's forward pass works with.
//
// A Context owns one Workspace (activation buffers sized for n_batch tokens, allocated once),
// the KV cache, the thread pool and the matmul scratch; a ForwardState bundles them with the
// tokens of one chunk. All activation buffers are row-major (n_tokens, width).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/thread_pool.h"
#include "model/config.h"
#include "model/kv_cache.h"

namespace zinc::model {

struct Workspace {
    Workspace(const ModelConfig& cfg, int n_batch, int n_ctx, int n_threads);
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
    std::vector<float> rope_cs;  // (n_batch, n_rot)     cos/sin per token
    std::vector<float> scores;   // (n_threads, n_head / n_head_kv, n_ctx) attention probabilities
};

/// ZINC_DUMP=<name> (e.g. "blk.3.attn_out"): print that intermediate to stderr for diffing.
/// Read once when the Context is created.
struct DumpFilter {
    std::string name;  // empty: dumping off
    bool wants(std::string_view n) const { return !name.empty() && (name == n || name == "all"); }
};

struct ForwardState {
    cpu::ThreadPool& pool;
    cpu::MatmulScratch& mm;
    KvCache& kv;
    Workspace& ws;
    const DumpFilter& dump;
    const int32_t* tokens = nullptr;
    int n_tokens = 0;
    int64_t pos0 = 0;  // position of tokens[0]
    bool all_logits = false;
    float* logits = nullptr;  // (all_logits ? n_tokens : 1, n_vocab)
};

}  // namespace zinc::model
