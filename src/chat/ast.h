// zinc/chat/ast.h — the syntax tree of a parsed template: one Node type with a kind tag.
//
// Field use per kind (unused fields stay empty):
//   expressions
//     Const      value
//     Name       str = variable name
//     Getattr    a = object, str = attribute              (x.name)
//     Getitem    a = object, b = index or Slice           (x[i], x.0)
//     Slice      a = start, b = stop, c = step (each may be null)
//     Call       a = callee, items = positional args, kw_names/kw_values = keyword args
//     Filter     a = input (null in filter blocks / set blocks: the block's text),
//                str = filter name, items / kw_* = arguments
//     Test       a = input, str = test name, items / kw_* = arguments
//     Unary      str = "-", "+" or "not", a = operand
//     Binary     str = "+", "-", "*", "/", "//", "%", "**", "and", "or"; a, b
//     Compare    a = first operand, items = further operands, names = operators
//                ("==", "!=", "<", "<=", ">", ">=", "in", "notin")
//     Concat     items (the ~ operator, any number of operands)
//     CondExpr   a = test, b = value if true, c = value if false (null: Undefined)
//     List, Tuple  items
//     Dict       items = keys, kw_values = values
//     NSRef      str = namespace variable, str2 = attribute   (set targets only)
//   statements
//     Data       str = literal text
//     Output     a = expression to print
//     If         a = test, body, orelse (an elif is a nested If alone in orelse)
//     For        a = target, b = iterable, c = filter test (may be null), body, orelse
//     Set        a = target (Name, Tuple of Names, NSRef), b = value
//     SetBlock   a = target, b = filter chain (may be null), body
//     Macro      str = name, names = parameters, kw_values = defaults for the last
//                parameters, body
//     CallBlock  a = Call expression, names / kw_values = caller parameters, body
//     FilterBlock  b = filter chain, body
//     With       names = targets, items = values, body
//     Break, Continue
//     Scope      body (the HF {% generation %} tag: rendered as its body)
//   Template     body
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/error.h"
#include "chat/value.h"

namespace zinc::chat {

enum class NodeKind : uint8_t {
    Const, Name, Getattr, Getitem, Slice, Call, Filter, Test, Unary, Binary, Compare, Concat,
    CondExpr, List, Tuple, Dict, NSRef,
    Data, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Break, Continue,
    Scope, Template,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
    NodeKind kind;
    SourcePos pos;
    std::string str;
    std::string str2;
    Value value;
    NodePtr a, b, c;
    std::vector<NodePtr> items;
    std::vector<std::string> names;
    std::vector<std::string> kw_names;
    std::vector<NodePtr> kw_values;
    std::vector<NodePtr> body;
    std::vector<NodePtr> orelse;

    Node(NodeKind k, SourcePos p) : kind(k), pos(p) {}
};

}  // namespace zinc::chat
