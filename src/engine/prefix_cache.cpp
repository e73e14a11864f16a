// zinc/engine/prefix_cache.cpp — chained block hashes, the cache index and its LRU list.
#include "engine/prefix_cache.h"

#include <algorithm>

#include "util/check.h"

namespace zinc::engine {
namespace {

uint64_t mix64(uint64_t z) {  // splitmix64 finaliser (Steele, Lea, Flood 2014)
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Evicted hashes remembered per pool block, for the evicted/cold miss distinction.
constexpr size_t kEvictedMemory = 8;

}  // namespace

uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
    uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ull);
    for (int32_t t : tokens) h = mix64(h + 0x9e3779b97f4a7c15ull + static_cast<uint32_t>(t));
    return mix64(h ^ static_cast<uint64_t>(tokens.size()));
}

uint64_t namespace_root(std::string_view name) {
    std::vector<int32_t> bytes(name.begin(), name.end());
    uint64_t h = chain_hash(kRootHash ^ 0x6e616d6573706163ull, bytes);
    return h == kRootHash ? h + 1 : h;
}

PrefixCache::PrefixCache(int32_t n_blocks, int32_t block_size)
    : block_size_(block_size),
      entry_of_(static_cast<size_t>(n_blocks), nullptr),
      lru_pos_(static_cast<size_t>(n_blocks)),
      in_lru_(static_cast<size_t>(n_blocks), 0),
      evicted_cap_(kEvictedMemory * static_cast<size_t>(n_blocks)) {}

int32_t PrefixCache::lookup(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const {
    const auto it = index_.find(hash);
    if (it == index_.end()) return -1;
    const Entry& e = it->second;
    if (e.parent != parent ||
        !std::equal(tokens.begin(), tokens.end(), e.tokens.begin(), e.tokens.end())) {
        return -1;  // a collision: different content under the same hash
    }
    return e.block;
}

bool PrefixCache::insert(int32_t b, uint64_t hash, uint64_t parent,
                         std::span<const int32_t> tokens) {
    ZINC_CHECK(static_cast<int32_t>(tokens.size()) == block_size_);
    if (entry_of_[b] != nullptr || index_.count(hash) != 0) return false;
    ZINC_CHECK(!in_lru_[b]);  // only blocks in use are registered
    auto [it, ok] = index_.emplace(
        hash, Entry{b, hash, parent, std::vector<int32_t>(tokens.begin(), tokens.end())});
    ZINC_CHECK(ok);
    entry_of_[b] = &it->second;
    if (evicted_.erase(hash) != 0) {
        // Leave the order deque alone; a stale entry there is skipped when it is popped.
    }
    return true;
}

void PrefixCache::erase(int32_t b) {
    const Entry* e = entry_of_[b];
    ZINC_CHECK(e != nullptr && !in_lru_[b]);
    entry_of_[b] = nullptr;
    index_.erase(e->hash);
}

void PrefixCache::on_idle(int32_t b) {
    ZINC_CHECK(entry_of_[b] != nullptr && !in_lru_[b]);
    lru_pos_[b] = lru_.insert(lru_.end(), b);
    in_lru_[b] = 1;
}

void PrefixCache::on_reuse(int32_t b) {
    ZINC_CHECK(in_lru_[b]);
    lru_.erase(lru_pos_[b]);
    in_lru_[b] = 0;
}

int32_t PrefixCache::evict_lru() {
    if (lru_.empty()) return -1;
    const int32_t b = lru_.front();
    lru_.pop_front();
    in_lru_[b] = 0;
    const uint64_t h = entry_of_[b]->hash;
    index_.erase(h);
    entry_of_[b] = nullptr;
    if (evicted_.insert(h).second) {
        evicted_order_.push_back(h);
        while (evicted_order_.size() > evicted_cap_) {
            evicted_.erase(evicted_order_.front());
            evicted_order_.pop_front();
        }
    }
    return b;
}

void PrefixCache::check_invariants() const {
    size_t n_entries = 0;
    for (size_t b = 0; b < entry_of_.size(); ++b) {
        if (entry_of_[b] == nullptr) {
            ZINC_CHECK(!in_lru_[b]);
            continue;
        }
        ++n_entries;
        const auto it = index_.find(entry_of_[b]->hash);
        ZINC_CHECK(it != index_.end() && &it->second == entry_of_[b]);
        ZINC_CHECK(it->second.block == static_cast<int32_t>(b));
        ZINC_CHECK(static_cast<int32_t>(it->second.tokens.size()) == block_size_);
        ZINC_CHECK(chain_hash(it->second.parent, it->second.tokens) == it->second.hash);
        ZINC_CHECK(evicted_.count(it->second.hash) == 0);
    }
    ZINC_CHECK(n_entries == index_.size());
    size_t n_lru = 0;
    for (int32_t b : lru_) {
        ZINC_CHECK(in_lru_[b] && entry_of_[b] != nullptr);
        ++n_lru;
    }
    size_t n_flag = 0;
    for (uint8_t f : in_lru_) n_flag += f;
    ZINC_CHECK(n_lru == n_flag);
    ZINC_CHECK(evicted_.size() <= evicted_order_.size());
}

}  // namespace zinc::engine
