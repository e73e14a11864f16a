// zinc/backend/cpu/kv_pool.cpp — KV pool allocation and block copies.
#include "backend/cpu/kv_pool.h"

#include <cstring>

#include "util/check.h"

namespace zinc::cpu {

KvPool::KvPool(const ModelConfig& cfg, int32_t n_blocks, int32_t block_size)
    : n_blocks_(n_blocks), block_size_(block_size) {
    ZINC_CHECK(n_blocks > 0 && block_size > 0);
    const size_t rows = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size);
    k_.reserve(cfg.n_layer);
    v_.reserve(cfg.n_layer);
    for (int il = 0; il < cfg.n_layer; ++il) {
        kv_dim_k_.push_back(cfg.kv_dim_k(il));
        kv_dim_v_.push_back(cfg.kv_dim_v(il));
        // new T[] without () leaves the memory uninitialised: pages stay unmapped until used.
        k_.emplace_back(new uint16_t[rows * kv_dim_k_.back()]);
        v_.emplace_back(new uint16_t[rows * kv_dim_v_.back()]);
    }
}

void KvPool::copy_block(int32_t src, int32_t dst) {
    ZINC_CHECK(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_);
    if (src == dst) return;
    const int64_t bs = block_size_;
    for (size_t il = 0; il < k_.size(); ++il) {
        const int64_t kd = kv_dim_k_[il], vd = kv_dim_v_[il];
        std::memcpy(k_[il].get() + dst * bs * kd, k_[il].get() + src * bs * kd,
                    sizeof(uint16_t) * bs * kd);
        std::memcpy(v_[il].get() + dst * bs * vd, v_[il].get() + src * bs * vd,
                    sizeof(uint16_t) * bs * vd);
    }
}

size_t KvPool::bytes() const {
    size_t row = 0;
    for (size_t il = 0; il < k_.size(); ++il)
        row += static_cast<size_t>(kv_dim_k_[il] + kv_dim_v_[il]) * sizeof(uint16_t);
    return row * static_cast<size_t>(n_blocks_) * static_cast<size_t>(block_size_);
}

size_t KvPool::bytes(const ModelConfig& cfg, int64_t n_positions) {
    return static_cast<size_t>(n_positions) * cfg.kv_bytes_per_position();
}

}  // namespace zinc::cpu
