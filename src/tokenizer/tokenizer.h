// zinc/tokenizer/tokenizer.h — text <-> token ids, built from a GGUF's tokenizer.* metadata.
//
// Two families, chosen by tokenizer.ggml.model:
//   "gpt2"  byte-level BPE (GPT-2 byte<->unicode map, ranked merges), with a pre-tokenizer regex
//           chosen by tokenizer.ggml.pre (llama3, qwen2, smollm, gpt2, ... as llama.cpp maps them).
//   "llama" SentencePiece-style BPE: merges by piece score, "▁" for spaces, <0xXX> byte fallback.
//   "bert"  WordPiece (BERT): lowercasing / accent stripping as the file says, words split on
//           whitespace and punctuation, greedy longest-match pieces; [CLS] ... [SEP].
// Behaviour matches llama.cpp's llama_tokenize / llama_token_to_piece (checked id for id by
// tests/py/test_tokenizer_parity.py against llama-cpp-python on a vocab-only load).
//
// Special/control tokens (token_type CONTROL or USER_DEFINED) are recognised in text only when
// encode(..., parse_special=true); otherwise their literal text is tokenized as plain text
// (USER_DEFINED tokens are split out either way, as llama.cpp does). encode_mixed() parses them
// only outside given byte ranges: chat prompts, whose message text is data
// (docs/chat-templates.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace zinc::gguf {
class File;
}

namespace zinc::tokenizer {

using TokenId = int32_t;

/// Bytes [begin, end) of a text.
struct TextRange {
    size_t begin = 0, end = 0;
};

/// llama.cpp's token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
    UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

class Tokenizer {
public:
    /// Errors: missing or malformed tokenizer.* keys, unsupported model or pre-tokenizer,
    /// token ids out of range.
    static Result<std::unique_ptr<Tokenizer>> from_gguf(const gguf::File& file);
    virtual ~Tokenizer() = default;

    /// Encode UTF-8 text (invalid bytes are handled, never crash). add_special: prepend BOS /
    /// append EOS as the model's add_bos_token / add_eos_token say. parse_special: recognise
    /// special-token text (e.g. "<|im_start|>") as the special token.
    std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const {
        return encode_impl(text, add_special, parse_special, nullptr);
    }

    /// Encode with special-token text parsed except where it overlaps a `plain` range (sorted,
    /// disjoint): those bytes are tokenized as with parse_special=false, so a CONTROL token's text
    /// is read as the token only when every byte of it lies outside the plain ranges. Text
    /// without special-token text tokenizes exactly as encode(text, add_special, true).
    std::vector<TokenId> encode_mixed(std::string_view text, bool add_special,
                                      const std::vector<TextRange>& plain) const {
        return encode_impl(text, add_special, true, &plain);
    }

    /// Raw bytes of one token as it appears in text (byte-level map undone, "▁" -> " ", byte
    /// tokens -> their byte). Control tokens render as "" unless `special` is true.
    virtual std::string token_to_piece(TokenId id, bool special = false) const = 0;

    /// Concatenated pieces (may contain invalid UTF-8 if ids split a character).
    std::string decode(const std::vector<TokenId>& ids, bool special = false) const;

    virtual int32_t n_vocab() const = 0;
    virtual std::string_view token_text(TokenId id) const = 0;  // the vocab string itself
    virtual TokenType token_type(TokenId id) const = 0;

    TokenId bos() const { return bos_; }   // -1 if none
    TokenId eos() const { return eos_; }   // -1 if none
    TokenId eot() const { return eot_; }   // -1 if none (e.g. <|im_end|>, <end_of_turn>)
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    /// End-of-generation: eos, eot, and other tokens llama.cpp treats as EOG.
    bool is_eog(TokenId id) const;

    /// Things worth telling the user about this file's tokenizer, one line each (e.g. a BOS id
    /// taken from the family default because the file does not name one). from_gguf fills it;
    /// the loader prints each once.
    const std::vector<std::string>& warnings() const { return warnings_; }

  protected:
    virtual std::vector<TokenId> encode_impl(std::string_view text, bool add_special,
                                             bool parse_special,
                                             const std::vector<TextRange>* plain) const = 0;

    TokenId bos_ = -1, eos_ = -1, eot_ = -1;
    bool add_bos_ = false, add_eos_ = false;
    std::vector<TokenId> eog_ids_;
    std::vector<std::string> warnings_;
};

/// Turns a stream of token ids into text that is always valid UTF-8: bytes of a character split
/// across tokens are held until the character is complete; invalid sequences become U+FFFD.
class IncrementalDetokenizer {
public:
    explicit IncrementalDetokenizer(const Tokenizer& tok, bool special = false);
    /// Text that became complete with this token (possibly empty).
    std::string push(TokenId id);
    /// Flush held bytes at end of stream (incomplete characters become U+FFFD).
    std::string finish();

private:
    const Tokenizer& tok_;
    bool special_;
    std::string pending_;
};

}  // namespace zinc::tokenizer
