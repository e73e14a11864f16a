// zinc/chat/value.cpp — construction, truthiness, equality and CPython-exact str()/repr() of
// interpreter values.
#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "chat/unicode.h"

namespace zinc::chat {

std::string callable_repr(const CallableData& fn);  // interpreter.cpp

Value Value::undefined(std::string reason) {
    Value v;
    v.s_ = std::move(reason);
    return v;
}
Value Value::none() {
    Value v;
    v.kind_ = ValueKind::None;
    return v;
}
Value Value::boolean(bool b) {
    Value v;
    v.kind_ = ValueKind::Bool;
    v.b_ = b;
    v.i_ = b ? 1 : 0;
    return v;
}
Value Value::integer(int64_t i) {
    Value v;
    v.kind_ = ValueKind::Int;
    v.i_ = i;
    return v;
}
Value Value::number(double f) {
    Value v;
    v.kind_ = ValueKind::Float;
    v.f_ = f;
    return v;
}
Value Value::string(std::string s) {
    Value v;
    v.kind_ = ValueKind::String;
    v.s_ = std::move(s);
    return v;
}
Value Value::string(std::string s, DataSpans spans) {
    Value v = string(std::move(s));
    if (!spans.empty()) v.taint_ = std::make_shared<const DataSpans>(std::move(spans));
    return v;
}
Value Value::data_string(std::string s) {
    const size_t n = s.size();
    if (n == 0) return string(std::move(s));
    return string(std::move(s), DataSpans{{0, n}});
}
Value Value::list(std::vector<Value> items, SeqKind kind) {
    Value v;
    v.kind_ = ValueKind::List;
    v.list_ = std::make_shared<ListData>();
    v.list_->items = std::move(items);
    v.list_->kind = kind;
    for (const auto& x : v.list_->items) v.list_->depth = std::max(v.list_->depth, value_depth(x) + 1);
    return v;
}
Value Value::dict() {
    Value v;
    v.kind_ = ValueKind::Dict;
    v.dict_ = std::make_shared<DictData>();
    return v;
}
Value Value::dict(std::vector<std::pair<Value, Value>> items) {
    Value v = dict();
    for (auto& [k, val] : items) v.dict_->set(std::move(k), std::move(val));
    return v;
}
Value Value::namespace_object() {
    Value v;
    v.kind_ = ValueKind::Namespace;
    v.dict_ = std::make_shared<DictData>();
    return v;
}
Value Value::object(std::shared_ptr<ObjectData> obj) {
    Value v;
    v.kind_ = ValueKind::Object;
    v.obj_ = std::move(obj);
    return v;
}
Value Value::callable(std::shared_ptr<const CallableData> fn) {
    Value v;
    v.kind_ = ValueKind::Callable;
    v.fn_ = std::move(fn);
    return v;
}

double Value::to_double() const { return kind_ == ValueKind::Float ? f_ : static_cast<double>(i_); }

SeqKind Value::seq_kind() const { return list_ ? list_->kind : SeqKind::List; }

bool Value::truthy() const {
    switch (kind_) {
        case ValueKind::Undefined:
        case ValueKind::None: return false;
        case ValueKind::Bool: return b_;
        case ValueKind::Int: return i_ != 0;
        case ValueKind::Float: return f_ != 0.0;
        case ValueKind::String: return !s_.empty();
        case ValueKind::List:
            return list_->kind == SeqKind::Generator || !list_->items.empty();
        case ValueKind::Dict: return !dict_->items.empty();
        case ValueKind::Namespace:
        case ValueKind::Object:
        case ValueKind::Callable: return true;
    }
    return false;
}

std::string_view Value::type_name() const {
    switch (kind_) {
        case ValueKind::Undefined: return "Undefined";
        case ValueKind::None: return "NoneType";
        case ValueKind::Bool: return "bool";
        case ValueKind::Int: return "int";
        case ValueKind::Float: return "float";
        case ValueKind::String: return "str";
        case ValueKind::List:
            switch (list_->kind) {
                case SeqKind::List: return "list";
                case SeqKind::Tuple: return "tuple";
                case SeqKind::Generator: return "generator";
                case SeqKind::DictKeys: return "dict_keys";
                case SeqKind::DictValues: return "dict_values";
                case SeqKind::DictItems: return "dict_items";
                case SeqKind::Range: return "range";
            }
            return "list";
        case ValueKind::Dict: return "dict";
        case ValueKind::Namespace: return "Namespace";
        case ValueKind::Object: return "object";
        case ValueKind::Callable: return "function";
    }
    return "object";
}

std::string py_float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
    // Shortest round-trip digits, then CPython's layout: repr() uses scientific notation when
    // the decimal exponent is < -4 or >= 16, and always shows a fractional part otherwise.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    // sci looks like "-1.2345e+17" or "5e-324"
    bool neg = false;
    size_t p = 0;
    if (sci[p] == '-') { neg = true; p++; }
    const size_t epos = sci.find('e');
    std::string digits;
    for (size_t k = p; k < epos; k++) {
        if (sci[k] != '.') digits.push_back(sci[k]);
    }
    const int exp = std::atoi(sci.c_str() + epos + 1);
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    std::string out = neg ? "-" : "";
    if (exp < -4 || exp >= 16) {
        out += digits[0];
        if (digits.size() > 1) {
            out += '.';
            out += digits.substr(1);
        }
        char eb[16];
        std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        out += eb;
        return out;
    }
    if (exp < 0) {
        out += "0.";
        out.append(static_cast<size_t>(-exp - 1), '0');
        out += digits;
        return out;
    }
    const size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
    } else {
        out += digits.substr(0, int_len);
        out += '.';
        out += digits.substr(int_len);
    }
    return out;
}

std::string py_str_repr(std::string_view s) {
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, quote);
    for (char32_t c : text::decode(s)) {
        if (c == static_cast<char32_t>(quote) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c >= 0xDC80 && c <= 0xDCFF) {
            // A raw invalid byte: Python would show the surrogate escape.
            char b[16];
            std::snprintf(b, sizeof(b), "\\udc%02x", static_cast<unsigned>(c - 0xDC00));
            out += b;
        } else if (!text::is_printable(c)) {
            char b[16];
            if (c < 0x100) std::snprintf(b, sizeof(b), "\\x%02x", static_cast<unsigned>(c));
            else if (c < 0x10000) std::snprintf(b, sizeof(b), "\\u%04x", static_cast<unsigned>(c));
            else std::snprintf(b, sizeof(b), "\\U%08x", static_cast<unsigned>(c));
            out += b;
        } else {
            text::append_utf8(out, c);
        }
    }
    out += quote;
    return out;
}

namespace {

// Namespaces are mutable and can contain themselves; like CPython's reprlib guard, a container
// met again while it is being printed shows as "{...}" / "[...]".
struct ReprGuard {
    std::vector<const void*> active;
};

std::string repr_impl(const Value& v, ReprGuard& g);

void repr_items(std::string& out, const std::vector<Value>& items, ReprGuard& g) {
    for (size_t k = 0; k < items.size(); k++) {
        if (k) out += ", ";
        out += repr_impl(items[k], g);
    }
}

std::string repr_dict_body(const DictData& d, ReprGuard& g) {
    if (std::find(g.active.begin(), g.active.end(), &d) != g.active.end() || g.active.size() > 400)
        return "{...}";
    g.active.push_back(&d);
    std::string out = "{";
    for (size_t k = 0; k < d.items.size(); k++) {
        if (k) out += ", ";
        out += repr_impl(d.items[k].first, g);
        out += ": ";
        out += repr_impl(d.items[k].second, g);
    }
    out += "}";
    g.active.pop_back();
    return out;
}

std::string repr_impl(const Value& v, ReprGuard& g) {
    switch (v.kind()) {
        case ValueKind::String: return py_str_repr(v.str());
        case ValueKind::Dict: return repr_dict_body(v.dict_data(), g);
        case ValueKind::Namespace: return "<Namespace " + repr_dict_body(v.dict_data(), g) + ">";
        case ValueKind::List: {
            const ListData& d = v.list_data();
            if (g.active.size() > 400) return "[...]";
            g.active.push_back(&d);
            std::string out;
            switch (d.kind) {
                case SeqKind::List:
                    out = "[";
                    repr_items(out, d.items, g);
                    out += "]";
                    break;
                case SeqKind::Tuple:
                    out = "(";
                    repr_items(out, d.items, g);
                    if (d.items.size() == 1) out += ",";
                    out += ")";
                    break;
                case SeqKind::Generator: out = "<generator object>"; break;
                case SeqKind::DictKeys:
                case SeqKind::DictValues:
                case SeqKind::DictItems:
                    out = std::string(v.type_name()) + "([";
                    repr_items(out, d.items, g);
                    out += "])";
                    break;
                case SeqKind::Range:
                    out = "range(" + std::to_string(d.range_start) + ", " + std::to_string(d.range_stop);
                    if (d.range_step != 1) out += ", " + std::to_string(d.range_step);
                    out += ")";
                    break;
            }
            g.active.pop_back();
            return out;
        }
        case ValueKind::Undefined: return "Undefined";
        default: return v.to_str();
    }
}

}  // namespace

std::string Value::repr() const {
    ReprGuard g;
    return repr_impl(*this, g);
}

std::string Value::to_str() const {
    switch (kind_) {
        case ValueKind::Undefined: return {};
        case ValueKind::None: return "None";
        case ValueKind::Bool: return b_ ? "True" : "False";
        case ValueKind::Int: return std::to_string(i_);
        case ValueKind::Float: return py_float_repr(f_);
        case ValueKind::String: return s_;
        case ValueKind::List:
        case ValueKind::Dict:
        case ValueKind::Namespace: return repr();
        case ValueKind::Object: return obj_->repr();
        case ValueKind::Callable: return callable_repr(*fn_);
    }
    return {};
}

bool py_hashable(const Value& v) {
    switch (v.kind()) {
        case ValueKind::List:
            if (v.seq_kind() != SeqKind::Tuple) return false;
            for (const auto& x : v.list_data().items) {
                if (!py_hashable(x)) return false;
            }
            return true;
        case ValueKind::Dict:
        case ValueKind::Namespace: return false;
        default: return true;
    }
}

bool py_equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case ValueKind::Undefined:
        case ValueKind::None: return true;
        case ValueKind::String: return a.str() == b.str();
        case ValueKind::List: {
            const auto& x = a.list_data();
            const auto& y = b.list_data();
            if (&x == &y) return true;
            // list == tuple is False in Python; views and generators compare by identity.
            if (x.kind != y.kind) return false;
            if (x.kind == SeqKind::Generator) return false;
            if (x.items.size() != y.items.size()) return false;
            for (size_t k = 0; k < x.items.size(); k++) {
                if (!py_equal(x.items[k], y.items[k])) return false;
            }
            return true;
        }
        case ValueKind::Dict: {
            const auto& x = a.dict_data();
            const auto& y = b.dict_data();
            if (x.items.size() != y.items.size()) return false;
            for (const auto& [k, v] : x.items) {
                const Value* other = y.find(k);
                if (!other || !py_equal(v, *other)) return false;
            }
            return true;
        }
        case ValueKind::Namespace: return &a.dict_data() == &b.dict_data();
        case ValueKind::Object: return &a.object_data() == &b.object_data();
        case ValueKind::Callable: return a.callable_ptr() == b.callable_ptr();
        default: return false;
    }
}

const Value* DictData::find(const Value& key) const {
    if (key.is_string()) return find(std::string_view(key.str()));
    for (const auto& kv : items) {
        if (py_equal(kv.first, key)) return &kv.second;
    }
    return nullptr;
}

const Value* DictData::find(std::string_view key) const {
    for (const auto& kv : items) {
        if (kv.first.is_string() && kv.first.str() == key) return &kv.second;
    }
    return nullptr;
}

uint32_t value_depth(const Value& v) {
    if (v.is_list()) return v.list_data().depth;
    if (v.is_dict() || v.is_namespace()) return v.dict_data().depth;
    return 0;
}

void DictData::set(Value key, Value value) {
    depth = std::max({depth, value_depth(key) + 1, value_depth(value) + 1});
    for (auto& kv : items) {
        if (py_equal(kv.first, key)) {
            kv.second = std::move(value);
            return;
        }
    }
    items.emplace_back(std::move(key), std::move(value));
}

}  // namespace zinc::chat
