// zinc/engine/grammar_mask_cache.h — token masks of one grammar over one vocabulary, cached by
// state key and shared by every matcher of that grammar: across the steps of a request and across
// requests with the same grammar (the server keeps one GrammarConstraint per grammar text).
//
// The vocabulary is split into buckets by token length (GrammarVocab::buckets: up to 8 bytes, up
// to 16, 32, ...). A bucket's mask in a state is cached under the state's key at the bucket's
// length (grammar_state_key.h), so the many tokens of at most 8 bytes share a mask across all the
// positions of a length-bounded string that are 8 or more characters from its bounds, and only
// the few long tokens see more of the state. With `abstract_keys` off (ZINC_GRAMMAR_ABSTRACT=0)
// the key is the exact state (the A/B check of the abstraction). Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar.h"
#include "engine/grammar_state_key.h"

namespace zinc::engine {

struct GrammarVocab;

class GrammarMaskCache {
  public:
    struct Options {
        bool abstract_keys = true;     // false: key by the exact state
        size_t max_bytes = 16u << 20;  // masks kept (oldest dropped first)
    };
    struct Stats {
        uint64_t hits = 0, misses = 0;  // bucket lookups
        size_t entries = 0;
    };

    /// The grammar must stay alive and in place while the cache lives (the constraint holds
    /// both). Options from the environment: ZINC_GRAMMAR_ABSTRACT=0 turns abstract_keys off.
    GrammarMaskCache(std::shared_ptr<const Grammar> g, size_t n_vocab, Options o);
    GrammarMaskCache(std::shared_ptr<const Grammar> g, size_t n_vocab);

    /// The key of state `s` for tokens of at most `max_len` bytes, into out.
    void key(const GrammarState& s, uint32_t max_len, std::string& out);
    /// OR the mask cached for (bucket, key) into `bits` ((n_vocab + 63) / 64 words); false (bits
    /// unchanged) when none is cached.
    bool or_into(size_t bucket, const std::string& key, std::vector<uint64_t>& bits);
    /// Keep a bucket's mask (the bits of that bucket's tokens only) under its key.
    void insert(size_t bucket, const std::string& key, const std::vector<uint64_t>& bits);
    Stats stats() const;

  private:
    std::shared_ptr<const Grammar> g_;
    size_t n_words_;
    Options opts_;
    mutable std::mutex mu_;
    GrammarStateKeys keys_;                                         // guarded by mu_
    std::unordered_map<std::string, std::vector<uint64_t>> masks_;  // bucket byte + key -> bits
    std::deque<std::string> fifo_;                                  // insertion order
    Stats stats_;
};

/// ZINC_GRAMMAR_ABSTRACT from the environment ("0": exact-state keys); read once per cache.
GrammarMaskCache::Options grammar_mask_options_from_env();

}  // namespace zinc::engine
