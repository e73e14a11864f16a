// zinc/server/tool_format.h — how a model writes a tool call: one descriptor per format, read by
// the forced-call grammar (tool_calls.cpp), the parser of finished replies and the streamed
// parser (tool_call_stream.cpp), so the markers and the detection rule live here only.
//
// Formats (chosen from the chat template's text):
//   Hermes: `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per call
//           (Qwen 2.5 / Qwen 3, Hermes, and every template that mentions <tool_call>); a reply
//           that starts with a bare call object is read as in Json too (the tags may be control
//           tokens, which the reply's text leaves out);
//   Harmony: gpt-oss's messages, `<|channel|>commentary to=functions.f <|constrain|>json
//           <|message|>{...}` (no newline before <|message|>), ended by `<|call|>` (an
//           end-of-generation token, so one call a turn; as text it is the close marker). A call
//           that opens a later message starts at `<|start|>assistant`, and its recipient may be
//           in that role header instead (`<|start|>assistant to=functions.f<|channel|>
//           commentary json<|message|>`); the channel may be analysis too (llama.cpp's
//           common/chat.cpp reads these shapes). Detected by `<|channel|>` in the template;
//   Json:   bare `{"name": "f", "parameters": {...}}` objects ("arguments" accepted too) from
//           the start of the reply, several separated by ";" or whitespace (Llama 3.x's JSON
//           tool calling).
// Not described: Gemma. Gemma 3's chat template has no tool format (its tools are prompted as
// text and its replies stay content); Gemma 4's `<|tool_call>call:f{key:<|"|>v<|"|>}<tool_call|>`
// (not JSON) is not read yet.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace zinc::server {

enum class ToolFormat { Hermes, Harmony, Json };

/// How a call's head (what names the tool, before the arguments) is written.
enum class CallHead {
    JsonObject,  // `{"name": "f", "arguments": ` (or "parameters"), the call a JSON object
    Harmony,     // `[<|start|>assistant[ to=functions.f]]<|channel|>commentary|analysis
                 // [ to=functions.f][ <|constrain|>][json]<|message|>`, the arguments after it
};

struct ToolFormatSpec {
    ToolFormat format;
    std::string_view name;  // "hermes", "harmony", "json": for messages and docs
    /// Text whose presence in a chat template's source selects this format; empty: the
    /// fallback (the last descriptor).
    std::string_view detect;
    /// The marker that opens / closes one call block ("" when calls are bare objects).
    std::string_view open, close;
    /// A second marker a call may open with ("" when none): harmony's `<|start|>assistant`.
    std::string_view open_alt;
    CallHead head = CallHead::JsonObject;
    /// A marked block that is not a call is content through its close marker (Hermes); false:
    /// only its marker is, and the text after it is read again (harmony, whose other messages
    /// share the marker).
    bool block_to_close = true;
    /// A reply may start with bare call objects (no markers), separated by ';' or whitespace.
    bool bare_calls = false;
    /// The key the arguments object is written under in the forced-call grammar. The parsers
    /// read both "arguments" and "parameters".
    std::string_view arguments_key;
    /// What the forced-call grammar writes between two calls (a GBNF fragment); "": one call
    /// a turn (the format's call ends the generation).
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
