// zinc/chat/filters.cpp — jinja2's built-in filters (the ones chat templates use), with
// transformers' tojson override. Each follows jinja2 3.1's filters.py: same defaults, same
// argument names, same laziness (map/select/unique/items/reverse return one-shot generators).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace zinc::chat {

ArgBinder::ArgBinder(const CallArgs& args, std::string_view fname,
                     std::initializer_list<const char*> params)
    : slots_(params.size(), nullptr) {
    if (args.pos.size() > params.size()) {
        fail(std::string(fname) + "() takes at most " + std::to_string(params.size()) +
             " argument(s) (" + std::to_string(args.pos.size()) + " given)");
    }
    for (size_t k = 0; k < args.pos.size(); k++) slots_[k] = &args.pos[k];
    for (const auto& [key, val] : args.kw) {
        size_t k = 0;
        for (const char* p : params) {
            if (key == p) break;
            k++;
        }
        if (k == params.size()) {
            fail(std::string(fname) + "() got an unexpected keyword argument '" + key + "'");
        }
        if (slots_[k]) fail(std::string(fname) + "() got multiple values for argument '" + key + "'");
        slots_[k] = &val;
    }
}

namespace {

std::string soft_str(const Value& v) { return v.to_str(); }

int64_t want_int(const Value* v, int64_t fallback, const char* what) {
    if (!v || v->is_none()) return fallback;
    if (v->is_int() || v->is_bool()) return v->as_int();
    fail(std::string(what) + " must be an integer, not " + std::string(v->type_name()));
}

// jinja2 make_attrgetter: "a.b.0" walks getitem (digit parts become integers).
Value get_attribute_path(Interpreter& in, const Value& item, const Value& attr) {
    if (attr.is_none() || attr.is_undefined()) return item;
    if (!attr.is_string()) return in.getitem(item, attr);
    Value cur = item;
    size_t start = 0;
    const std::string& s = attr.str();
    while (true) {
        const size_t dot = s.find('.', start);
        const std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                         [](char c) { return c >= '0' && c <= '9'; });
        if (digits && part.size() < 18) cur = in.getitem(cur, Value::integer(std::stoll(part)));
        else cur = in.getitem(cur, Value::string(part));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return cur;
}

Value ignore_case(const Value& v) {
    return v.is_string() ? Value::string(text::lower(v.str())) : v;
}

// ---- numeric parsing (Python int() / float() of a str) --------------------------------------

bool parse_py_int(const std::string& raw, int64_t base, int64_t& out) {
    const std::string s = text::strip(raw, nullptr, true, true);
    size_t i = 0;
    bool neg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    auto has_prefix = [&](char p) {
        return i + 1 < s.size() && s[i] == '0' && (s[i + 1] | 0x20) == p;
    };
    if (base == 0) {
        if (has_prefix('x')) base = 16;
        else if (has_prefix('o')) base = 8;
        else if (has_prefix('b')) base = 2;
        else base = 10;
        if (base != 10) i += 2;
        else {
            // base 0 forbids leading zeros in non-zero decimals
            size_t j = i;
            while (j < s.size() && (s[j] == '0' || s[j] == '_')) j++;
            if (j > i && s[i] == '0' && j < s.size()) return false;
        }
    } else if ((base == 16 && has_prefix('x')) || (base == 8 && has_prefix('o')) ||
               (base == 2 && has_prefix('b'))) {
        i += 2;
        if (i < s.size() && s[i] == '_') i++;
    }
    if (base < 2 || base > 36) return false;
    if (i >= s.size()) return false;
    unsigned __int128 v = 0;
    bool prev_digit = false;
    for (; i < s.size(); i++) {
        const char c = s[i];
        if (c == '_') {
            if (!prev_digit || i + 1 >= s.size()) return false;
            prev_digit = false;
            continue;
        }
        int d = -1;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
        if (d < 0 || d >= base) return false;
        v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
        if (v > static_cast<unsigned __int128>(INT64_MAX) + 1) fail("integer overflow (zinc supports 64-bit integers)");
        prev_digit = true;
    }
    if (!prev_digit) return false;
    if (!neg && v > static_cast<unsigned __int128>(INT64_MAX)) fail("integer overflow (zinc supports 64-bit integers)");
    out = neg ? static_cast<int64_t>(-v) : static_cast<int64_t>(v);
    return true;
}

bool parse_py_float(const std::string& raw, double& out) {
    std::string s = text::strip(raw, nullptr, true, true);
    std::string low;
    for (char c : s) low.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    std::string body = low;
    bool neg = false;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
        neg = body[0] == '-';
        body = body.substr(1);
    }
    if (body == "inf" || body == "infinity") { out = neg ? -HUGE_VAL : HUGE_VAL; return true; }
    if (body == "nan") { out = std::nan(""); return true; }
    // digits with single underscores between digits; [.digits]; [e[+-]digits]
    std::string clean;
    bool any_digit = false;
    for (size_t i = 0; i < body.size(); i++) {
        const char c = body[i];
        if (c == '_') {
            const bool ok = i > 0 && i + 1 < body.size() && std::isdigit(static_cast<unsigned char>(body[i - 1])) &&
                            std::isdigit(static_cast<unsigned char>(body[i + 1]));
            if (!ok) return false;
            continue;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) any_digit = true;
        else if (c != '.' && c != 'e' && c != '+' && c != '-') return false;
        clean.push_back(c);
    }
    if (!any_digit) return false;
    double v = 0;
    auto res = std::from_chars(clean.data(), clean.data() + clean.size(), v);
    if (res.ptr != clean.data() + clean.size()) return false;
    if (res.ec == std::errc::result_out_of_range) {
        const size_t e = clean.find('e');
        v = (e != std::string::npos && clean[e + 1] == '-') ? 0.0 : HUGE_VAL;
    } else if (res.ec != std::errc()) {
        return false;
    }
    // from_chars accepts "1e5" but also forms Python rejects ("1.e" is rejected by both).
    out = neg ? -v : v;
    return true;
}

Value float_to_int(double f) {
    if (std::isnan(f) || std::isinf(f)) return Value();  // ValueError / OverflowError
    const double t = std::trunc(f);
    if (t >= 9.2233720368547758e18 || t < -9.2233720368547758e18) fail("integer overflow (zinc supports 64-bit integers)");
    return Value::integer(static_cast<int64_t>(t));
}

// ---- filters --------------------------------------------------------------------------------

Value f_abs(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "abs", {});
    if (v.is_float()) return Value::number(std::fabs(v.as_float()));
    if (v.is_int() || v.is_bool()) {
        if (v.as_int() == INT64_MIN) fail("integer overflow (zinc supports 64-bit integers)");
        return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
    }
    fail("bad operand type for abs(): '" + std::string(v.type_name()) + "'");
}

Value f_attr(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "attr", {"name"});
    if (!b.has(0)) fail("attr() missing required argument 'name'");
    const std::string name = b.get(0)->to_str();
    if (v.is_dict()) {
        if (has_method(v, name)) return in.getattr(v, name);
        return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    return in.getattr(v, name);
}

Value f_batch(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "batch", {"linecount", "fill_with"});
    const int64_t n = want_int(b.get(0), 0, "linecount");
    if (n <= 0) fail("batch() linecount must be positive");
    std::vector<Value> out, cur;
    for (auto& item : in.iterate(v)) {
        if (static_cast<int64_t>(cur.size()) == n) {
            out.push_back(Value::list(std::move(cur)));
            cur.clear();
        }
        cur.push_back(item);
    }
    if (!cur.empty()) {
        if (b.has(1) && !b.get(1)->is_none()) {
            while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*b.get(1));
        }
        out.push_back(Value::list(std::move(cur)));
    }
    return Value::list(std::move(out), SeqKind::Generator);
}

Value f_capitalize(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "capitalize", {});
    return Value::string(text::capitalize(soft_str(v)));
}

Value f_center(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "center", {"width"});
    const int64_t width = want_int(b.get(0), 80, "width");
    const std::string s = soft_str(v);
    const auto len = static_cast<int64_t>(text::length(s));
    if (width <= len) return Value::string(s);
    const int64_t marg = width - len;
    const int64_t left = marg / 2 + (marg & width & 1);
    return Value::string(std::string(static_cast<size_t>(left), ' ') + s +
                         std::string(static_cast<size_t>(marg - left), ' '));
}

Value f_length(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "length", {});
    return Value::integer(in.length(v));
}

Value f_default(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "default", {"default_value", "boolean"});
    const bool boolean = b.has(1) && b.get(1)->truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return b.get_or(0, Value::string(""));
    return v;
}

Value f_dictsort(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "dictsort", {"case_sensitive", "by", "reverse"});
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_dict()) fail("dictsort() needs a mapping");
    const bool cs = b.has(0) && b.get(0)->truthy();
    const std::string by = b.has(1) ? b.get(1)->to_str() : "key";
    if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
    const bool reverse = b.has(2) && b.get(2)->truthy();
    const size_t pos = by == "key" ? 0 : 1;
    std::vector<Value> items;
    for (const auto& [k, val] : v.dict_data().items) items.push_back(Value::list({k, val}, SeqKind::Tuple));
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        Value kx = x.list_data().items[pos], ky = y.list_data().items[pos];
        if (!cs) { kx = ignore_case(kx); ky = ignore_case(ky); }
        return reverse ? py_less(ky, kx) : py_less(kx, ky);
    });
    (void)in;
    return Value::list(std::move(items));
}

Value f_escape(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "escape", {});
    const std::string s = soft_str(v);
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out.push_back(c);
        }
    }
    return Value::string(std::move(out));
}

Value f_first(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "first", {});
    std::vector<Value> items = in.iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "last", {});
    if (v.is_list() && v.seq_kind() == SeqKind::Generator) fail("'generator' object is not reversible");
    std::vector<Value> items = in.iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value f_float(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "float", {"default"});
    const Value dflt = b.get_or(0, Value::number(0.0));
    if (v.is_undefined()) fail_undefined(v);
    if (v.is_float()) return v;
    if (v.is_int() || v.is_bool()) return Value::number(static_cast<double>(v.as_int()));
    if (v.is_string()) {
        double f;
        if (parse_py_float(v.str(), f)) return Value::number(f);
    }
    return dflt;
}

Value f_format(Interpreter& in, const Value& v, const CallArgs& a) {
    if (!a.pos.empty() && !a.kw.empty()) fail("can't handle positional and keyword arguments at the same time");
    Value args;
    if (!a.kw.empty()) {
        args = Value::dict();
        for (const auto& [k, val] : a.kw) args.dict_data().set(Value::string(k), val);
    } else {
        args = Value::list(a.pos, SeqKind::Tuple);
    }
    return py_percent_format(in, str_value(v), args);
}

Value f_indent(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "indent", {"width", "first", "blank"});
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_string()) fail("can only concatenate str (not \"" + std::string(v.type_name()) + "\") to str");
    std::string indention;
    if (b.has(0) && b.get(0)->is_string()) indention = b.get(0)->str();
    else indention = std::string(static_cast<size_t>(std::max<int64_t>(0, want_int(b.get(0), 4, "width"))), ' ');
    const bool first = b.has(1) && b.get(1)->truthy();
    const bool blank = b.has(2) && b.get(2)->truthy();
    const std::vector<std::string> lines = text::splitlines(v.str() + "\n");
    std::string rv;
    if (blank) {
        for (size_t k = 0; k < lines.size(); k++) {
            if (k) rv += "\n" + indention;
            rv += lines[k];
        }
    } else if (!lines.empty()) {
        rv = lines[0];
        for (size_t k = 1; k < lines.size(); k++) {
            rv += "\n";
            if (!lines[k].empty()) rv += indention;
            rv += lines[k];
        }
    }
    if (first) rv = indention + rv;
    return Value::string(std::move(rv));
}

Value f_int(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "int", {"default", "base"});
    const Value dflt = b.get_or(0, Value::integer(0));
    const int64_t base = want_int(b.get(1), 10, "base");
    if (v.is_undefined()) fail_undefined(v);
    if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
    if (v.is_float()) {
        Value r = float_to_int(v.as_float());
        return r.is_undefined() ? dflt : r;
    }
    if (v.is_string()) {
        int64_t i;
        if (parse_py_int(v.str(), base, i)) return Value::integer(i);
        double f;
        if (parse_py_float(v.str(), f)) {
            Value r = float_to_int(f);
            return r.is_undefined() ? dflt : r;
        }
    }
    return dflt;
}

Value f_items(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "items", {});
    std::vector<Value> out;
    if (v.is_undefined()) return Value::list({}, SeqKind::Generator);
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
    for (const auto& [k, val] : v.dict_data().items) out.push_back(Value::list({k, val}, SeqKind::Tuple));
    return Value::list(std::move(out), SeqKind::Generator);
}

Value f_join(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "join", {"d", "attribute"});
    const Value sep = b.has(0) ? str_value(*b.get(0)) : Value::string("");
    TaintedText out;
    bool first = true;
    for (const Value& item : in.iterate(v)) {
        if (!first) append_value(out, sep);
        first = false;
        append_value(out, b.has(1) ? get_attribute_path(in, item, *b.get(1)) : item);
        in.check_size(out.size());
    }
    return text_value(std::move(out));
}

Value f_list(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "list", {});
    return Value::list(in.iterate(v));
}

Value f_lower(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "lower", {});
    return Value::string(text::lower(soft_str(v)));
}

Value f_upper(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "upper", {});
    return Value::string(text::upper(soft_str(v)));
}

Value f_title(Interpreter&, const Value& v, const CallArgs& a) {
    // jinja2: split on runs of [-\s({\[<] and upper-case the first character of each piece.
    ArgBinder b(a, "title", {});
    const std::u32string s = text::decode(soft_str(v));
    auto is_sep = [](char32_t c) {
        return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || text::is_space(c);
    };
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
        size_t j = i;
        const bool sep = is_sep(s[i]);
        while (j < s.size() && is_sep(s[j]) == sep) j++;
        const std::string head = text::encode(std::u32string_view(s).substr(i, 1));
        out += text::upper(head) + text::lower(text::encode(std::u32string_view(s).substr(i + 1, j - i - 1)));
        i = j;
    }
    return Value::string(std::move(out));
}

Value f_map(Interpreter& in, const Value& v, const CallArgs& a) {
    std::vector<Value> out;
    const std::vector<Value> items = v.truthy() || v.is_list() ? in.iterate(v) : std::vector<Value>{};
    if (a.pos.empty() && !a.kw.empty() && a.kw[0].first == "attribute") {
        Value attribute, dflt = Value::none();
        for (const auto& [k, val] : a.kw) {
            if (k == "attribute") attribute = val;
            else if (k == "default") dflt = val;
            else fail("Unexpected keyword argument '" + k + "'");
        }
        for (const Value& item : items) {
            Value r = get_attribute_path(in, item, attribute);
            if (r.is_undefined() && !dflt.is_none()) r = dflt;
            out.push_back(std::move(r));
        }
        return Value::list(std::move(out), SeqKind::Generator);
    }
    bool has_attr_kw = false;
    for (const auto& kv : a.kw) has_attr_kw = has_attr_kw || kv.first == "attribute";
    if (a.pos.empty() && has_attr_kw) {
        CallArgs reordered;
        for (const auto& kv : a.kw) {
            if (kv.first == "attribute") reordered.kw.insert(reordered.kw.begin(), kv);
            else reordered.kw.push_back(kv);
        }
        return f_map(in, v, reordered);
    }
    if (a.pos.empty()) fail("map requires a filter argument");
    const std::string name = a.pos[0].to_str();
    if (!find_filter(name)) fail("No filter named '" + name + "'.");
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (const Value& item : items) out.push_back(in.apply_filter(name, item, rest));
    return Value::list(std::move(out), SeqKind::Generator);
}

Value min_max(Interpreter& in, const Value& v, const CallArgs& a, bool want_max) {
    ArgBinder b(a, want_max ? "max" : "min", {"case_sensitive", "attribute"});
    const bool cs = b.has(0) && b.get(0)->truthy();
    const std::vector<Value> items = in.iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    auto key = [&](const Value& x) {
        Value k = b.has(1) ? get_attribute_path(in, x, *b.get(1)) : x;
        return cs ? k : ignore_case(k);
    };
    size_t best = 0;
    Value best_key = key(items[0]);
    for (size_t k = 1; k < items.size(); k++) {
        Value kk = key(items[k]);
        if (want_max ? py_less(best_key, kk) : py_less(kk, best_key)) {
            best = k;
            best_key = kk;
        }
    }
    return items[best];
}
Value f_max(Interpreter& in, const Value& v, const CallArgs& a) { return min_max(in, v, a, true); }
Value f_min(Interpreter& in, const Value& v, const CallArgs& a) { return min_max(in, v, a, false); }

Value select_or_reject(Interpreter& in, const Value& v, const CallArgs& a, bool lookup_attr, bool select) {
    std::vector<Value> out;
    if (!v.truthy()) return Value::list({}, SeqKind::Generator);
    size_t off = 0;
    Value attr;
    if (lookup_attr) {
        if (a.pos.empty()) fail("Missing parameter for attribute name");
        attr = a.pos[0];
        off = 1;
    }
    std::string test;
    CallArgs rest;
    if (a.pos.size() > off) {
        test = a.pos[off].to_str();
        rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off) + 1, a.pos.end());
        rest.kw = a.kw;
    }
    for (const Value& item : in.iterate(v)) {
        const Value x = lookup_attr ? get_attribute_path(in, item, attr) : item;
        const bool r = test.empty() ? x.truthy() : in.apply_test(test, x, rest);
        if (r == select) out.push_back(item);
    }
    return Value::list(std::move(out), SeqKind::Generator);
}
Value f_select(Interpreter& in, const Value& v, const CallArgs& a) { return select_or_reject(in, v, a, false, true); }
Value f_reject(Interpreter& in, const Value& v, const CallArgs& a) { return select_or_reject(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, const CallArgs& a) { return select_or_reject(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, const CallArgs& a) { return select_or_reject(in, v, a, true, false); }

Value f_replace(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "replace", {"old", "new", "count"});
    if (!b.has(0) || !b.has(1)) fail("replace() missing required arguments 'old' and 'new'");
    const int64_t count = want_int(b.get(2), -1, "count");
    Value r = replace_value(str_value(v), b.get(0)->to_str(), str_value(*b.get(1)),
                            static_cast<long>(count));
    in.check_size(r.str().size());
    return r;
}

Value f_reverse(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "reverse", {});
    if (v.is_string()) {
        std::vector<Value> chars = in.iterate(v);  // each keeps its taint
        std::reverse(chars.begin(), chars.end());
        TaintedText out;
        for (const Value& c : chars) append_value(out, c);
        return text_value(std::move(out));
    }
    const bool was_generator = v.is_list() && v.seq_kind() == SeqKind::Generator;
    std::vector<Value> items = in.iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items), was_generator ? SeqKind::List : SeqKind::Generator);
}

Value f_round(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "round", {"precision", "method"});
    const int64_t precision = want_int(b.get(0), 0, "precision");
    const std::string method = b.has(1) ? b.get(1)->to_str() : "common";
    if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number()) fail("type " + std::string(v.type_name()) + " doesn't define __round__ method");
    if (method == "common") {
        if (!v.is_float()) {
            if (precision >= 0) return Value::integer(v.as_int());
            // round half to even at 10^-precision
            int64_t p = 1;
            for (int64_t k = 0; k < -precision && p < INT64_MAX / 10; k++) p *= 10;
            const int64_t x = v.as_int();
            int64_t q = x / p, r = x % p;
            if (r < 0) { r += p; q--; }
            if (2 * r > p || (2 * r == p && (q % 2 != 0))) q++;
            return Value::integer(q * p);
        }
        const double x = v.as_float();
        if (std::isnan(x) || std::isinf(x)) return v;
        if (precision >= 0 && precision <= 300) {
            // printf rounds the exact binary value half-to-even, as CPython's round() does.
            char buf[512];
            std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
            double r = std::strtod(buf, nullptr);
            if (r == 0.0) r = std::copysign(0.0, x);
            return Value::number(r);
        }
        if (precision > 300) return v;
        const double p = std::pow(10.0, static_cast<double>(-precision));
        return Value::number(std::nearbyint(x / p) * p);
    }
    const double p = std::pow(10.0, static_cast<double>(precision));
    const double x = v.to_double() * p;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value f_safe(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "safe", {});
    return str_value(v);
}

Value f_sort(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "sort", {"reverse", "case_sensitive", "attribute"});
    const bool reverse = b.has(0) && b.get(0)->truthy();
    const bool cs = b.has(1) && b.get(1)->truthy();
    std::vector<Value> attrs;  // comma-separated attribute list
    if (b.has(2) && !b.get(2)->is_none()) {
        if (b.get(2)->is_string()) {
            const std::string& s = b.get(2)->str();
            size_t start = 0;
            while (true) {
                const size_t c = s.find(',', start);
                attrs.push_back(Value::string(s.substr(start, c == std::string::npos ? std::string::npos : c - start)));
                if (c == std::string::npos) break;
                start = c + 1;
            }
        } else {
            attrs.push_back(*b.get(2));
        }
    }
    std::vector<Value> items = in.iterate(v);
    std::vector<std::pair<Value, size_t>> keyed;
    for (size_t k = 0; k < items.size(); k++) {
        std::vector<Value> parts;
        if (attrs.empty()) parts.push_back(cs ? items[k] : ignore_case(items[k]));
        for (const auto& at : attrs) {
            Value x = get_attribute_path(in, items[k], at);
            parts.push_back(cs ? x : ignore_case(x));
        }
        keyed.emplace_back(Value::list(std::move(parts)), k);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        return reverse ? py_less(y.first, x.first) : py_less(x.first, y.first);
    });
    std::vector<Value> out;
    for (const auto& kv : keyed) out.push_back(items[kv.second]);
    return Value::list(std::move(out));
}

Value f_string(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "string", {});
    return str_value(v);
}

Value f_sum(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "sum", {"attribute", "start"});
    Value total = b.get_or(1, Value::integer(0));
    for (const Value& item : in.iterate(v)) {
        total = py_binop(in, "+", total, b.has(0) ? get_attribute_path(in, item, *b.get(0)) : item);
    }
    return total;
}

Value f_tojson(Interpreter&, const Value& v, const CallArgs& a) {
    // transformers' override: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
    // sort_keys=False) -- no HTML escaping, unlike jinja2's own tojson.
    ArgBinder b(a, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonOptions opt;
    opt.ensure_ascii = b.has(0) && b.get(0)->truthy();
    if (b.has(1) && !b.get(1)->is_none()) {
        const Value& ind = *b.get(1);
        if (ind.is_string()) {
            opt.indent_is_string = true;
            opt.indent_str = ind.str();
            opt.indent = 0;
        } else if (ind.is_int() || ind.is_bool()) {
            opt.indent = static_cast<int>(std::clamp<int64_t>(ind.as_int(), 0, 1000));
            opt.indent_str = std::string(static_cast<size_t>(opt.indent), ' ');
            opt.indent_is_string = true;
        } else {
            fail("tojson() indent must be an integer or a string");
        }
        opt.item_sep = ",";
    }
    if (b.has(2) && !b.get(2)->is_none()) {
        const Value& sep = *b.get(2);
        if (!sep.is_list() || sep.list_data().items.size() != 2 || !sep.list_data().items[0].is_string() ||
            !sep.list_data().items[1].is_string())
            fail("tojson() separators must be a pair of strings");
        opt.item_sep = sep.list_data().items[0].str();
        opt.key_sep = sep.list_data().items[1].str();
    }
    opt.sort_keys = b.has(3) && b.get(3)->truthy();
    return Value::string(py_json_dumps(v, opt));
}

Value f_trim(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "trim", {"chars"});
    std::string chars;
    const bool has_chars = b.has(0) && !b.get(0)->is_none();
    if (has_chars) chars = b.get(0)->to_str();
    const Value s = str_value(v);
    const Span keep = text::strip_range(s.str(), has_chars ? &chars : nullptr, true, true);
    return substr_value(s, keep.begin, keep.end);
}

Value f_unique(Interpreter& in, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "unique", {"case_sensitive", "attribute"});
    const bool cs = b.has(0) && b.get(0)->truthy();
    std::vector<Value> out, seen;
    for (const Value& item : in.iterate(v)) {
        Value key = b.has(1) ? get_attribute_path(in, item, *b.get(1)) : item;
        if (!cs) key = ignore_case(key);
        if (!py_hashable(key)) fail("unhashable type: '" + std::string(key.type_name()) + "'");
        bool dup = false;
        for (const auto& s : seen) {
            if (py_equal(s, key)) { dup = true; break; }
        }
        if (dup) continue;
        seen.push_back(key);
        out.push_back(item);
    }
    return Value::list(std::move(out), SeqKind::Generator);
}

Value f_wordcount(Interpreter&, const Value& v, const CallArgs& a) {
    ArgBinder b(a, "wordcount", {});
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : text::decode(soft_str(v))) {
        const bool w = c == '_' || text::is_alpha_cp(c) || text::is_digit_cp(c) || (c >= 0x80 && !text::is_space(c) && text::is_printable(c) && c > 0x2FF);
        if (w && !in_word) n++;
        in_word = w;
    }
    return Value::integer(n);
}

// Filters that compute new text from their input (case mapping, escaping, layout, JSON) are
// not taint-aware: their result is made entirely data when the input or an argument holds data
// (the wrapper below). Every other filter moves values or bytes and keeps their taint itself.
template <FilterFn F>
Value derived(Interpreter& in, const Value& v, const CallArgs& a) {
    Value r = F(in, v, a);
    if (!r.is_string() || r.has_data()) return r;
    bool data = contains_data(v);
    for (const Value& x : a.pos) data = data || contains_data(x);
    for (const auto& kv : a.kw) data = data || contains_data(kv.second);
    return data ? Value::data_string(r.str()) : r;
}

struct FilterEntry {
    const char* name;
    FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", derived<f_capitalize>},
    {"center", derived<f_center>},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", derived<f_escape>},
    {"escape", derived<f_escape>},
    {"first", f_first},
    {"float", f_float},
    {"format", f_format},
    {"indent", derived<f_indent>},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", derived<f_lower>},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", derived<f_title>},
    {"tojson", derived<f_tojson>},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", derived<f_upper>},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
    for (const auto& f : kFilters) {
        if (name == f.name) return f.fn;
    }
    return nullptr;
}

bool is_known_filter(std::string_view name) { return find_filter(name) != nullptr; }

}  // namespace zinc::chat
