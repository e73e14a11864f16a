// zinc/chat/unicode.cpp — UTF-8 decoding and the Python str operations of unicode.h.
#include "chat/unicode.h"

#include <algorithm>

namespace zinc::chat::text {

std::u32string decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    size_t i = 0;
    const size_t n = s.size();
    while (i < n) {
        const auto b0 = static_cast<unsigned char>(s[i]);
        if (b0 < 0x80) {
            out.push_back(b0);
            i++;
            continue;
        }
        int len = 0;
        char32_t cp = 0;
        if (b0 >= 0xC2 && b0 <= 0xDF) { len = 2; cp = b0 & 0x1F; }
        else if (b0 >= 0xE0 && b0 <= 0xEF) { len = 3; cp = b0 & 0x0F; }
        else if (b0 >= 0xF0 && b0 <= 0xF4) { len = 4; cp = b0 & 0x07; }
        bool ok = len > 0 && i + len <= n;
        for (int k = 1; ok && k < len; k++) {
            const auto b = static_cast<unsigned char>(s[i + k]);
            if ((b & 0xC0) != 0x80) ok = false;
            cp = (cp << 6) | (b & 0x3F);
        }
        if (ok) {
            // Reject overlong forms, surrogates and values past U+10FFFF.
            if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                (cp >= 0xD800 && cp <= 0xDFFF))
                ok = false;
        }
        if (!ok) {
            out.push_back(0xDC00 + b0);  // surrogateescape: keeps the raw byte
            i++;
            continue;
        }
        out.push_back(cp);
        i += len;
    }
    return out;
}

void append_utf8(std::string& out, char32_t c) {
    if (c >= 0xDC80 && c <= 0xDCFF) {  // an escaped raw byte
        out.push_back(static_cast<char>(c - 0xDC00));
    } else if (c < 0x80) {
        out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        if (c >= 0xD800 && c <= 0xDFFF) c = 0xFFFD;  // lone surrogates cannot be encoded
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c <= 0x10FFFF) {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
        append_utf8(out, 0xFFFD);
    }
}

std::string encode(std::u32string_view cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t c : cps) append_utf8(out, c);
    return out;
}

size_t length(std::string_view s) {
    bool ascii = true;
    for (char c : s) {
        if (static_cast<unsigned char>(c) >= 0x80) { ascii = false; break; }
    }
    return ascii ? s.size() : decode(s).size();
}

bool is_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
    if (c == ' ') return true;
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x7F) return true;
    if (c <= 0xA0 || c == 0xAD) return false;
    if (is_space(c)) return false;
    if ((c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
        (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) ||
        (c >= 0x0600 && c <= 0x0605) || c == 0x061C || c == 0x06DD || c == 0x070F ||
        c == 0x180E || c == 0x110BD || (c >= 0x1BCA0 && c <= 0x1BCA3) ||
        (c >= 0x1D173 && c <= 0x1D17A) || c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F))
        return false;  // format characters (Cf)
    if ((c >= 0xD800 && c <= 0xF8FF) || c >= 0xF0000) return false;  // surrogates, private use
    if ((c & 0xFFFE) == 0xFFFE || (c >= 0xFDD0 && c <= 0xFDEF)) return false;  // noncharacters
    return true;
}

namespace {

// Simple one-to-one case pairs: returns the other case, or 0 when the code point has none.
// `upper` selects the direction (true: lower -> upper).
char32_t map_case(char32_t c, bool to_upper) {
    if (c < 0x80) {
        if (to_upper && c >= 'a' && c <= 'z') return c - 32;
        if (!to_upper && c >= 'A' && c <= 'Z') return c + 32;
        return 0;
    }
    if (c == 0xB5) return to_upper ? 0x39C : 0;  // micro sign -> capital mu
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return to_upper ? 0 : c + 32;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return to_upper ? c - 32 : 0;
    if (c == 0xFF) return to_upper ? 0x178 : 0;
    if (c == 0x178) return to_upper ? 0 : 0xFF;
    if (c == 0x131) return to_upper ? 'I' : 0;
    if (c == 0x17F) return to_upper ? 'S' : 0;
    // Latin Extended-A: pairs (even upper, odd lower) except 0x139..0x148 and 0x179..0x17E
    // where the upper case is odd.
    if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) {
        if (c == 0x130) return to_upper ? 0 : 'i';
        const bool is_up = (c % 2) == 0;
        if (to_upper) return is_up ? 0 : c - 1;
        return is_up ? c + 1 : 0;
    }
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) {
        const bool is_up = (c % 2) == 1;
        if (to_upper) return is_up ? 0 : c - 1;
        return is_up ? c + 1 : 0;
    }
    // Latin Extended-B: the digraph triplets (upper, title, lower) and the regular pair runs.
    for (char32_t base : {char32_t{0x1C4}, char32_t{0x1C7}, char32_t{0x1CA}, char32_t{0x1F1}}) {
        if (c >= base && c <= base + 2) {
            if (to_upper) return c == base ? 0 : base;
            return c == base + 2 ? 0 : base + 2;
        }
    }
    if (c >= 0x1CD && c <= 0x1DC) {
        const bool is_up = (c % 2) == 1;
        if (to_upper) return is_up ? 0 : c - 1;
        return is_up ? c + 1 : 0;
    }
    if ((c >= 0x1DE && c <= 0x1EF) || (c >= 0x1F8 && c <= 0x21F) || (c >= 0x222 && c <= 0x233) ||
        (c >= 0x246 && c <= 0x24F)) {
        const bool is_up = (c % 2) == 0;
        if (to_upper) return is_up ? 0 : c - 1;
        return is_up ? c + 1 : 0;
    }
    // Greek
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return to_upper ? 0 : c + 32;
    if (c >= 0x3B1 && c <= 0x3C9) {
        if (c == 0x3C2) return to_upper ? 0x3A3 : 0;
        return to_upper ? c - 32 : 0;
    }
    if (c == 0x386) return to_upper ? 0 : 0x3AC;
    if (c == 0x3AC) return to_upper ? 0x386 : 0;
    if (c >= 0x388 && c <= 0x38A) return to_upper ? 0 : c + 37;
    if (c >= 0x3AD && c <= 0x3AF) return to_upper ? c - 37 : 0;
    if (c == 0x38C) return to_upper ? 0 : 0x3CC;
    if (c == 0x3CC) return to_upper ? 0x38C : 0;
    if (c == 0x38E || c == 0x38F) return to_upper ? 0 : c + 63;
    if (c == 0x3CD || c == 0x3CE) return to_upper ? c - 63 : 0;
    if (c == 0x3AA || c == 0x3AB) return to_upper ? 0 : c + 32;
    if (c == 0x3CA || c == 0x3CB) return to_upper ? c - 32 : 0;
    // Cyrillic
    if (c >= 0x410 && c <= 0x42F) return to_upper ? 0 : c + 32;
    if (c >= 0x430 && c <= 0x44F) return to_upper ? c - 32 : 0;
    if (c >= 0x400 && c <= 0x40F) return to_upper ? 0 : c + 80;
    if (c >= 0x450 && c <= 0x45F) return to_upper ? c - 80 : 0;
    if ((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) ||
        (c >= 0x4D0 && c <= 0x52F)) {
        const bool is_up = (c % 2) == 0;
        if (to_upper) return is_up ? 0 : c - 1;
        return is_up ? c + 1 : 0;
    }
    // Armenian
    if (c >= 0x531 && c <= 0x556) return to_upper ? 0 : c + 48;
    if (c >= 0x561 && c <= 0x586) return to_upper ? c - 48 : 0;
    // Latin Extended Additional (Vietnamese etc.): pairs, even upper.
    if (c >= 0x1E00 && c <= 0x1EFF && !(c >= 0x1E96 && c <= 0x1E9F)) {
        const bool is_up = (c % 2) == 0;
        if (to_upper) return is_up ? 0 : c - 1;
        return is_up ? c + 1 : 0;
    }
    // Fullwidth Latin
    if (c >= 0xFF21 && c <= 0xFF3A) return to_upper ? 0 : c + 32;
    if (c >= 0xFF41 && c <= 0xFF5A) return to_upper ? c - 32 : 0;
    return 0;
}

// Full (possibly multi-code-point) upper-case mappings CPython applies.
bool special_upper(char32_t c, std::u32string& out) {
    switch (c) {
        case 0xDF: out += U"SS"; return true;
        case 0x149: out += U"\u02BCN"; return true;
        case 0x1F0: out += U"J\u030C"; return true;
        case 0xFB00: out += U"FF"; return true;
        case 0xFB01: out += U"FI"; return true;
        case 0xFB02: out += U"FL"; return true;
        case 0xFB03: out += U"FFI"; return true;
        case 0xFB04: out += U"FFL"; return true;
        case 0xFB05: case 0xFB06: out += U"ST"; return true;
        default: return false;
    }
}

bool is_case_ignorable(char32_t c) {
    return c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xB7 ||
           c == 0x2019 || c == 0xAD || (c >= 0x300 && c <= 0x36F);
}

}  // namespace

bool is_upper_cp(char32_t c) { return map_case(c, false) != 0 || c == 0x130; }
bool is_lower_cp(char32_t c) {
    return map_case(c, true) != 0 || c == 0xDF || c == 0x149 || c == 0x1F0 ||
           (c >= 0xFB00 && c <= 0xFB06) || c == 0x138;
}
bool is_cased_letter(char32_t c) { return is_upper_cp(c) || is_lower_cp(c); }

bool is_alpha_cp(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (is_cased_letter(c) || c == 0xAA || c == 0xBA) return true;
    return (c >= 0x3040 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7A3) ||
           (c >= 0x05D0 && c <= 0x05EA) || (c >= 0x0621 && c <= 0x064A) ||
           (c >= 0x0E01 && c <= 0x0E30) || (c >= 0x0905 && c <= 0x0939);
}

bool is_digit_cp(char32_t c) {
    return (c >= '0' && c <= '9') || (c >= 0xFF10 && c <= 0xFF19);
}

std::string upper(std::string_view s) {
    std::u32string in = decode(s), out;
    out.reserve(in.size());
    for (char32_t c : in) {
        if (special_upper(c, out)) continue;
        const char32_t m = map_case(c, true);
        out.push_back(m ? m : c);
    }
    return encode(out);
}

namespace {

// Title case of one code point (the first letter of a word).
void append_title(std::u32string& out, char32_t c) {
    switch (c) {
        case 0xDF: out += U"Ss"; return;
        case 0x149: out += U"\u02BCN"; return;
        case 0x1F0: out += U"J\u030C"; return;
        case 0xFB00: out += U"Ff"; return;
        case 0xFB01: out += U"Fi"; return;
        case 0xFB02: out += U"Fl"; return;
        case 0xFB03: out += U"Ffi"; return;
        case 0xFB04: out += U"Ffl"; return;
        case 0xFB05: case 0xFB06: out += U"St"; return;
        default: break;
    }
    for (char32_t base : {char32_t{0x1C4}, char32_t{0x1C7}, char32_t{0x1CA}, char32_t{0x1F1}}) {
        if (c >= base && c <= base + 2) {
            out.push_back(base + 1);  // the title-case digraph (Dž, Lj, Nj, Dz)
            return;
        }
    }
    const char32_t m = map_case(c, true);
    out.push_back(m ? m : c);
}

// Lower-case of in[i] with CPython's final-sigma rule: capital sigma becomes "ς" when a cased
// letter precedes it and none follows (skipping case-ignorable characters on both sides).
char32_t lower_at(const std::u32string& in, size_t i) {
    const char32_t c = in[i];
    if (c == 0x3A3) {
        size_t j = i;
        bool before = false;
        while (j > 0) {
            j--;
            if (is_case_ignorable(in[j])) continue;
            before = is_cased_letter(in[j]);
            break;
        }
        bool after = false;
        for (size_t k = i + 1; k < in.size(); k++) {
            if (is_case_ignorable(in[k])) continue;
            after = is_cased_letter(in[k]);
            break;
        }
        return before && !after ? 0x3C2 : 0x3C3;
    }
    const char32_t m = map_case(c, false);
    return m ? m : c;
}

}  // namespace

std::string lower(std::string_view s) {
    std::u32string in = decode(s), out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); i++) {
        if (in[i] == 0x130) {
            out += U"i\u0307";
            continue;
        }
        out.push_back(lower_at(in, i));
    }
    return encode(out);
}

std::string title(std::string_view s) {
    // CPython: a cased character following an uncased one is title-cased, others lower-cased.
    std::u32string in = decode(s), out;
    out.reserve(in.size());
    bool prev_cased = false;
    for (size_t i = 0; i < in.size(); i++) {
        const char32_t c = in[i];
        if (!prev_cased) {
            append_title(out, c);
        } else {
            out.push_back(lower_at(in, i));
        }
        prev_cased = is_cased_letter(c);
    }
    return encode(out);
}

std::string capitalize(std::string_view s) {
    std::u32string in = decode(s);
    if (in.empty()) return {};
    std::u32string first;
    append_title(first, in[0]);
    return encode(first) + lower(encode(std::u32string_view(in).substr(1)));
}

std::vector<size_t> cp_offsets(std::string_view s) {
    std::vector<size_t> out;
    out.reserve(s.size() + 1);
    size_t at = 0;
    for (char32_t c : decode(s)) {
        out.push_back(at);
        if (c < 0x80 || (c >= 0xDC80 && c <= 0xDCFF))
            at += 1;
        else if (c < 0x800)
            at += 2;
        else if (c < 0x10000)
            at += 3;
        else
            at += 4;
    }
    out.push_back(at);
    return out;
}

Span strip_range(std::string_view s, const std::string* chars, bool left, bool right) {
    std::u32string in = decode(s);
    const std::vector<size_t> off = cp_offsets(s);
    std::u32string set;
    if (chars) set = decode(*chars);
    auto strippable = [&](char32_t c) {
        return chars ? set.find(c) != std::u32string::npos : is_space(c);
    };
    size_t b = 0, e = in.size();
    if (left)
        while (b < e && strippable(in[b])) b++;
    if (right)
        while (e > b && strippable(in[e - 1])) e--;
    return {off[b], off[e]};
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
    const Span r = strip_range(s, chars, left, right);
    return std::string(s.substr(r.begin, r.end - r.begin));
}

std::vector<Span> split_ranges(std::string_view s, const std::string* sep, long maxsplit) {
    std::vector<Span> out;
    if (sep) {
        if (sep->empty()) return out;  // caller reports "empty separator"
        size_t pos = 0;
        while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
            const size_t hit = s.find(*sep, pos);
            if (hit == std::string_view::npos) break;
            out.push_back({pos, hit});
            pos = hit + sep->size();
        }
        out.push_back({pos, s.size()});
        return out;
    }
    std::u32string in = decode(s);
    const std::vector<size_t> off = cp_offsets(s);
    size_t i = 0;
    const size_t n = in.size();
    while (true) {
        while (i < n && is_space(in[i])) i++;
        if (i >= n) break;
        if (maxsplit >= 0 && static_cast<long>(out.size()) >= maxsplit) {
            out.push_back({off[i], off[n]});  // remainder kept as is
            break;
        }
        size_t j = i;
        while (j < n && !is_space(in[j])) j++;
        out.push_back({off[i], off[j]});
        i = j;
    }
    return out;
}

std::vector<Span> rsplit_ranges(std::string_view s, const std::string* sep, long maxsplit) {
    if (maxsplit < 0) return split_ranges(s, sep, maxsplit);
    std::vector<Span> out;
    if (sep) {
        if (sep->empty()) return out;
        size_t end = s.size();
        while (static_cast<long>(out.size()) < maxsplit) {
            if (end < sep->size()) break;
            const size_t hit = s.rfind(*sep, end - sep->size());
            if (hit == std::string_view::npos) break;
            out.push_back({hit + sep->size(), end});
            end = hit;
        }
        out.push_back({0, end});
        std::reverse(out.begin(), out.end());
        return out;
    }
    std::u32string in = decode(s);
    const std::vector<size_t> off = cp_offsets(s);
    size_t e = in.size();
    while (true) {
        while (e > 0 && is_space(in[e - 1])) e--;
        if (e == 0) break;
        if (static_cast<long>(out.size()) >= maxsplit) {
            out.push_back({0, off[e]});  // remainder kept as is
            break;
        }
        size_t b = e;
        while (b > 0 && !is_space(in[b - 1])) b--;
        out.push_back({off[b], off[e]});
        e = b;
    }
    std::reverse(out.begin(), out.end());
    return out;
}

namespace {
std::vector<std::string> parts_of(std::string_view s, const std::vector<Span>& ranges) {
    std::vector<std::string> out;
    out.reserve(ranges.size());
    for (const Span& r : ranges) out.emplace_back(s.substr(r.begin, r.end - r.begin));
    return out;
}
}  // namespace

std::vector<std::string> split(std::string_view s, const std::string* sep, long maxsplit) {
    return parts_of(s, split_ranges(s, sep, maxsplit));
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, long maxsplit) {
    return parts_of(s, rsplit_ranges(s, sep, maxsplit));
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, long count) {
    std::string out;
    if (old.empty()) {
        // Python inserts `repl` between every code point (and at both ends), up to count.
        std::u32string in = decode(s);
        long done = 0;
        for (size_t i = 0; i <= in.size(); i++) {
            if (count < 0 || done < count) { out += repl; done++; }
            if (i < in.size()) append_utf8(out, in[i]);
        }
        return out;
    }
    size_t pos = 0;
    long done = 0;
    while (count < 0 || done < count) {
        const size_t hit = s.find(old, pos);
        if (hit == std::string_view::npos) break;
        out.append(s.substr(pos, hit - pos));
        out.append(repl);
        pos = hit + old.size();
        done++;
    }
    out.append(s.substr(pos));
    return out;
}

std::vector<Span> splitlines_ranges(std::string_view s) {
    std::u32string in = decode(s);
    const std::vector<size_t> off = cp_offsets(s);
    std::vector<Span> out;
    size_t start = 0, i = 0;
    while (i < in.size()) {
        const char32_t c = in[i];
        const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
                         c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!brk) {
            i++;
            continue;
        }
        out.push_back({off[start], off[i]});
        if (c == '\r' && i + 1 < in.size() && in[i + 1] == '\n') i++;
        i++;
        start = i;
    }
    if (start < in.size()) out.push_back({off[start], off[in.size()]});
    return out;
}

std::vector<std::string> splitlines(std::string_view s) {
    return parts_of(s, splitlines_ranges(s));
}

}  // namespace zinc::chat::text
