// zinc/models/blocks.h — the shared transformer blocks the architecture files compose, as ops of
// the op list (model/ir.h).
//
// Each block emits the ops of one piece of a decoder layer over the standard decoder tensors.
// Output names follow llama.cpp's callback names (inp_embd, Qcur, Kcur, Vcur, kqv_out, attn_out,
// ffn_inp, ffn_gate, ffn_up, ffn_glu, ffn_out, l_out, result_norm), so validation, fault
// injection and ZINC_DUMP=blk.3.l_out address them.
#pragma once

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/ir.h"
#include "model/weights.h"

namespace zinc::models {

using model::ModelConfig;
using model::ProgramBuilder;
using model::Tid;
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
    const Weight* bo = nullptr;      // (n_embd) f32 bias of the output projection, or null
    const Weight* sinks = nullptr;   // (n_head) f32 attention sink logits (gpt-oss), or null
    const Weight* q_norm = nullptr;  // (head_dim_k) f32, RMS norm per head before RoPE
    const Weight* k_norm = nullptr;
    const Weight* rope_freqs = nullptr;  // (n_rot / 2) f32 per-pair frequency divisors
    bool v_norm = false;  // RMS-normalise V per head with no weight before caching (gemma4)
};

/// Gated feed-forward: down(act(gate x) * up x).
struct FfnWeights {
    const Weight* gate = nullptr;  // (n_embd -> n_ff)
    const Weight* up = nullptr;    // (n_embd -> n_ff)
    const Weight* down = nullptr;  // (n_ff -> n_embd)
};

/// The activation tensors of a decoder (widths from the config), (rows, width) each.
struct DecoderTensors {
    Tid x, xn, proj;  // residual stream, normalised block input, attention / FFN output (n_embd)
    Tid q, k, v;      // (q_dim), (kv_dim_k), (kv_dim_v)
    Tid attn;         // (n_head * head_dim_v)
    Tid gate, up;     // (n_ff), or kNoTensor without a dense FFN
    Tid logits;       // (n_vocab): the output rows' logits
};
/// The standard decoder tensors; dense_ffn false (routed-expert layers, whose intermediates live
/// in the tiers' moe op) leaves gate and up out.
DecoderTensors decoder_tensors(ProgramBuilder& b, const ModelConfig& cfg, bool dense_ffn = true);

/// The rope_kv op's parameters from the config: RoPE of layer rope_layer, KV cache layer
/// kv_layer, the head counts and dims, rms_eps for the Q/K norms (null: none). The caller adds
/// what its architecture has beyond that (freq factors, the V norm).
model::RopeKvP rope_kv_params(const ModelConfig& cfg, int rope_layer, int kv_layer,
                              const Weight* q_norm, const Weight* k_norm);
/// The attention op's parameters over KV cache layer kv_layer: head counts and dims, the
/// config's scale; causal, no window and no sinks unless the caller sets them.
model::AttentionP attention_params(const ModelConfig& cfg, int kv_layer);

/// Self-attention of layer il on t.xn: Q/K/V projections (+bias) -> Qcur/Kcur/Vcur, optional
/// per-head Q/K RMS norm, RoPE, K/V appended to the cache (rope_kv), causal (optionally
/// sliding-window) attention -> kqv_out, output projection into `out` -> attn_out.
void self_attention(ProgramBuilder& b, const ModelConfig& cfg, int il, const AttentionWeights& w,
                    const DecoderTensors& t, Tid out);

enum class Activation { SiLU, GeluTanh };
/// out = down(act(gate xn) * (up xn)): ffn_gate, ffn_up, ffn_glu (in place in t.gate), and the
/// down projection named `out_name` (ffn_out; a shared expert's is ffn_shexp).
void ffn_gated(ProgramBuilder& b, const ModelConfig& cfg, const FfnWeights& w, Activation act,
               const DecoderTensors& t, Tid out, const char* out_name = "ffn_out");

/// Final norm (result_norm, into t.xn) and LM head (into t.logits) on the output rows of t.x;
/// softcap > 0 applies cap * tanh(logit / cap).
void output_head(ProgramBuilder& b, const ModelConfig& cfg, const DecoderTensors& t,
                 const Weight& norm, const Weight& lm_head, float softcap);

/// Routed experts of one layer (3-D GGUF tensors: gate/up (n_embd, n_ff_exp, n_expert), down
/// (n_ff_exp, n_embd, n_expert)), the router, and gpt-oss's optional biases.
struct ExpertWeights {
    const Weight* router = nullptr;    // ffn_gate_inp (n_embd -> n_expert)
    const Weight* router_b = nullptr;  // (n_expert) f32, or null
    const Weight *gate = nullptr, *up = nullptr, *down = nullptr;
    const Weight *gate_b = nullptr, *up_b = nullptr, *down_b = nullptr;  // or null
    /// gate == up: one fused ffn_gate_up_exps (n_embd, 2 n_ff_exp, n_expert) (gemma4)
    bool gate_up_fused = false;
    const Weight* down_scale = nullptr;  // (n_expert) f32 per-expert output scale, or null
};
/// Binds ffn_gate_inp and ffn_{gate,up,down}_exps of layer il (shapes from cfg); biases only with
/// `biases` (ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias, all required then).
ExpertWeights bind_experts(model::WeightBinder& b, const ModelConfig& cfg, int il, bool biases);
/// The routing (how the experts and weights are chosen) and the experts' activation.
struct ExpertRouting {
    model::MoeGating gating = model::MoeGating::SoftmaxTopK;
    bool norm_w = false;
    model::GluAct act = model::GluAct::SiLU;
};
/// out = the routed experts of `in` (rows, n_embd): the router matmul of `router_in` (default:
/// `in`; gemma4 routes from another normalisation of the residual) into `logits` (a tensor of
/// width n_expert) and the moe op (ffn_moe_logits, ffn_moe_out).
void routed_experts(ProgramBuilder& b, const ModelConfig& cfg, const ExpertWeights& w,
                    const ExpertRouting& r, Tid in, Tid logits, Tid out,
                    Tid router_in = model::kNoTensor);

/// The MoE keys every routed-expert architecture needs: <arch>.expert_count, .expert_used_count
/// (at most model::kMoeMaxUsed) and .expert_feed_forward_length, each >= 1; the error names the
/// missing or bad key.
Result<void> check_moe_config(const gguf::File& file, const ModelConfig& cfg);

}  // namespace zinc::models
