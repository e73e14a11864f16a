// zinc/backend/cpu/kv_pool.cpp — KV pool allocation and block copies.
#include "backend/cpu/kv_pool.h"

#include <cstring>

#include "util/check.h"

namespace zinc::cpu {

KvPool::KvPool(const ModelConfig& cfg, int32_t n_blocks, int32_t block_size)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      kv_dim_k_(cfg.kv_dim_k()),
      kv_dim_v_(cfg.kv_dim_v()) {
    ZINC_CHECK(n_blocks > 0 && block_size > 0);
    const size_t rows = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size);
    k_.reserve(cfg.n_layer);
    v_.reserve(cfg.n_layer);
    for (int il = 0; il < cfg.n_layer; ++il) {
        // new T[] without () leaves the memory uninitialised: pages stay unmapped until used.
        k_.emplace_back(new uint16_t[rows * kv_dim_k_]);
        v_.emplace_back(new uint16_t[rows * kv_dim_v_]);
    }
}

void KvPool::copy_block(int32_t src, int32_t dst) {
    ZINC_CHECK(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_);
    if (src == dst) return;
    const int64_t bs = block_size_;
    for (size_t il = 0; il < k_.size(); ++il) {
        std::memcpy(k_[il].get() + dst * bs * kv_dim_k_, k_[il].get() + src * bs * kv_dim_k_,
                    sizeof(uint16_t) * bs * kv_dim_k_);
        std::memcpy(v_[il].get() + dst * bs * kv_dim_v_, v_[il].get() + src * bs * kv_dim_v_,
                    sizeof(uint16_t) * bs * kv_dim_v_);
    }
}

size_t KvPool::bytes() const {
    return static_cast<size_t>(k_.size()) * static_cast<size_t>(n_blocks_) *
           static_cast<size_t>(block_size_) * static_cast<size_t>(kv_dim_k_ + kv_dim_v_) *
           sizeof(uint16_t);
}

size_t KvPool::bytes(const ModelConfig& cfg, int64_t n_positions) {
    return static_cast<size_t>(cfg.n_layer) * static_cast<size_t>(n_positions) *
           static_cast<size_t>(cfg.kv_dim_k() + cfg.kv_dim_v()) * sizeof(uint16_t);
}

}  // namespace zinc::cpu
