// zinc/tokenizer/pre_tokenizer.h — byte-level BPE pre-tokenizers (tokenizer.ggml.pre), written as
// hand-made matchers over code points instead of regexes.
//
// Each kind reproduces the regex list llama.cpp applies for that pre value (llama-vocab.cpp,
// unicode.cpp): the text is split by the first pattern (matches and the gaps between them both
// become pieces), then every piece by the next pattern, and so on.
//   Gpt2:    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   SmolLm:  \p{N}  then the Gpt2 pattern (StarCoder-style: every digit on its own)
//   Llama3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2:   the Llama3 pattern with \p{N} instead of \p{N}{1,3}
//   Default: [\p{P}\$\+<=>\^~\|]+  then Gpt2  then \p{N}+  then [0-9][0-9][0-9]
// Classes follow llama.cpp exactly, including where its std::regex fallback sees ASCII
// differently from Unicode (e.g. the Default punctuation class has no '`').
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace zinc::tokenizer {

enum class PreTokenizerKind { Gpt2, SmolLm, Llama3, Qwen2, Default };

/// Per-pre-value settings llama.cpp attaches to the pre-tokenizer.
struct PreTokenizerInfo {
    PreTokenizerKind kind = PreTokenizerKind::Default;
    bool ignore_merges = false;    // a whole piece that is a token is emitted as is (llama3)
    bool default_add_bos = false;  // add_bos when tokenizer.ggml.add_bos_token is absent
};

/// Map a tokenizer.ggml.pre value ("" means absent -> Default, as llama.cpp does). Accepts the
/// names llama.cpp maps to the five supported kinds. Error: an unsupported value, named.
Result<PreTokenizerInfo> pre_tokenizer_from_name(std::string_view pre);

/// Split code points into pieces; appends piece lengths (in code points, all > 0, summing to
/// cpts.size()) to `lengths` after clearing it.
void pre_tokenize(PreTokenizerKind kind, const std::vector<uint32_t>& cpts,
                  std::vector<size_t>& lengths);

}  // namespace zinc::tokenizer
