// zinc/backend/cpu/kv_pool.h — the paged key/value storage of the CPU tier, f16.
//
// A pool of n_blocks blocks of block_size positions, every layer. Layout per layer il: K is
// (n_blocks * block_size, cfg.kv_dim_k(il)) and V is (n_blocks * block_size, cfg.kv_dim_v(il))
// (n_head_kv * head_dim of that layer; gemma4's differ between layers), row-major f16, one row per physical slot; physical row r = block * block_size +
// slot. Which blocks a sequence owns is the caller's business (engine/block_manager.h, or a
// Context's fixed contiguous table). Memory is allocated once and left untouched until written,
// so only the slots in use become resident.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/attention.h"
#include "model/config.h"

namespace zinc::cpu {

using model::ModelConfig;

class KvPool {
  public:
    KvPool(const ModelConfig& cfg, int32_t n_blocks, int32_t block_size);
    int32_t n_blocks() const { return n_blocks_; }
    int32_t block_size() const { return block_size_; }
    uint16_t* k_row(int il, int64_t phys) { return k_[il].get() + phys * kv_dim_k_[il]; }
    uint16_t* v_row(int il, int64_t phys) { return v_[il].get() + phys * kv_dim_v_[il]; }
    PagedKvView view(int il) const {
        return {k_[il].get(), v_[il].get(), kv_dim_k_[il], kv_dim_v_[il], block_size_};
    }
    /// Copy every layer's K and V rows of block src into block dst.
    void copy_block(int32_t src, int32_t dst);
    /// Bytes of this pool.
    size_t bytes() const;
    /// Bytes for n_positions positions of every layer.
    static size_t bytes(const ModelConfig& cfg, int64_t n_positions);

  private:
    int32_t n_blocks_;
    int32_t block_size_;
    std::vector<int64_t> kv_dim_k_;  // per layer (ModelConfig::kv_dim_k(il))
    std::vector<int64_t> kv_dim_v_;
    std::vector<std::unique_ptr<uint16_t[]>> k_;
    std::vector<std::unique_ptr<uint16_t[]>> v_;
};

}  // namespace zinc::cpu
