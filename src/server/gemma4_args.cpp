// zinc/server/gemma4_args.cpp — see gemma4_args.h. A byte-level state machine over the
// dictionary syntax; only a possible `<|"|>` is left unread between calls.
#include "server/gemma4_args.h"

namespace zinc::server {

namespace {

constexpr std::string_view kQuote = "<|\"|>";

bool is_ws(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// `s` at `i` starts kQuote (1), may start it but ends first (0), or does not (-1).
int quote_at(std::string_view s, size_t i) {
    const std::string_view at = s.substr(i, kQuote.size());
    if (at == kQuote) return 1;
    return kQuote.substr(0, at.size()) == at ? 0 : -1;
}

}  // namespace

std::string json_escape_inner(std::string_view s) {
    std::string out;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    static const char* hex = "0123456789abcdef";
                    out += "\\u00";
                    out += hex[c >> 4];
                    out += hex[c & 15];
                } else {
                    out += ch;
                }
        }
    }
    return out;
}

Gemma4ArgsReader::Status Gemma4ArgsReader::read(std::string_view in, size_t& used,
                                                std::string& out) {
    size_t i = 0;
    auto fail = [&] {
        used = i;
        return Status::Failed;
    };
    auto close = [&](char closer) {  // in[i] == closer ends the innermost container
        out += closer;
        open_.pop_back();
        ++i;
        state_ = open_.empty() ? State::Done : State::AfterValue;
    };
    while (i < in.size() && state_ != State::Done) {
        const char c = in[i];
        switch (state_) {
            case State::Value: {
                if (is_ws(c)) {
                    ++i;
                    break;
                }
                const bool empty_ok = empty_ok_;  // right after `[`
                empty_ok_ = false;
                if (c == '{') {
                    out += '{';
                    open_.push_back('{');
                    state_ = State::FirstKey;
                    ++i;
                } else if (c == '[') {
                    out += '[';
                    open_.push_back('[');
                    empty_ok_ = true;
                    ++i;
                } else if (c == ']' && empty_ok) {
                    close(']');
                } else if (c == '<') {
                    const int q = quote_at(in, i);
                    if (q < 0) return fail();
                    if (q == 0) {
                        empty_ok_ = empty_ok;
                        used = i;
                        return Status::More;
                    }
                    out += '"';
                    i += kQuote.size();
                    state_ = State::String;
                } else if (c == ',' || c == ':' || c == '}' || c == ']') {
                    return fail();
                } else {
                    out += c;
                    ++i;
                    state_ = State::Literal;
                }
                break;
            }
            case State::FirstKey:
            case State::KeyStart:
                if (is_ws(c)) {
                    ++i;
                } else if (c == '}' && state_ == State::FirstKey) {
                    close('}');
                } else if (c == ':' || c == '}' || c == '<') {
                    return fail();
                } else {
                    out += '"';
                    out += json_escape_inner(std::string_view(&in[i], 1));
                    ++i;
                    state_ = State::Key;
                }
                break;
            case State::Key:
                if (c == ':') {
                    out += "\":";
                    ++i;
                    state_ = State::Value;
                } else if (c == '}') {
                    return fail();
                } else {
                    out += json_escape_inner(std::string_view(&in[i], 1));
                    ++i;
                }
                break;
            case State::String: {
                size_t j = i;
                while (j < in.size() && in[j] != '<') ++j;
                out += json_escape_inner(in.substr(i, j - i));
                i = j;
                if (i == in.size()) break;
                const int q = quote_at(in, i);
                if (q == 0) {
                    used = i;
                    return Status::More;
                }
                if (q > 0) {
                    out += '"';
                    i += kQuote.size();
                    state_ = open_.empty() ? State::Done : State::AfterValue;
                } else {
                    out += '<';
                    ++i;
                }
                break;
            }
            case State::Literal:
                if (c == ',' || c == '}' || c == ']' || c == '<' || is_ws(c)) {
                    state_ = open_.empty() ? State::Done : State::AfterValue;
                } else {
                    out += c;
                    ++i;
                }
                break;
            case State::AfterValue:
                if (is_ws(c)) {
                    ++i;
                } else if (c == ',') {
                    out += ',';
                    ++i;
                    state_ = open_.back() == '{' ? State::KeyStart : State::Value;
                } else if ((c == '}' && open_.back() == '{') || (c == ']' && open_.back() == '[')) {
                    close(c);
                } else {
                    return fail();
                }
                break;
            case State::Done:
                break;
        }
    }
    used = i;
    return state_ == State::Done ? Status::Done : Status::More;
}

std::string Gemma4ArgsReader::at_end(std::string_view rest) const {
    return state_ == State::String ? json_escape_inner(rest) : std::string();
}

}  // namespace zinc::server
