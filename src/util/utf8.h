// zinc/util/utf8.h — UTF-8 validation, and escaping untrusted text (a file's metadata, a model's
// vocabulary) for a terminal: such text may hold invalid bytes or control sequences (ESC [ ...)
// that a terminal would act on, so it is never written raw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zinc::utf8 {

/// Length (1..4) of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
/// surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one. Sets *cp.
inline size_t sequence_at(std::string_view s, size_t i, char32_t* cp = nullptr) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    char32_t c = 0;
    if (b0 < 0x80) {
        len = 1;
        c = b0;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
        c = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        c = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        c = b0 & 0x07;
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) return 0;
        c = (c << 6) | (b & 0x3F);
    }
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
        (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    if (cp) *cp = c;
    return len;
}

/// Byte offset of the first byte that does not start a well-formed sequence, or npos.
inline size_t first_invalid(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const size_t n = sequence_at(s, i);
        if (n == 0) return i;
        i += n;
    }
    return std::string_view::npos;
}

/// A C0 or C1 control character or DEL (what a terminal may act on).
inline bool is_control(char32_t c) {
    return c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0);
}

/// `s` made safe to print: well-formed printable characters as they are; \n \r \t \" \\ as
/// those escapes; other control characters as \u00XX; invalid bytes as \xXX. At most
/// `max_chars` characters of `s` are kept (npos: all); `*cut` says whether some were not.
inline std::string escape_for_terminal(std::string_view s, size_t max_chars = std::string::npos,
                                       bool* cut = nullptr) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    size_t n_chars = 0, i = 0;
    for (; i < s.size() && n_chars < max_chars; ++n_chars) {
        char32_t c = 0;
        const size_t len = sequence_at(s, i, &c);
        if (len == 0) {
            const auto b = static_cast<unsigned char>(s[i]);
            out += "\\x";
            out += hex[b >> 4];
            out += hex[b & 15];
            ++i;
            continue;
        }
        switch (c) {
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            default:
                if (is_control(c)) {
                    out += "\\u00";
                    out += hex[(c >> 4) & 15];
                    out += hex[c & 15];
                } else {
                    out.append(s.substr(i, len));
                }
        }
        i += len;
    }
    if (cut) *cut = i < s.size();
    return out;
}

/// `s` with only what a terminal could act on escaped: invalid bytes as \xXX, control
/// characters (newlines and tabs included) as \u00XX; quotes and backslashes are kept, so
/// messages read as written.
inline std::string escape_controls(std::string_view s) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < s.size();) {
        char32_t c = 0;
        const size_t len = sequence_at(s, i, &c);
        if (len == 0 || is_control(c)) {
            const unsigned v = len == 0 ? static_cast<unsigned char>(s[i]) : static_cast<unsigned>(c);
            out += len == 0 ? "\\x" : "\\u00";
            out += hex[(v >> 4) & 15];
            out += hex[v & 15];
            i += len == 0 ? 1 : len;
            continue;
        }
        out.append(s.substr(i, len));
        i += len;
    }
    return out;
}

}  // namespace zinc::utf8
