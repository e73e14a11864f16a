// zinc/chat/operators.cpp — Python arithmetic, ordering and membership for interpreter values
// (int/float promotion, floor division and modulo rounding toward -inf, str and list
// concatenation and repetition, "%" string formatting, chained comparisons).
#include <cmath>

#include "chat/interpreter.h"
#include "chat/unicode.h"

namespace zinc::chat {

namespace {

[[noreturn]] void fail_operands(std::string_view op, const Value& a, const Value& b) {
    fail("unsupported operand type(s) for " + std::string(op) + ": '" + std::string(a.type_name()) +
         "' and '" + std::string(b.type_name()) + "'");
}

[[noreturn]] void fail_overflow() { fail("integer overflow (zinc supports 64-bit integers)"); }

bool is_int_like(const Value& v) { return v.is_int() || v.is_bool(); }

Value repeat(Interpreter& in, const Value& seq, int64_t n) {
    if (n < 0) n = 0;
    if (seq.is_string()) {
        in.check_size(seq.str().size() * static_cast<size_t>(n));
        TaintedText out;
        out.text_mut().reserve(seq.str().size() * static_cast<size_t>(n));
        for (int64_t k = 0; k < n; k++) append_value(out, seq);
        return text_value(std::move(out));
    }
    const auto& items = seq.list_data().items;
    in.check_size(items.size() * static_cast<size_t>(n) * sizeof(Value));
    std::vector<Value> out;
    for (int64_t k = 0; k < n; k++) out.insert(out.end(), items.begin(), items.end());
    return Value::list(std::move(out), seq.seq_kind());
}

// CPython's float floor division and modulo (Objects/floatobject.c float_divmod).
void float_divmod(double vx, double wx, double& floordiv, double& mod) {
    mod = std::fmod(vx, wx);
    double div = (vx - mod) / wx;
    if (mod != 0.0) {
        if ((wx < 0) != (mod < 0)) {
            mod += wx;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, wx);
    }
    if (div != 0.0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = std::copysign(0.0, vx / wx);
    }
}

}  // namespace

Value py_binop(Interpreter& in, std::string_view op, const Value& a, const Value& b) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    const bool nums = a.is_number() && b.is_number();
    const bool ints = is_int_like(a) && is_int_like(b);
    if (op == "+") {
        if (ints) {
            int64_t r;
            if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail_overflow();
            return Value::integer(r);
        }
        if (nums) return Value::number(a.to_double() + b.to_double());
        if (a.is_string() && b.is_string()) {
            in.check_size(a.str().size() + b.str().size());
            TaintedText out;
            append_value(out, a);
            append_value(out, b);
            return text_value(std::move(out));
        }
        if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
            (a.seq_kind() == SeqKind::List || a.seq_kind() == SeqKind::Tuple)) {
            std::vector<Value> items = a.list_data().items;
            const auto& more = b.list_data().items;
            items.insert(items.end(), more.begin(), more.end());
            return Value::list(std::move(items), a.seq_kind());
        }
        fail_operands("+", a, b);
    }
    if (op == "-") {
        if (ints) {
            int64_t r;
            if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail_overflow();
            return Value::integer(r);
        }
        if (nums) return Value::number(a.to_double() - b.to_double());
        fail_operands("-", a, b);
    }
    if (op == "*") {
        if (ints) {
            int64_t r;
            if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail_overflow();
            return Value::integer(r);
        }
        if (nums) return Value::number(a.to_double() * b.to_double());
        const auto repeatable = [](const Value& v) {
            return v.is_string() || (v.is_list() && (v.seq_kind() == SeqKind::List ||
                                                     v.seq_kind() == SeqKind::Tuple));
        };
        if (repeatable(a) && is_int_like(b)) return repeat(in, a, b.as_int());
        if (repeatable(b) && is_int_like(a)) return repeat(in, b, a.as_int());
        fail_operands("*", a, b);
    }
    if (op == "/") {
        if (!nums) fail_operands("/", a, b);
        if (b.to_double() == 0.0) fail("division by zero");
        return Value::number(a.to_double() / b.to_double());
    }
    if (op == "//") {
        if (ints) {
            const int64_t x = a.as_int(), y = b.as_int();
            if (y == 0) fail("integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) fail_overflow();
            int64_t q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
            return Value::integer(q);
        }
        if (!nums) fail_operands("//", a, b);
        if (b.to_double() == 0.0) fail("float floor division by zero");
        double fd, md;
        float_divmod(a.to_double(), b.to_double(), fd, md);
        return Value::number(fd);
    }
    if (op == "%") {
        if (a.is_string()) return py_percent_format(in, a, b);
        if (ints) {
            const int64_t x = a.as_int(), y = b.as_int();
            if (y == 0) fail("integer division or modulo by zero");
            if (y == -1) return Value::integer(0);
            int64_t r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return Value::integer(r);
        }
        if (!nums) fail_operands("%", a, b);
        if (b.to_double() == 0.0) fail("float modulo");
        double fd, md;
        float_divmod(a.to_double(), b.to_double(), fd, md);
        return Value::number(md);
    }
    if (op == "**") {
        if (ints && b.as_int() >= 0) {
            int64_t base = a.as_int(), e = b.as_int(), r = 1;
            while (e > 0) {
                if (e & 1) {
                    if (__builtin_mul_overflow(r, base, &r)) fail_overflow();
                }
                e >>= 1;
                if (e > 0 && __builtin_mul_overflow(base, base, &base)) fail_overflow();
            }
            return Value::integer(r);
        }
        if (!nums) fail_operands("** or pow()", a, b);
        const double x = a.to_double(), y = b.to_double();
        if (x == 0.0 && y < 0) fail("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) fail("complex results are not supported");
        return Value::number(std::pow(x, y));
    }
    fail("unknown operator " + std::string(op));
}

namespace {

// Python rich comparison for <, <=, >, >= (TypeError between unrelated types).
bool py_order(std::string_view op, const Value& a, const Value& b) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    auto apply = [&](auto x, auto y) {
        if (op == "<") return x < y;
        if (op == "<=") return x <= y;
        if (op == ">") return x > y;
        return x >= y;
    };
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return apply(a.to_double(), b.to_double());
        return apply(a.as_int(), b.as_int());
    }
    if (a.is_string() && b.is_string()) return apply(a.str().compare(b.str()), 0);
    if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
        (a.seq_kind() == SeqKind::List || a.seq_kind() == SeqKind::Tuple)) {
        const auto& x = a.list_data().items;
        const auto& y = b.list_data().items;
        for (size_t k = 0; k < x.size() && k < y.size(); k++) {
            if (!py_equal(x[k], y[k])) return py_order(op, x[k], y[k]);
        }
        return apply(x.size(), y.size());
    }
    fail("'" + std::string(op) + "' not supported between instances of '" +
         std::string(a.type_name()) + "' and '" + std::string(b.type_name()) + "'");
}

bool py_contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case ValueKind::Undefined: return false;
        case ValueKind::String:
            if (!item.is_string()) {
                fail("'in <string>' requires string as left operand, not " +
                     std::string(item.type_name()));
            }
            return container.str().find(item.str()) != std::string::npos;
        case ValueKind::List: {
            ListData& d = container.list_data();
            if (d.kind == SeqKind::Generator) {
                if (d.consumed) return false;
                d.consumed = true;
            }
            for (const auto& x : d.items) {
                if (py_equal(x, item)) return true;
            }
            return false;
        }
        case ValueKind::Dict:
            if (!py_hashable(item)) fail("unhashable type: '" + std::string(item.type_name()) + "'");
            return container.dict_data().find(item) != nullptr;
        default:
            fail("argument of type '" + std::string(container.type_name()) + "' is not iterable");
    }
}

}  // namespace

bool py_compare(std::string_view op, const Value& a, const Value& b) {
    if (op == "==") return py_equal(a, b);
    if (op == "!=") return !py_equal(a, b);
    if (op == "in") return py_contains(b, a);
    if (op == "notin") return !py_contains(b, a);
    return py_order(op, a, b);
}

bool py_less(const Value& a, const Value& b) { return py_order("<", a, b); }

}  // namespace zinc::chat
