// zinc/backend/cpu/attention.h — causal scaled dot-product attention over the f16 KV cache
// (Vaswani et al. 2017), with grouped-query heads (Ainslie et al. 2023) and an optional sliding
// window. Math is f32: K/V rows are widened from f16 as they are read.
//
// Query token t sits at position pos0 + t and attends to cache positions j with
// j <= pos0 + t and, when window > 0, pos0 + t - j < window (the window counts the token itself,
// as llama.cpp's LLAMA_SWA_TYPE_STANDARD and HF's sliding_window do). Query head h reads KV head
// h / (n_head / n_head_kv).
#pragma once

#include <cstdint>

#include "backend/cpu/thread_pool.h"

namespace zinc::cpu {

struct AttentionParams {
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim_k = 0;
    int head_dim_v = 0;
    float scale = 1.0f;  // multiplies q.k (usually 1/sqrt(head_dim_k))
    int window = 0;      // 0: full causal
};

/// The cache of one layer: position j's K row is k + j * k_stride (n_head_kv * head_dim_k f16).
struct KvView {
    const uint16_t* k = nullptr;
    const uint16_t* v = nullptr;
    int64_t k_stride = 0;  // elements between positions
    int64_t v_stride = 0;
};

/// q: (n_tokens, ldq) with heads at h * head_dim_k; out: (n_tokens, ldo) with heads at
/// h * head_dim_v. The cache must already hold positions [0, pos0 + n_tokens). `scores` is
/// scratch of attention_scratch_floats(p, pool.n_threads(), pos0 + n_tokens) floats.
inline int64_t attention_scratch_floats(const AttentionParams& p, int n_threads, int64_t n_pos) {
    return static_cast<int64_t>(n_threads) * (p.n_head / p.n_head_kv) * n_pos;
}

void attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
               int n_tokens, int64_t pos0, const KvView& kv, float* out, int64_t ldo,
               float* scores);

}  // namespace zinc::cpu
