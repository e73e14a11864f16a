// zinc/tokenizer/vocab.h — the token table shared by both tokenizer families (internal header).
//
// Strings live in one arena (a vector<char>); ids index offsets into it, and a hash map from
// string_view (into the arena) to id gives text -> token lookups. Token attributes follow
// llama.cpp's llama_token_attr, derived from tokenizer.ggml.token_type and then adjusted the way
// llama.cpp does at load (EOG-looking tokens become CONTROL, a few gpt-oss tokens USER_DEFINED).
//
// VocabSpec is the in-memory description read from GGUF metadata; unit tests build one directly
// to make tiny vocabularies (make_tokenizer in tokenizer.cpp turns it into a Tokenizer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace zinc::tokenizer {

/// Bit flags as in llama.cpp's llama_token_attr.
namespace attr {
constexpr uint32_t kUndefined = 0;
constexpr uint32_t kUnknown = 1u << 0;
constexpr uint32_t kUnused = 1u << 1;
constexpr uint32_t kNormal = 1u << 2;
constexpr uint32_t kControl = 1u << 3;
constexpr uint32_t kUserDefined = 1u << 4;
constexpr uint32_t kByte = 1u << 5;
}  // namespace attr

/// Everything a tokenizer is built from. Views must outlive make_tokenizer() only (the Vocab
/// copies what it keeps). Optional ids/flags are "key absent" when empty.
struct VocabSpec {
    std::string model;                     // tokenizer.ggml.model: "gpt2", "llama" or "bert"
    std::string pre;                       // tokenizer.ggml.pre ("" when absent)
    std::vector<std::string_view> tokens;  // tokenizer.ggml.tokens
    std::vector<float> scores;             // tokenizer.ggml.scores (empty: all 0)
    std::vector<int32_t> token_types;      // tokenizer.ggml.token_type (empty: all NORMAL, as
                                           // llama.cpp does when the key is absent)
    std::vector<std::string_view> merges;  // tokenizer.ggml.merges ("left right"), gpt2 only
    std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id, mask_id;
    std::optional<int64_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
    std::optional<bool> add_bos, add_eos, add_space_prefix;
    // WordPiece ("bert"): tokenizer.ggml.add_sep_token, .normalizer.lowercase, .strip_accents
    std::optional<bool> add_sep, lowercase, strip_accents;
};

/// Special ids resolved from metadata and llama.cpp's defaults/auto-detection (-1 = none).
struct SpecialIds {
    TokenId bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
    TokenId fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
};

class Vocab {
  public:
    /// Copies the tokens into the arena and builds the index. Errors: empty vocab, duplicate
    /// token text, arrays of the wrong length.
    static Result<std::unique_ptr<Vocab>> build(const VocabSpec& spec);

    int32_t size() const { return static_cast<int32_t>(attrs_.size()); }
    bool valid(TokenId id) const { return id >= 0 && id < size(); }
    std::string_view text(TokenId id) const {
        return {arena_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
    }
    float score(TokenId id) const { return scores_.empty() ? 0.0f : scores_[id]; }
    uint32_t attrs(TokenId id) const { return attrs_[id]; }
    TokenType type(TokenId id) const { return types_[id]; }
    void add_attr(TokenId id, uint32_t a) { attrs_[id] |= a; }
    void set_attr(TokenId id, uint32_t a) { attrs_[id] = a; }
    /// Token whose text is exactly `s`, or -1.
    TokenId find(std::string_view s) const {
        auto it = index_.find(s);
        return it == index_.end() ? -1 : it->second;
    }

  private:
    Vocab() = default;
    std::vector<char> arena_;        // all token texts back to back
    std::vector<uint32_t> offsets_;  // (n + 1) offsets into arena_
    std::vector<float> scores_;      // n or empty
    std::vector<uint32_t> attrs_;    // n, attr:: bits
    std::vector<TokenType> types_;   // n, as in the file
    std::unordered_map<std::string_view, TokenId> index_;
};

/// Resolve special ids, EOG set and attribute adjustments exactly as llama.cpp's vocab load does.
/// `is_spm` selects the family defaults. Returns the EOG ids (sorted).
std::vector<TokenId> resolve_specials(const VocabSpec& spec, bool is_spm, Vocab& vocab,
                                      SpecialIds& ids);

}  // namespace zinc::tokenizer
