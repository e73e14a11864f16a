// Helpers for the tokenizer unit tests: build tokenizers from small in-memory vocabularies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace zinc::tokenizer::test {

/// Owns the strings a VocabSpec points at.
struct SpecOwner {
    std::vector<std::string> tokens, merges;
    VocabSpec spec;
    void add(std::string text, TokenType type = TokenType::NORMAL, float score = 0) {
        tokens.push_back(std::move(text));
        spec.token_types.push_back(static_cast<int32_t>(type));
        spec.scores.push_back(score);
    }
    void merge(std::string m) { merges.push_back(std::move(m)); }
    Result<std::unique_ptr<Tokenizer>> build() {
        spec.tokens.assign(tokens.begin(), tokens.end());
        spec.merges.assign(merges.begin(), merges.end());
        return make_tokenizer(spec);
    }
};

/// Byte-level text of a UTF-8 string (what a GPT-2 vocab stores), e.g. " a" -> "Ġa".
inline std::string byte_level(const std::string& s) {
    std::string out;
    for (unsigned char c : s) append_utf8(byte_to_gpt2_cp(c), out);
    return out;
}

}  // namespace zinc::tokenizer::test
