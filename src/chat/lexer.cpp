// zinc/chat/lexer.cpp — jinja2-compatible tokenizer (see lexer.h for the rules it follows).
#include "chat/lexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "chat/unicode.h"

namespace zinc::chat {

namespace {

// Byte length of the whitespace code point at `p` (Python's \s), or 0.
size_t ws_len(std::string_view s, size_t p) {
    if (p >= s.size()) return 0;
    const auto c = static_cast<unsigned char>(s[p]);
    if (c < 0x80) return text::is_space(c) ? 1 : 0;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (p + len > s.size()) return 0;
    const std::u32string cp = text::decode(s.substr(p, len));
    return (cp.size() == 1 && text::is_space(cp[0])) ? len : 0;
}

size_t skip_ws(std::string_view s, size_t p) {
    while (size_t n = ws_len(s, p)) p += n;
    return p;
}

bool is_name_start(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

class Lexer {
public:
    explicit Lexer(std::string_view src) : src_(src) {
        line_starts_.push_back(0);
        for (size_t i = 0; i < src_.size(); i++) {
            if (src_[i] == '\n') line_starts_.push_back(i + 1);
        }
    }

    std::vector<Token> run() {
        size_t pos = 0;
        bool line_starting = true;
        while (pos < src_.size()) {
            // The next tag start: "{{", "{%" or "{#".
            size_t k = pos;
            while (true) {
                k = src_.find('{', k);
                if (k == std::string_view::npos || k + 1 >= src_.size()) {
                    k = std::string_view::npos;
                    break;
                }
                const char c = src_[k + 1];
                if (c == '{' || c == '%' || c == '#') break;
                k++;
            }
            if (k == std::string_view::npos) {
                push_data(src_.substr(pos), pos);
                break;
            }
            const char kind = src_[k + 1];
            size_t p = k + 2;
            char sign = 0;
            if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
            std::string_view before = src_.substr(pos, k - pos);
            size_t raw_body = 0;
            const bool raw = kind == '%' && match_raw_begin(p, raw_body);
            before = apply_lstrip(before, sign, kind != '{', line_starting);
            push_data(before, pos);
            if (raw) {
                pos = lex_raw(raw_body, line_starting);
                continue;
            }
            if (kind == '#') {
                pos = lex_comment(k, p, line_starting);
                continue;
            }
            pos = lex_tag(k, p, kind == '{', line_starting);
        }
        Token eof;
        eof.type = TokType::Eof;
        eof.pos = pos_at(src_.size());
        toks_.push_back(eof);
        return std::move(toks_);
    }

private:
    SourcePos pos_at(size_t off) const {
        auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
        const size_t line_idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
        int col = 1;
        for (size_t i = line_starts_[line_idx]; i < off && i < src_.size(); i++) {
            if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) col++;
        }
        return SourcePos{static_cast<int>(line_idx) + 1, col};
    }

    void push(TokType t, std::string value, size_t off) {
        Token tok;
        tok.type = t;
        tok.value = std::move(value);
        tok.pos = pos_at(off);
        toks_.push_back(std::move(tok));
    }

    void push_data(std::string_view d, size_t off) {
        if (!d.empty()) push(TokType::Data, std::string(d), off);
    }

    // jinja2's OptionalLStrip: "-" strips all trailing whitespace of the text before the tag;
    // otherwise, for block and comment tags, lstrip_blocks removes the spaces between the last
    // line start and the tag.
    std::string_view apply_lstrip(std::string_view text, char sign, bool block_like,
                                  bool line_starting) const {
        if (sign == '-') {
            size_t e = text.size();
            while (e > 0) {
                // step back one code point and test it
                size_t b = e - 1;
                while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) b--;
                if (ws_len(text, b) != e - b) break;
                e = b;
            }
            return text.substr(0, e);
        }
        if (sign == '+' || !block_like) return text;
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
            if (l_pos < text.size() && skip_ws(text, l_pos) == text.size()) {
                return text.substr(0, l_pos);
            }
        }
        return text;
    }

    // "{%" sign? \s* "raw" \s* ("-%}" \s* | "%}") starting at p (after the sign).
    bool match_raw_begin(size_t p, size_t& body) const {
        p = skip_ws(src_, p);
        if (src_.compare(p, 3, "raw") != 0) return false;
        p += 3;
        if (p < src_.size() && (is_name_start(static_cast<unsigned char>(src_[p])) ||
                                is_digit(static_cast<unsigned char>(src_[p]))))
            return false;
        p = skip_ws(src_, p);
        if (src_.compare(p, 3, "-%}") == 0) {
            body = skip_ws(src_, p + 3);
            return true;
        }
        if (src_.compare(p, 2, "%}") == 0) {
            body = p + 2;
            return true;
        }
        return false;
    }

    size_t lex_raw(size_t body, bool& line_starting) {
        // line_starting after the raw_begin match
        line_starting = body > 0 && src_[body - 1] == '\n';
        size_t k = body;
        while (true) {
            k = src_.find("{%", k);
            if (k == std::string_view::npos) fail("missing end of raw directive", pos_at(body));
            size_t p = k + 2;
            char sign = 0;
            if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
            p = skip_ws(src_, p);
            if (src_.compare(p, 6, "endraw") != 0) {
                k += 2;
                continue;
            }
            p = skip_ws(src_, p + 6);
            size_t end = 0;
            if (src_.compare(p, 3, "+%}") == 0) end = p + 3;
            else if (src_.compare(p, 3, "-%}") == 0) end = skip_ws(src_, p + 3);
            else if (src_.compare(p, 2, "%}") == 0) {
                end = p + 2;
                if (end < src_.size() && src_[end] == '\n') end++;
            } else {
                k += 2;
                continue;
            }
            push_data(apply_lstrip(src_.substr(body, k - body), sign, true, line_starting), body);
            line_starting = src_[end - 1] == '\n';
            return end;
        }
    }

    size_t lex_comment(size_t start, size_t content, bool& line_starting) {
        const size_t j = src_.find("#}", content);
        if (j == std::string_view::npos) fail("missing end of comment tag", pos_at(start));
        size_t end = j + 2;
        if (j > content && src_[j - 1] == '-') {
            end = skip_ws(src_, end);
        } else if (j > content && src_[j - 1] == '+') {
            // no trim
        } else if (end < src_.size() && src_[end] == '\n') {
            end++;  // trim_blocks
        }
        line_starting = src_[end - 1] == '\n';
        return end;
    }

    size_t lex_tag(size_t start, size_t p, bool variable, bool& line_starting) {
        push(variable ? TokType::VarBegin : TokType::BlockBegin, {}, start);
        std::vector<char> balance;
        while (true) {
            if (p >= src_.size()) {
                fail(std::string("unexpected end of template, missing '") +
                         (variable ? "}}" : "%}") + "'",
                     pos_at(start));
            }
            if (balance.empty()) {
                size_t end = 0;
                if (variable) {
                    if (src_.compare(p, 3, "-}}") == 0) end = skip_ws(src_, p + 3);
                    else if (src_.compare(p, 2, "}}") == 0) end = p + 2;
                } else {
                    if (src_.compare(p, 3, "+%}") == 0) end = p + 3;
                    else if (src_.compare(p, 3, "-%}") == 0) end = skip_ws(src_, p + 3);
                    else if (src_.compare(p, 2, "%}") == 0) {
                        end = p + 2;
                        if (end < src_.size() && src_[end] == '\n') end++;  // trim_blocks
                    }
                }
                if (end) {
                    push(variable ? TokType::VarEnd : TokType::BlockEnd, {}, p);
                    line_starting = src_[end - 1] == '\n';
                    return end;
                }
            }
            if (size_t n = ws_len(src_, p)) {
                p = skip_ws(src_, p + n);
                continue;
            }
            p = lex_one(p, balance);
        }
    }

    // One token inside a tag: float, integer, name, string or operator (jinja2's rule order).
    size_t lex_one(size_t p, std::vector<char>& balance) {
        const auto c = static_cast<unsigned char>(src_[p]);
        if (is_digit(c)) {
            if (size_t e = match_float(p)) return e;
            return lex_integer(p);
        }
        if (is_name_start(c) || c >= 0x80) {
            size_t e = p;
            while (e < src_.size()) {
                const auto b = static_cast<unsigned char>(src_[e]);
                if (is_name_start(b) || is_digit(b)) { e++; continue; }
                if (b >= 0x80) {
                    size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
                    len = std::min(len, src_.size() - e);
                    const std::u32string cp = text::decode(src_.substr(e, len));
                    if (cp.size() == 1 && text::is_alpha_cp(cp[0])) { e += len; continue; }
                }
                break;
            }
            if (e == p) fail("unexpected char " + py_char_repr(p), pos_at(p));
            push(TokType::Name, std::string(src_.substr(p, e - p)), p);
            return e;
        }
        if (c == '\'' || c == '"') return lex_string(p);
        static const char* const ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                          "*", "%", "~", "[", "]", "(", ")", "{", "}", ">",
                                          "<", "=", ".", ":", "|", ",", ";"};
        for (const char* op : ops) {
            const size_t n = std::char_traits<char>::length(op);
            if (src_.compare(p, n, op) != 0) continue;
            if (n == 1) {
                const char o = op[0];
                if (o == '{') balance.push_back('}');
                else if (o == '(') balance.push_back(')');
                else if (o == '[') balance.push_back(']');
                else if (o == '}' || o == ')' || o == ']') {
                    if (balance.empty()) fail(std::string("unexpected '") + o + "'", pos_at(p));
                    const char want = balance.back();
                    balance.pop_back();
                    if (want != o) {
                        fail(std::string("unexpected '") + o + "', expected '" + want + "'",
                             pos_at(p));
                    }
                }
            }
            push(TokType::Operator, op, p);
            return p + n;
        }
        fail("unexpected char " + py_char_repr(p), pos_at(p));
    }

    std::string py_char_repr(size_t p) const {
        const auto b = static_cast<unsigned char>(src_[p]);
        size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
        len = std::min(len, src_.size() - p);
        return "'" + std::string(src_.substr(p, len)) + "'";
    }

    // (\d+_)*\d+ ( (\.(\d+_)*\d+)? e[+-]?(\d+_)*\d+ | \.(\d+_)*\d+ ), not preceded by '.'.
    size_t digits_us(size_t p) const {  // (\d+_)*\d+ ; returns end or 0
        size_t e = p;
        if (e >= src_.size() || !is_digit(static_cast<unsigned char>(src_[e]))) return 0;
        while (true) {
            while (e < src_.size() && is_digit(static_cast<unsigned char>(src_[e]))) e++;
            if (e + 1 < src_.size() && src_[e] == '_' &&
                is_digit(static_cast<unsigned char>(src_[e + 1]))) {
                e++;
                continue;
            }
            return e;
        }
    }

    size_t match_float(size_t p) {
        if (p > 0 && src_[p - 1] == '.') return 0;
        size_t e = digits_us(p);
        if (!e) return 0;
        size_t frac_end = 0;
        if (e < src_.size() && src_[e] == '.') frac_end = digits_us(e + 1);
        size_t after = frac_end ? frac_end : e;
        size_t exp_end = 0;
        if (after < src_.size() && (src_[after] == 'e' || src_[after] == 'E')) {
            size_t q = after + 1;
            if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) q++;
            exp_end = digits_us(q);
        }
        size_t end = exp_end ? exp_end : frac_end;
        if (!end) return 0;
        std::string num;
        for (size_t i = p; i < end; i++) {
            if (src_[i] != '_') num.push_back(src_[i]);
        }
        double v = 0;
        auto res = std::from_chars(num.data(), num.data() + num.size(), v);
        if (res.ec == std::errc::result_out_of_range) {
            // Overflow gives inf in Python; underflow gives 0.0.
            const size_t epos = num.find_first_of("eE");
            v = (epos != std::string::npos && num[epos + 1] == '-') ? 0.0 : HUGE_VAL;
        }
        Token tok;
        tok.type = TokType::Float;
        tok.fval = v;
        tok.value = std::string(src_.substr(p, end - p));
        tok.pos = pos_at(p);
        toks_.push_back(std::move(tok));
        return end;
    }

    size_t lex_integer(size_t p) {
        int base = 10;
        size_t e = p;
        std::string digits;
        auto is_base_digit = [&](char ch) {
            const auto u = static_cast<unsigned char>(ch);
            if (base == 2) return ch == '0' || ch == '1';
            if (base == 8) return ch >= '0' && ch <= '7';
            if (base == 16) return is_digit(u) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
            return is_digit(u);
        };
        if (src_[p] == '0' && p + 1 < src_.size() &&
            std::string_view("bBoOxX").find(src_[p + 1]) != std::string_view::npos) {
            const char b = static_cast<char>(src_[p + 1] | 0x20);
            base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
            size_t q = p + 2;
            // (_?digit)+
            while (true) {
                size_t r = q;
                if (r < src_.size() && src_[r] == '_') r++;
                if (r < src_.size() && is_base_digit(src_[r])) {
                    digits.push_back(src_[r]);
                    q = r + 1;
                } else {
                    break;
                }
            }
            if (!digits.empty()) e = q;
            else base = 10;
        }
        if (base == 10) {
            // [1-9](_?\d)* | 0(_?0)*
            const char first = src_[p];
            digits.assign(1, first);
            size_t q = p + 1;
            while (true) {
                size_t r = q;
                if (r < src_.size() && src_[r] == '_') r++;
                if (r < src_.size() && is_digit(static_cast<unsigned char>(src_[r])) &&
                    (first != '0' || src_[r] == '0')) {
                    digits.push_back(src_[r]);
                    q = r + 1;
                } else {
                    break;
                }
            }
            e = q;
        }
        uint64_t v = 0;
        auto res = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
        if (res.ec != std::errc() || v > static_cast<uint64_t>(INT64_MAX)) {
            fail("integer literal too large (zinc supports 64-bit integers)", pos_at(p));
        }
        Token tok;
        tok.type = TokType::Integer;
        tok.ival = static_cast<int64_t>(v);
        tok.value = std::string(src_.substr(p, e - p));
        tok.pos = pos_at(p);
        toks_.push_back(std::move(tok));
        return e;
    }

    size_t lex_string(size_t p) {
        const char q = src_[p];
        size_t e = p + 1;
        while (true) {
            if (e >= src_.size()) fail("unterminated string literal", pos_at(p));
            if (src_[e] == '\\') {
                if (e + 1 >= src_.size()) fail("unterminated string literal", pos_at(p));
                e += 2;
                continue;
            }
            if (src_[e] == q) break;
            e++;
        }
        Token tok;
        tok.type = TokType::String;
        tok.pos = pos_at(p);
        tok.value = unescape(src_.substr(p + 1, e - p - 1), tok.pos);
        toks_.push_back(std::move(tok));
        return e + 1;
    }

    // Python's "unicode-escape" decoding as jinja2 applies it to string literals.
    static std::string unescape(std::string_view s, SourcePos pos) {
        if (s.find('\\') == std::string_view::npos) return std::string(s);
        std::string out;
        size_t i = 0;
        auto hex = [&](size_t start, size_t n, const char* what) -> char32_t {
            if (start + n > s.size()) fail(std::string("truncated ") + what + " escape", pos);
            uint32_t v = 0;
            for (size_t k = 0; k < n; k++) {
                const char c = s[start + k];
                int d = -1;
                if (c >= '0' && c <= '9') d = c - '0';
                else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
                else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
                if (d < 0) fail(std::string("truncated ") + what + " escape", pos);
                v = v * 16 + static_cast<uint32_t>(d);
            }
            if (v > 0x10FFFF) fail("illegal Unicode character", pos);
            return v;
        };
        while (i < s.size()) {
            const char c = s[i];
            if (c != '\\' || i + 1 >= s.size()) {
                out.push_back(c);
                i++;
                continue;
            }
            const char n = s[i + 1];
            i += 2;
            switch (n) {
                case '\n': break;
                case '\\': out.push_back('\\'); break;
                case '\'': out.push_back('\''); break;
                case '"': out.push_back('"'); break;
                case 'a': out.push_back('\a'); break;
                case 'b': out.push_back('\b'); break;
                case 'f': out.push_back('\f'); break;
                case 'n': out.push_back('\n'); break;
                case 'r': out.push_back('\r'); break;
                case 't': out.push_back('\t'); break;
                case 'v': out.push_back('\v'); break;
                case 'x': text::append_utf8(out, hex(i, 2, "\\xXX")); i += 2; break;
                case 'u': text::append_utf8(out, hex(i, 4, "\\uXXXX")); i += 4; break;
                case 'U': text::append_utf8(out, hex(i, 8, "\\UXXXXXXXX")); i += 8; break;
                case 'N': fail("\\N{...} escapes are not supported", pos);
                default:
                    if (n >= '0' && n <= '7') {
                        uint32_t v = static_cast<uint32_t>(n - '0');
                        for (int k = 0; k < 2 && i < s.size() && s[i] >= '0' && s[i] <= '7'; k++) {
                            v = v * 8 + static_cast<uint32_t>(s[i++] - '0');
                        }
                        text::append_utf8(out, v);
                    } else if (static_cast<unsigned char>(n) >= 0x80) {
                        // jinja2 backslash-escapes non-ASCII text before decoding, so "\é"
                        // decodes to a backslash followed by the text "xe9".
                        const size_t start = i - 1;
                        size_t len = 1;
                        while (start + len < s.size() &&
                               (static_cast<unsigned char>(s[start + len]) & 0xC0) == 0x80)
                            len++;
                        const std::u32string cp = text::decode(s.substr(start, len));
                        char buf[16];
                        const auto u = static_cast<unsigned>(cp.empty() ? 0 : cp[0]);
                        if (u < 0x100) std::snprintf(buf, sizeof(buf), "\\x%02x", u);
                        else if (u < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", u);
                        else std::snprintf(buf, sizeof(buf), "\\U%08x", u);
                        out += buf;
                        i = start + len;
                    } else {
                        out.push_back('\\');
                        out.push_back(n);
                    }
            }
        }
        return out;
    }

    std::string_view src_;
    std::vector<size_t> line_starts_;
    std::vector<Token> toks_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
    // Normalize newlines and drop one trailing newline (keep_trailing_newline=False).
    std::string norm;
    norm.reserve(source.size());
    for (size_t i = 0; i < source.size(); i++) {
        if (source[i] == '\r') {
            norm.push_back('\n');
            if (i + 1 < source.size() && source[i + 1] == '\n') i++;
        } else {
            norm.push_back(source[i]);
        }
    }
    if (!norm.empty() && norm.back() == '\n') norm.pop_back();
    Lexer lx(norm);
    return lx.run();
}

std::string describe_token(const Token& t) {
    switch (t.type) {
        case TokType::Data: return "template data";
        case TokType::VarBegin: return "begin of print statement";
        case TokType::VarEnd: return "end of print statement";
        case TokType::BlockBegin: return "begin of statement block";
        case TokType::BlockEnd: return "end of statement block";
        case TokType::Name: return "'" + t.value + "'";
        case TokType::String: return "string";
        case TokType::Integer: return "integer";
        case TokType::Float: return "float";
        case TokType::Operator: return "'" + t.value + "'";
        case TokType::Eof: return "end of template";
    }
    return "token";
}

}  // namespace zinc::chat
