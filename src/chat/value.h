// zinc/chat/value.h — the dynamic value of the Jinja interpreter, with Python semantics.
//
// Chat templates are Jinja evaluated by Python (jinja2 inside transformers), so every value
// behaves like the Python object jinja2 would hold: truthiness, equality (1 == 1.0 == True),
// str() and repr() formatting (True, None, 1e-05, ['a', 'b'], {'k': 1}) and json.dumps output
// all follow CPython. Kinds:
//   Undefined  jinja2's default Undefined: prints as "", falsy, iterates as empty; most other
//              uses (attribute, arithmetic, call) are errors carrying `text` as the reason.
//   None, Bool, Int (64-bit; Python's big ints are not modelled: overflow is an error),
//   Float (double), String (UTF-8 bytes; lengths, indexes and slices count code points),
//   List       shared ListData; SeqKind records what Python type it stands for (list, tuple,
//              generator, dict view, range) so repr, len() and truthiness match.
//   Dict       shared DictData, insertion-ordered, keys compared with Python equality.
//   Namespace  jinja2's namespace(): a mutable attribute bag (shared: assignment is visible
//              through every reference).
//   Object     loop contexts and other read-only attribute objects (ObjectData).
//   Callable   macros, global functions and bound methods (CallableData, defined by the
//              interpreter).
// Lists and dicts are shared, like Python references; the interpreter never mutates them after
// construction except through namespaces (templates run in jinja2's immutable sandbox).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/taint.h"

namespace zinc::chat {

enum class ValueKind : uint8_t {
    Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Object, Callable,
};

/// Which Python sequence type a List stands for (affects repr, len() and truthiness).
enum class SeqKind : uint8_t {
    List,        // [1, 2]
    Tuple,       // (1, 2)
    Generator,   // results of map/select filters: always truthy, no len(), consumed once
    DictKeys,    // dict_keys(['a'])
    DictValues,  // dict_values([1])
    DictItems,   // dict_items([('a', 1)])
    Range,       // range(0, 3)
};

class Value;
struct ListData;
struct DictData;
struct ObjectData;
struct CallableData;

class Value {
public:
    Value() = default;  // Undefined
    static Value undefined(std::string reason = {});
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value number(double f);
    static Value string(std::string s);  // template text (no data)
    /// A string whose bytes in `spans` are data (taint.h); `spans` must be normalised.
    static Value string(std::string s, DataSpans spans);
    /// A string that is entirely data (an input value).
    static Value data_string(std::string s);
    static Value list(std::vector<Value> items, SeqKind kind = SeqKind::List);
    static Value dict();
    static Value dict(std::vector<std::pair<Value, Value>> items);
    static Value namespace_object();
    static Value object(std::shared_ptr<ObjectData> obj);
    static Value callable(std::shared_ptr<const CallableData> fn);

    ValueKind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == ValueKind::Undefined; }
    bool is_none() const { return kind_ == ValueKind::None; }
    bool is_bool() const { return kind_ == ValueKind::Bool; }
    bool is_int() const { return kind_ == ValueKind::Int; }
    bool is_float() const { return kind_ == ValueKind::Float; }
    bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python Number
    bool is_string() const { return kind_ == ValueKind::String; }
    bool is_list() const { return kind_ == ValueKind::List; }
    bool is_dict() const { return kind_ == ValueKind::Dict; }
    bool is_namespace() const { return kind_ == ValueKind::Namespace; }
    bool is_callable() const { return kind_ == ValueKind::Callable; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return i_; }       // Int (Bool also stores 0/1 here)
    double as_float() const { return f_; }
    double to_double() const;                   // Int, Bool or Float as double
    const std::string& str() const { return s_; }  // String text; Undefined reason
    /// String: its data ranges, or nullptr when it holds no data (taint.h).
    const DataSpans* data_spans() const { return taint_.get(); }
    bool has_data() const { return taint_ != nullptr; }
    ListData& list_data() const { return *list_; }
    DictData& dict_data() const { return *dict_; }  // Dict and Namespace
    const std::shared_ptr<DictData>& dict_ptr() const { return dict_; }
    ObjectData& object_data() const { return *obj_; }
    const CallableData& callable_data() const { return *fn_; }
    const std::shared_ptr<const CallableData>& callable_ptr() const { return fn_; }
    SeqKind seq_kind() const;

    /// Python bool(x).
    bool truthy() const;
    /// Python str(x) as jinja2 prints it ({{ x }}); Undefined prints as "".
    std::string to_str() const;
    /// Python repr(x).
    std::string repr() const;
    /// Python type name, for error messages ("str", "int", "dict", "NoneType", ...).
    std::string_view type_name() const;

private:
    ValueKind kind_ = ValueKind::Undefined;
    bool b_ = false;
    int64_t i_ = 0;
    double f_ = 0;
    std::string s_;
    std::shared_ptr<ListData> list_;
    std::shared_ptr<DictData> dict_;
    std::shared_ptr<ObjectData> obj_;
    std::shared_ptr<const CallableData> fn_;
    std::shared_ptr<const DataSpans> taint_;  // String only; null: no data
};

struct ListData {
    std::vector<Value> items;
    uint32_t depth = 1;     // nesting depth (1 + deepest element), kept to bound recursion
    SeqKind kind = SeqKind::List;
    bool consumed = false;  // Generator: iterated once already (later iterations see nothing)
    int64_t range_start = 0, range_stop = 0, range_step = 1;  // Range: for repr
};

/// Insertion-ordered mapping with Python key equality (1, 1.0 and True are the same key).
struct DictData {
    std::vector<std::pair<Value, Value>> items;
    uint32_t depth = 1;  // 1 + deepest key or value ever stored
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    void set(Value key, Value value);  // replaces in place or appends
};

/// A read-only object with attributes (jinja2's LoopContext, ...).
struct ObjectData {
    virtual ~ObjectData() = default;
    /// The attribute, or Undefined when absent.
    virtual Value get_attr(std::string_view name) = 0;
    virtual std::string repr() const = 0;
};

/// Whether any string in `v` (deep: list items, dict keys and values, namespace attributes)
/// holds data.
bool contains_data(const Value& v);
/// `v` with every string in it (deep) made entirely data: how input values enter a render.
Value mark_data(const Value& v);
/// Bytes [b, e) of string `s`, keeping their taint.
Value substr_value(const Value& s, size_t b, size_t e);
/// A new string computed from inputs: entirely data when `data`, else template text.
Value derived_string(std::string s, bool data);
/// Append what `{{ v }}` prints: a string with its taint; any other value's str(), entirely
/// data when it contains data.
void append_value(TaintedText& out, const Value& v);
/// The string value of a finished buffer.
Value text_value(TaintedText&& t);
/// Python str(v) keeping taint: a string as it is; any other value's text, entirely data when
/// it contains data.
Value str_value(const Value& v);
/// str.replace(old, repl, count) on string `s` (count < 0: all): the kept bytes keep their
/// taint, each inserted `repl` brings its own.
Value replace_value(const Value& s, std::string_view old, const Value& repl, long count);

/// Nesting depth of containers (0 for scalars).
uint32_t value_depth(const Value& v);

/// Python `a == b` (deep for lists and dicts; Undefined equals only Undefined).
bool py_equal(const Value& a, const Value& b);
/// Whether a value can be a dict key / set member in Python (not list, dict, namespace).
bool py_hashable(const Value& v);

/// CPython repr() of a float ("1.0", "1e-05", "1.2345678901234568e+17", "inf", "nan").
std::string py_float_repr(double f);
/// CPython repr() of a str (quote choice and escapes of non-printable characters).
std::string py_str_repr(std::string_view s);

}  // namespace zinc::chat
