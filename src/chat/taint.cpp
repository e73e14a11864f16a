// zinc/chat/taint.cpp — data-range arithmetic (see taint.h) and the taint-aware Value helpers.
#include "chat/taint.h"

#include <algorithm>

#include "chat/unicode.h"
#include "chat/value.h"

namespace zinc::chat {

void spans_add(DataSpans& spans, size_t b, size_t e) {
    if (b >= e) return;
    if (!spans.empty() && spans.back().end >= b) {
        spans.back().end = std::max(spans.back().end, e);
        return;
    }
    spans.push_back({b, e});
}

void spans_append(DataSpans& spans, const DataSpans& more, size_t shift) {
    for (const Span& s : more) spans_add(spans, s.begin + shift, s.end + shift);
}

DataSpans spans_slice(const DataSpans& spans, size_t b, size_t e) {
    DataSpans out;
    for (const Span& s : spans) {
        if (s.end <= b) continue;
        if (s.begin >= e) break;
        spans_add(out, std::max(s.begin, b) - b, std::min(s.end, e) - b);
    }
    return out;
}

bool spans_overlap(const DataSpans& spans, size_t b, size_t e) {
    for (const Span& s : spans) {
        if (s.end <= b) continue;
        return s.begin < e;
    }
    return false;
}

namespace {

// Namespaces can hold themselves ({% set ns.me = ns %}), so the walks are bounded; past the
// bound a value counts as data (the safe answer).
constexpr int kMaxWalk = 512;

bool contains_data_at(const Value& v, int depth) {
    if (depth > kMaxWalk) return true;
    switch (v.kind()) {
        case ValueKind::String:
            return v.has_data();
        case ValueKind::List:
            for (const Value& x : v.list_data().items)
                if (contains_data_at(x, depth + 1)) return true;
            return false;
        case ValueKind::Dict:
        case ValueKind::Namespace:
            for (const auto& [k, x] : v.dict_data().items)
                if (contains_data_at(k, depth + 1) || contains_data_at(x, depth + 1)) return true;
            return false;
        default:
            return false;
    }
}

Value mark_data_at(const Value& v, int depth) {
    if (depth > kMaxWalk) return v;
    switch (v.kind()) {
        case ValueKind::String:
            return Value::data_string(v.str());
        case ValueKind::List: {
            std::vector<Value> items;
            items.reserve(v.list_data().items.size());
            for (const Value& x : v.list_data().items) items.push_back(mark_data_at(x, depth + 1));
            return Value::list(std::move(items), v.seq_kind());
        }
        case ValueKind::Dict: {
            Value d = Value::dict();
            for (const auto& [k, x] : v.dict_data().items)
                d.dict_data().set(mark_data_at(k, depth + 1), mark_data_at(x, depth + 1));
            return d;
        }
        default:
            return v;
    }
}

}  // namespace

bool contains_data(const Value& v) {
    return contains_data_at(v, 0);
}

Value mark_data(const Value& v) {
    return mark_data_at(v, 0);
}

Value substr_value(const Value& s, size_t b, size_t e) {
    const std::string& str = s.str();
    e = std::min(e, str.size());
    b = std::min(b, e);
    std::string part = str.substr(b, e - b);
    if (!s.data_spans()) return Value::string(std::move(part));
    return Value::string(std::move(part), spans_slice(*s.data_spans(), b, e));
}

Value derived_string(std::string s, bool data) {
    return data ? Value::data_string(std::move(s)) : Value::string(std::move(s));
}

void append_value(TaintedText& out, const Value& v) {
    if (v.is_string()) {
        out.append(v.str(), v.data_spans());
        return;
    }
    out.append_as(v.to_str(), contains_data(v));
}

Value text_value(TaintedText&& t) {
    return Value::string(std::move(t.text_mut()), std::move(t.spans_mut()));
}

Value str_value(const Value& v) {
    if (v.is_string()) return v;
    return derived_string(v.to_str(), contains_data(v));
}

Value replace_value(const Value& s, std::string_view old, const Value& repl, long count) {
    const std::string& str = s.str();
    TaintedText out;
    auto keep = [&](size_t b, size_t e) {
        if (b >= e) return;
        const std::string_view bytes = std::string_view(str).substr(b, e - b);
        if (!s.data_spans()) return out.append_literal(bytes);
        const DataSpans part = spans_slice(*s.data_spans(), b, e);
        out.append(bytes, &part);
    };
    long done = 0;
    if (old.empty()) {
        // Python inserts `repl` between every code point (and at both ends), up to count.
        const std::vector<size_t> off = text::cp_offsets(str);
        for (size_t i = 0; i < off.size(); i++) {
            if (count < 0 || done < count) {
                append_value(out, repl);
                done++;
            }
            if (i + 1 < off.size()) keep(off[i], off[i + 1]);
        }
        return text_value(std::move(out));
    }
    size_t pos = 0;
    while (count < 0 || done < count) {
        const size_t hit = str.find(old, pos);
        if (hit == std::string::npos) break;
        keep(pos, hit);
        append_value(out, repl);
        pos = hit + old.size();
        done++;
    }
    keep(pos, str.size());
    return text_value(std::move(out));
}

}  // namespace zinc::chat
