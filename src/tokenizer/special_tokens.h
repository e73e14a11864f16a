// zinc/tokenizer/special_tokens.h — splitting text on the literal text of special tokens, before
// the model tokenizer sees it (llama.cpp's tokenizer_st_partition).
//
// Candidates are tokens with attribute CONTROL, USER_DEFINED or UNKNOWN. llama.cpp takes them
// longest text first and, for each, cuts every occurrence out of the text that is still raw, left
// to right. We get the same result without rescanning the text once per special token: a trie
// finds every occurrence of every candidate in one pass, then occurrences are accepted in
// (token rank, position) order when none of their bytes has been claimed yet.
// With parse_special=false, CONTROL and UNKNOWN tokens are plain text but USER_DEFINED tokens
// are still split out (llama.cpp and HF tokenizers do the same). With `plain` ranges, an
// occurrence of a CONTROL or UNKNOWN token that overlaps one is plain text too (chat prompts:
// the ranges are the message text, which must never become control tokens).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace zinc::tokenizer {

struct Fragment {
    bool is_token = false;
    TokenId token = -1;             // when is_token
    size_t offset = 0, length = 0;  // raw text span (bytes) when !is_token
};

class SpecialMatcher {
  public:
    explicit SpecialMatcher(const Vocab& vocab);
    /// Fragments of `text` in order; raw spans are never empty. `plain`: sorted, disjoint byte
    /// ranges where CONTROL/UNKNOWN text is not recognised (nullptr: none).
    std::vector<Fragment> partition(std::string_view text, bool parse_special,
                                    const std::vector<TextRange>* plain = nullptr) const;

  private:
    struct Node {
        TokenId token = -1;  // candidate ending here
        uint32_t rank = 0;   // order in llama.cpp's longest-first list
        uint32_t first = 0;  // children: edge_bytes_/edge_nodes_[first, first + count)
        uint32_t count = 0;
    };
    uint32_t child(uint32_t node, uint8_t byte) const;  // 0 = none (root is 0, never a child)
    std::vector<Node> nodes_;
    std::vector<uint8_t> edge_bytes_;  // per node, sorted by byte
    std::vector<uint32_t> edge_nodes_;
    std::vector<uint32_t> attrs_by_rank_;
    std::vector<uint32_t> len_by_rank_;
};

}  // namespace zinc::tokenizer
