// zinc/server/tool_call_stream.cpp — see tool_call_stream.h. A byte-level state machine: buf_
// holds the input not yet consumed, each state consumes what it can decide and leaves the rest
// for the next chunk (JSON: RFC 8259; UTF-8: RFC 3629).
#include "server/tool_call_stream.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace zinc::server {

namespace {

bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Bytes at the end of `s` that begin a UTF-8 character not yet complete (0 when `s` ends on a
// character boundary, or with bytes that no continuation could make valid).
size_t incomplete_utf8_tail(std::string_view s) {
    const size_t n = s.size();
    for (size_t k = 1; k <= 3 && k <= n; ++k) {
        const auto c = static_cast<unsigned char>(s[n - k]);
        if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        const size_t need = (c & 0xE0) == 0xC0   ? 2
                            : (c & 0xF0) == 0xE0 ? 3
                            : (c & 0xF8) == 0xF0 ? 4
                                                 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::optional<uint32_t> hex4(std::string_view h) {
    uint32_t v = 0;
    for (char c : h) {
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= static_cast<uint32_t>(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= static_cast<uint32_t>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= static_cast<uint32_t>(c - 'A' + 10);
        else
            return std::nullopt;
    }
    return v;
}

// A JSON string escape at the start of `e` (e[0] == '\\') decoded onto `out`: the bytes it
// took, or 0 when `e` ends inside it. A malformed escape is kept as written; a lone surrogate
// becomes U+FFFD.
size_t decode_escape(std::string_view e, std::string& out) {
    if (e.size() < 2) return 0;
    switch (e[1]) {
        case '"':
            out += '"';
            return 2;
        case '\\':
            out += '\\';
            return 2;
        case '/':
            out += '/';
            return 2;
        case 'b':
            out += '\b';
            return 2;
        case 'f':
            out += '\f';
            return 2;
        case 'n':
            out += '\n';
            return 2;
        case 'r':
            out += '\r';
            return 2;
        case 't':
            out += '\t';
            return 2;
        case 'u':
            break;
        default:
            out += e.substr(0, 2);
            return 2;
    }
    if (e.size() < 6) return 0;
    const auto hi = hex4(e.substr(2, 4));
    if (!hi) {
        out += e.substr(0, 2);
        return 2;
    }
    if (*hi >= 0xD800 && *hi < 0xDC00) {  // a high surrogate: its low half follows as \uXXXX
        if ((e.size() > 6 && e[6] != '\\') || (e.size() > 7 && e[7] != 'u')) {
            append_utf8(out, 0xFFFD);
            return 6;
        }
        if (e.size() < 12) return 0;
        const auto lo = hex4(e.substr(8, 4));
        if (lo && *lo >= 0xDC00 && *lo < 0xE000) {
            append_utf8(out, 0x10000 + ((*hi - 0xD800) << 10) + (*lo - 0xDC00));
            return 12;
        }
        append_utf8(out, 0xFFFD);
        return 6;
    }
    append_utf8(out, *hi >= 0xDC00 && *hi < 0xE000 ? 0xFFFD : *hi);
    return 6;
}

// The longest proper prefix of `marker` that `s` ends with.
size_t marker_prefix_tail(std::string_view s, std::string_view marker) {
    for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k)
        if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
    return 0;
}

bool is_name_char(char c) {  // a tool name's characters (parse_tools)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

bool is_word_char(char c) {  // harmony's channel names and constrain types
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

}  // namespace

// Reads a call's head as its bytes arrive. Each reader returns true when what it reads is
// complete; false when the input ran out (more may come) or the text is not that (`failed`).
struct ToolCallStream::HeadCursor {
    std::string_view s;
    size_t p = 0;
    bool failed = false;

    void skip_ws() {
        while (p < s.size() && is_ws(s[p])) ++p;
    }
    bool expect(std::string_view lit) {
        for (char c : lit) {
            if (p == s.size()) return false;
            if (s[p] != c) {
                failed = true;
                return false;
            }
            ++p;
        }
        return true;
    }
    // One of `options` (none a prefix of another) at p: its index, or -1 (see above).
    int alt(std::initializer_list<std::string_view> options) {
        bool partial = false;
        int i = 0;
        for (std::string_view o : options) {
            const std::string_view at = s.substr(p, o.size());
            if (at == o) {
                p += o.size();
                return i;
            }
            partial = partial || (at.size() < o.size() && o.substr(0, at.size()) == at);
            ++i;
        }
        failed = !partial;
        return -1;
    }
    // A string among `options` after its opening quote, through its closing quote.
    bool quoted(const std::vector<std::string>& options, std::string& got) {
        for (; p < s.size(); ++p) {
            const char c = s[p];
            if (c == '"') {
                ++p;
                failed = std::find(options.begin(), options.end(), got) == options.end();
                return !failed;
            }
            got += c;
            if (c == '\\' || !any_starts_with(options, got)) {
                failed = true;
                return false;
            }
        }
        return false;
    }
    // A run of `is_char` bytes among `options` (complete at the first other byte).
    bool word(const std::vector<std::string>& options, std::string& got, bool (*is_char)(char)) {
        for (; p < s.size() && is_char(s[p]); ++p) {
            got += s[p];
            if (!any_starts_with(options, got)) {
                failed = true;
                return false;
            }
        }
        if (p == s.size()) return false;
        failed = std::find(options.begin(), options.end(), got) == options.end();
        return !failed;
    }
    static bool any_starts_with(const std::vector<std::string>& options, const std::string& got) {
        return std::any_of(options.begin(), options.end(), [&](const std::string& k) {
            return k.compare(0, got.size(), got) == 0;
        });
    }
};

ToolCallStream::ToolCallStream(ToolFormat format, std::vector<std::string> names, bool parallel)
    : spec_(tool_format_spec(format)), names_(std::move(names)), parallel_(parallel) {}

std::vector<ToolStreamPiece> ToolCallStream::feed(std::string_view chunk) {
    buf_.append(chunk);
    while (step()) {
    }
    return take(false);
}

std::vector<ToolStreamPiece> ToolCallStream::finish() {
    while (true) {
        while (step()) {
        }
        if (state_ != State::Header) break;
        header_state(/*at_end=*/true);  // an uncommitted start: refused, read again as text
    }
    switch (state_) {
        case State::Text:
        case State::FailedBlock:
            // A held prefix of a marker that never completed is text.
            put_content(buf_);
            break;
        case State::Object:
        case State::Key:
        case State::Colon:
        case State::Value:
        case State::Raw:
        case State::String:
            truncated_ = !args_done_;
            break;
        case State::Literal:
            if (value_is_args_) put_args(lit_);
            truncated_ = !args_done_;
            break;
        case State::Gemma4Args:
            put_args(g4_.at_end(buf_));
            truncated_ = !args_done_;
            break;
        case State::Header:
        case State::AfterCall:
        case State::Done:
            break;
    }
    buf_.clear();
    // Trailing whitespace: the reply's own unless it made calls.
    if (!ws_.empty() && n_calls_ == 0) put({-1, false, "", ws_});
    ws_.clear();
    return take(true);
}

bool ToolCallStream::step() {
    switch (state_) {
        case State::Text:
            return text_state();
        case State::Header:
            return header_state(false);
        case State::FailedBlock:
            return failed_block_state();
        case State::Object:
        case State::Key:
        case State::Colon:
        case State::Value:
            return object_state();
        case State::Raw:
        case State::String:
        case State::Literal:
            return value_bytes();
        case State::Gemma4Args:
            return gemma4_state();
        case State::AfterCall:
            return after_call_state();
        case State::Done:
            buf_.clear();  // not parallel: after the one call, nothing is read
            return false;
    }
    return false;
}

bool ToolCallStream::text_state() {
    std::string text;
    size_t i = 0;
    for (; i < buf_.size(); ++i) {
        const char c = buf_[i];
        if (is_ws(c)) {
            if (!after_call_) text += c;
            continue;
        }
        if (bare_ok_ && spec_.bare_calls && c == '{') {
            put_content(text);
            buf_.erase(0, i);
            hdr_.clear();
            marker_len_ = 0;
            in_block_ = false;
            state_ = State::Header;
            return true;
        }
        bool maybe = false;  // buf_ ends with a proper prefix of a marker here
        for (std::string_view open : {spec_.open, spec_.open_alt}) {
            if (open.empty() || c != open[0]) continue;
            const size_t n = std::min(open.size(), buf_.size() - i);
            if (std::string_view(buf_).substr(i, n) != open.substr(0, n)) continue;
            if (n < open.size()) {
                maybe = true;
                continue;
            }
            put_content(text);
            buf_.erase(0, i + open.size());
            hdr_ = open;
            marker_len_ = open.size();
            in_block_ = true;
            after_call_ = false;
            bare_ok_ = false;
            state_ = State::Header;
            return true;
        }
        if (maybe) {  // maybe a marker: wait for the next chunk
            put_content(text);
            buf_.erase(0, i);
            return false;
        }
        after_call_ = false;
        bare_ok_ = false;
        text += c;
    }
    put_content(text);
    buf_.clear();
    return false;
}

bool ToolCallStream::header_state(bool at_end) {
    hdr_ += buf_;
    buf_.clear();
    HeadCursor h{hdr_, marker_len_};
    std::string name;
    bool no_arguments = false;
    const bool complete = spec_.head == CallHead::Harmony  ? harmony_head(h, name)
                          : spec_.head == CallHead::Gemma4 ? gemma4_head(h, name)
                                                           : json_head(h, name, no_arguments);
    if (complete) {
        ws_.clear();  // whitespace right before a call is dropped
        put({n_calls_++, true, name, ""});
        buf_ = hdr_.substr(h.p);
        hdr_.clear();
        args_seen_ = args_done_ = false;
        value_is_args_ = true;
        state_ = no_arguments ? State::Object : State::Value;
        if (spec_.head == CallHead::Gemma4) {
            g4_ = Gemma4ArgsReader();
            args_seen_ = true;
            state_ = State::Gemma4Args;
        }
        return true;
    }
    if (!h.failed && !at_end) return false;
    // Not a call: its first byte (the marker, or the '{') is text and the rest is read again
    // (after a marker of a format whose blocks are content through their close marker, as such).
    if (in_block_) {
        put_content(std::string_view(hdr_).substr(0, marker_len_));
        buf_ = hdr_.substr(marker_len_);
        state_ = spec_.block_to_close ? State::FailedBlock : State::Text;
    } else {
        put_content("{");
        buf_ = hdr_.substr(1);
        state_ = State::Text;
    }
    bare_ok_ = false;
    hdr_.clear();
    return true;
}

// [marker] ws* '{' ws* '"name"' ws* ':' ws* '"' NAME '"' ws* ('}' | ',' ws* '"' KEY '"' ws* ':'),
// KEY "arguments" or "parameters".
bool ToolCallStream::json_head(HeadCursor& h, std::string& name, bool& no_arguments) const {
    static const std::vector<std::string> kArgumentKeys = {"arguments", "parameters"};
    std::string key;
    h.skip_ws();
    if (!h.expect("{")) return false;
    h.skip_ws();
    if (!h.expect("\"name\"")) return false;
    h.skip_ws();
    if (!h.expect(":")) return false;
    h.skip_ws();
    if (!h.expect("\"") || !h.quoted(names_, name)) return false;
    h.skip_ws();
    if (h.p < h.s.size() && h.s[h.p] == '}') return no_arguments = true;
    if (!h.expect(",")) return false;
    h.skip_ws();
    if (!h.expect("\"") || !h.quoted(kArgumentKeys, key)) return false;
    h.skip_ws();
    return h.expect(":");
}

// After `<|start|>assistant`: [' to=functions.' NAME] '<|channel|>'; after `<|channel|>` (or
// that): ('commentary' | 'analysis') [' to=functions.' NAME, unless named before] ws*
// ['<|constrain|>'] [TYPE] ws* '<|message|>'; exactly one NAME.
bool ToolCallStream::harmony_head(HeadCursor& h, std::string& name) const {
    static const std::vector<std::string> kChannels = {"commentary", "analysis"};
    auto recipient = [&] {
        h.skip_ws();
        return h.expect("to=functions.") && h.word(names_, name, is_name_char);
    };
    if (marker_len_ == spec_.open_alt.size() && hdr_.compare(0, marker_len_, spec_.open_alt) == 0) {
        if (h.p < h.s.size() && h.s[h.p] != '<' && !recipient()) return false;
        if (!h.expect(spec_.open)) return false;
    }
    std::string channel;
    if (!h.word(kChannels, channel, is_word_char)) return false;
    if (name.empty() && !recipient()) return false;
    h.skip_ws();
    int k = h.alt({"<|constrain|>", "<|message|>"});
    if (k < 0) {
        if (h.failed && h.p < h.s.size() && is_word_char(h.s[h.p])) {  // a bare type: "json"
            h.failed = false;
            k = 0;
        } else {
            return false;
        }
    }
    if (k == 1) return true;
    std::string type;
    while (h.p < h.s.size() && is_word_char(h.s[h.p])) type += h.s[h.p++];
    if (h.p == h.s.size()) return false;
    h.skip_ws();
    return h.expect("<|message|>");
}

// After `<|tool_call>`: 'call:' NAME, complete at the arguments' '{' (which is left unread).
bool ToolCallStream::gemma4_head(HeadCursor& h, std::string& name) const {
    if (!h.expect("call:") || !h.word(names_, name, is_name_char)) return false;
    if (h.s[h.p] != '{') h.failed = true;
    return !h.failed;
}

// The arguments as JSON as they are read; the call ends with them, or where the text leaves
// their syntax (what follows is read as after a call).
bool ToolCallStream::gemma4_state() {
    size_t used = 0;
    std::string json;
    const Gemma4ArgsReader::Status st = g4_.read(buf_, used, json);
    put_args(json);
    buf_.erase(0, used);
    if (st == Gemma4ArgsReader::Status::More) return false;
    args_done_ = true;
    close_call();
    return true;
}

bool ToolCallStream::failed_block_state() {
    const std::string_view close = spec_.close;
    if (const size_t e = buf_.find(close); !close.empty() && e != std::string::npos) {
        put_content(std::string_view(buf_).substr(0, e + close.size()));
        buf_.erase(0, e + close.size());
        state_ = State::Text;
        return true;
    }
    const size_t keep = close.empty() ? 0 : marker_prefix_tail(buf_, close);
    put_content(std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return false;
}

bool ToolCallStream::object_state() {
    size_t i = 0;
    const size_t n = buf_.size();
    if (state_ != State::Key || lit_.empty())
        while (i < n && is_ws(buf_[i])) ++i;
    if (i == n) {
        buf_.clear();
        return false;
    }
    const char c = buf_[i];
    switch (state_) {
        case State::Object:  // after the name or a value: ',' or the object's end
            if (c == '}') {
                buf_.erase(0, i + 1);
                close_call();
                return true;
            }
            if (c == ',') {
                buf_.erase(0, i + 1);
                lit_.clear();
                state_ = State::Key;
                return true;
            }
            break;
        case State::Key:  // lit_: the key so far, from its opening quote
            if (lit_.empty()) {
                if (c != '"') break;
                lit_ = "\"";
                esc_ = false;
                buf_.erase(0, i + 1);
                return true;
            }
            for (; i < n; ++i) {
                const char k = buf_[i];
                if (esc_) {
                    esc_ = false;
                } else if (k == '\\') {
                    esc_ = true;
                } else if (k == '"') {
                    lit_.erase(0, 1);
                    buf_.erase(0, i + 1);
                    state_ = State::Colon;
                    return true;
                }
                lit_ += k;
            }
            buf_.clear();
            return false;
        case State::Colon:
            if (c != ':') break;
            buf_.erase(0, i + 1);
            value_is_args_ = !args_seen_ && (lit_ == "arguments" || lit_ == "parameters");
            state_ = State::Value;
            return true;
        case State::Value:
            buf_.erase(0, i);
            if (value_is_args_) args_seen_ = true;
            depth_ = 0;
            in_str_ = esc_ = false;
            lit_.clear();
            if (c == '"' && value_is_args_) {  // arguments as JSON text in a string: decoded
                buf_.erase(0, 1);
                state_ = State::String;
            } else if (c == '{' || c == '[' || c == '"') {
                state_ = State::Raw;
            } else {
                state_ = State::Literal;
            }
            return true;
        default:
            break;
    }
    // Not the call object's grammar: the call ends here; the rest is read as what follows it.
    buf_.erase(0, i);
    close_call();
    return true;
}

bool ToolCallStream::value_bytes() {
    const bool block_end = in_block_ && !spec_.close.empty();
    size_t i = 0;
    const size_t n = buf_.size();
    if (state_ == State::Raw) {
        for (; i < n; ++i) {
            const char c = buf_[i];
            bool done = false;
            if (in_str_) {
                if (esc_)
                    esc_ = false;
                else if (c == '\\')
                    esc_ = true;
                else if (c == '"') {
                    in_str_ = false;
                    done = depth_ == 0;
                }
            } else if (c == '{' || c == '[') {
                ++depth_;
            } else if (c == '}' || c == ']') {
                done = --depth_ <= 0;
            } else if (c == '"') {
                in_str_ = true;
            } else if (c == '<' && block_end) {
                // Markup outside a string: the value was cut short; the call ends before it.
                if (value_is_args_) put_args(std::string_view(buf_).substr(0, i));
                buf_.erase(0, i);
                if (value_is_args_) args_done_ = true;
                close_call();
                return true;
            }
            if (done) {
                if (value_is_args_) put_args(std::string_view(buf_).substr(0, i + 1));
                buf_.erase(0, i + 1);
                end_call_value(value_is_args_);
                return true;
            }
        }
        if (value_is_args_) put_args(buf_);
        buf_.clear();
        return false;
    }
    if (state_ == State::String) {
        std::string out;
        while (i < n) {
            const char c = buf_[i];
            if (c == '\\') {
                const size_t k = decode_escape(std::string_view(buf_).substr(i), out);
                if (k == 0) break;  // the escape continues in the next chunk
                i += k;
            } else if (c == '"') {
                put_args(out);
                buf_.erase(0, i + 1);
                end_call_value(true);
                return true;
            } else {
                out += c;
                ++i;
            }
        }
        put_args(out);
        buf_.erase(0, i);
        return false;
    }
    // Literal: up to a delimiter.
    for (; i < n; ++i) {
        const char c = buf_[i];
        if (c == ',' || c == '}' || c == ']' || is_ws(c) || (c == '<' && block_end)) {
            if (value_is_args_) put_args(lit_ == "null" ? std::string_view("{}") : lit_);
            buf_.erase(0, i);
            end_call_value(value_is_args_);
            return true;
        }
        lit_ += c;
    }
    buf_.clear();
    return false;
}

void ToolCallStream::end_call_value(bool was_arguments) {
    if (was_arguments) args_done_ = true;
    lit_.clear();
    state_ = State::Object;
    if (spec_.head == CallHead::Harmony) close_call();  // the arguments are the whole call
}

void ToolCallStream::close_call() {
    if (!args_seen_) put_args("{}");
    args_seen_ = args_done_ = true;
    lit_.clear();
    state_ = parallel_ ? State::AfterCall : State::Done;
}

bool ToolCallStream::after_call_state() {
    size_t i = 0;
    const size_t n = buf_.size();
    if (in_block_) {
        while (i < n && is_ws(buf_[i])) ++i;
        if (i == n) {
            buf_.clear();
            return false;
        }
        const std::string_view close = spec_.close;
        const size_t m = std::min(close.size(), n - i);
        if (!close.empty() && std::string_view(buf_).substr(i, m) == close.substr(0, m)) {
            if (m < close.size()) {  // maybe the close marker: wait
                buf_.erase(0, i);
                return false;
            }
            i += close.size();
        }
        buf_.erase(0, i);
        bare_ok_ = false;
    } else {
        while (i < n && (is_ws(buf_[i]) || buf_[i] == ';')) ++i;
        buf_.erase(0, i);
        if (buf_.empty()) return false;
        bare_ok_ = true;  // another bare call may follow
    }
    after_call_ = true;
    state_ = State::Text;
    return true;
}

void ToolCallStream::put_content(std::string_view s) {
    // Whitespace is held until text follows it (and dropped if a call does).
    std::string text;
    for (char c : s) {
        if (is_ws(c)) {
            ws_ += c;
            continue;
        }
        text += ws_;
        ws_.clear();
        text += c;
    }
    if (!text.empty()) put({-1, false, "", std::move(text)});
}

void ToolCallStream::put_args(std::string_view s) {
    if (!s.empty()) put({n_calls_ - 1, false, "", std::string(s)});
}

void ToolCallStream::put(ToolStreamPiece p) {
    if (has_carry_) {
        has_carry_ = false;
        ToolStreamPiece c = std::move(carry_);
        if (c.call == p.call && !p.starts_call)
            p.text = c.text + p.text;
        else
            out_.push_back(std::move(c));
    }
    if (!out_.empty() && out_.back().call == p.call && !p.starts_call) {
        out_.back().text += p.text;
        return;
    }
    out_.push_back(std::move(p));
}

std::vector<ToolStreamPiece> ToolCallStream::take(bool at_end) {
    if (at_end && has_carry_) {
        has_carry_ = false;
        out_.push_back(std::move(carry_));
    }
    if (!at_end && !out_.empty()) {
        // Never half a UTF-8 character in a piece: its bytes wait for the rest.
        ToolStreamPiece& last = out_.back();
        if (const size_t k = incomplete_utf8_tail(last.text); k > 0) {
            carry_ = {last.call, false, "", last.text.substr(last.text.size() - k)};
            has_carry_ = true;
            last.text.resize(last.text.size() - k);
            if (last.text.empty() && !last.starts_call) out_.pop_back();
        }
    }
    std::vector<ToolStreamPiece> out = std::move(out_);
    out_.clear();
    return out;
}

}  // namespace zinc::server
