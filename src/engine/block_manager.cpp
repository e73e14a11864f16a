// zinc/engine/block_manager.cpp — ref counts, the free list, copy-on-write.
#include "engine/block_manager.h"

#include "util/check.h"

namespace zinc::engine {

BlockManager::BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_cache)
    : n_blocks_(n_blocks),
      block_size_(block_size),
      cache_enabled_(prefix_cache),
      ref_(static_cast<size_t>(n_blocks), 0),
      on_free_(static_cast<size_t>(n_blocks), 1),
      cache_(n_blocks, block_size) {
    ZINC_CHECK(n_blocks > 0 && block_size > 0);
    free_.reserve(static_cast<size_t>(n_blocks));
    // Block 0 on top: a fresh pool hands out low ids first (pages fault in order).
    for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockManager::allocate() {
    int32_t b;
    if (!free_.empty()) {
        b = free_.back();
        free_.pop_back();
        on_free_[b] = 0;
    } else {
        b = cache_.evict_lru();
        if (b < 0) return -1;
    }
    ZINC_CHECK(ref_[b] == 0);
    ref_[b] = 1;
    return b;
}

void BlockManager::retain(int32_t b) {
    ZINC_CHECK(b >= 0 && b < n_blocks_ && !on_free_[b]);
    if (ref_[b] == 0) cache_.on_reuse(b);  // a cached block taken back
    ++ref_[b];
}

void BlockManager::release(int32_t b) {
    ZINC_CHECK(b >= 0 && b < n_blocks_ && ref_[b] > 0);
    if (--ref_[b] > 0) return;
    if (cache_.is_registered(b)) {
        cache_.on_idle(b);
    } else {
        free_.push_back(b);
        on_free_[b] = 1;
    }
}

int32_t BlockManager::make_writable(int32_t b, const std::function<void(int32_t, int32_t)>& copy) {
    ZINC_CHECK(ref_[b] > 0);
    if (ref_[b] == 1 && !cache_.is_registered(b)) return b;
    const int32_t nb = allocate();
    if (nb < 0) return -1;
    copy(b, nb);
    release(b);
    return nb;
}

bool BlockManager::register_full(int32_t b, uint64_t hash, uint64_t parent,
                                 std::span<const int32_t> tokens) {
    ZINC_CHECK(ref_[b] > 0);
    if (!cache_enabled_) return false;
    if (cache_.is_registered(b)) return true;
    return cache_.insert(b, hash, parent, tokens);
}

void BlockManager::check_invariants(std::span<const int32_t> owners) const {
    cache_.check_invariants();
    int32_t n_free = 0, n_cached = 0, n_used = 0;
    std::vector<uint8_t> seen(static_cast<size_t>(n_blocks_), 0);
    for (int32_t b : free_) {
        ZINC_CHECK(b >= 0 && b < n_blocks_ && !seen[b]);
        seen[b] = 1;
    }
    for (int32_t b = 0; b < n_blocks_; ++b) {
        ZINC_CHECK(ref_[b] >= 0);
        ZINC_CHECK(seen[b] == on_free_[b]);
        if (on_free_[b]) {
            ZINC_CHECK(ref_[b] == 0 && !cache_.is_registered(b));
            ++n_free;
        } else if (ref_[b] == 0) {
            ZINC_CHECK(cache_.is_registered(b) && cache_.is_idle(b));
            ++n_cached;
        } else {
            ZINC_CHECK(!cache_.is_idle(b));
            ++n_used;
        }
        if (!owners.empty()) ZINC_CHECK(owners[b] == ref_[b]);
    }
    ZINC_CHECK(n_free == this->n_free() && n_cached == this->n_cached());
    ZINC_CHECK(n_free + n_cached + n_used == n_blocks_);
    if (!cache_enabled_) ZINC_CHECK(cache_.n_registered() == 0);
}

}  // namespace zinc::engine
