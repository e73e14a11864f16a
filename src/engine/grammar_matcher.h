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
// A lazy constraint (GrammarConstraint::triggers, llama.cpp's lazy grammars) leaves the text free
// until a trigger (e.g. `<tool_call>`, or `{"name": "get_weather"` at the start of the text)
// appears in it; the grammar then constrains the text from the trigger's first byte on (the
// grammar's sentences start with a trigger), and the bytes before it stay free. While awaiting,
// every token is allowed and end of generation too, except the tokens that would complete a
// trigger with a continuation the grammar refuses (GrammarConstraint::trigger_ids: the few tokens
// that can end an occurrence, checked one by one), so a sampled token is never refused.
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

/// Text from which on a lazy constraint's grammar applies (above).
struct GrammarTrigger {
    std::string text;
    bool at_start = false;  // counts only at the text's first non-whitespace byte
};

/// What a request is constrained by: a parsed grammar over a vocabulary, and the masks cached for
/// it (null: each matcher keeps its own).
struct GrammarConstraint {
    std::shared_ptr<const Grammar> grammar;
    std::shared_ptr<const GrammarVocab> vocab;
    std::shared_ptr<GrammarMaskCache> masks;
    /// Not empty: lazy (above): the grammar applies from the first trigger's occurrence on.
    std::vector<GrammarTrigger> triggers;
    size_t max_trigger = 0;  // the longest trigger's bytes
    /// The tokens whose bytes can end an occurrence of a trigger (those that contain it, or start
    /// with a proper suffix of it), sorted: the only ones a lazy matcher checks while awaiting.
    std::vector<int32_t> trigger_ids;
};

/// A constraint with its mask cache (options from the environment, grammar_mask_cache.h);
/// `triggers` not empty (none of them ""): lazy.
std::shared_ptr<const GrammarConstraint> make_grammar_constraint(
    Grammar g, std::shared_ptr<const GrammarVocab> vocab,
    std::vector<GrammarTrigger> triggers = {});

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
    /// A lazy constraint whose trigger has not appeared yet (the text is free so far).
    bool awaiting() const { return awaiting_; }
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
    /// Awaiting: the grammar's state once `piece` is appended to the free text, in `out`, and
    /// whether the grammar starts there (a trigger completed with an allowed continuation).
    /// false with `*refused` set: a trigger completed but the grammar refuses what follows it.
    bool trigger_fires(const std::string& piece, State& out, bool* refused) const;
    /// Awaiting: some trigger may still occur (false once only at_start ones are left and the
    /// free text has gone past where one could start: the text stays free to the end).
    bool can_fire() const;

    std::shared_ptr<const GrammarConstraint> c_;
    std::shared_ptr<GrammarMaskCache> masks_;  // c_->masks, or this matcher's own
    State state_;
    bool awaiting_ = false;
    std::string tail_;   // awaiting: the free text's last max_trigger - 1 bytes at most
    size_t n_free_ = 0;  // awaiting: bytes of free text so far
    size_t first_text_ = std::string::npos;  // and the offset of its first non-whitespace one
    std::vector<uint64_t> bits_, bucket_bits_;
    std::vector<uint8_t> bytes_;
    bool bits_valid_ = false, bytes_valid_ = false;
    std::string key_;  // scratch
};

}  // namespace zinc::engine
