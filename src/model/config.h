// zinc/model/config.h — ModelConfig: the hyperparameters of a decoder-only transformer, read
// from the GGUF "<arch>.*" keys (names as in llama.cpp's llama-arch.cpp LLM_KV_NAMES):
//   <arch>.block_count, .embedding_length, .feed_forward_length, .context_length,
//   .attention.head_count, .attention.head_count_kv, .attention.key_length,
//   .attention.value_length, .attention.layer_norm_rms_epsilon, .attention.sliding_window,
//   .attention.layer_norm_epsilon, .attention.causal, .pooling_type,
//   .rope.dimension_count, .rope.freq_base, .rope.scaling.type, .rope.scaling.factor,
//   .rope.scaling.attn_factor, .rope.scaling.original_context_length, .rope.scaling.yarn_*.
// Per-layer differences (sliding window, RoPE base) are exposed through accessors taking il.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/rope.h"
#include "util/result.h"

namespace zinc::gguf {
class File;
}

namespace zinc::model {

struct ModelConfig {
    Arch arch = Arch::Llama;
    std::string arch_name;  // general.architecture
    int32_t n_layer = 0;
    int32_t n_embd = 0;  // residual stream width
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim_k = 0;  // attention.key_length (default n_embd / n_head)
    int32_t head_dim_v = 0;  // attention.value_length (default head_dim_k)
    int32_t n_ff = 0;        // feed-forward hidden width
    int32_t n_vocab = 0;     // rows of token_embd.weight
    int32_t n_ctx_train = 0;
    int32_t n_rot = 0;  // rope.dimension_count (default head_dim_k)
    float rms_eps = 1e-5f;    // attention.layer_norm_rms_epsilon (RMSNorm models)
    float norm_eps = 1e-12f;  // attention.layer_norm_epsilon (LayerNorm models: bert); one of
                              // the two keys is required
    /// attention.causal (default true; bert: false, every token attends to the whole input).
    bool causal = true;
    /// pooling_type (llama.cpp's enum llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last), the
    /// pooling an embedding model was trained with; -1 when the key is absent.
    int32_t pooling_type = -1;

    RopeMode rope_mode = RopeMode::Norm;
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear scaling
    float rope_freq_base_swa = 10000.0f;
    float rope_freq_scale_swa = 1.0f;
    // YaRN (rope.scaling.type "yarn"; model/rope.h): every layer's RoPE, as llama.cpp does.
    float rope_ext_factor = 0.0f;   // 0: no YaRN
    float rope_attn_factor = 1.0f;  // llama.cpp's cparams.yarn_attn_factor
    float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
    int32_t n_ctx_orig_yarn = 0;
    int32_t sliding_window = 0;      // 0: none
    std::vector<uint8_t> layer_swa;  // (n_layer) 1 where the layer uses the sliding window
    float attn_scale = 1.0f;         // multiplies q.k; 1/sqrt(head_dim_k) by default
    /// Gemma-family soft-caps, x -> cap * tanh(x / cap) (0: none), from
    /// <arch>.final_logit_softcapping (applied to the logits by both tiers) and
    /// <arch>.attn_logit_softcapping (read only: Gemma 3 does not use it and llama.cpp ignores it
    /// for gemma3; an architecture that applies it must do so in its attention).
    float final_logit_softcap = 0.0f;
    float attn_logit_softcap = 0.0f;
    /// Mixture of experts (<arch>.expert_count, .expert_used_count,
    /// .expert_feed_forward_length, .expert_weights_scale; 0 when absent: a dense model). The
    /// architecture file decides whether they are required.
    int32_t n_expert = 0;
    int32_t n_expert_used = 0;
    int32_t n_ff_exp = 0;
    float expert_weights_scale = 0.0f;

    /// Per-layer K and V row widths of the KV cache (n_head_kv(il) * head_dim(il)), for
    /// architectures whose layers differ (gemma4: sliding 16 x 256, global 4 x 512); empty:
    /// kv_dim_k() / kv_dim_v() for every layer. Set by the architecture file.
    std::vector<int32_t> layer_kv_k, layer_kv_v;
    /// attention.head_count_kv as llama.cpp's per-layer array (get_key_or_arr), when the file
    /// has one whose values differ; empty otherwise (n_head_kv is then every layer's). Only an
    /// architecture that reads it accepts such a file (read_config refuses it for the others).
    std::vector<int32_t> layer_n_head_kv;

    int32_t q_dim() const { return n_head * head_dim_k; }
    int32_t kv_dim_k(int il) const { return layer_kv_k.empty() ? kv_dim_k() : layer_kv_k[il]; }
    int32_t kv_dim_v(int il) const { return layer_kv_v.empty() ? kv_dim_v() : layer_kv_v[il]; }
    /// f16 K + V bytes of one position, summed over the layers.
    size_t kv_bytes_per_position() const {
        size_t b = 0;
        for (int il = 0; il < n_layer; ++il)
            b += static_cast<size_t>(kv_dim_k(il) + kv_dim_v(il)) * sizeof(uint16_t);
        return b;
    }
    int32_t kv_dim_k() const { return n_head_kv * head_dim_k; }
    int32_t kv_dim_v() const { return n_head_kv * head_dim_v; }
    int32_t attn_out_dim() const { return n_head * head_dim_v; }
    bool is_swa(int il) const { return !layer_swa.empty() && layer_swa[il] != 0; }
    /// Sliding window of layer il (0 = full causal attention).
    int window(int il) const { return is_swa(il) ? sliding_window : 0; }
    /// RoPE parameters of layer il (local layers may use another base).
    RopeParams rope(int il) const;
};

/// Read and validate the hyperparameters of `info`'s architecture. n_vocab is taken from
/// token_embd.weight's row count. Errors name the file and the missing or invalid key.
Result<ModelConfig> read_config(const gguf::File& file, const ArchInfo& info);

}  // namespace zinc::model
