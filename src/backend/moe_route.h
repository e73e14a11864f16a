// zinc/backend/moe_route.h — MoE routing of one row, written once for the CPU tier and the CUDA
// kernel (same float operations in the same order: backend/canon.h), so both tiers pick the same
// experts with the same weights.
//
// Conventions (llama.cpp's build_moe_ffn):
//  * softmax-then-top-k (qwen3moe): p_i = exp(l_i - max) / sum_j exp(l_j - max) (the sum in
//    double, increasing j; p_i = e_i * (float)(1 / sum), as ggml_soft_max); the k largest p in
//    descending order (ties: the lower expert id first); weight_s = p of the s-th expert; with
//    norm_w the weights are divided by their sum (added in slot order, clamped below at
//    6.103515625e-5 as llama.cpp does).
//  * top-k-then-softmax (gpt-oss): the k largest logits (descending, ties by lower id), weights
//    the softmax over those k logits.
//  * w_scale not 0 or 1: every weight is multiplied by it (<arch>.expert_weights_scale).
// The probabilities are recomputed per selection pass instead of stored, so the routine needs no
// scratch array (k passes over n_expert entries: 8 x 128 for Qwen3-30B-A3B).
#pragma once

#include <cstdint>

#include "backend/canon.h"

namespace zinc::moe {

constexpr int kMaxUsed = 32;  // most experts a row may use (llama.cpp: LLAMA_MAX_EXPERTS is 512
                              // in total; top-k of the models here is 4..8)

// Whether (va, a) comes before (vb, b) in the descending order with ties by lower index.
ZINC_HD bool before(float va, int a, float vb, int b) {
    return va > vb || (va == vb && a < b);
}

/// Whether entry (v, i) may be chosen in the selection pass after (prev_v, prev_i): it comes
/// after the previous choice in the descending order (prev_i < 0: the first pass, all may).
ZINC_HD bool eligible(float prev_v, int prev_i, float v, int i) {
    return prev_i < 0 || before(prev_v, prev_i, v, i);
}

/// The k chosen values w[0..k) (probabilities, or logits for gpt-oss's order) -> the routing
/// weights: gpt-oss's softmax over the k logits, then norm_w and w_scale. Every float operation
/// is a canon:: one.
ZINC_HD void finish_weights(int k, bool softmax_first, bool norm_w, float w_scale, float* w) {
    if (!softmax_first) {        // softmax over the k selected logits (w[0] is their max)
        const float top = w[0];  // (w[0] itself is overwritten first)
        double sum = 0.0;
        for (int s = 0; s < k; ++s) {
            w[s] = canon::exp(canon::sub(w[s], top));
            sum = canon::dadd(sum, static_cast<double>(w[s]));
        }
        const float kinv = static_cast<float>(canon::ddiv(1.0, sum));
        for (int s = 0; s < k; ++s) w[s] = canon::mul(w[s], kinv);
    }
    if (norm_w) {
        float sum = w[0];
        for (int s = 1; s < k; ++s) sum = canon::add(sum, w[s]);
        sum = canon::max_sse(sum, 6.103515625e-5f);
        for (int s = 0; s < k; ++s) w[s] = canon::div(w[s], sum);
    }
    if (w_scale != 0.0f && w_scale != 1.0f)
        for (int s = 0; s < k; ++s) w[s] = canon::mul(w[s], w_scale);
}

/// Route one row. logits: (n_expert); ids, w: (k). softmax_first: qwen3moe's order (else
/// gpt-oss's). Every float operation is a canon:: one. (The CUDA tier's route kernel computes
/// the same values with a block per row: moe.cu.)
ZINC_HD void route_row(const float* logits, int n_expert, int k, bool softmax_first, bool norm_w,
                       float w_scale, int32_t* ids, float* w) {
    float mx = logits[0];
    for (int i = 1; i < n_expert; ++i) mx = canon::max_sse(logits[i], mx);
    float inv = 1.0f;
    if (softmax_first) {
        double sum = 0.0;
        for (int i = 0; i < n_expert; ++i)
            sum = canon::dadd(sum, static_cast<double>(canon::exp(canon::sub(logits[i], mx))));
        inv = static_cast<float>(canon::ddiv(1.0, sum));
    }
    // k selection passes; value of entry i: p_i (softmax_first) or the logit.
    float prev_v = 0.0f;
    int prev_i = -1;
    for (int s = 0; s < k; ++s) {
        int best = -1;
        float best_v = 0.0f;
        for (int i = 0; i < n_expert; ++i) {
            const float v =
                softmax_first ? canon::mul(canon::exp(canon::sub(logits[i], mx)), inv) : logits[i];
            if (!eligible(prev_v, prev_i, v, i)) continue;  // taken already
            if (best < 0 || before(v, i, best_v, best)) {
                best = i;
                best_v = v;
            }
        }
        if (best < 0) best = 0;  // only NaN logits left: a valid id, weight NaN follows
        ids[s] = best;
        w[s] = best_v;
        prev_v = best_v;
        prev_i = best;
    }
    finish_weights(k, softmax_first, norm_w, w_scale, w);
}

/// out (n) = sum over slots s of w[s] * y_s, y_s = ys + row(s) * ld, as llama.cpp adds the
/// weighted expert outputs: (w0 y0 + w1 y1) + w2 y2 + ..., each product rounded. row(s) = s, or
/// pos[s] where the slots' rows were sorted (the CUDA tier's expert-grouped GEMM).
ZINC_HD float combine_elem(const float* ys, int64_t ld, const float* w, int k, int64_t d,
                           const int32_t* pos = nullptr) {
    auto row = [&](int s) -> int64_t { return pos != nullptr ? pos[s] : s; };
    float acc = canon::mul(ys[row(0) * ld + d], w[0]);
    for (int s = 1; s < k; ++s) acc = canon::add(acc, canon::mul(ys[row(s) * ld + d], w[s]));
    return acc;
}

}  // namespace zinc::moe
