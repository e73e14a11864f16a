// zinc/engine/grammar_matcher.h — grammar-constrained sampling: which tokens of the vocabulary
// may come next under a GBNF grammar (grammar.h), per sequence.
//
// The state is llama.cpp's: a set of stacks of positions in the grammar's rules (each stack one
// way the text so far can be parsed; its top a character set still to match), plus the bytes of
// a UTF-8 character begun but not finished (tokens of byte-level vocabularies split characters).
// A token is allowed when feeding its bytes leaves at least one stack alive. The mask for all
// tokens walks the vocabulary sorted by bytes, so a shared prefix is matched once and a dead
// prefix skips every token that starts with it; masks are cached per state (strings and
// repetitions return to the same state token after token). End-of-generation tokens are allowed
// exactly when some stack is empty (the text so far is a complete sentence of the grammar).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar.h"

namespace zinc::engine {

/// The vocabulary as bytes, sorted for the mask walk. Built once per tokenizer.
struct GrammarVocab {
    /// pieces[id]: the token's bytes as it appears in text ("" for control tokens, never
    /// allowed by a grammar); eog: end-of-generation ids.
    GrammarVocab(std::vector<std::string> pieces, std::vector<int32_t> eog);
    std::vector<std::string> pieces;  // (n_vocab)
    std::vector<int32_t> order;       // ids with non-empty pieces, sorted by piece bytes
    std::vector<uint32_t> lcp;        // (order.size()) common prefix with the previous in order
    std::vector<int32_t> eog;         // sorted
    int32_t n_vocab() const { return static_cast<int32_t>(pieces.size()); }
    bool is_eog(int32_t id) const;
};

/// What a request is constrained by: a parsed grammar over a vocabulary.
struct GrammarConstraint {
    std::shared_ptr<const Grammar> grammar;
    std::shared_ptr<const GrammarVocab> vocab;
};

class GrammarMatcher {
  public:
    explicit GrammarMatcher(std::shared_ptr<const GrammarConstraint> c);

    /// (n_vocab) 1 where the token may come next. Valid until the next accept().
    const std::vector<uint8_t>& allowed();
    /// Whether one token may come next (cheaper than allowed() for a single check).
    bool allows(int32_t id) const;
    /// Advance past a token; false (state unchanged) when the grammar does not allow it.
    bool accept(int32_t id);
    /// The text so far is a complete sentence of the grammar (end of generation is allowed).
    bool complete() const;

    struct State {
        std::vector<std::vector<const GrammarElem*>> stacks;
        uint32_t partial_bits = 0;  // code point bits of an unfinished UTF-8 character
        uint8_t partial_left = 0;   // continuation bytes it still needs (0: none pending)
        uint32_t partial_min = 0;   // its smallest code point (longer encodings are overlong)
    };

  private:
    bool step_byte(const State& in, uint8_t b, State& out) const;
    void advance_char(const State& in, uint32_t cp, State& out) const;
    void expand(std::vector<const GrammarElem*>& stack, State& out) const;
    bool feed(const State& in, const std::string& bytes, State& out) const;
    std::string cache_key() const;

    std::shared_ptr<const GrammarConstraint> c_;
    State state_;
    std::vector<uint8_t> mask_;
    bool mask_valid_ = false;
    std::unordered_map<std::string, std::vector<uint8_t>> cache_;  // state -> mask
};

}  // namespace zinc::engine
