// zinc/chat/json.cpp — Python's json.dumps for interpreter values, byte for byte: the layout of
// transformers' tojson filter (ensure_ascii=False by default, ", " / ": " separators, or "," and
// newline + indent when an indent is given; NaN/Infinity; keys converted like Python does).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace zinc::chat {

namespace {

constexpr int kMaxJsonDepth = 500;

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (char32_t c : text::decode(s)) {
        switch (c) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        char buf[16];
        if (c < 0x20) {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            out += buf;
        } else if (ensure_ascii && c > 0x7E && c != 0x7F) {
            if (c >= 0x10000) {
                const char32_t v = c - 0x10000;
                std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                              static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
            } else {
                std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            }
            out += buf;
        } else {
            text::append_utf8(out, c);
        }
    }
    out += '"';
}

std::string float_json(double f) {
    if (f != f) return "NaN";
    if (f == HUGE_VAL) return "Infinity";
    if (f == -HUGE_VAL) return "-Infinity";
    return py_float_repr(f);
}

[[noreturn]] void not_serializable(const Value& v) {
    fail("Object of type " + std::string(v.type_name()) + " is not JSON serializable");
}

void dump(std::string& out, const Value& v, const JsonOptions& opt, int level) {
    if (level > kMaxJsonDepth) fail("value nested too deeply for tojson");
    const bool pretty = opt.indent >= 0;
    auto newline = [&](int lvl) {
        out += '\n';
        for (int k = 0; k < lvl; k++) out += opt.indent_str;
    };
    switch (v.kind()) {
        case ValueKind::None: out += "null"; return;
        case ValueKind::Bool: out += v.as_bool() ? "true" : "false"; return;
        case ValueKind::Int: out += std::to_string(v.as_int()); return;
        case ValueKind::Float: out += float_json(v.as_float()); return;
        case ValueKind::String: dump_string(out, v.str(), opt.ensure_ascii); return;
        case ValueKind::List: {
            const SeqKind k = v.seq_kind();
            if (k != SeqKind::List && k != SeqKind::Tuple) not_serializable(v);
            const auto& items = v.list_data().items;
            if (items.empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < items.size(); i++) {
                if (i) out += opt.item_sep;
                if (pretty) newline(level + 1);
                dump(out, items[i], opt, level + 1);
            }
            if (pretty) newline(level);
            out += ']';
            return;
        }
        case ValueKind::Dict: {
            std::vector<std::pair<Value, Value>> items = v.dict_data().items;
            if (items.empty()) {
                out += "{}";
                return;
            }
            if (opt.sort_keys) {
                std::stable_sort(items.begin(), items.end(),
                                 [](const auto& x, const auto& y) { return py_less(x.first, y.first); });
            }
            out += '{';
            bool first = true;
            for (const auto& [key, val] : items) {
                std::string k;
                switch (key.kind()) {
                    case ValueKind::String: k = key.str(); break;
                    case ValueKind::Bool: k = key.as_bool() ? "true" : "false"; break;
                    case ValueKind::None: k = "null"; break;
                    case ValueKind::Int: k = std::to_string(key.as_int()); break;
                    case ValueKind::Float: k = float_json(key.as_float()); break;
                    default:
                        fail("keys must be str, int, float, bool or None, not " + std::string(key.type_name()));
                }
                if (!first) out += opt.item_sep;
                first = false;
                if (pretty) newline(level + 1);
                dump_string(out, k, opt.ensure_ascii);
                out += opt.key_sep;
                dump(out, val, opt, level + 1);
            }
            if (pretty) newline(level);
            out += '}';
            return;
        }
        default: not_serializable(v);
    }
}

}  // namespace

std::string py_json_dumps(const Value& v, const JsonOptions& opt) {
    std::string out;
    dump(out, v, opt, 0);
    return out;
}

}  // namespace zinc::chat
