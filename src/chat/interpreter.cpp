// zinc/chat/interpreter.cpp — statement execution, expression evaluation, scoping, attribute
// and item access, iteration and macro calls (jinja2 semantics; see interpreter.h).
#include "chat/interpreter.h"

#include <algorithm>
#include <ctime>

#include "chat/unicode.h"

namespace zinc::chat {

std::string callable_repr(const CallableData& fn) {
    switch (fn.type) {
        case CallableData::Type::Macro: return "<Macro '" + fn.name + "'>";
        case CallableData::Type::Method:
            return "<built-in method " + fn.name + " of " + std::string(fn.self.type_name()) +
                   " object>";
        case CallableData::Type::Builtin: break;
    }
    return "<function " + fn.name + ">";
}

void fail_undefined(const Value& u) {
    fail(u.str().empty() ? std::string("undefined value") : u.str());
}

namespace {

std::string object_type_repr(const Value& v) {
    if (v.is_none()) return "None";
    return std::string(v.type_name()) + " object";
}

// jinja2's LoopContext, one per iteration.
struct LoopObject final : ObjectData {
    std::shared_ptr<const std::vector<Value>> items;
    size_t index0 = 0;
    int depth = 1;

    Value get_attr(std::string_view name) override {
        const auto n = static_cast<int64_t>(items->size());
        const auto i = static_cast<int64_t>(index0);
        if (name == "index") return Value::integer(i + 1);
        if (name == "index0") return Value::integer(i);
        if (name == "revindex") return Value::integer(n - i);
        if (name == "revindex0") return Value::integer(n - i - 1);
        if (name == "first") return Value::boolean(i == 0);
        if (name == "last") return Value::boolean(i == n - 1);
        if (name == "length") return Value::integer(n);
        if (name == "depth") return Value::integer(depth);
        if (name == "depth0") return Value::integer(depth - 1);
        if (name == "previtem") {
            return i > 0 ? (*items)[index0 - 1] : Value::undefined("there is no previous item");
        }
        if (name == "nextitem") {
            return i + 1 < n ? (*items)[index0 + 1] : Value::undefined("there is no next item");
        }
        if (name == "cycle") {
            auto fn = std::make_shared<CallableData>();
            fn->name = "cycle";
            const size_t idx = index0;
            fn->fn = [idx](Interpreter&, const CallArgs& args) -> Value {
                if (args.pos.empty()) fail("no items for cycling given");
                return args.pos[idx % args.pos.size()];
            };
            return Value::callable(std::move(fn));
        }
        return Value::undefined("'LoopContext object' has no attribute '" + std::string(name) + "'");
    }
    std::string repr() const override {
        return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items->size()) + ">";
    }
};

bool body_uses_name(const Node& n, std::string_view name) {
    if (n.kind == NodeKind::Name && n.str == name) return true;
    // Nested macros have their own kwargs/varargs.
    if (n.kind == NodeKind::Macro) return false;
    for (const NodePtr* p : {&n.a, &n.b, &n.c}) {
        if (*p && body_uses_name(**p, name)) return true;
    }
    for (const auto* vec : {&n.items, &n.kw_values, &n.body, &n.orelse}) {
        for (const auto& x : *vec) {
            if (x && body_uses_name(*x, name)) return true;
        }
    }
    return false;
}

constexpr uint32_t kMaxValueDepth = 256;  // nesting of lists/dicts a template may build

void check_value_depth(const Value& v) {
    if (value_depth(v) > kMaxValueDepth) fail("value nested too deeply");
}

struct DepthGuard {
    DepthGuard(int& d, int max, SourcePos pos) : d_(d) {
        if (++d_ > max) {
            d_--;
            fail("template recursion too deep", pos);
        }
    }
    ~DepthGuard() { d_--; }
    int& d_;
};

}  // namespace

Interpreter::Interpreter(const DictData& vars, std::optional<int64_t> now_unix, RenderLimits limits)
    : vars_(vars), now_(now_unix), limits_(limits) {}

Interpreter::~Interpreter() {
    // Namespaces are the only mutable containers, so the only way to build a reference cycle
    // ({% set ns.me = ns %}); clearing them after the render frees such cycles.
    for (auto& w : namespaces_) {
        if (auto d = w.lock()) d->items.clear();
    }
}

void Interpreter::track_namespace(const Value& ns) {
    if (ns.is_namespace()) namespaces_.push_back(ns.dict_ptr());
}

int64_t Interpreter::now_unix() const {
    return now_ ? *now_ : static_cast<int64_t>(std::time(nullptr));
}

void Interpreter::tick() {
    if (++steps_ > limits_.max_steps) fail("template exceeded its step budget (endless loop?)");
}

void Interpreter::check_size(size_t n) const {
    if (n > limits_.max_output_bytes) fail("template output too large");
}

TaintedText Interpreter::render(const Node& tmpl) {
    root_ = std::make_shared<Scope>();
    TaintedText out;
    exec_body(tmpl.body, root_, out);
    return out;
}

// ---- statements ---------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_body(const std::vector<NodePtr>& body,
                                         const std::shared_ptr<Scope>& sc, TaintedText& out) {
    for (const auto& n : body) {
        const Flow f = exec(*n, sc, out);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Node& n, const std::shared_ptr<Scope>& sc,
                                    TaintedText& out) {
    DepthGuard guard(depth_, limits_.max_depth, n.pos);
    tick();
    try {
        switch (n.kind) {
            case NodeKind::Data:
                check_size(out.size() + n.str.size());
                out.append_literal(n.str);  // the template's own text: control
                return Flow::Normal;
            case NodeKind::Output: {
                const Value v = eval(*n.a, sc);
                if (v.is_string()) check_size(out.size() + v.str().size());
                append_value(out, v);
                check_size(out.size());
                return Flow::Normal;
            }
            case NodeKind::If:
                if (eval(*n.a, sc).truthy()) return exec_body(n.body, sc, out);
                return exec_body(n.orelse, sc, out);
            case NodeKind::For:
                exec_for(n, sc, out);
                return Flow::Normal;
            case NodeKind::Set: {
                const Value v = eval(*n.b, sc);
                assign(*n.a, v, *sc, sc);
                return Flow::Normal;
            }
            case NodeKind::SetBlock: {
                auto inner = std::make_shared<Scope>();
                inner->parent = sc;
                TaintedText text;
                exec_body(n.body, inner, text);
                Value v = text_value(std::move(text));
                if (n.b) v = eval_filter_chain(*n.b, sc, &v);
                assign(*n.a, v, *sc, sc);
                return Flow::Normal;
            }
            case NodeKind::Macro:
                sc->vars[n.str] = make_macro(n, sc);
                return Flow::Normal;
            case NodeKind::CallBlock: {
                const Value caller = make_macro(n, sc);
                const Node& call = *n.a;
                const Value callee = eval(*call.a, sc);
                const CallArgs args = eval_args(call, sc);
                if (!callee.is_callable() ||
                    callee.callable_data().type != CallableData::Type::Macro)
                    fail("{% call %} needs a macro to call", call.pos);
                const Value v = call_macro(callee.callable_data(), args, &caller);
                check_size(out.size() + v.str().size());
                append_value(out, v);
                return Flow::Normal;
            }
            case NodeKind::FilterBlock: {
                auto inner = std::make_shared<Scope>();
                inner->parent = sc;
                TaintedText text;
                exec_body(n.body, inner, text);
                const Value in = text_value(std::move(text));
                append_value(out, eval_filter_chain(*n.b, sc, &in));
                check_size(out.size());
                return Flow::Normal;
            }
            case NodeKind::With: {
                auto inner = std::make_shared<Scope>();
                inner->parent = sc;
                for (size_t k = 0; k < n.names.size(); k++) {
                    inner->vars[n.names[k]] = eval(*n.items[k], sc);
                }
                return exec_body(n.body, inner, out);
            }
            case NodeKind::Scope: return exec_body(n.body, sc, out);
            case NodeKind::Break: return Flow::Break;
            case NodeKind::Continue: return Flow::Continue;
            default: fail("unexpected node in statement position", n.pos);
        }
    } catch (TemplateError& e) {
        if (e.pos.line == 0) e.pos = n.pos;
        throw;
    }
}

void Interpreter::exec_for(const Node& n, const std::shared_ptr<Scope>& sc, TaintedText& out) {
    const Value iterable = eval(*n.b, sc);
    std::vector<Value> all = iterate(iterable);
    if (n.c) {
        // The loop filter runs before the loop: loop.index and loop.length count kept items.
        std::vector<Value> kept;
        for (auto& item : all) {
            tick();
            auto probe = std::make_shared<Scope>();
            probe->parent = sc;
            assign(*n.a, item, *probe, probe);
            if (eval(*n.c, probe).truthy()) kept.push_back(std::move(item));
        }
        all = std::move(kept);
    }
    auto items = std::make_shared<const std::vector<Value>>(std::move(all));
    // loop.depth counts recursive-loop levels only; recursive loops are unsupported, so 1.
    const int depth = 1;
    for (size_t i = 0; i < items->size(); i++) {
        tick();
        auto iter_scope = std::make_shared<Scope>();
        iter_scope->parent = sc;
        auto loop = std::make_shared<LoopObject>();
        loop->items = items;
        loop->index0 = i;
        loop->depth = depth;
        iter_scope->vars["loop"] = Value::object(loop);
        assign(*n.a, (*items)[i], *iter_scope, iter_scope);
        const Flow f = exec_body(n.body, iter_scope, out);
        if (f == Flow::Break) break;
    }
    if (items->empty() && !n.orelse.empty()) {
        auto else_scope = std::make_shared<Scope>();
        else_scope->parent = sc;
        exec_body(n.orelse, else_scope, out);
    }
}

void Interpreter::assign(const Node& target, const Value& v, Scope& sc,
                         const std::shared_ptr<Scope>& lookup_scope) {
    switch (target.kind) {
        case NodeKind::Name: sc.vars[target.str] = v; return;
        case NodeKind::Tuple: {
            const std::vector<Value> parts = iterate(v);
            const size_t want = target.items.size();
            if (parts.size() < want) {
                fail("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                         std::to_string(parts.size()) + ")",
                     target.pos);
            }
            if (parts.size() > want) {
                fail("too many values to unpack (expected " + std::to_string(want) + ")", target.pos);
            }
            for (size_t k = 0; k < want; k++) assign(*target.items[k], parts[k], sc, lookup_scope);
            return;
        }
        case NodeKind::NSRef: {
            const Value ns = lookup(target.str, *lookup_scope);
            if (!ns.is_namespace()) fail("cannot assign attribute on non-namespace object", target.pos);
            ns.dict_data().set(Value::string(target.str2), v);
            check_value_depth(ns);
            return;
        }
        default: fail("cannot assign to this expression", target.pos);
    }
}

Value Interpreter::make_macro(const Node& n, const std::shared_ptr<Scope>& sc) {
    auto fn = std::make_shared<CallableData>();
    fn->type = CallableData::Type::Macro;
    fn->name = n.kind == NodeKind::Macro ? n.str : "caller";
    fn->macro = &n;
    fn->scope = sc;
    for (const auto& b : n.body) {
        fn->catch_kwargs = fn->catch_kwargs || body_uses_name(*b, "kwargs");
        fn->catch_varargs = fn->catch_varargs || body_uses_name(*b, "varargs");
    }
    return Value::callable(std::move(fn));
}

Value Interpreter::call_macro(const CallableData& fn, const CallArgs& args, const Value* caller) {
    const Node& m = *fn.macro;
    std::shared_ptr<Scope> parent = fn.scope.lock();
    if (!parent) parent = root_;
    auto sc = std::make_shared<Scope>();
    sc->parent = parent;
    const size_t np = m.names.size();
    const size_t nd = m.kw_values.size();
    if (args.pos.size() > np && !fn.catch_varargs) {
        fail("macro '" + fn.name + "' takes not more than " + std::to_string(np) + " argument(s)");
    }
    std::vector<bool> bound(np, false);
    for (size_t k = 0; k < np && k < args.pos.size(); k++) {
        sc->vars[m.names[k]] = args.pos[k];
        bound[k] = true;
    }
    Value extra_kw = Value::dict();
    for (const auto& [key, val] : args.kw) {
        auto it = std::find(m.names.begin(), m.names.end(), key);
        if (it != m.names.end()) {
            const auto k = static_cast<size_t>(it - m.names.begin());
            if (bound[k]) fail("macro '" + fn.name + "' got multiple values for argument '" + key + "'");
            sc->vars[key] = val;
            bound[k] = true;
        } else if (fn.catch_kwargs) {
            extra_kw.dict_data().set(Value::string(key), val);
        } else {
            fail("macro '" + fn.name + "' takes no keyword argument '" + key + "'");
        }
    }
    for (size_t k = 0; k < np; k++) {
        if (bound[k]) continue;
        if (k >= np - nd) {
            sc->vars[m.names[k]] = eval(*m.kw_values[k - (np - nd)], sc);
        } else {
            sc->vars[m.names[k]] = Value::undefined("parameter '" + m.names[k] + "' was not provided");
        }
    }
    if (fn.catch_varargs) {
        std::vector<Value> rest;
        for (size_t k = np; k < args.pos.size(); k++) rest.push_back(args.pos[k]);
        sc->vars["varargs"] = Value::list(std::move(rest), SeqKind::Tuple);
    }
    if (fn.catch_kwargs) sc->vars["kwargs"] = extra_kw;
    if (caller) sc->vars["caller"] = *caller;
    TaintedText out;
    exec_body(m.body, sc, out);
    return text_value(std::move(out));
}

// ---- expressions --------------------------------------------------------------------------

Value Interpreter::lookup(std::string_view name, const Scope& sc) const {
    const std::string key(name);
    for (const Scope* s = &sc; s; s = s->parent.get()) {
        auto it = s->vars.find(key);
        if (it != s->vars.end()) return it->second;
    }
    if (const Value* v = vars_.find(name)) return *v;
    Value g = find_global_function(name);
    if (!g.is_undefined()) return g;
    return Value::undefined("'" + key + "' is undefined");
}

CallArgs Interpreter::eval_args(const Node& n, const std::shared_ptr<Scope>& sc) {
    CallArgs args;
    args.pos.reserve(n.items.size());
    for (const auto& x : n.items) args.pos.push_back(eval(*x, sc));
    for (size_t k = 0; k < n.kw_names.size(); k++) {
        args.kw.emplace_back(n.kw_names[k], eval(*n.kw_values[k], sc));
    }
    return args;
}

Value Interpreter::eval(const Node& n, const std::shared_ptr<Scope>& sc) {
    DepthGuard guard(depth_, limits_.max_depth, n.pos);
    tick();
    try {
        return eval_inner(n, sc);
    } catch (TemplateError& e) {
        if (e.pos.line == 0) e.pos = n.pos;
        throw;
    }
}

Value Interpreter::eval_filter_chain(const Node& n, const std::shared_ptr<Scope>& sc,
                                     const Value* block_input) {
    Value input;
    if (n.a) {
        input = n.a->kind == NodeKind::Filter && block_input
                    ? eval_filter_chain(*n.a, sc, block_input)
                    : eval(*n.a, sc);
    } else {
        if (!block_input) fail("filter without input", n.pos);
        input = *block_input;
    }
    const CallArgs args = eval_args(n, sc);
    try {
        return apply_filter(n.str, input, args);
    } catch (TemplateError& e) {
        if (e.pos.line == 0) e.pos = n.pos;
        throw;
    }
}

Value Interpreter::eval_inner(const Node& n, const std::shared_ptr<Scope>& sc) {
    switch (n.kind) {
        case NodeKind::Const: return n.value;
        case NodeKind::Name: return lookup(n.str, *sc);
        case NodeKind::Getattr: return getattr(eval(*n.a, sc), n.str);
        case NodeKind::Getitem:
            if (n.b->kind == NodeKind::Slice) return slice(eval(*n.a, sc), *n.b, sc);
            return getitem(eval(*n.a, sc), eval(*n.b, sc));
        case NodeKind::Call: {
            const Value callee = eval(*n.a, sc);
            const CallArgs args = eval_args(n, sc);
            return call(callee, args);
        }
        case NodeKind::Filter: return eval_filter_chain(n, sc, nullptr);
        case NodeKind::Test: {
            const Value input = eval(*n.a, sc);
            const CallArgs args = eval_args(n, sc);
            return Value::boolean(apply_test(n.str, input, args));
        }
        case NodeKind::Unary: {
            const Value v = eval(*n.a, sc);
            if (n.str == "not") return Value::boolean(!v.truthy());
            if (v.is_undefined()) fail_undefined(v);
            if (v.is_float()) return Value::number(n.str == "-" ? -v.as_float() : v.as_float());
            if (v.is_int() || v.is_bool()) {
                if (n.str == "+") return Value::integer(v.as_int());
                if (v.as_int() == INT64_MIN) fail("integer overflow (zinc supports 64-bit integers)");
                return Value::integer(-v.as_int());
            }
            fail("bad operand type for unary " + n.str + ": '" + std::string(v.type_name()) + "'");
        }
        case NodeKind::Binary: {
            if (n.str == "and") {
                Value l = eval(*n.a, sc);
                return l.truthy() ? eval(*n.b, sc) : l;
            }
            if (n.str == "or") {
                Value l = eval(*n.a, sc);
                return l.truthy() ? l : eval(*n.b, sc);
            }
            const Value l = eval(*n.a, sc);
            const Value r = eval(*n.b, sc);
            return py_binop(*this, n.str, l, r);
        }
        case NodeKind::Compare: {
            Value left = eval(*n.a, sc);
            for (size_t k = 0; k < n.items.size(); k++) {
                Value right = eval(*n.items[k], sc);
                if (!py_compare(n.names[k], left, right)) return Value::boolean(false);
                left = std::move(right);
            }
            return Value::boolean(true);
        }
        case NodeKind::Concat: {
            TaintedText s;
            for (const auto& x : n.items) {
                append_value(s, eval(*x, sc));
                check_size(s.size());
            }
            return text_value(std::move(s));
        }
        case NodeKind::CondExpr:
            if (eval(*n.a, sc).truthy()) return eval(*n.b, sc);
            if (n.c) return eval(*n.c, sc);
            return Value::undefined("the inline if-expression on line " + std::to_string(n.pos.line) +
                                    " evaluated to false and no else section was defined.");
        case NodeKind::List:
        case NodeKind::Tuple: {
            std::vector<Value> items;
            items.reserve(n.items.size());
            for (const auto& x : n.items) items.push_back(eval(*x, sc));
            Value v = Value::list(std::move(items), n.kind == NodeKind::Tuple ? SeqKind::Tuple : SeqKind::List);
            check_value_depth(v);
            return v;
        }
        case NodeKind::Dict: {
            Value d = Value::dict();
            for (size_t k = 0; k < n.items.size(); k++) {
                Value key = eval(*n.items[k], sc);
                if (!py_hashable(key)) fail("unhashable type: '" + std::string(key.type_name()) + "'");
                d.dict_data().set(std::move(key), eval(*n.kw_values[k], sc));
            }
            check_value_depth(d);
            return d;
        }
        default: fail("unexpected expression", n.pos);
    }
}

// ---- calls, filters, tests ------------------------------------------------------------------

Value Interpreter::call(const Value& fn, const CallArgs& args) {
    if (fn.is_undefined()) fail_undefined(fn);
    if (!fn.is_callable()) fail("'" + std::string(fn.type_name()) + "' object is not callable");
    const CallableData& c = fn.callable_data();
    switch (c.type) {
        case CallableData::Type::Builtin: return c.fn(*this, args);
        case CallableData::Type::Macro: return call_macro(c, args, nullptr);
        case CallableData::Type::Method: return call_method(*this, c.self, c.name, args);
    }
    return Value();
}

Value Interpreter::apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
    FilterFn f = find_filter(name);
    if (!f) fail("no filter named '" + std::string(name) + "'");
    return f(*this, input, args);
}

bool Interpreter::apply_test(std::string_view name, const Value& input, const CallArgs& args) {
    TestFn t = find_test(name);
    if (!t) fail("no test named '" + std::string(name) + "'");
    return t(*this, input, args);
}

// ---- attribute and item access -------------------------------------------------------------

Value Interpreter::getattr(const Value& obj, std::string_view name) {
    if (obj.is_undefined()) fail_undefined(obj);
    if (!name.empty() && name[0] == '_') {
        return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                                std::string(obj.type_name()) + "' object is unsafe.");
    }
    if (is_unsafe_method(obj, name)) {
        return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                                std::string(obj.type_name()) + "' object is unsafe.");
    }
    if (has_method(obj, name)) {
        auto fn = std::make_shared<CallableData>();
        fn->type = CallableData::Type::Method;
        fn->name = std::string(name);
        fn->self = obj;
        return Value::callable(std::move(fn));
    }
    if (obj.is_dict() || obj.is_namespace()) {
        if (const Value* v = obj.dict_data().find(name)) return *v;
    } else if (obj.kind() == ValueKind::Object) {
        return obj.object_data().get_attr(name);
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + std::string(name) + "'");
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
    if (obj.is_undefined()) fail_undefined(obj);
    const bool int_key = key.is_int() || key.is_bool();
    if (obj.is_string() && int_key) {
        const std::vector<size_t> off = text::cp_offsets(obj.str());
        int64_t i = key.as_int();
        const auto n = static_cast<int64_t>(off.size() - 1);
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
            const auto k = static_cast<size_t>(i);
            return substr_value(obj, off[k], off[k + 1]);
        }
    } else if (obj.is_list() && int_key) {
        const SeqKind k = obj.seq_kind();
        if (k == SeqKind::List || k == SeqKind::Tuple || k == SeqKind::Range) {
            const auto& items = obj.list_data().items;
            int64_t i = key.as_int();
            const auto n = static_cast<int64_t>(items.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
        }
    } else if (obj.is_dict() && py_hashable(key)) {
        if (const Value* v = obj.dict_data().find(key)) return *v;
    }
    if (key.is_string()) return getattr(obj, key.str());
    return Value::undefined(object_type_repr(obj) + " has no element " + key.repr());
}

Value Interpreter::slice(const Value& obj, const Node& sl, const std::shared_ptr<Scope>& sc) {
    Value parts[3];
    const Node* nodes[3] = {sl.a.get(), sl.b.get(), sl.c.get()};
    bool bad_type = false;
    for (int k = 0; k < 3; k++) {
        parts[k] = nodes[k] ? eval(*nodes[k], sc) : Value::none();
        if (!parts[k].is_none() && !parts[k].is_int() && !parts[k].is_bool()) bad_type = true;
    }
    if (obj.is_undefined()) fail_undefined(obj);
    const bool sliceable = obj.is_string() ||
                           (obj.is_list() && (obj.seq_kind() == SeqKind::List ||
                                              obj.seq_kind() == SeqKind::Tuple ||
                                              obj.seq_kind() == SeqKind::Range));
    if (!sliceable || bad_type) {
        return Value::undefined(object_type_repr(obj) + " has no element slice");
    }
    const int64_t step = parts[2].is_none() ? 1 : parts[2].as_int();
    if (step == 0) fail("slice step cannot be zero");
    std::vector<size_t> off;
    if (obj.is_string()) off = text::cp_offsets(obj.str());
    const int64_t len = obj.is_string() ? static_cast<int64_t>(off.size() - 1)
                                        : static_cast<int64_t>(obj.list_data().items.size());
    const int64_t lower = step < 0 ? -1 : 0;
    const int64_t upper = step < 0 ? len - 1 : len;
    auto adjust = [&](const Value& v, int64_t dflt) {
        if (v.is_none()) return dflt;
        int64_t x = v.as_int();
        if (x < 0) {
            x += len;
            if (x < lower) x = lower;
        } else if (x > upper) {
            x = upper;
        }
        return x;
    };
    const int64_t start = adjust(parts[0], step < 0 ? upper : lower);
    const int64_t stop = adjust(parts[1], step < 0 ? lower : upper);
    std::vector<int64_t> idx;
    if (step > 0) {
        for (int64_t i = start; i < stop; i += step) idx.push_back(i);
    } else {
        for (int64_t i = start; i > stop; i += step) idx.push_back(i);
    }
    if (obj.is_string()) {
        // Each code point keeps its bytes and their taint.
        TaintedText out;
        const DataSpans* spans = obj.data_spans();
        for (int64_t i : idx) {
            const auto k = static_cast<size_t>(i);
            const size_t b = off[k], e = off[k + 1];
            const std::string_view bytes = std::string_view(obj.str()).substr(b, e - b);
            out.append_as(bytes, spans && spans_overlap(*spans, b, e));
        }
        return text_value(std::move(out));
    }
    std::vector<Value> out;
    const auto& items = obj.list_data().items;
    for (int64_t i : idx) out.push_back(items[static_cast<size_t>(i)]);
    return Value::list(std::move(out), obj.seq_kind() == SeqKind::Tuple ? SeqKind::Tuple : SeqKind::List);
}

std::vector<Value> Interpreter::iterate(const Value& v) {
    switch (v.kind()) {
        case ValueKind::Undefined: return {};
        case ValueKind::List: {
            ListData& d = v.list_data();
            if (d.kind == SeqKind::Generator) {
                if (d.consumed) return {};
                d.consumed = true;
            }
            return d.items;
        }
        case ValueKind::Dict: {
            std::vector<Value> keys;
            for (const auto& kv : v.dict_data().items) keys.push_back(kv.first);
            return keys;
        }
        case ValueKind::String: {
            std::vector<Value> out;
            const std::vector<size_t> off = text::cp_offsets(v.str());
            for (size_t k = 0; k + 1 < off.size(); ++k)
                out.push_back(substr_value(v, off[k], off[k + 1]));
            return out;
        }
        default: fail("'" + std::string(v.type_name()) + "' object is not iterable");
    }
}

int64_t Interpreter::length(const Value& v) {
    switch (v.kind()) {
        case ValueKind::Undefined: return 0;
        case ValueKind::String: return static_cast<int64_t>(text::length(v.str()));
        case ValueKind::List:
            if (v.seq_kind() == SeqKind::Generator) fail("object of type 'generator' has no len()");
            return static_cast<int64_t>(v.list_data().items.size());
        case ValueKind::Dict: return static_cast<int64_t>(v.dict_data().items.size());
        default: fail("object of type '" + std::string(v.type_name()) + "' has no len()");
    }
}

}  // namespace zinc::chat
