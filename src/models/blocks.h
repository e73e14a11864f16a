// zinc/models/blocks.h — the shared transformer blocks the architecture files compose.
//
// Each block reads and writes row-major activations (st.n_tokens rows) and uses the Runner's
// thread pool for its matmuls and per-token work. Names passed to dump() follow llama.cpp's
// callback names where one exists (attn_norm, attn_out, ffn_out, l_out, result_norm), prefixed
// with "blk.<il>." for per-layer tensors, so ZINC_DUMP=blk.3.l_out prints that intermediate.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "model/config.h"
#include "model/forward_state.h"
#include "model/weights.h"

namespace zinc::models {

using model::ForwardState;
using model::ModelConfig;
using model::Weight;

/// Projections of one self-attention layer. Biases and Q/K norms are optional (nullptr).
struct AttentionWeights {
    const Weight* wq = nullptr;  // (n_embd -> n_head * head_dim_k)
    const Weight* wk = nullptr;  // (n_embd -> n_head_kv * head_dim_k)
    const Weight* wv = nullptr;  // (n_embd -> n_head_kv * head_dim_v)
    const Weight* wo = nullptr;  // (n_head * head_dim_v -> n_embd)
    const Weight* bq = nullptr;  // (n_head * head_dim_k) f32
    const Weight* bk = nullptr;
    const Weight* bv = nullptr;
    const Weight* q_norm = nullptr;  // (head_dim_k) f32, RMS norm per head before RoPE
    const Weight* k_norm = nullptr;
    const Weight* rope_freqs = nullptr;  // (n_rot / 2) f32 per-pair frequency divisors
};

/// Gated feed-forward: down(act(gate x) * up x).
struct FfnWeights {
    const Weight* gate = nullptr;  // (n_embd -> n_ff)
    const Weight* up = nullptr;    // (n_embd -> n_ff)
    const Weight* down = nullptr;  // (n_ff -> n_embd)
};

/// st.ws.x = token_embd rows of st.tokens, times `scale`.
void embed(ForwardState& st, const Weight& tok_embd, float scale);

/// y = rms_norm(x) * w, per token; rows of `dim` floats. y may alias x.
void rms_norm(ForwardState& st, const float* x, const Weight& w, float eps, float* y, int64_t dim);

/// Self-attention of layer il: Q/K/V projections (+bias), optional per-head Q/K RMS norm, RoPE,
/// append K/V to the cache, causal (optionally sliding-window) attention, output projection.
/// out: (n_tokens, n_embd).
void self_attention(ForwardState& st, const ModelConfig& cfg, int il, const AttentionWeights& w,
                    const float* xn, float* out);

enum class Activation { SiLU, GeluTanh };
/// out = down(act(gate xn) * (up xn)): SwiGLU (SiLU) or GeGLU (tanh GELU). out: (n_tokens, n_embd)
void ffn_gated(ForwardState& st, const ModelConfig& cfg, int il, const FfnWeights& w,
               Activation act, const float* xn, float* out);

/// In the last layer, after attention has written its K/V, only the rows whose logits are
/// wanted matter: move rows st.out_rows to the front of each buffer and set st.n_tokens =
/// st.n_out, so the final FFN and norms run on those rows only (as llama.cpp's inp_out_ids).
/// With no output rows, the last row is kept (its results are only dumped). Afterwards
/// st.tokens, st.pos, st.kv_slot and st.seqs are cleared: rows no longer match them.
void keep_output_rows(ForwardState& st, std::initializer_list<float*> bufs, int64_t dim);

/// x += y over (n_tokens, dim).
void add_residual(ForwardState& st, float* x, const float* y, int64_t dim);

/// Final norm and LM head on the output rows of st.ws.x (rows [0, n_out) after
/// keep_output_rows), into st.logits; softcap > 0 applies cap * tanh(logit / cap).
void output_head(ForwardState& st, const ModelConfig& cfg, const Weight& norm,
                 const Weight& lm_head, float softcap = 0.0f);

/// Print (n_tokens, dim) values to stderr when ZINC_DUMP names "<name>" or "blk.<il>.<name>".
/// With st.hooks: first the test-only fault injection of that intermediate (ZINC_TEST_CORRUPT
/// rewrites row 0 in place, so the forward pass continues on the wrong value), then its capture
/// for validation (runtime/forward_hooks.h).
void dump(ForwardState& st, std::string_view name, int il, float* data, int64_t dim);

}  // namespace zinc::models
