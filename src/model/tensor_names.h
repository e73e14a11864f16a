// zinc/model/tensor_names.h — GGUF tensor names (llama.cpp's LLM_TENSOR_NAMES convention).
// Global tensors are "<base>.weight"; per-layer tensors are "blk.<il>.<base>.<suffix>".
#pragma once

#include <string>
#include <string_view>

namespace zinc::model::tn {

inline constexpr std::string_view kTokenEmbd = "token_embd";
inline constexpr std::string_view kOutputNorm = "output_norm";
inline constexpr std::string_view kOutput = "output";
inline constexpr std::string_view kRopeFreqs = "rope_freqs";
// BERT (llama.cpp's LLM_ARCH_BERT): embeddings of token type and absolute position, the
// embedding LayerNorm, and the post-attention / post-FFN LayerNorms of each layer.
inline constexpr std::string_view kTokenTypes = "token_types";
inline constexpr std::string_view kPosEmbd = "position_embd";
inline constexpr std::string_view kTokenEmbdNorm = "token_embd_norm";
inline constexpr std::string_view kAttnOutNorm = "attn_output_norm";
inline constexpr std::string_view kLayerOutNorm = "layer_output_norm";

inline constexpr std::string_view kAttnNorm = "attn_norm";
inline constexpr std::string_view kAttnQ = "attn_q";
inline constexpr std::string_view kAttnK = "attn_k";
inline constexpr std::string_view kAttnV = "attn_v";
inline constexpr std::string_view kAttnOut = "attn_output";
inline constexpr std::string_view kAttnQNorm = "attn_q_norm";
inline constexpr std::string_view kAttnKNorm = "attn_k_norm";
inline constexpr std::string_view kAttnPostNorm = "post_attention_norm";
inline constexpr std::string_view kAttnSinks = "attn_sinks";  // (n_head) f32 (gpt-oss)
inline constexpr std::string_view kFfnNorm = "ffn_norm";
inline constexpr std::string_view kFfnGate = "ffn_gate";
inline constexpr std::string_view kFfnUp = "ffn_up";
inline constexpr std::string_view kFfnDown = "ffn_down";
inline constexpr std::string_view kFfnPostNorm = "post_ffw_norm";
// Mixture of experts: the router (n_embd -> n_expert) and the experts as 3-D tensors
// (ggml order: gate/up (n_embd, n_ff_exp, n_expert), down (n_ff_exp, n_embd, n_expert)).
inline constexpr std::string_view kFfnGateInp = "ffn_gate_inp";
inline constexpr std::string_view kFfnGateExps = "ffn_gate_exps";
inline constexpr std::string_view kFfnUpExps = "ffn_up_exps";
inline constexpr std::string_view kFfnDownExps = "ffn_down_exps";
// Gemma 4 (llama.cpp's LLM_ARCH_GEMMA4): gate and up experts fused in one 3-D tensor
// (n_embd, 2 n_ff_exp, n_expert); the extra norms of its MoE layers (the dense MLP's output
// norm _1, the experts' input and output norms); the per-layer output scalar; the fused Q/K/V
// projection and the per-layer-embedding tensors of E2B/E4B (recognised to be refused).
inline constexpr std::string_view kFfnGateUpExps = "ffn_gate_up_exps";
inline constexpr std::string_view kFfnPostNorm1 = "post_ffw_norm_1";
inline constexpr std::string_view kFfnPreNorm2 = "pre_ffw_norm_2";
inline constexpr std::string_view kFfnPostNorm2 = "post_ffw_norm_2";
inline constexpr std::string_view kLayerOutScale = "layer_output_scale";
inline constexpr std::string_view kAttnQkv = "attn_qkv";
inline constexpr std::string_view kPerLayerTokenEmbd = "per_layer_token_embd";

/// "<base>.<suffix>", e.g. global("output_norm") == "output_norm.weight".
std::string global(std::string_view base, std::string_view suffix = "weight");
/// "blk.<il>.<base>.<suffix>", e.g. layer(3, kAttnQ) == "blk.3.attn_q.weight".
std::string layer(int il, std::string_view base, std::string_view suffix = "weight");

}  // namespace zinc::model::tn
