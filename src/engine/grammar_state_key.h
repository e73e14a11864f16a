// zinc/engine/grammar_state_key.h — the key under which a matcher state's token mask is cached:
// the state with everything that a token of at most `depth` bytes cannot see abstracted away.
//
// Why: a length-bounded string (`char{300,400}`, as JSON Schema's minLength/maxLength become) is
// a chain of rule positions, one a character, so every character is a new matcher state and a
// cache keyed by the exact state never hits. But a token of n bytes reads at most n characters
// (each character it touches takes at least one of its bytes, a completed or begun UTF-8
// character included), so whether it is allowed depends only on what the grammar can do in the
// next n characters: the count of characters left matters only while it is below n.
//
// Depth-d classes of grammar positions (a position: an element of a rule's alternative, standing
// for the rest of that alternative), interned bottom-up, so that equal classes mean the same
// structure for the next d characters:
//   d <= 0                     ANY  (nothing more is read)
//   End / Alt                  END  (the alternative is done: the stack below goes on)
//   a character set at p       (the set's elements, class_{d-1}(after the set))
//   a reference to rule R at p (rule_class_d(R), class_{d - minlen(R)}(p + 1))
//   rule_class_d(R)            (class_d of each alternative's start, in order)
// where minlen(R) is the fewest characters R matches: whatever path R takes, its continuation
// is read for at most d - minlen(R) characters. The recursion terminates because the parser
// refuses left recursion (a rule reached again without consuming a character).
//
// A stack (bottom .. top) at depth d: class_d(top), then the frame below at d - minlen(top's
// rest), and so on until the depth is spent; the frames deeper than that cannot be reached by
// the token. A state's key: its unfinished UTF-8 character and the sorted, distinct stack keys.
// States with equal keys at depth d allow exactly the same tokens of at most d bytes (tested
// against the per-token check on random grammars: tests/unit/engine/grammar_mask_test.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar.h"

namespace zinc::engine {

using GrammarStack = std::vector<const GrammarElem*>;  // bottom .. top; top: a character set

/// A matcher state (grammar_matcher.h): the stacks (each one way to parse the text so far) and
/// the UTF-8 character begun but not finished.
struct GrammarState {
    std::vector<GrammarStack> stacks;
    uint32_t partial_bits = 0;  // code point bits of an unfinished UTF-8 character
    uint8_t partial_left = 0;   // continuation bytes it still needs (0: none pending)
    uint32_t partial_min = 0;   // its smallest code point (longer encodings are overlong)
};

/// Position classes of one grammar, memoised per (position, depth). Not thread-safe: its owner
/// (GrammarMaskCache) locks around it. The grammar must outlive it and not move.
class GrammarStateKeys {
  public:
    explicit GrammarStateKeys(const Grammar& g);

    /// The key of `s` at `depth` (the byte length of the longest token it decides), into out.
    void key(const GrammarState& s, uint32_t depth, std::string& out);
    /// The exact state as a key (every frame), for the cache without abstraction.
    static void exact_key(const GrammarState& s, std::string& out);

  private:
    uint32_t pos_class(const GrammarElem* p, int32_t d);
    uint32_t rule_class(uint32_t r, int32_t d);
    uint32_t intern(const std::string& tuple);
    uint32_t index(const GrammarElem* p) const;

    const Grammar& g_;
    std::unordered_map<const GrammarElem*, uint32_t> index_;  // element -> flat index
    std::vector<uint32_t> pos_min_;   // (n_elems) fewest characters from there to the alt's end
    std::vector<uint32_t> rule_min_;  // (n_rules) fewest characters the rule matches
    std::unordered_map<uint64_t, uint32_t> pos_memo_, rule_memo_;  // (index << 20 | d) -> class
    std::unordered_map<std::string, uint32_t> tuples_;             // tuple -> class
    std::vector<std::string> stack_keys_;                          // scratch
};

}  // namespace zinc::engine
