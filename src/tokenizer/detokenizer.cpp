// zinc/tokenizer/detokenizer.cpp — ids -> bytes: token_to_piece (llama.cpp's rules per token
// attribute and family), decode, and the IncrementalDetokenizer that only ever emits whole,
// well-formed UTF-8 characters.
#include <cstdio>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace zinc::tokenizer {

namespace {

// "▁" (U+2581) -> " ".
std::string unescape_spm_spaces(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
            out.push_back(' ');
            i += 3;
        } else {
            out.push_back(s[i++]);
        }
    }
    return out;
}

// Undo the GPT-2 byte map. Code points that are not the image of a byte render as llama.cpp
// does: "[UNK_BYTE_0x<hex of the char>" + the whole token text + "]".
std::string decode_byte_level(std::string_view s) {
    std::string out;
    std::vector<uint32_t> cpts;
    decode_utf8_lenient(s, cpts);
    for (uint32_t cp : cpts) {
        const int b = gpt2_cp_to_byte(cp);
        if (b >= 0) {
            out.push_back(static_cast<char>(b));
            continue;
        }
        std::string utf8;
        append_utf8(cp, utf8);
        out += "[UNK_BYTE_0x";
        char hex[3];
        for (unsigned char c : utf8) {
            std::snprintf(hex, sizeof hex, "%02x", c);
            out += hex;
        }
        out.append(s);
        out += "]";
    }
    return out;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Byte token "<0xXX>" -> XX. Like strtol, stops at the first non-hex digit.
char byte_of_token(std::string_view text) {
    int v = 0;
    for (size_t i = 3; i < 5 && i < text.size(); ++i) {
        const int h = hex_value(text[i]);
        if (h < 0) break;
        v = v * 16 + h;
    }
    return static_cast<char>(v);
}

}  // namespace

std::string TokenizerBase::token_to_piece(TokenId id, bool special) const {
    if (!vocab_->valid(id)) return {};
    const uint32_t a = vocab_->attrs(id);
    if (!special && (a & (attr::kUnknown | attr::kControl))) return {};
    const auto text = vocab_->text(id);
    if (a & (attr::kUnknown | attr::kControl | attr::kUserDefined)) return std::string(text);
    if (a & attr::kNormal)
        return family_ == Family::SentencePiece ? unescape_spm_spaces(text)
                                                : decode_byte_level(text);
    if (a & attr::kByte) return std::string(1, byte_of_token(text));
    return {};  // UNUSED / UNDEFINED tokens render as nothing
}

std::string_view TokenizerBase::token_text(TokenId id) const {
    return vocab_->valid(id) ? vocab_->text(id) : std::string_view();
}

TokenType TokenizerBase::token_type(TokenId id) const {
    return vocab_->valid(id) ? vocab_->type(id) : TokenType::UNDEFINED;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool special) const {
    std::string out;
    for (TokenId id : ids) out += token_to_piece(id, special);
    return out;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool special)
    : tok_(tok), special_(special) {}

std::string IncrementalDetokenizer::push(TokenId id) {
    pending_ += tok_.token_to_piece(id, special_);
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        bool stuck = false;
        const size_t ok = utf8_valid_prefix(std::string_view(pending_).substr(i), &stuck);
        out.append(pending_, i, ok);
        i += ok;
        if (!stuck) break;  // the rest (if any) is an incomplete character: hold it
        i += utf8_maximal_subpart(std::string_view(pending_).substr(i));
        out += "\xEF\xBF\xBD";
    }
    pending_.erase(0, i);
    return out;
}

std::string IncrementalDetokenizer::finish() {
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        bool stuck = false;
        const size_t ok = utf8_valid_prefix(std::string_view(pending_).substr(i), &stuck);
        out.append(pending_, i, ok);
        i += ok;
        if (i >= pending_.size()) break;
        i += utf8_maximal_subpart(std::string_view(pending_).substr(i));
        out += "\xEF\xBF\xBD";
    }
    pending_.clear();
    return out;
}

}  // namespace zinc::tokenizer
