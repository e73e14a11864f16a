// zinc/chat/lexer.h — splits a Jinja template into tokens the way jinja2's lexer does with
// Hugging Face's settings (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False).
//
// Source rules (jinja2 3.1 lexer):
//   * "\r\n" and "\r" become "\n"; one trailing newline of the template is dropped.
//   * Tags: {{ expr }}, {% stmt %}, {# comment #}, {% raw %}...{% endraw %}.
//   * "{%-" / "{{-" / "{#-" strip all whitespace before the tag; "-%}" / "-}}" / "-#}" strip all
//     whitespace after it. "{%+" disables lstrip for that tag, "+%}" disables trim.
//   * trim_blocks: the first newline right after a block or comment tag is removed.
//   * lstrip_blocks: spaces/tabs between a line start and a block or comment tag are removed.
//   * Inside tags: names, strings ('..' / ".." with Python escapes), integers (with _, 0x, 0o,
//     0b), floats, and operators; an end tag inside open brackets is read as operators.
// Errors throw TemplateError with the position.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/error.h"

namespace zinc::chat {

enum class TokType : uint8_t {
    Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, Eof,
};

struct Token {
    TokType type = TokType::Eof;
    std::string value;  // Data text, Name, decoded String, Operator spelling
    int64_t ival = 0;   // Integer
    double fval = 0;    // Float
    SourcePos pos;
};

/// Tokenize `source`. Throws TemplateError on lexical errors (unterminated comment or string,
/// unexpected character, unbalanced brackets).
std::vector<Token> tokenize(std::string_view source);

/// Printable description of a token for error messages ("end of statement block", "'foo'").
std::string describe_token(const Token& t);

}  // namespace zinc::chat
