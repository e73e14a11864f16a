// zinc/engine/grammar.cpp — the GBNF parser (see grammar.h), a recursive descent over the text
// in the shape of llama.cpp's llama-grammar.cpp parser, with line:column errors.
#include "engine/grammar.h"

#include <functional>
#include <map>
#include <optional>

namespace zinc::engine {

uint32_t decode_utf8(std::string_view s, size_t& i) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    size_t n = 0;
    uint32_t cp = b0;
    if (b0 >= 0xC0 && b0 < 0xE0) {
        n = 1;
        cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 < 0xF0) {
        n = 2;
        cp = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 < 0xF8) {
        n = 3;
        cp = b0 & 0x07u;
    }
    if (n == 0 || i + n >= s.size()) {
        ++i;
        return b0;
    }
    for (size_t k = 1; k <= n; ++k) {
        const auto b = static_cast<uint8_t>(s[i + k]);
        if ((b & 0xC0u) != 0x80u) {
            ++i;
            return b0;
        }
        cp = (cp << 6) | (b & 0x3Fu);
    }
    i += n + 1;
    return cp;
}

namespace {

using ET = GrammarElemType;

struct ParseError {
    size_t pos;
    std::string what;
};

class Parser {
  public:
    explicit Parser(std::string_view src) : s_(src) {}

    Result<Grammar> run() {
        try {
            parse_all();
        } catch (const ParseError& e) {
            return make_error(where(e.pos) + ": " + e.what);
        }
        return finish();
    }

  private:
    std::string_view s_;
    size_t p_ = 0;
    Grammar g_;
    std::map<std::string, uint32_t, std::less<>> ids_;
    std::vector<bool> defined_;
    std::vector<size_t> first_ref_;  // (n_rules) where each rule was first referenced

    std::string where(size_t pos) const {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < pos && i < s_.size(); ++i) {
            if (s_[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        return "line " + std::to_string(line) + ", column " + std::to_string(col);
    }

    [[noreturn]] void fail(const std::string& what) const { throw ParseError{p_, what}; }
    [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
        throw ParseError{pos, what};
    }

    bool at_end() const { return p_ >= s_.size(); }
    char cur() const { return at_end() ? '\0' : s_[p_]; }

    std::string shown() const {
        if (at_end()) return "the end of the text";
        const char c = cur();
        if (c == '\n') return "a newline";
        return std::string("'") + c + "'";
    }

    static bool is_word(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
    }

    // Blanks and comments; newlines too when newline_ok.
    void skip_space(bool newline_ok) {
        while (!at_end()) {
            const char c = cur();
            if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
                ++p_;
            } else if (c == '#') {
                while (!at_end() && cur() != '\n') ++p_;
            } else {
                break;
            }
        }
    }

    // Is the next non-blank thing (across newlines and comments) a '|'? Then the rule goes on.
    bool continues_with_bar() {
        const size_t save = p_;
        skip_space(true);
        if (cur() == '|') return true;
        p_ = save;
        return false;
    }

    uint32_t rule_id(const std::string& name, size_t ref_pos) {
        auto it = ids_.find(name);
        if (it != ids_.end()) return it->second;
        const auto id = static_cast<uint32_t>(g_.rules.size());
        ids_.emplace(name, id);
        g_.rules.emplace_back();
        g_.names.push_back(name);
        defined_.push_back(false);
        first_ref_.push_back(ref_pos);
        return id;
    }

    uint32_t new_rule(const std::string& base) {
        std::string name = base + "_" + std::to_string(g_.rules.size());
        while (ids_.count(name)) name += "_";
        const uint32_t id = rule_id(name, p_);
        defined_[id] = true;
        return id;
    }

    std::string parse_name() {
        const size_t b = p_;
        while (!at_end() && is_word(cur())) ++p_;
        if (p_ == b) fail("expected a rule name, found " + shown());
        return std::string(s_.substr(b, p_ - b));
    }

    uint32_t parse_hex(int n) {
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
            const char c = cur();
            uint32_t d = 0;
            if (c >= '0' && c <= '9') {
                d = static_cast<uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                d = static_cast<uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                d = static_cast<uint32_t>(c - 'A' + 10);
            } else {
                fail("expected " + std::to_string(n) + " hex digits in an escape, found " +
                     shown());
            }
            v = v * 16 + d;
            ++p_;
        }
        if (v > 0x10FFFF)
            fail_at(p_ - static_cast<size_t>(n), "escape is not a Unicode code point");
        return v;
    }

    // One character of a literal or class, escapes decoded. `close` is the delimiter.
    uint32_t parse_char(char close) {
        if (at_end() || cur() == '\n')
            fail(std::string("unterminated ") +
                 (close == '"' ? "string literal" : "character class") + "; expected '" + close +
                 "'");
        if (cur() != '\\') {
            size_t i = p_;
            const uint32_t cp = decode_utf8(s_, i);
            p_ = i;
            return cp;
        }
        ++p_;
        const char e = cur();
        ++p_;
        switch (e) {
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case '\\':
                return '\\';
            case '"':
                return '"';
            case '[':
                return '[';
            case ']':
                return ']';
            case '-':
                return '-';
            case '^':
                return '^';
            case '/':
                return '/';
            case 'x':
                return parse_hex(2);
            case 'u':
                return parse_hex(4);
            case 'U':
                return parse_hex(8);
            default:
                p_ -= 2;  // point at the backslash
                fail("unknown escape '\\" + std::string(1, e) +
                     "'; expected one of \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH "
                     "\\UHHHHHHHH");
        }
    }

    // A sequence (one alternative) into out; nested: inside parentheses (newlines allowed).
    void parse_sequence(const std::string& rule_name, std::vector<GrammarElem>& out, bool nested) {
        size_t last_start = out.size();  // where the last element starts, for repetitions
        bool have_last = false;
        while (!at_end()) {
            const char c = cur();
            const size_t elem_pos = p_;
            if (c == '"') {
                ++p_;
                last_start = out.size();
                have_last = true;
                while (cur() != '"') out.push_back({ET::Char, parse_char('"')});
                ++p_;
                // An empty literal is an empty element: repeating it is meaningless but harmless
                // only if it stays a no-op, so it is not a repeatable element.
                if (out.size() == last_start) have_last = false;
            } else if (c == '[') {
                ++p_;
                last_start = out.size();
                have_last = true;
                ET start = ET::Char;
                if (cur() == '^') {
                    ++p_;
                    start = ET::CharNot;
                }
                bool first = true;
                while (cur() != ']') {
                    const uint32_t lo = parse_char(']');
                    out.push_back({first ? start : ET::CharAlt, lo});
                    first = false;
                    if (cur() == '-' && p_ + 1 < s_.size() && s_[p_ + 1] != ']') {
                        ++p_;
                        const size_t hp = p_;
                        const uint32_t hi = parse_char(']');
                        if (hi < lo)
                            fail_at(hp, "range end is below its start in a character class");
                        out.push_back({ET::CharRngUpper, hi});
                    }
                }
                if (first)
                    fail("empty character class; expected at least one character before ']'");
                ++p_;
            } else if (c == '.') {
                ++p_;
                last_start = out.size();
                have_last = true;
                out.push_back({ET::CharAny, 0});
            } else if (is_word(c)) {
                const std::string name = parse_name();
                skip_space(false);
                if (s_.substr(p_, 3) == "::=")
                    fail_at(elem_pos, "expected the end of rule '" + rule_name +
                                          "' (a newline) before the next rule '" + name + "'");
                last_start = out.size();
                have_last = true;
                out.push_back({ET::RuleRef, rule_id(name, elem_pos)});
                continue;  // skip_space already done
            } else if (c == '(') {
                ++p_;
                skip_space(true);
                const uint32_t sub = new_rule(rule_name);
                std::vector<GrammarElem> body;
                parse_alternates(rule_name, body, true);
                g_.rules[sub] = std::move(body);
                if (cur() != ')')
                    fail("expected ')' to close the group opened at " + where(elem_pos) +
                         ", found " + shown());
                ++p_;
                last_start = out.size();
                have_last = true;
                out.push_back({ET::RuleRef, sub});
            } else if (c == '*' || c == '+' || c == '?') {
                if (!have_last) fail(std::string("'") + c + "' has nothing to repeat before it");
                ++p_;
                const int min = c == '+' ? 1 : 0;
                const int max = c == '?' ? 1 : -1;
                repeat(rule_name, out, last_start, min, max);
                have_last = false;
            } else if (c == '{') {
                if (!have_last) fail("'{' has nothing to repeat before it");
                ++p_;
                skip_space(nested);
                auto number = [&]() -> int {
                    if (!(cur() >= '0' && cur() <= '9'))
                        fail("expected a number in a {m,n} repetition, found " + shown());
                    long v = 0;
                    while (cur() >= '0' && cur() <= '9') {
                        v = v * 10 + (cur() - '0');
                        if (v > 100000) fail("repetition count is too large (at most 100000)");
                        ++p_;
                    }
                    return static_cast<int>(v);
                };
                const int min = number();
                int max = min;
                skip_space(nested);
                if (cur() == ',') {
                    ++p_;
                    skip_space(nested);
                    max = (cur() >= '0' && cur() <= '9') ? number() : -1;
                    skip_space(nested);
                }
                if (cur() != '}')
                    fail("expected '}' to close a {m,n} repetition, found " + shown());
                ++p_;
                if (max >= 0 && max < min)
                    fail_at(elem_pos, "repetition {" + std::to_string(min) + "," +
                                          std::to_string(max) + "} has max below min");
                repeat(rule_name, out, last_start, min, max);
                have_last = false;
            } else {
                break;
            }
            skip_space(nested);
        }
    }

    // Replace out[last_start ..) (one element: a literal, class, reference or group) by its
    // repetition {min, max} (max -1: unbounded), as llama.cpp's handle_repetitions does.
    void repeat(const std::string& rule_name, std::vector<GrammarElem>& out, size_t last_start,
                int min, int max) {
        std::vector<GrammarElem> elem(out.begin() + static_cast<std::ptrdiff_t>(last_start),
                                      out.end());
        out.resize(last_start);
        // A multi-character literal repeats as a unit: wrap it in a rule.
        if (elem.size() > 1 && elem[0].type == ET::Char && elem[1].type == ET::Char) {
            const uint32_t lit = new_rule(rule_name);
            g_.rules[lit] = elem;
            g_.rules[lit].push_back({ET::End, 0});
            elem = {{ET::RuleRef, lit}};
        }
        for (int k = 0; k < min; ++k) out.insert(out.end(), elem.begin(), elem.end());
        if (max == min) return;
        if (max < 0) {
            // rep ::= elem rep | ""
            const uint32_t rep = new_rule(rule_name);
            auto& r = g_.rules[rep];
            r = elem;
            r.push_back({ET::RuleRef, rep});
            r.push_back({ET::Alt, 0});
            r.push_back({ET::End, 0});
            out.push_back({ET::RuleRef, rep});
            return;
        }
        // opt_n ::= elem opt_{n-1} | "" ; opt_1 ::= elem | ""
        uint32_t prev = 0;
        bool have_prev = false;
        for (int k = 0; k < max - min; ++k) {
            const uint32_t opt = new_rule(rule_name);
            auto& r = g_.rules[opt];
            r = elem;
            if (have_prev) r.push_back({ET::RuleRef, prev});
            r.push_back({ET::Alt, 0});
            r.push_back({ET::End, 0});
            prev = opt;
            have_prev = true;
        }
        out.push_back({ET::RuleRef, prev});
    }

    void parse_alternates(const std::string& rule_name, std::vector<GrammarElem>& out,
                          bool nested) {
        parse_sequence(rule_name, out, nested);
        while (true) {
            if (!nested && !continues_with_bar()) break;
            if (cur() != '|') break;
            ++p_;
            skip_space(true);
            out.push_back({ET::Alt, 0});
            parse_sequence(rule_name, out, nested);
        }
        out.push_back({ET::End, 0});
    }

    void parse_all() {
        skip_space(true);
        while (!at_end()) {
            const size_t name_pos = p_;
            const std::string name = parse_name();
            skip_space(false);
            if (s_.substr(p_, 3) != "::=")
                fail("expected '::=' after rule name '" + name + "', found " + shown());
            p_ += 3;
            skip_space(true);
            const uint32_t id = rule_id(name, name_pos);
            if (defined_[id]) fail_at(name_pos, "rule '" + name + "' is defined twice");
            defined_[id] = true;
            std::vector<GrammarElem> body;
            parse_alternates(name, body, false);
            g_.rules[id] = std::move(body);
            if (!at_end() && cur() != '\n' && cur() != '\r')
                fail("expected the end of rule '" + name + "' (a newline), found " + shown());
            skip_space(true);
        }
    }

    Result<Grammar> finish() {
        for (size_t i = 0; i < g_.rules.size(); ++i)
            if (!defined_[i])
                return make_error(where(first_ref_[i]) + ": rule '" + g_.names[i] +
                                  "' is referenced but never defined");
        auto it = ids_.find("root");
        if (it == ids_.end())
            return make_error(
                "line 1, column 1: the grammar has no 'root' rule; expected "
                "'root ::= ...'");
        g_.root = it->second;
        if (auto r = check_left_recursion(); !r.ok()) return r.error();
        return std::move(g_);
    }

    // Nullable rules, then a rule -> rule edge for every reference reachable without consuming
    // a character; a cycle is left recursion.
    Result<void> check_left_recursion() {
        const size_t n = g_.rules.size();
        std::vector<bool> nullable(n, false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t i = 0; i < n; ++i) {
                if (nullable[i]) continue;
                bool alt_null = true;
                for (const GrammarElem& e : g_.rules[i]) {
                    if (e.type == ET::Alt || e.type == ET::End) {
                        if (alt_null) {
                            nullable[i] = true;
                            changed = true;
                            break;
                        }
                        alt_null = true;
                    } else if (e.type == ET::RuleRef) {
                        alt_null = alt_null && nullable[e.value];
                    } else if (e.type != ET::CharAlt && e.type != ET::CharRngUpper) {
                        alt_null = false;
                    }
                }
            }
        }
        std::vector<std::vector<uint32_t>> edges(n);
        for (size_t i = 0; i < n; ++i) {
            bool prefix_null = true;
            for (const GrammarElem& e : g_.rules[i]) {
                if (e.type == ET::Alt || e.type == ET::End) {
                    prefix_null = true;
                } else if (e.type == ET::RuleRef) {
                    if (prefix_null) edges[i].push_back(e.value);
                    prefix_null = prefix_null && nullable[e.value];
                } else if (e.type != ET::CharAlt && e.type != ET::CharRngUpper) {
                    prefix_null = false;
                }
            }
        }
        std::vector<int> color(n, 0);  // 0 new, 1 on the path, 2 done
        std::vector<uint32_t> path;
        std::function<bool(uint32_t)> dfs = [&](uint32_t v) {
            color[v] = 1;
            path.push_back(v);
            for (uint32_t w : edges[v]) {
                if (color[w] == 1) {
                    path.push_back(w);
                    return true;
                }
                if (color[w] == 0 && dfs(w)) return true;
            }
            path.pop_back();
            color[v] = 2;
            return false;
        };
        for (uint32_t v = 0; v < n; ++v) {
            if (color[v] != 0 || !dfs(v)) continue;
            // Report the cycle by source rule names (generated names carry their rule's).
            std::string cyc;
            for (size_t k = 0; k < path.size(); ++k)
                if (path[k] == path.back() || !cyc.empty())
                    cyc += (cyc.empty() ? "" : " -> ") + g_.names[path[k]];
            return make_error(where(first_ref_[path.back()]) + ": the grammar is left-recursive (" +
                              cyc +
                              ") or repeats something that can match nothing; expected every "
                              "recursion to consume a character first");
        }
        return {};
    }
};

}  // namespace

Result<Grammar> parse_grammar(std::string_view text) {
    return Parser(text).run();
}

}  // namespace zinc::engine
