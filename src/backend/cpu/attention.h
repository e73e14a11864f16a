// zinc/backend/cpu/attention.h — causal scaled dot-product attention over the f16 KV cache
// (Vaswani et al. 2017), with grouped-query heads (Ainslie et al. 2023) and an optional sliding
// window. Math is f32: K/V rows are widened from f16 as they are read.
//
// Query token t of a sequence sits at position pos0 + t and attends to that sequence's cache
// positions j with j <= pos0 + t and, when window > 0, pos0 + t - j < window (the window counts
// the token itself, as llama.cpp's LLAMA_SWA_TYPE_STANDARD and HF's sliding_window do). Query
// head h reads KV head h / (n_head / n_head_kv).
//
// The cache is paged (Kwon et al. 2023, "PagedAttention"): one layer's K (and V) storage is a
// pool of physical rows, grouped in blocks of block_size rows; position j of a sequence lives in
// physical row block_table[j / block_size] * block_size + j % block_size. paged_attention runs
// the rows of many sequences in one call (varlen: each row attends only to its own sequence's
// positions); the result of a row does not depend on which other rows share the call, on the
// thread count, or on the block size: the math follows the canonical order of backend/canon.h
// (key chunks of canon::kAttnChunk aligned positions, merged in order), which the CUDA tier
// performs too, so both tiers give the same bits.
#pragma once

#include <cstdint>
#include <span>

#include "backend/canon.h"
#include "backend/cpu/thread_pool.h"

namespace zinc::cpu {

struct AttentionParams {
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
    float scale = 1.0f;  // multiplies q.k (usually 1/sqrt(head_dim_k))
    int window = 0;      // 0: full causal
    // (n_head) f32 attention sinks or null: per query head a learned logit that joins the
    // softmax denominator and contributes no value (gpt-oss; Xiao et al. 2023, "Efficient
    // Streaming Language Models with Attention Sinks"). out = sum_j e^(s_j - M) v_j /
    // (sum_j e^(s_j - M) + e^(sink - M)). In the canonical order it is one more chunk merged
    // after the last key chunk, with m = sink, l = 1, o = 0 (backend/canon.h merge_sink).
    const float* sinks = nullptr;
    // false: bidirectional (BERT): query row t attends to every position of its sequence in the
    // cache, [0, pos0 + n_tokens), whatever its own position (window must be 0).
    bool causal = true;
};

/// A contiguous cache of one layer: position j's K row is k + j * k_stride (n_head_kv *
/// head_dim_k f16).
struct KvView {
    const uint16_t* k = nullptr;
    const uint16_t* v = nullptr;
    int64_t k_stride = 0;  // elements between positions
    int64_t v_stride = 0;
};

/// A paged cache of one layer: physical row r's K is k + r * k_stride, V is v + r * v_stride.
struct PagedKvView {
    const uint16_t* k = nullptr;
    const uint16_t* v = nullptr;
    int64_t k_stride = 0;
    int64_t v_stride = 0;
    int64_t block_size = 0;  // physical rows per block
};

/// One sequence's query rows in a paged_attention call.
struct AttentionSeq {
    int32_t row0 = 0;      // first query row (rows of the sequences are consecutive, in order)
    int32_t n_tokens = 0;  // query rows at positions pos0 .. pos0 + n_tokens - 1
    int64_t pos0 = 0;
    const int32_t* block_table = nullptr;  // physical blocks covering [0, pos0 + n_tokens)
};

/// Scratch floats for attention (any number of positions; n_pos is kept for callers): per
/// thread, the scores of one key chunk and the running and chunk outputs of the `group` query
/// heads that share a KV head (the canonical chunked order, backend/canon.h).
inline int64_t attention_scratch_floats(const AttentionParams& p, int n_threads, int64_t n_pos) {
    const int64_t group = p.n_head / p.n_head_kv;
    return static_cast<int64_t>(n_threads) * group * (canon::kAttnChunk + 2 * p.head_dim_v + 2);
}

/// q: (n_rows, ldq) with heads at h * head_dim_k; out: (n_rows, ldo) with heads at
/// h * head_dim_v, n_rows = the rows of all seqs. The cache must already hold every sequence's
/// positions [0, pos0 + n_tokens). `scores` is scratch of attention_scratch_floats(p,
/// pool.n_threads(), longest pos0 + n_tokens) floats.
void paged_attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
                     std::span<const AttentionSeq> seqs, const PagedKvView& kv, float* out,
                     int64_t ldo, float* scores);

/// One sequence over a contiguous cache: q (n_tokens, ldq) at positions pos0 ... Same math as
/// paged_attention (a single block covering every position).
void attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
               int n_tokens, int64_t pos0, const KvView& kv, float* out, int64_t ldo,
               float* scores);

}  // namespace zinc::cpu
