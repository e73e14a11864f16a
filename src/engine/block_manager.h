// zinc/engine/block_manager.h — the KV block manager: which physical blocks of the Runner's KV
// pool are free, cached or owned by sequences.
//
// The pool has n_blocks blocks of block_size positions (every layer; the Runner holds the
// storage). Each block has a reference count: the number of block-table entries of live
// sequences that point at it (sequences sharing a cached prefix share its blocks). Every block
// is in exactly one state:
//   free    ref 0, not in the prefix cache, on the free list;
//   cached  ref 0, registered in the prefix cache, on its LRU list (reusable by a later prompt
//           with the same prefix, evicted when the free list is empty);
//   used    ref > 0 (registered in the prefix cache or not).
// Invariants (check_invariants; the unit tests check them after every operation):
//   free + cached + used == n_blocks; the free list holds each free block once;
//   a block on the LRU list is registered and has ref 0; a registered block has ref > 0 or is
//   on the LRU list; the ref count of a block equals the number of its owners (checked against
//   the sequences' block tables by the scheduler);
//   when no sequence is alive, every block is free or cached.
// Copy-on-write: a sequence about to write into a block that another owner shares, or that the
// prefix cache indexes, first gets a private copy (make_writable). So a block is written only by
// its single owner and only while unindexed, and an indexed block's K/V always match its hash.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/prefix_cache.h"

namespace zinc::engine {

class BlockManager {
  public:
    /// prefix_cache false: released blocks go straight back to the free list.
    BlockManager(int32_t n_blocks, int32_t block_size, bool prefix_cache);

    int32_t n_blocks() const { return n_blocks_; }
    int32_t block_size() const { return block_size_; }
    bool prefix_cache_enabled() const { return cache_enabled_; }
    int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
    int32_t n_cached() const { return cache_.n_idle(); }
    int32_t n_used() const { return n_blocks_ - n_free() - n_cached(); }
    /// Blocks an allocation can take now (free, then evicting cached ones).
    int32_t n_available() const { return n_free() + n_cached(); }
    int32_t ref_count(int32_t b) const { return ref_[b]; }

    /// A block with ref count 1: from the free list, else the least recently used cached block
    /// (evicted from the prefix cache). -1 when every block is used.
    int32_t allocate();
    /// One more owner of b (a used block, or a cached one taken back out of the LRU list).
    void retain(int32_t b);
    /// One owner fewer; at 0, a registered block becomes cached, any other free.
    void release(int32_t b);

    /// Make block b private and unindexed before a write (copy-on-write): if another owner
    /// shares it or the prefix cache indexes it (a cached block's content never changes while
    /// it is indexed), allocate a new block, copy b into it (copy(src, dst): the Runner's
    /// copy_block), drop the caller's reference to b and return the new id; otherwise return b.
    /// -1 when a copy is needed and no block is available (nothing changes then).
    /// Precondition: the caller owns b.
    int32_t make_writable(int32_t b, const std::function<void(int32_t, int32_t)>& copy);

    /// Register a full, used block in the prefix cache (no-op when disabled or when the same
    /// content is already cached under another block). Returns whether b is now registered.
    bool register_full(int32_t b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);

    PrefixCache& cache() { return cache_; }
    const PrefixCache& cache() const { return cache_; }

    /// ZINC_CHECK every invariant above except ownership. With owners (n_blocks entries: how
    /// many block-table entries point at each block) also check ref counts equal them.
    void check_invariants(std::span<const int32_t> owners = {}) const;

  private:
    int32_t n_blocks_;
    int32_t block_size_;
    bool cache_enabled_;
    std::vector<int32_t> ref_;   // (n_blocks)
    std::vector<int32_t> free_;  // stack: the most recently freed block is reused first
    std::vector<uint8_t> on_free_;
    PrefixCache cache_;
};

}  // namespace zinc::engine
