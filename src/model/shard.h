// zinc/model/shard.h — tensor parallelism as a transform of the op list: one Program becomes N
// shard Programs, one per rank, Megatron-style (Shoeybi et al. 2019, "Megatron-LM", section 3).
//
// Per layer, each rank computes:
//   * Q/K/V projections on its share of the output rows (whole heads; GQA: whole KV heads, or,
//     when N is a multiple of n_head_kv, one KV head replicated on N / n_head_kv ranks as vLLM
//     does), RoPE and the K/V append on those heads into its own, narrower KV cache, attention
//     of its query heads (with their learned sink logits, gpt-oss);
//   * gate/up projections on its share of the n_ff rows, the GLU on them;
//   * the attention-output and FFN-down projections on the matching input columns (a partial
//     sum of the full result, bias on rank 0 only), followed by an AllReduce(sum) op that
//     carries the projection's name (attn_out, ffn_out), so what is validated is the summed
//     value;
//   * everything else replicated: embedding, norms, residual adds, the output head.
// Tensor ids and roles are the source Program's; split tensors (q, k, v, attn, gate, up) are
// narrower in the shard Programs, and their named values (Qcur .. ffn_glu) are ZINC_DUMP-only
// there for N > 1 (a shard holds only part of them). The source's marks carry over (logits,
// embd, hidden, bidirectional, recurrent): embd and hidden name replicated tensors (after the
// last AllReduce the residual stream is whole on every rank), so an embedding forward of rank 0
// stopped at its embd_op (renumbered: the AllReduce ops are extra ops) gives the full value.
//
// Weights: a shard's row slice of a GGUF matrix is whole rows, a view into the mapping (free);
// a column (input) slice must fall on the matrix's quant block boundaries (checked: the error
// names the tensor, the columns and the block size) and is a copy of those blocks, byte for
// byte (no requantisation), owned by the ShardSet. For N = 1 every slice is the whole matrix
// and the shard Program is the source with one-rank AllReduce ops (identities), same weights.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/ir.h"
#include "model/weights.h"
#include "util/result.h"

namespace zinc::model {

/// One rank's share of the model.
struct Shard {
    Program program;     // the rank's op list (weights: the source's or the ShardSet's views)
    ModelConfig config;  // n_head, n_head_kv of this rank: its KV cache is kv_dim_k/v() wide
};

/// The N shards and the weight views they point into. Not copyable: the shard Programs hold
/// pointers into `views`. The source Program's weights (the GGUF mapping) must outlive it.
struct ShardSet {
    int n_shards = 1;
    int kv_replicas = 1;  // ranks holding a copy of each KV head (N / n_head_kv when N > n_head_kv)
    std::vector<Shard> shards;
    std::deque<Weight> views;                        // row and column slices
    std::vector<std::unique_ptr<uint8_t[]>> copies;  // the column slices' bytes
    uint64_t copied_bytes = 0;                       // sum of copies' sizes
    ShardSet() = default;
    ShardSet(const ShardSet&) = delete;
    ShardSet& operator=(const ShardSet&) = delete;
};

/// Split `prog` (of a model with config `cfg`) into `n_shards` rank Programs. Errors (one line,
/// naming the model's numbers): n_shards < 1; head counts that do not split (n_head % N,
/// n_head_kv % N unless N % n_head_kv == 0); n_ff % N; a column slice off its matrix's block
/// boundaries; an op that reads a split tensor in a way the transform does not know.
Result<std::unique_ptr<ShardSet>> shard_program(const Program& prog, const ModelConfig& cfg,
                                                int n_shards);

}  // namespace zinc::model
