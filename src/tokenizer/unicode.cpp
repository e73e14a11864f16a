// zinc/tokenizer/unicode.cpp — code point classes, lenient/strict UTF-8, GPT-2 byte map.
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode_tables.h"

namespace zinc::tokenizer {

CpClass cp_class(uint32_t cp) {
    if (cp > kMaxCodePoint) return CpClass::Undefined;
    using unicode_data::kCpClassRanges;
    using unicode_data::kCpClassRangesCount;
    // Last range whose first code point is <= cp.
    const auto* end = kCpClassRanges + kCpClassRangesCount;
    const auto* it =
        std::upper_bound(kCpClassRanges, end, cp,
                         [](uint32_t v, const unicode_data::CpRange& r) { return v < r.first; });
    return static_cast<CpClass>((it - 1)->cls);
}

bool is_white_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    using unicode_data::kWhiteSpace;
    using unicode_data::kWhiteSpaceCount;
    return std::binary_search(kWhiteSpace, kWhiteSpace + kWhiteSpaceCount, cp);
}

uint32_t to_lower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    using unicode_data::kLowercase;
    const auto* end = kLowercase + unicode_data::kLowercaseCount;
    const auto* it = std::lower_bound(
        kLowercase, end, cp, [](const unicode_data::CpPair& p, uint32_t c) { return p.cp < c; });
    return it != end && it->cp == cp ? it->mapped : cp;
}

uint32_t nfd_base(uint32_t cp) {
    using unicode_data::kNfdRanges;
    const auto* end = kNfdRanges + unicode_data::kNfdRangesCount;
    // the last range starting at or before cp
    const auto* it =
        std::upper_bound(kNfdRanges, end, cp,
                         [](uint32_t c, const unicode_data::NfdRange& r) { return c < r.first; });
    if (it == kNfdRanges) return cp;
    --it;
    return cp <= it->last ? it->base : cp;
}

size_t utf8_len_from_lead(uint8_t lead) {
    static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLen[lead >> 4];
}

void decode_utf8_lenient(std::string_view text, std::vector<uint32_t>& out) {
    out.clear();
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
    size_t i = 0;
    while (i < n) {
        const uint8_t b = s[i];
        if (b < 0x80) {
            out.push_back(b);
            i += 1;
        } else if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
            out.push_back(((b & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu));
            i += 2;
        } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
            out.push_back(((b & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu));
            i += 3;
        } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
            const uint32_t cp = ((b & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) |
                                ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
            if (cp > kMaxCodePoint) {
                out.push_back(kReplacementChar);
                i += 1;
            } else {
                out.push_back(cp);
                i += 4;
            }
        } else {
            out.push_back(kReplacementChar);
            i += 1;
        }
    }
}

void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

namespace {

// Bytes GPT-2 keeps as themselves: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF.
constexpr bool gpt2_keeps(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Gpt2Map {
    std::array<uint32_t, 256> to_cp{};
    Gpt2Map() {
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) to_cp[b] = gpt2_keeps(b) ? static_cast<uint32_t>(b) : next++;
    }
};

const Gpt2Map& gpt2_map() {
    static const Gpt2Map m;
    return m;
}

}  // namespace

uint32_t byte_to_gpt2_cp(uint8_t byte) {
    return gpt2_map().to_cp[byte];
}

int gpt2_cp_to_byte(uint32_t cp) {
    if (cp < 256) return gpt2_keeps(static_cast<int>(cp)) ? static_cast<int>(cp) : -1;
    // The 68 remapped bytes take U+0100.. in increasing byte order.
    if (cp >= 256 + 68) return -1;
    const auto& m = gpt2_map();
    for (int b = 0; b < 256; ++b)
        if (m.to_cp[b] == cp) return b;
    return -1;
}

namespace {

// Number of bytes of the well-formed sequence starting with `lead` and the valid range of the
// second byte (Unicode Table 3-7). Returns 0 for bytes that cannot start a sequence.
int seq_info(uint8_t lead, uint8_t* lo, uint8_t* hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead == 0xE0) {
        *lo = 0xA0;
        return 3;
    }
    if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return 3;
    if (lead == 0xED) {
        *hi = 0x9F;
        return 3;
    }
    if (lead == 0xF0) {
        *lo = 0x90;
        return 4;
    }
    if (lead >= 0xF1 && lead <= 0xF3) return 4;
    if (lead == 0xF4) {
        *hi = 0x8F;
        return 4;
    }
    return 0;
}

// How many bytes at the start of s form a valid (possibly incomplete) prefix of a well-formed
// sequence; sets *len to the full sequence length (0 if the lead is invalid).
size_t valid_run(std::string_view s, int* len) {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    uint8_t lo, hi;
    *len = seq_info(p[0], &lo, &hi);
    if (*len == 0) return 0;
    size_t k = 1;
    while (k < static_cast<size_t>(*len) && k < s.size()) {
        const uint8_t c = p[k];
        const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (c < l || c > h) break;
        ++k;
    }
    return k;
}

}  // namespace

size_t utf8_valid_prefix(std::string_view s, bool* stuck) {
    size_t i = 0;
    *stuck = false;
    while (i < s.size()) {
        int len = 0;
        const size_t k = valid_run(s.substr(i), &len);
        if (len > 0 && k == static_cast<size_t>(len)) {
            i += k;
            continue;
        }
        // Incomplete only if the run reached the end of the buffer.
        *stuck = !(len > 0 && i + k == s.size());
        break;
    }
    return i;
}

size_t utf8_maximal_subpart(std::string_view s) {
    int len = 0;
    const size_t k = valid_run(s, &len);
    return k == 0 ? 1 : k;
}

}  // namespace zinc::tokenizer
