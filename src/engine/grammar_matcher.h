// zinc/engine/grammar_matcher.h — grammar-constrained sampling: which tokens of the vocabulary
// may come next under a GBNF grammar (grammar.h), per sequence.
//
// The state is llama.cpp's: a set of stacks of positions in the grammar's rules (each stack one
// way the text so far can be parsed; its top a character set still to match), plus the bytes of
// a UTF-8 character begun but not finished (tokens of byte-level vocabularies split characters).
// A token is allowed when feeding its bytes leaves at least one stack alive (allows(): the
// per-token check, the oracle of the mask). End-of-generation tokens are allowed exactly when
// some stack is empty (the text so far is a complete sentence of the grammar).
//
// The mask for the whole vocabulary (allowed_bits()) is cached: per length bucket of tokens,
// under the state's key at that length (grammar_state_key.h), in the constraint's
// GrammarMaskCache, shared by every request with the same grammar. On a miss, the bucket's tokens
// are walked sorted by bytes (a shared prefix is matched once, a dead prefix skips every token
// that starts with it), and each (state, byte) step is computed once per walk: the states met are
// interned, so the thousands of tokens that go through the same states cost a table look-up per
// byte.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "engine/grammar_mask_cache.h"
#include "engine/grammar_state_key.h"

namespace zinc::engine {

/// The vocabulary as bytes, bucketed by length and sorted for the mask walk. Built once per
/// tokenizer (the server keeps one per model).
struct GrammarVocab {
    /// pieces[id]: the token's bytes as it appears in text ("" for control tokens, never
    /// allowed by a grammar); eog: end-of-generation ids.
    GrammarVocab(std::vector<std::string> pieces, std::vector<int32_t> eog);
    /// Tokens whose byte length is in (previous bucket's max_len, max_len]: 8, 16, 32, ...
    struct Bucket {
        uint32_t max_len = 0;
        std::vector<int32_t> order;  // ids sorted by piece bytes
        std::vector<uint32_t> lcp;   // (order.size()) common prefix with the previous in order
    };
    std::vector<std::string> pieces;  // (n_vocab)
    std::vector<Bucket> buckets;      // ids with non-empty pieces, not end-of-generation
    std::vector<int32_t> eog;         // sorted
    int32_t n_vocab() const { return static_cast<int32_t>(pieces.size()); }
    size_t n_words() const { return (pieces.size() + 63) / 64; }
    bool is_eog(int32_t id) const;
};

/// What a request is constrained by: a parsed grammar over a vocabulary, and the masks cached for
/// it (null: each matcher keeps its own).
struct GrammarConstraint {
    std::shared_ptr<const Grammar> grammar;
    std::shared_ptr<const GrammarVocab> vocab;
    std::shared_ptr<GrammarMaskCache> masks;
};

/// A constraint with its mask cache (options from the environment, grammar_mask_cache.h).
std::shared_ptr<const GrammarConstraint> make_grammar_constraint(
    Grammar g, std::shared_ptr<const GrammarVocab> vocab);

class GrammarMatcher {
  public:
    explicit GrammarMatcher(std::shared_ptr<const GrammarConstraint> c);

    /// ((n_vocab + 63) / 64) words: bit id % 64 of word id / 64 is set where the token may come
    /// next. Valid until the next accept().
    const std::vector<uint64_t>& allowed_bits();
    /// (n_vocab) 1 where the token may come next (allowed_bits() as bytes). Valid until the next
    /// accept().
    const std::vector<uint8_t>& allowed();
    /// Whether one token may come next (cheaper than allowed() for a single check).
    bool allows(int32_t id) const;
    /// Advance past a token; false (state unchanged) when the grammar does not allow it.
    bool accept(int32_t id);
    /// The text so far is a complete sentence of the grammar (end of generation is allowed).
    bool complete() const;
    /// How many ways the text so far parses (the state's stacks; llama.cpp's algorithm keeps
    /// them all, so an ambiguous grammar can make many).
    size_t n_stacks() const { return state_.stacks.size(); }

    using State = GrammarState;

  private:
    struct Walk;
    bool step_byte(const State& in, uint8_t b, State& out) const;
    void advance_char(const State& in, uint32_t cp, State& out) const;
    void expand(GrammarStack& stack, State& out) const;
    bool feed(const State& in, const std::string& bytes, State& out) const;
    void walk(Walk& w, const GrammarVocab::Bucket& b, std::vector<uint64_t>& bits) const;

    std::shared_ptr<const GrammarConstraint> c_;
    std::shared_ptr<GrammarMaskCache> masks_;  // c_->masks, or this matcher's own
    State state_;
    std::vector<uint64_t> bits_, bucket_bits_;
    std::vector<uint8_t> bytes_;
    bool bits_valid_ = false, bytes_valid_ = false;
    std::string key_;  // scratch
};

}  // namespace zinc::engine
