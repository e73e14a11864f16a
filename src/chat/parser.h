// zinc/chat/parser.h — builds the syntax tree (ast.h) from tokens, following jinja2 3.1's
// grammar and operator precedence:
//   condexpr:  or ("if" or ("else" condexpr)?)*
//   or / and / not / compare (==, !=, <, <=, >, >=, in, not in; chained)
//   math1 (+ -) / concat (~) / math2 (* / // %) / pow (**) / unary (- +, binds tighter than **)
//   primary (names, literals, (tuple), [list], {dict}) with postfix .attr [index/slice] (call),
//   then filters "| name(args)" and tests "is [not] name args".
// Statements: if/elif/else, for (tuple targets, "if" filter, else), set (incl. tuple targets,
// namespace attributes and block form), macro, call, filter, with, print, break, continue, raw,
// and HF's generation tag. extends/block/include/import/from/autoescape are reported as
// unsupported constructs; unknown filters are errors at parse time, as in jinja2.
#pragma once

#include <string_view>

#include "chat/ast.h"

namespace zinc::chat {

/// Parse a whole template. Throws TemplateError with the position of the offending token.
NodePtr parse_template(std::string_view source);

}  // namespace zinc::chat
