// zinc/chat/interpreter.h — evaluates a parsed template (ast.h) against variables, with the
// semantics of jinja2's ImmutableSandboxedEnvironment as transformers configures it.
//
// Scoping follows jinja2: the template body is one scope; every for-loop iteration, macro call,
// call/filter/with block gets a child scope, so `set` inside a loop is not visible after it
// (templates use namespace() for that) while `set` inside an if is. Names resolve through the
// scope chain, then the render variables, then the global functions (builtins.h).
//
// Limits keep hostile templates from exhausting the machine: a step budget (each statement,
// expression node and loop iteration is a step), an output size cap, and a recursion cap
// (macro recursion and nesting); exceeding one is a TemplateError, never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/ast.h"
#include "chat/builtins.h"
#include "chat/value.h"

namespace zinc::chat {

struct RenderLimits {
    uint64_t max_steps = 50'000'000;
    size_t max_output_bytes = 256u << 20;
    int max_depth = 400;  // nested evaluation frames (macro recursion)
};

struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
};

/// What a Callable value is: a built-in function, a template macro or a bound Python method.
struct CallableData {
    enum class Type : uint8_t { Builtin, Macro, Method };
    Type type = Type::Builtin;
    std::string name;
    std::function<Value(Interpreter&, const CallArgs&)> fn;  // Builtin
    const Node* macro = nullptr;                             // Macro / CallBlock node
    std::weak_ptr<Scope> scope;                              // Macro: defining scope
    bool catch_kwargs = false, catch_varargs = false;        // body reads kwargs / varargs
    Value self;                                              // Method: the object
};

class Interpreter {
public:
    /// `vars`: the render variables (messages, add_generation_prompt, ...). `now_unix`: the
    /// clock strftime_now() reads (seconds since the epoch, formatted in local time); the
    /// current time when absent.
    Interpreter(const DictData& vars, std::optional<int64_t> now_unix, RenderLimits limits);
    ~Interpreter();
    Interpreter(const Interpreter&) = delete;
    Interpreter& operator=(const Interpreter&) = delete;

    /// Render the template: the text with its data ranges. Throws TemplateError.
    TaintedText render(const Node& tmpl);

    // ---- services for the built-ins ----
    Value call(const Value& fn, const CallArgs& args);
    Value apply_filter(std::string_view name, const Value& input, const CallArgs& args);
    bool apply_test(std::string_view name, const Value& input, const CallArgs& args);
    /// jinja2 environment.getattr / getitem (attribute first / item first, Undefined when
    /// missing, sandbox checks).
    Value getattr(const Value& obj, std::string_view name);
    Value getitem(const Value& obj, const Value& key);
    /// Python iter(): the items of a list, the keys of a dict, the characters of a string;
    /// Undefined iterates as empty. Throws TypeError for non-iterables. Consumes generators.
    std::vector<Value> iterate(const Value& v);
    /// Python len(): throws TypeError for values without a length.
    int64_t length(const Value& v);
    int64_t now_unix() const;
    void tick();
    /// Grows a string by `n` bytes, checking the output cap (used for repetition, join, ...).
    void check_size(size_t n) const;
    /// Remember a namespace() created during the render (cleared afterwards to break cycles).
    void track_namespace(const Value& ns);

private:
    enum class Flow : uint8_t { Normal, Break, Continue };

    Flow exec_body(const std::vector<NodePtr>& body, const std::shared_ptr<Scope>& sc,
                   TaintedText& out);
    Flow exec(const Node& n, const std::shared_ptr<Scope>& sc, TaintedText& out);
    void exec_for(const Node& n, const std::shared_ptr<Scope>& sc, TaintedText& out);
    void assign(const Node& target, const Value& v, Scope& sc,
                const std::shared_ptr<Scope>& lookup);
    Value eval(const Node& n, const std::shared_ptr<Scope>& sc);
    Value eval_inner(const Node& n, const std::shared_ptr<Scope>& sc);
    Value eval_filter_chain(const Node& n, const std::shared_ptr<Scope>& sc, const Value* block_input);
    CallArgs eval_args(const Node& n, const std::shared_ptr<Scope>& sc);
    Value lookup(std::string_view name, const Scope& sc) const;
    Value call_macro(const CallableData& fn, const CallArgs& args, const Value* caller);
    Value make_macro(const Node& n, const std::shared_ptr<Scope>& sc);
    Value slice(const Value& obj, const Node& sl, const std::shared_ptr<Scope>& sc);

    const DictData& vars_;
    std::optional<int64_t> now_;
    RenderLimits limits_;
    uint64_t steps_ = 0;
    int depth_ = 0;
    std::vector<std::weak_ptr<DictData>> namespaces_;
    std::shared_ptr<Scope> root_;
};

/// Binary operators with Python semantics ("+", "-", "*", "/", "//", "%", "**").
Value py_binop(Interpreter& in, std::string_view op, const Value& a, const Value& b);
/// Comparison ("==", "!=", "<", "<=", ">", ">=", "in", "notin").
bool py_compare(std::string_view op, const Value& a, const Value& b);
/// Python `a < b` ordering used by sort/min/max (TypeError on mixed types).
bool py_less(const Value& a, const Value& b);
/// Error message for using an Undefined value.
[[noreturn]] void fail_undefined(const Value& u);

}  // namespace zinc::chat
