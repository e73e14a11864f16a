// zinc/server/tool_format.h — how a model writes a tool call: one descriptor per format, read by
// the forced-call grammar (tool_calls.cpp), the parser of finished replies and the streamed
// parser (tool_call_stream.cpp), so the markers and the detection rule live here only.
//
// Formats (chosen from the chat template's text):
//   Hermes: `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per call
//           (Qwen 2.5 / Qwen 3, Hermes, and every template that mentions <tool_call>); a reply
//           that starts with a bare call object is read as in Json too (the tags may be control
//           tokens, which the reply's text leaves out);
//   Json:   bare `{"name": "f", "parameters": {...}}` objects ("arguments" accepted too) from
//           the start of the reply, several separated by ";" or whitespace (Llama 3.x's JSON
//           tool calling).
// Not described (their replies stay content): gpt-oss harmony, Gemma.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace zinc::server {

enum class ToolFormat { Hermes, Json };

struct ToolFormatSpec {
    ToolFormat format;
    std::string_view name;  // "hermes", "json": for messages and docs
    /// Text whose presence in a chat template's source selects this format; empty: the
    /// fallback (the last descriptor).
    std::string_view detect;
    /// The marker that opens / closes one call block ("" when calls are bare objects).
    std::string_view open, close;
    /// A reply may start with bare call objects (no markers), separated by ';' or whitespace.
    bool bare_calls = false;
    /// The key the arguments object is written under in the forced-call grammar. The parsers
    /// read both "arguments" and "parameters".
    std::string_view arguments_key;
    /// What the forced-call grammar writes between two calls (a GBNF fragment).
    std::string_view grammar_separator;
};

/// Every described format, in detection order (the last one is the fallback).
std::span<const ToolFormatSpec> tool_format_specs();

/// The descriptor of `f`.
const ToolFormatSpec& tool_format_spec(ToolFormat f);

/// The format a chat template writes calls in: the first descriptor whose `detect` text occurs
/// in `template_source`, else the fallback.
ToolFormat tool_format_for_template(std::string_view template_source);

}  // namespace zinc::server
