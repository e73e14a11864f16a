// zinc/model/kv_cache.h — the per-sequence key/value cache, f16.
//
// Layout per layer: K is (n_ctx, n_head_kv * head_dim_k) and V is (n_ctx, n_head_kv *
// head_dim_v), row-major, one row per position, f16. Memory is allocated once and left
// untouched until written, so only the positions in use become resident.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/attention.h"
#include "model/config.h"

namespace zinc::model {

class KvCache {
  public:
    KvCache(const ModelConfig& cfg, int n_ctx);
    int n_ctx() const { return n_ctx_; }
    uint16_t* k_row(int il, int64_t pos) { return k_[il].get() + pos * kv_dim_k_; }
    uint16_t* v_row(int il, int64_t pos) { return v_[il].get() + pos * kv_dim_v_; }
    cpu::KvView view(int il) const { return {k_[il].get(), v_[il].get(), kv_dim_k_, kv_dim_v_}; }
    /// Bytes for n_ctx positions of every layer.
    static size_t bytes(const ModelConfig& cfg, int n_ctx);

  private:
    int n_ctx_;
    int64_t kv_dim_k_;
    int64_t kv_dim_v_;
    std::vector<std::unique_ptr<uint16_t[]>> k_;
    std::vector<std::unique_ptr<uint16_t[]>> v_;
};

}  // namespace zinc::model
