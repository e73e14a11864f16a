// zinc/chat/globals.cpp — the global functions templates can call: jinja2's range, dict and
// namespace, and the helpers transformers adds (raise_exception, strftime_now); plus Python's
// "%" and str.format string formatting.
#include <cmath>
#include <cstdio>
#include <ctime>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace zinc::chat {

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value make_builtin(const char* name, Value (*fn)(Interpreter&, const CallArgs&)) {
    auto c = std::make_shared<CallableData>();
    c->type = CallableData::Type::Builtin;
    c->name = name;
    c->fn = fn;
    return Value::callable(std::move(c));
}

int64_t int_arg(const Value& v, const char* fname) {
    if (v.is_int() || v.is_bool()) return v.as_int();
    fail("'" + std::string(v.type_name()) + "' object cannot be interpreted as an integer (in " + fname + ")");
}

Value g_range(Interpreter&, const CallArgs& a) {
    if (!a.kw.empty()) fail("range() takes no keyword arguments");
    if (a.pos.empty() || a.pos.size() > 3) fail("range expected 1 to 3 arguments");
    int64_t start = 0, stop = 0, step = 1;
    if (a.pos.size() == 1) {
        stop = int_arg(a.pos[0], "range");
    } else {
        start = int_arg(a.pos[0], "range");
        stop = int_arg(a.pos[1], "range");
        if (a.pos.size() == 3) step = int_arg(a.pos[2], "range");
    }
    if (step == 0) fail("range() arg 3 must not be zero");
    std::vector<Value> items;
    const long double count = step > 0 ? std::ceil((static_cast<long double>(stop) - start) / step)
                                       : std::ceil((static_cast<long double>(start) - stop) / -step);
    if (count > kMaxRange) {
        fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) items.push_back(Value::integer(i));
    Value r = Value::list(std::move(items), SeqKind::Range);
    r.list_data().range_start = start;
    r.list_data().range_stop = stop;
    r.list_data().range_step = step;
    return r;
}

// dict(mapping_or_pairs?, **kwargs), also the argument convention of namespace().
void fill_dict(Interpreter& in, DictData& d, const CallArgs& a, const char* fname) {
    if (a.pos.size() > 1) fail(std::string(fname) + " expected at most 1 positional argument");
    if (!a.pos.empty()) {
        const Value& src = a.pos[0];
        if (src.is_dict() || src.is_namespace()) {
            for (const auto& kv : src.dict_data().items) d.set(kv.first, kv.second);
        } else {
            for (const Value& pair : in.iterate(src)) {
                const std::vector<Value> kv = in.iterate(pair);
                if (kv.size() != 2) fail(std::string(fname) + ": sequence elements must have length 2");
                if (!py_hashable(kv[0])) fail("unhashable type: '" + std::string(kv[0].type_name()) + "'");
                d.set(kv[0], kv[1]);
            }
        }
    }
    for (const auto& [k, v] : a.kw) d.set(Value::string(k), v);
}

Value g_dict(Interpreter& in, const CallArgs& a) {
    Value d = Value::dict();
    fill_dict(in, d.dict_data(), a, "dict");
    return d;
}

Value g_namespace(Interpreter& in, const CallArgs& a) {
    Value ns = Value::namespace_object();
    fill_dict(in, ns.dict_data(), a, "namespace");
    in.track_namespace(ns);
    return ns;
}

Value g_raise_exception(Interpreter&, const CallArgs& a) {
    const std::string msg = a.pos.empty() ? (a.kw.empty() ? std::string() : a.kw[0].second.to_str())
                                          : a.pos[0].to_str();
    throw TemplateError{msg, {}, true};
}

Value g_strftime_now(Interpreter& in, const CallArgs& a) {
    ArgBinder b(a, "strftime_now", {"format"});
    if (!b.has(0)) fail("strftime_now() missing required argument 'format'");
    if (!b.get(0)->is_string()) fail("strftime() argument 1 must be str, not " + std::string(b.get(0)->type_name()));
    const std::string fmt = b.get(0)->str();
    const std::time_t t = static_cast<std::time_t>(in.now_unix());
    std::tm tm{};
    localtime_r(&t, &tm);
    if (fmt.empty()) return Value::string("");
    // strftime returns 0 both for "too small" and for an empty result: grow, then give up.
    for (size_t cap = 64 + fmt.size() * 4; cap <= (1u << 20); cap *= 4) {
        std::string buf(cap, '\0');
        const size_t n = std::strftime(buf.data(), cap, fmt.c_str(), &tm);
        if (n > 0) {
            buf.resize(n);
            return derived_string(std::move(buf), b.get(0)->has_data());  // data format: data
        }
    }
    return Value::string("");
}

}  // namespace

Value find_global_function(std::string_view name) {
    if (name == "range") return make_builtin("range", g_range);
    if (name == "dict") return make_builtin("dict", g_dict);
    if (name == "namespace") return make_builtin("namespace", g_namespace);
    if (name == "raise_exception") return make_builtin("raise_exception", g_raise_exception);
    if (name == "strftime_now") return make_builtin("strftime_now", g_strftime_now);
    return Value();
}

// ---- "%" formatting -------------------------------------------------------------------------

namespace {

std::string pad(const std::string& s, int64_t width, bool left_align, char fill = ' ') {
    const auto len = static_cast<int64_t>(text::length(s));
    if (width <= len) return s;
    const std::string padding(static_cast<size_t>(width - len), fill);
    return left_align ? s + padding : padding + s;
}

}  // namespace

Value py_percent_format(Interpreter& in, const Value& fmt_value, const Value& args) {
    const std::string& fmt = fmt_value.str();
    const DataSpans* fmt_spans = fmt_value.data_spans();
    // The format string's own bytes keep their taint; each interpolated piece is data when its
    // argument holds data.
    auto fmt_data = [&](size_t at) { return fmt_spans && spans_overlap(*fmt_spans, at, at + 1); };
    std::vector<Value> pos;
    const Value* mapping = nullptr;
    if (args.is_list() && args.seq_kind() == SeqKind::Tuple) pos = args.list_data().items;
    else if (args.is_dict()) mapping = &args;
    else pos.push_back(args);
    size_t next = 0;
    TaintedText out;
    size_t i = 0;
    while (i < fmt.size()) {
        const char c = fmt[i];
        if (c != '%') {
            out.append_as(std::string_view(&fmt[i], 1), fmt_data(i));
            i++;
            continue;
        }
        i++;
        if (i >= fmt.size()) fail("incomplete format");
        const Value* arg = nullptr;
        if (fmt[i] == '(') {
            const size_t close = fmt.find(')', i);
            if (close == std::string::npos) fail("incomplete format key");
            if (!mapping) fail("format requires a mapping");
            arg = mapping->dict_data().find(std::string_view(fmt).substr(i + 1, close - i - 1));
            if (!arg) fail("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
            i = close + 1;
        }
        std::string flags;
        while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) flags += fmt[i++];
        int64_t width = -1, prec = -1;
        if (i < fmt.size() && fmt[i] == '*') fail("unsupported construct: '*' width in % format");
        while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
            width = std::max<int64_t>(width, 0) * 10 + (fmt[i++] - '0');
            if (width > 100000) fail("format width too large");
        }
        if (i < fmt.size() && fmt[i] == '.') {
            i++;
            prec = 0;
            while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
                prec = prec * 10 + (fmt[i++] - '0');
                if (prec > 1000) fail("format precision too large");
            }
        }
        while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) i++;
        if (i >= fmt.size()) fail("incomplete format");
        const char conv = fmt[i++];
        if (conv == '%') {
            out.append_as("%", fmt_data(i - 1));
            continue;
        }
        if (!arg) {
            if (mapping) fail("format requires a mapping");
            if (next >= pos.size()) fail("not enough arguments for format string");
            arg = &pos[next++];
        }
        const bool left = flags.find('-') != std::string::npos;
        std::string piece;
        switch (conv) {
            case 's':
            case 'r':
            case 'a': {
                piece = conv == 's' ? arg->to_str() : arg->repr();
                if (prec >= 0) {
                    const std::u32string cps = text::decode(piece);
                    if (static_cast<int64_t>(cps.size()) > prec) piece = text::encode(std::u32string_view(cps).substr(0, static_cast<size_t>(prec)));
                }
                out.append_as(pad(piece, width, left), contains_data(*arg));
                break;
            }
            case 'd':
            case 'i':
            case 'u':
            case 'x':
            case 'X':
            case 'o':
            case 'e':
            case 'E':
            case 'f':
            case 'F':
            case 'g':
            case 'G':
            case 'c': {
                if (arg->is_undefined()) fail_undefined(*arg);
                if (!arg->is_number() && conv != 'c') {
                    fail(std::string("%") + conv + " format: a real number is required, not " + std::string(arg->type_name()));
                }
                std::string spec = "%" + flags;
                if (width >= 0) spec += std::to_string(width);
                if (prec >= 0) spec += "." + std::to_string(prec);
                char buf[2048];
                if (conv == 'c') {
                    if (arg->is_string())
                        piece = arg->str();
                    else if (arg->is_int())
                        text::append_utf8(piece, static_cast<char32_t>(arg->as_int()));
                    else
                        fail("%c requires int or char");
                    out.append_as(pad(piece, width, left), contains_data(*arg));
                    break;
                }
                if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o') {
                    int64_t v;
                    if (arg->is_float()) {
                        if (conv != 'd' && conv != 'i' && conv != 'u') fail(std::string("%") + conv + " format: an integer is required, not float");
                        if (!std::isfinite(arg->as_float())) fail("cannot convert float to integer");
                        v = static_cast<int64_t>(std::trunc(arg->as_float()));
                    } else {
                        v = arg->as_int();
                    }
                    const char c2 = conv == 'i' || conv == 'u' ? 'd' : conv;
                    spec += "ll";
                    spec += c2;
                    if (c2 == 'd') std::snprintf(buf, sizeof(buf), spec.c_str(), static_cast<long long>(v));
                    else {
                        // Python formats the sign separately for hex/octal of negatives.
                        const bool neg = v < 0;
                        std::string s2 = spec;
                        std::snprintf(buf, sizeof(buf), s2.c_str(), static_cast<unsigned long long>(neg ? -static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v)));
                        if (neg) {
                            std::string t(buf);
                            const size_t first = t.find_first_not_of(' ');
                            t.insert(first == std::string::npos ? 0 : first, "-");
                            if (width >= 0 && static_cast<int64_t>(t.size()) > width && t[0] == ' ')
                                t.erase(0, 1);
                            out.append_literal(t);
                            break;
                        }
                    }
                    out.append_literal(buf);
                    break;
                }
                spec += conv;
                std::snprintf(buf, sizeof(buf), spec.c_str(), arg->to_double());
                out.append_literal(buf);
                break;
            }
            default: fail(std::string("unsupported format character '") + conv + "'");
        }
        in.check_size(out.size());
    }
    if (!mapping && next < pos.size()) fail("not all arguments converted during string formatting");
    return text_value(std::move(out));
}

// ---- str.format -----------------------------------------------------------------------------

namespace {

// A subset of Python's format-spec mini-language: [[fill]align][sign][width][,][.precision][type].
std::string apply_format_spec(const Value& v, const std::string& spec) {
    if (spec.empty()) return v.to_str();
    size_t i = 0;
    char fill = ' ', align = 0;
    const std::u32string sc = text::decode(spec);
    if (sc.size() >= 2 && (sc[1] == '<' || sc[1] == '>' || sc[1] == '^')) {
        if (sc[0] >= 0x80) fail("unsupported construct: non-ASCII fill character in format spec");
        fill = static_cast<char>(sc[0]);
        align = static_cast<char>(sc[1]);
        i = 2;
    } else if (!spec.empty() && (spec[0] == '<' || spec[0] == '>' || spec[0] == '^')) {
        align = spec[0];
        i = 1;
    }
    std::string rest = text::encode(std::u32string_view(sc).substr(std::min(i, sc.size())));
    i = 0;
    char sign = 0;
    if (i < rest.size() && (rest[i] == '+' || rest[i] == '-' || rest[i] == ' ')) sign = rest[i++];
    if (i < rest.size() && rest[i] == '0' && !align) {
        fill = '0';
        align = '=';
        i++;
    }
    int64_t width = 0;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) {
        width = width * 10 + (rest[i++] - '0');
        if (width > 100000) fail("format width too large");
    }
    int64_t prec = -1;
    if (i < rest.size() && rest[i] == '.') {
        i++;
        prec = 0;
        while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) {
            prec = prec * 10 + (rest[i++] - '0');
            if (prec > 1000) fail("format precision too large");
        }
    }
    bool grouping = false;
    if (i < rest.size() && rest[i] == ',') {
        grouping = true;
        i++;
    }
    if (i < rest.size() && rest[i] == '.' && prec < 0) {
        i++;
        prec = 0;
        while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) {
            prec = prec * 10 + (rest[i++] - '0');
            if (prec > 1000) fail("format precision too large");
        }
    }
    char type = 0;
    if (i < rest.size()) type = rest[i++];
    if (i != rest.size()) fail("unsupported construct: format spec '" + spec + "'");
    std::string body;
    const bool numeric = v.is_number() && !(type == 's');
    if (type == 0 || type == 's') {
        if (type == 's' && !v.is_string()) fail("Unknown format code 's' for object of type '" + std::string(v.type_name()) + "'");
        body = v.to_str();
        if (prec >= 0 && v.is_string()) {
            const std::u32string cps = text::decode(body);
            if (static_cast<int64_t>(cps.size()) > prec) body = text::encode(std::u32string_view(cps).substr(0, static_cast<size_t>(prec)));
        } else if (prec >= 0 && v.is_float()) {
            char buf[2048];
            std::snprintf(buf, sizeof(buf), "%.*g", static_cast<int>(prec ? prec : 1), v.as_float());
            body = buf;
        }
    } else {
        if (!v.is_number()) fail(std::string("Unknown format code '") + type + "' for object of type '" + std::string(v.type_name()) + "'");
        char buf[2048];
        switch (type) {
            case 'd':
                if (v.is_float()) fail("Unknown format code 'd' for object of type 'float'");
                std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v.as_int()));
                break;
            case 'x': case 'X': case 'o': case 'b': {
                if (v.is_float()) fail(std::string("Unknown format code '") + type + "' for object of type 'float'");
                const int64_t x = v.as_int();
                unsigned long long u = x < 0 ? -static_cast<unsigned long long>(x) : static_cast<unsigned long long>(x);
                std::string digits;
                const unsigned base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
                do {
                    const unsigned d = static_cast<unsigned>(u % base);
                    digits.insert(digits.begin(), static_cast<char>(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10));
                    u /= base;
                } while (u);
                std::snprintf(buf, sizeof(buf), "%s%s", x < 0 ? "-" : "", digits.c_str());
                break;
            }
            case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': case '%': {
                double x = v.to_double();
                const int p = static_cast<int>(prec < 0 ? 6 : prec);
                if (type == '%') {
                    std::snprintf(buf, sizeof(buf), "%.*f%%", p, x * 100.0);
                } else {
                    const char f[5] = {'%', '.', '*', type, 0};
                    std::snprintf(buf, sizeof(buf), f, p, x);
                }
                break;
            }
            default: fail(std::string("unsupported construct: format type '") + type + "'");
        }
        body = buf;
    }
    if (grouping && numeric) {
        // Insert thousands separators into the integer digits.
        size_t start = (body[0] == '-' || body[0] == '+') ? 1 : 0;
        size_t end = start;
        while (end < body.size() && std::isdigit(static_cast<unsigned char>(body[end]))) end++;
        std::string digits = body.substr(start, end - start), grouped;
        for (size_t k = 0; k < digits.size(); k++) {
            if (k && (digits.size() - k) % 3 == 0) grouped += ',';
            grouped += digits[k];
        }
        body = body.substr(0, start) + grouped + body.substr(end);
    }
    if (numeric && sign && body[0] != '-') {
        if (sign == '+') body = "+" + body;
        else if (sign == ' ') body = " " + body;
    }
    const auto len = static_cast<int64_t>(text::length(body));
    if (width <= len) return body;
    const auto n = static_cast<size_t>(width - len);
    if (!align) align = numeric ? '>' : '<';
    if (align == '<') return body + std::string(n, fill);
    if (align == '>') return std::string(n, fill) + body;
    if (align == '=') {
        const bool has_sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ');
        return has_sign ? body.substr(0, 1) + std::string(n, fill) + body.substr(1) : std::string(n, fill) + body;
    }
    const size_t left = n / 2;
    return std::string(left, fill) + body + std::string(n - left, fill);
}

}  // namespace

Value py_str_format(Interpreter& in, const Value& fmt_value, const CallArgs& args) {
    const std::string& fmt = fmt_value.str();
    const DataSpans* fmt_spans = fmt_value.data_spans();
    auto fmt_data = [&](size_t at) { return fmt_spans && spans_overlap(*fmt_spans, at, at + 1); };
    TaintedText out;
    size_t i = 0, auto_idx = 0;
    bool used_auto = false, used_manual = false;
    while (i < fmt.size()) {
        const char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
                out.append_as("}", fmt_data(i));
                i += 2;
                continue;
            }
            fail("Single '}' encountered in format string");
        }
        if (c != '{') {
            out.append_as(std::string_view(&fmt[i], 1), fmt_data(i));
            i++;
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out.append_as("{", fmt_data(i));
            i += 2;
            continue;
        }
        const size_t close = fmt.find('}', i);
        if (close == std::string::npos) fail("Single '{' encountered in format string");
        std::string field = fmt.substr(i + 1, close - i - 1);
        if (field.find('{') != std::string::npos) fail("unsupported construct: nested format fields");
        i = close + 1;
        std::string spec, conv;
        if (const size_t colon = field.find(':'); colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field = field.substr(0, colon);
        }
        if (const size_t bang = field.find('!'); bang != std::string::npos) {
            conv = field.substr(bang + 1);
            field = field.substr(0, bang);
            if (conv != "r" && conv != "s" && conv != "a") fail("Unknown conversion specifier " + conv);
        }
        // first part: index or name; then .attr / [key] chains
        size_t p = 0;
        while (p < field.size() && field[p] != '.' && field[p] != '[') p++;
        const std::string head = field.substr(0, p);
        Value v;
        if (head.empty()) {
            if (used_manual) fail("cannot switch from manual field specification to automatic field numbering");
            used_auto = true;
            if (auto_idx >= args.pos.size()) fail("Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
            v = args.pos[auto_idx++];
        } else if (std::all_of(head.begin(), head.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
            if (used_auto) fail("cannot switch from automatic field numbering to manual field specification");
            used_manual = true;
            const size_t k = head.size() > 9 ? SIZE_MAX : std::stoul(head);
            if (k >= args.pos.size()) fail("Replacement index " + head + " out of range for positional args tuple");
            v = args.pos[k];
        } else {
            bool found = false;
            for (const auto& [key, val] : args.kw) {
                if (key == head) { v = val; found = true; }
            }
            if (!found) fail("KeyError: '" + head + "'");
        }
        while (p < field.size()) {
            if (field[p] == '.') {
                size_t e = p + 1;
                while (e < field.size() && field[e] != '.' && field[e] != '[') e++;
                v = in.getattr(v, field.substr(p + 1, e - p - 1));
                p = e;
            } else {
                const size_t e = field.find(']', p);
                if (e == std::string::npos) fail("Missing ']' in format string");
                const std::string key = field.substr(p + 1, e - p - 1);
                const bool digits = !key.empty() && key.size() < 18 &&
                                    std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
                v = in.getitem(v, digits ? Value::integer(std::stoll(key)) : Value::string(key));
                p = e + 1;
            }
        }
        if (v.is_undefined()) fail_undefined(v);
        const bool data = contains_data(v);
        if (conv == "r" || conv == "a")
            v = Value::string(v.repr());
        else if (conv == "s")
            v = Value::string(v.to_str());
        out.append_as(apply_format_spec(v, spec), data);
        in.check_size(out.size());
    }
    return text_value(std::move(out));
}

}  // namespace zinc::chat
