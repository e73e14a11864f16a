// zinc/chat/tests_and_methods.cpp — jinja2's tests (`x is defined`, `n is divisibleby 3`) and
// the Python str / dict / list methods templates call (`s.startswith('x')`, `d.items()`), with
// the immutable sandbox's refusal of mutating methods (list.append, dict.update, ...).
#include <algorithm>
#include <cstring>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace zinc::chat {

namespace {

const Value& arg0(const CallArgs& a, const char* test) {
    if (a.pos.empty() && a.kw.empty()) fail(std::string(test) + "() missing 1 required positional argument");
    return a.pos.empty() ? a.kw[0].second : a.pos[0];
}

bool t_defined(Interpreter&, const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, const CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, const CallArgs&) { return v.is_bool(); }
bool t_false(Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_true(Interpreter&, const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, const CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, const CallArgs&) { return v.is_float(); }
bool t_number(Interpreter&, const Value& v, const CallArgs&) { return v.is_number(); }
bool t_string(Interpreter&, const Value& v, const CallArgs&) { return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, const CallArgs&) { return v.is_dict(); }
bool t_callable(Interpreter&, const Value& v, const CallArgs&) { return v.is_callable(); }
bool t_escaped(Interpreter&, const Value&, const CallArgs&) { return false; }
bool t_sequence(Interpreter&, const Value& v, const CallArgs&) {
    // len() and __getitem__: str, list, tuple, range, dict, and jinja2's Undefined.
    if (v.is_string() || v.is_dict() || v.is_undefined()) return true;
    if (v.is_list()) {
        const SeqKind k = v.seq_kind();
        return k == SeqKind::List || k == SeqKind::Tuple || k == SeqKind::Range;
    }
    return false;
}
bool t_iterable(Interpreter&, const Value& v, const CallArgs&) {
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_odd(Interpreter& in, const Value& v, const CallArgs&) {
    return py_equal(py_binop(in, "%", v, Value::integer(2)), Value::integer(1));
}
bool t_even(Interpreter& in, const Value& v, const CallArgs&) {
    return py_equal(py_binop(in, "%", v, Value::integer(2)), Value::integer(0));
}
bool t_divisibleby(Interpreter& in, const Value& v, const CallArgs& a) {
    return py_equal(py_binop(in, "%", v, arg0(a, "divisibleby")), Value::integer(0));
}
bool t_eq(Interpreter&, const Value& v, const CallArgs& a) { return py_compare("==", v, arg0(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, const CallArgs& a) { return py_compare("!=", v, arg0(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, const CallArgs& a) { return py_compare("<", v, arg0(a, "lt")); }
bool t_le(Interpreter&, const Value& v, const CallArgs& a) { return py_compare("<=", v, arg0(a, "le")); }
bool t_gt(Interpreter&, const Value& v, const CallArgs& a) { return py_compare(">", v, arg0(a, "gt")); }
bool t_ge(Interpreter&, const Value& v, const CallArgs& a) { return py_compare(">=", v, arg0(a, "ge")); }
bool t_in(Interpreter&, const Value& v, const CallArgs& a) { return py_compare("in", v, arg0(a, "in")); }
bool t_sameas(Interpreter&, const Value& v, const CallArgs& a) {
    const Value& o = arg0(a, "sameas");
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
        case ValueKind::None:
        case ValueKind::Undefined: return true;
        case ValueKind::Bool: return v.as_bool() == o.as_bool();
        case ValueKind::Int: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
        case ValueKind::String: return v.str() == o.str();
        case ValueKind::List: return &v.list_data() == &o.list_data();
        case ValueKind::Dict:
        case ValueKind::Namespace: return &v.dict_data() == &o.dict_data();
        default: return py_equal(v, o);
    }
}
bool t_lower(Interpreter&, const Value& v, const CallArgs&) {
    bool cased = false;
    for (char32_t c : text::decode(v.to_str())) {
        if (text::is_upper_cp(c)) return false;
        cased = cased || text::is_lower_cp(c);
    }
    return cased;
}
bool t_upper(Interpreter&, const Value& v, const CallArgs&) {
    bool cased = false;
    for (char32_t c : text::decode(v.to_str())) {
        if (text::is_lower_cp(c)) return false;
        cased = cased || text::is_upper_cp(c);
    }
    return cased;
}
bool t_filter(Interpreter&, const Value& v, const CallArgs&) {
    return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Interpreter&, const Value& v, const CallArgs&) {
    return v.is_string() && find_test(v.str()) != nullptr;
}

struct TestEntry {
    const char* name;
    TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none},
    {"boolean", t_boolean}, {"false", t_false}, {"true", t_true}, {"integer", t_integer},
    {"float", t_float}, {"number", t_number}, {"string", t_string}, {"mapping", t_mapping},
    {"sequence", t_sequence}, {"iterable", t_iterable}, {"callable", t_callable},
    {"escaped", t_escaped}, {"odd", t_odd}, {"even", t_even}, {"divisibleby", t_divisibleby},
    {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne},
    {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le},
    {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge},
    {"in", t_in}, {"sameas", t_sameas}, {"lower", t_lower}, {"upper", t_upper},
    {"filter", t_filter}, {"test", t_test},
};

// ---- methods --------------------------------------------------------------------------------

constexpr const char* kStrMethods[] = {
    "capitalize", "count", "endswith", "find", "format", "index", "isalnum", "isalpha",
    "isdigit", "islower", "isspace", "isupper", "join", "lower", "lstrip", "removeprefix",
    "removesuffix", "replace", "rfind", "rsplit", "rstrip", "split", "splitlines",
    "startswith", "strip", "title", "upper",
};
constexpr const char* kDictMethods[] = {"copy", "get", "items", "keys", "values"};
constexpr const char* kListMethods[] = {"copy", "count", "index"};
constexpr const char* kUnsafeList[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
constexpr const char* kUnsafeDict[] = {"clear", "pop", "popitem", "setdefault", "update"};

template <size_t N>
bool in_set(const char* const (&set)[N], std::string_view name) {
    return std::any_of(std::begin(set), std::end(set), [&](const char* s) { return name == s; });
}

bool mutable_list(const Value& v) { return v.is_list() && v.seq_kind() == SeqKind::List; }
bool tuple_like(const Value& v) {
    return v.is_list() && (v.seq_kind() == SeqKind::List || v.seq_kind() == SeqKind::Tuple);
}

std::string want_str(const Value& v, const char* what) {
    if (!v.is_string()) {
        fail(std::string(what) + " argument must be str, not " + std::string(v.type_name()));
    }
    return v.str();
}

// startswith/endswith accept a str or a tuple of str.
bool affix_match(const std::string& s, const Value& arg, bool prefix, const char* what) {
    if (arg.is_list() && arg.seq_kind() == SeqKind::Tuple) {
        for (const auto& x : arg.list_data().items) {
            if (affix_match(s, x, prefix, what)) return true;
        }
        return false;
    }
    if (!arg.is_string()) {
        fail(std::string(what) + " first arg must be str or a tuple of str, not " +
             std::string(arg.type_name()));
    }
    const std::string& a = arg.str();
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

int64_t cp_index(const std::string& s, size_t byte_off) {
    return static_cast<int64_t>(text::length(std::string_view(s).substr(0, byte_off)));
}

// String methods keep taint (taint.h): the parts strip/split/removeprefix return keep their
// bytes' taint, replace/join/format combine the taint of their pieces, and case mapping makes the
// whole result data when the string held any.
Value str_method(Interpreter& in, const Value& self, std::string_view name, const CallArgs& a) {
    const std::string& s = self.str();
    auto strip_chars = [&](const char* fname, bool l, bool r) {
        ArgBinder b(a, fname, {"chars"});
        Span keep;
        if (b.has(0) && !b.get(0)->is_none()) {
            const std::string chars = want_str(*b.get(0), fname);
            keep = text::strip_range(s, &chars, l, r);
        } else {
            keep = text::strip_range(s, nullptr, l, r);
        }
        return substr_value(self, keep.begin, keep.end);
    };
    if (name == "strip") return strip_chars("strip", true, true);
    if (name == "lstrip") return strip_chars("lstrip", true, false);
    if (name == "rstrip") return strip_chars("rstrip", false, true);
    if (name == "startswith" || name == "endswith") {
        ArgBinder b(a, name == "startswith" ? "startswith" : "endswith", {"prefix", "start", "end"});
        if (!b.has(0)) fail(std::string(name) + "() takes at least 1 argument (0 given)");
        if (b.has(1) || b.has(2)) {
            // Rare: slice bounds. Apply them on code points.
            std::u32string cps = text::decode(s);
            const auto n = static_cast<int64_t>(cps.size());
            auto norm = [&](const Value* v, int64_t d) {
                if (!v || v->is_none()) return d;
                int64_t x = v->as_int();
                if (x < 0) x = std::max<int64_t>(0, x + n);
                return std::min(x, n);
            };
            const int64_t st = norm(b.get(1), 0), en = norm(b.get(2), n);
            const std::string sub = st <= en ? text::encode(std::u32string_view(cps).substr(
                                                   static_cast<size_t>(st), static_cast<size_t>(en - st)))
                                             : std::string();
            if (st > n) return Value::boolean(false);
            return Value::boolean(affix_match(sub, *b.get(0), name == "startswith", name.data()));
        }
        return Value::boolean(affix_match(s, *b.get(0), name == "startswith", name.data()));
    }
    if (name == "split" || name == "rsplit") {
        ArgBinder b(a, name == "split" ? "split" : "rsplit", {"sep", "maxsplit"});
        const bool has_sep = b.has(0) && !b.get(0)->is_none();
        std::string sep;
        if (has_sep) {
            sep = want_str(*b.get(0), "split()");
            if (sep.empty()) fail("empty separator");
        }
        long maxsplit = -1;
        if (b.has(1)) {
            if (!b.get(1)->is_int() && !b.get(1)->is_bool()) fail("maxsplit must be an integer");
            maxsplit = static_cast<long>(b.get(1)->as_int());
        }
        auto parts = name == "split" ? text::split_ranges(s, has_sep ? &sep : nullptr, maxsplit)
                                     : text::rsplit_ranges(s, has_sep ? &sep : nullptr, maxsplit);
        std::vector<Value> out;
        for (const Span& p : parts) out.push_back(substr_value(self, p.begin, p.end));
        return Value::list(std::move(out));
    }
    if (name == "splitlines") {
        ArgBinder b(a, "splitlines", {"keepends"});
        if (b.has(0) && b.get(0)->truthy()) fail("unsupported construct: splitlines(keepends=True)");
        std::vector<Value> out;
        for (const Span& p : text::splitlines_ranges(s))
            out.push_back(substr_value(self, p.begin, p.end));
        return Value::list(std::move(out));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        ArgBinder b(a, name.data(), {});
        const bool data = self.has_data();
        if (name == "upper") return derived_string(text::upper(s), data);
        if (name == "lower") return derived_string(text::lower(s), data);
        if (name == "title") return derived_string(text::title(s), data);
        return derived_string(text::capitalize(s), data);
    }
    if (name == "replace") {
        ArgBinder b(a, "replace", {"old", "new", "count"});
        if (!b.has(0) || !b.has(1)) fail("replace expected at least 2 arguments");
        long count = -1;
        if (b.has(2)) count = static_cast<long>(b.get(2)->as_int());
        const std::string old = want_str(*b.get(0), "replace()");
        want_str(*b.get(1), "replace()");
        Value r = replace_value(self, old, *b.get(1), count);
        in.check_size(r.str().size());
        return r;
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "count") {
        ArgBinder b(a, name.data(), {"sub"});
        if (!b.has(0)) fail(std::string(name) + "() takes at least 1 argument (0 given)");
        const std::string sub = want_str(*b.get(0), name.data());
        if (name == "count") {
            if (sub.empty()) return Value::integer(static_cast<int64_t>(text::length(s)) + 1);
            int64_t n = 0;
            for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) n++;
            return Value::integer(n);
        }
        const size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
        if (p == std::string::npos) {
            if (name == "index") fail("substring not found");
            return Value::integer(-1);
        }
        return Value::integer(cp_index(s, p));
    }
    if (name == "join") {
        ArgBinder b(a, "join", {"iterable"});
        if (!b.has(0)) fail("join() takes exactly one argument (0 given)");
        TaintedText out;
        size_t k = 0;
        for (const Value& item : in.iterate(*b.get(0))) {
            if (!item.is_string()) {
                fail("sequence item " + std::to_string(k) + ": expected str instance, " +
                     std::string(item.type_name()) + " found");
            }
            if (k++) append_value(out, self);
            append_value(out, item);
            in.check_size(out.size());
        }
        return text_value(std::move(out));
    }
    if (name == "removeprefix" || name == "removesuffix") {
        ArgBinder b(a, name.data(), {"affix"});
        if (!b.has(0)) fail(std::string(name) + "() takes exactly one argument (0 given)");
        const std::string x = want_str(*b.get(0), name.data());
        if (name == "removeprefix") {
            if (x.size() <= s.size() && s.compare(0, x.size(), x) == 0)
                return substr_value(self, x.size(), s.size());
            return self;
        }
        if (x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 && !x.empty())
            return substr_value(self, 0, s.size() - x.size());
        return self;
    }
    if (name == "format") return py_str_format(in, self, a);
    // is* predicates
    ArgBinder b(a, name.data(), {});
    const std::u32string cps = text::decode(s);
    if (cps.empty()) return Value::boolean(false);
    auto all = [&](auto pred) { return std::all_of(cps.begin(), cps.end(), pred); };
    if (name == "isdigit") return Value::boolean(all(text::is_digit_cp));
    if (name == "isalpha") return Value::boolean(all(text::is_alpha_cp));
    if (name == "isalnum") return Value::boolean(all([](char32_t c) { return text::is_alpha_cp(c) || text::is_digit_cp(c); }));
    if (name == "isspace") return Value::boolean(all(text::is_space));
    if (name == "islower" || name == "isupper") {
        bool cased = false;
        for (char32_t c : cps) {
            if (name == "islower" ? text::is_upper_cp(c) : text::is_lower_cp(c)) return Value::boolean(false);
            cased = cased || text::is_cased_letter(c);
        }
        return Value::boolean(cased);
    }
    fail("unsupported str method '" + std::string(name) + "'");
}

}  // namespace

TestFn find_test(std::string_view name) {
    for (const auto& t : kTests) {
        if (name == t.name) return t.fn;
    }
    return nullptr;
}

bool has_method(const Value& self, std::string_view name) {
    if (self.is_string()) return in_set(kStrMethods, name);
    if (self.is_dict()) return in_set(kDictMethods, name);
    if (tuple_like(self)) return in_set(kListMethods, name);
    return false;
}

bool is_unsafe_method(const Value& self, std::string_view name) {
    if (mutable_list(self)) return in_set(kUnsafeList, name);
    if (self.is_dict()) return in_set(kUnsafeDict, name);
    return false;
}

Value call_method(Interpreter& in, const Value& self, std::string_view name, const CallArgs& a) {
    if (self.is_string()) return str_method(in, self, name, a);
    if (self.is_dict()) {
        const DictData& d = self.dict_data();
        if (name == "get") {
            ArgBinder b(a, "get", {"key", "default"});
            if (!b.has(0)) fail("get expected at least 1 argument, got 0");
            if (!py_hashable(*b.get(0))) fail("unhashable type: '" + std::string(b.get(0)->type_name()) + "'");
            if (const Value* v = d.find(*b.get(0))) return *v;
            return b.get_or(1, Value::none());
        }
        ArgBinder b(a, name.data(), {});
        if (name == "copy") return Value::dict(d.items);
        std::vector<Value> out;
        for (const auto& [k, v] : d.items) {
            if (name == "keys") out.push_back(k);
            else if (name == "values") out.push_back(v);
            else out.push_back(Value::list({k, v}, SeqKind::Tuple));
        }
        const SeqKind kind = name == "keys" ? SeqKind::DictKeys : name == "values" ? SeqKind::DictValues : SeqKind::DictItems;
        return Value::list(std::move(out), kind);
    }
    if (tuple_like(self)) {
        const auto& items = self.list_data().items;
        if (name == "copy") {
            ArgBinder b(a, "copy", {});
            return Value::list(items, self.seq_kind());
        }
        ArgBinder b(a, name.data(), {"value"});
        if (!b.has(0)) fail(std::string(name) + "() takes exactly one argument (0 given)");
        int64_t count = 0;
        for (size_t k = 0; k < items.size(); k++) {
            if (!py_equal(items[k], *b.get(0))) continue;
            if (name == "index") return Value::integer(static_cast<int64_t>(k));
            count++;
        }
        if (name == "index") fail(b.get(0)->repr() + " is not in list");
        return Value::integer(count);
    }
    fail("'" + std::string(self.type_name()) + "' object has no attribute '" + std::string(name) + "'");
}

}  // namespace zinc::chat
