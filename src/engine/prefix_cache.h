// zinc/engine/prefix_cache.h — the index of cached full KV blocks, by a chained hash of their
// tokens, with LRU eviction of the cached blocks no sequence is using.
//
// A full block (block_size positions whose K/V are computed) is identified by
// hash(parent_hash, its block_size token ids), where parent_hash is the previous block's hash
// (kRootHash for the first block): the hash of block i covers every token of blocks 0..i, so two
// sequences share block i only when they agree on all positions up to its end (the KV of a
// position depends on every earlier token). This is vLLM's automatic prefix caching scheme.
// Entries also keep the parent hash and the tokens and a lookup compares both, so a hash
// collision can only matter if it happens in the 64-bit parent hash as well.
//
// States of a registered block: *in use* (ref count > 0, owned by sequences; not evictable) or
// *idle* (ref count 0, on the LRU list; evicted first-in-first-out by last release time when the
// block manager needs a free block). The BlockManager (engine/block_manager.h) owns ref counts
// and calls in here; this class owns the index, the LRU order and the hit/miss counters.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace zinc::engine {

/// Parent hash of a sequence's first block.
inline constexpr uint64_t kRootHash = 0x5a1c0de5eedf00d5ull;

/// hash(parent, tokens): a 64-bit mix of the parent hash and every token id (splitmix64
/// finaliser per token); deterministic across runs and machines.
uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);

/// Root (parent hash of block 0) of a named cache namespace: chain_hash of kRootHash and the
/// name's bytes, never kRootHash itself for a non-empty name.
uint64_t namespace_root(std::string_view name);

/// Why a prompt block was not served from the cache (EngineStats counts each).
enum class MissReason { Cold, Evicted, Partial, Disabled };

class PrefixCache {
  public:
    /// n_blocks: size of the block pool (block ids are in [0, n_blocks)).
    PrefixCache(int32_t n_blocks, int32_t block_size);

    /// The block registered for (hash, parent, tokens), or -1.
    int32_t lookup(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const;
    /// Whether `hash` was registered once and evicted since (for the miss reason).
    bool was_evicted(uint64_t hash) const { return evicted_.count(hash) != 0; }
    /// Whether some block is registered under `hash`.
    bool contains(uint64_t hash) const { return index_.count(hash) != 0; }

    /// Register block b (in use, full) under hash. Returns false (nothing changes) when the hash
    /// is already registered (another block holds the same content) or b is registered.
    bool insert(int32_t b, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
    /// Drop b's registration (it is about to be written). b must be registered and in use.
    void erase(int32_t b);
    bool is_registered(int32_t b) const { return entry_of_[b] != nullptr; }

    /// b's ref count fell to 0: it becomes idle, most recently used.
    void on_idle(int32_t b);
    /// An idle b is taken again by a sequence: it leaves the LRU list.
    void on_reuse(int32_t b);
    /// Evict the least recently used idle block: unregister it and return its id; -1 if none.
    int32_t evict_lru();

    int32_t n_idle() const { return static_cast<int32_t>(lru_.size()); }
    int32_t n_registered() const { return static_cast<int32_t>(index_.size()); }
    bool is_idle(int32_t b) const { return in_lru_[b] != 0; }

    /// Check the index, reverse map and LRU list agree (ZINC_CHECK); for tests.
    void check_invariants() const;

  private:
    struct Entry {
        int32_t block;
        uint64_t hash;
        uint64_t parent;
        std::vector<int32_t> tokens;
    };
    int32_t block_size_;
    std::unordered_map<uint64_t, Entry> index_;  // hash -> entry
    std::vector<const Entry*> entry_of_;         // (n_blocks) block -> its entry, or nullptr
    std::list<int32_t> lru_;                     // idle registered blocks, least recent first
    std::vector<std::list<int32_t>::iterator> lru_pos_;  // (n_blocks)
    std::vector<uint8_t> in_lru_;                        // (n_blocks)
    // Hashes evicted since start (bounded: the oldest are forgotten past kEvictedMemory * pool).
    std::unordered_set<uint64_t> evicted_;
    std::deque<uint64_t> evicted_order_;
    size_t evicted_cap_;
};

}  // namespace zinc::engine
