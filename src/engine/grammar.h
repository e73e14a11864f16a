// zinc/engine/grammar.h — GBNF grammars (llama.cpp's grammar syntax) parsed into flat rules.
//
// Syntax (llama.cpp grammars/README.md): `name ::= alternatives` rules, `|` alternatives,
// "literals" and [character classes] (`^` negates, `a-z` ranges) with the escapes \n \r \t,
// backslash-backslash, \" \] \xHH \uHHHH \UHHHHHHHH, `.` (any character), rule references, ( groups
// ), and the postfix repetitions *, +, ?, {m}, {m,}, {m,n}; `#` starts a comment. A rule ends at a
// newline outside parentheses unless the next non-blank line starts with `|`. `root` is the start
// rule.
//
// Rules are stored as llama.cpp stores them: each a flat array of elements, alternatives
// separated by Alt, closed by End; a character set is Char/CharNot followed by CharRngUpper /
// CharAlt elements. Repetitions become generated rules (x* -> x_rep ::= x x_rep | ""), so the
// matcher (grammar_matcher.h) only sees sequences, alternatives and references. Grammars that are
// left-recursive (including through a nullable prefix, e.g. ("")*) are refused: the matcher's
// expansion would not terminate. Errors name line:column and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace zinc::engine {

enum class GrammarElemType : uint8_t {
    End,           // end of a rule
    Alt,           // start of another alternative
    RuleRef,       // value: rule index
    Char,          // value: code point; starts a set matching it (or the ranges that follow)
    CharNot,       // value: code point; starts a negated set
    CharRngUpper,  // value: upper bound of the range started by the preceding Char/CharAlt
    CharAlt,       // value: another code point (or range start) of the current set
    CharAny,       // any code point
};

struct GrammarElem {
    GrammarElemType type;
    uint32_t value;
};

struct Grammar {
    std::vector<std::vector<GrammarElem>> rules;  // (n_rules), each closed by End
    std::vector<std::string> names;               // (n_rules) source or generated names
    uint32_t root = 0;
};

/// Parse GBNF text. Errors: "line L, column C: <what>; expected <what>".
Result<Grammar> parse_grammar(std::string_view text);

/// Decode one UTF-8 code point at s[i]; advances i. Invalid bytes decode as themselves (the
/// grammar text is UTF-8; a bad byte is taken literally, as llama.cpp does).
uint32_t decode_utf8(std::string_view s, size_t& i);

}  // namespace zinc::engine
