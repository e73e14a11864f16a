// zinc/chat/builtins.h — internal interface between the evaluator (interpreter.cpp) and the
// built-in filters (filters.cpp), tests and Python methods (tests_and_methods.cpp) and global
// functions (globals.cpp). Not part of the public API.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace zinc::chat {

class Interpreter;

/// Arguments of one call: positional then keyword (in source order).
struct CallArgs {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
};

/// Binds CallArgs to a Python-style parameter list. Throws TemplateError on too many
/// positional arguments, unknown keywords or a parameter given twice, naming `fname`.
class ArgBinder {
public:
    ArgBinder(const CallArgs& args, std::string_view fname, std::initializer_list<const char*> params);
    /// The argument for parameter `i`, or nullptr when not given.
    const Value* get(size_t i) const { return slots_[i]; }
    Value get_or(size_t i, Value fallback) const { return slots_[i] ? *slots_[i] : std::move(fallback); }
    bool has(size_t i) const { return slots_[i] != nullptr; }

private:
    std::vector<const Value*> slots_;
};

using FilterFn = Value (*)(Interpreter& in, const Value& input, const CallArgs& args);
using TestFn = bool (*)(Interpreter& in, const Value& input, const CallArgs& args);

/// Built-in filter / test by name (aliases included), or nullptr.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
bool is_known_filter(std::string_view name);

/// Python method lookup for str, dict and list values. `has_method` says whether `name` is a
/// callable attribute of `self` that templates may use; `is_unsafe_method` whether it is one the
/// immutable sandbox refuses (list.append, dict.update, ...).
bool has_method(const Value& self, std::string_view name);
bool is_unsafe_method(const Value& self, std::string_view name);
Value call_method(Interpreter& in, const Value& self, std::string_view name, const CallArgs& args);

/// Global function by name (range, dict, namespace, raise_exception, strftime_now), or
/// Undefined.
Value find_global_function(std::string_view name);

/// Python `"fmt" % args` (printf-style formatting: %s %r %d %i %f %x %% with flags/width).
/// The format string's bytes keep their taint; a piece interpolated from an argument holding
/// data is data.
Value py_percent_format(Interpreter& in, const Value& fmt, const Value& args);
/// Python str.format(*args, **kwargs) as jinja2's sandbox allows it (taint as above).
Value py_str_format(Interpreter& in, const Value& fmt, const CallArgs& args);
/// json.dumps(value, ensure_ascii, indent, separators, sort_keys), as HF's tojson filter.
struct JsonOptions {
    bool ensure_ascii = false;
    int indent = -1;  // < 0: None (single line)
    std::string indent_str;  // used instead of spaces when indent was given as a string
    bool indent_is_string = false;
    std::string item_sep = ", ";
    std::string key_sep = ": ";
    bool sort_keys = false;
};
std::string py_json_dumps(const Value& v, const JsonOptions& opt);

}  // namespace zinc::chat
