// zinc/model/kv_cache.cpp — KV cache allocation.
#include "model/kv_cache.h"

namespace zinc::model {

KvCache::KvCache(const ModelConfig& cfg, int n_ctx)
    : n_ctx_(n_ctx), kv_dim_k_(cfg.kv_dim_k()), kv_dim_v_(cfg.kv_dim_v()) {
    k_.reserve(cfg.n_layer);
    v_.reserve(cfg.n_layer);
    for (int il = 0; il < cfg.n_layer; ++il) {
        // new T[] without () leaves the memory uninitialised: pages stay unmapped until used.
        k_.emplace_back(new uint16_t[static_cast<size_t>(n_ctx) * kv_dim_k_]);
        v_.emplace_back(new uint16_t[static_cast<size_t>(n_ctx) * kv_dim_v_]);
    }
}

size_t KvCache::bytes(const ModelConfig& cfg, int n_ctx) {
    return static_cast<size_t>(cfg.n_layer) * static_cast<size_t>(n_ctx) *
           static_cast<size_t>(cfg.kv_dim_k() + cfg.kv_dim_v()) * sizeof(uint16_t);
}

}  // namespace zinc::model
