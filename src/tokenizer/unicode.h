// zinc/tokenizer/unicode.h — code point helpers the tokenizers share: UTF-8 decoding with
// llama.cpp's lenient rules, encoding, general-category classes, White_Space, and the GPT-2
// byte <-> code point map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::tokenizer {

/// Unicode general category folded into the classes the pre-tokenizer regexes use
/// (\p{L}, \p{N}, \p{Z}, \p{M}, \p{P}, \p{S}, \p{C}); unassigned code points are Undefined.
enum class CpClass : uint8_t {
    Undefined = 0,
    Letter = 1,
    Number = 2,
    Separator = 3,
    Mark = 4,
    Punctuation = 5,
    Symbol = 6,
    Control = 7,
};

constexpr uint32_t kReplacementChar = 0xFFFD;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

/// Class of a code point (Unicode 15.1). Code points above U+10FFFF are Undefined.
CpClass cp_class(uint32_t cp);
/// The White_Space property (what regex \s means in the pre-tokenizer patterns).
bool is_white_space(uint32_t cp);

/// Simple lowercase mapping of a code point (itself when it has none), Unicode 15.1.
uint32_t to_lower(uint32_t cp);
/// The first code point of cp's canonical decomposition (NFD), i.e. cp with its accents taken
/// off (itself when it does not decompose), as llama.cpp's unicode_cpts_normalize_nfd.
uint32_t nfd_base(uint32_t cp);

/// Length of a UTF-8 sequence judged by its first byte only (1 for continuation bytes), as
/// llama.cpp's SentencePiece and BPE symbol splitters do.
size_t utf8_len_from_lead(uint8_t lead);

/// Decode `text` into code points with llama.cpp's rules: a lead byte followed by the right
/// number of continuation bytes is accepted without checking for overlong forms or surrogates;
/// anything else consumes one byte and yields U+FFFD. Sequences that would decode above U+10FFFF
/// (llama.cpp throws on re-encoding those) also yield U+FFFD for their first byte.
void decode_utf8_lenient(std::string_view text, std::vector<uint32_t>& out);

/// Append the UTF-8 encoding of `cp` (cp <= U+10FFFF; surrogates are encoded as-is).
void append_utf8(uint32_t cp, std::string& out);

/// GPT-2 byte-level map: each byte 0..255 has a printable code point (bytes that are printable
/// Latin-1 map to themselves, the rest to U+0100 + n in byte order).
uint32_t byte_to_gpt2_cp(uint8_t byte);
/// Inverse map; returns -1 for code points that are not the image of a byte.
int gpt2_cp_to_byte(uint32_t cp);

/// Length of the longest prefix of `s` made of complete, well-formed UTF-8 characters (strict:
/// no overlongs, surrogates or values above U+10FFFF). `*stuck` is set when the bytes after that
/// prefix can never become well-formed (so they must be replaced), rather than merely incomplete.
size_t utf8_valid_prefix(std::string_view s, bool* stuck);
/// Length of the maximal ill-formed subpart at the start of `s` (>= 1), per Unicode 15 §3.9
/// "U+FFFD substitution of maximal subparts" (what Python's errors="replace" does).
size_t utf8_maximal_subpart(std::string_view s);

}  // namespace zinc::tokenizer
