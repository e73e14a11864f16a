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
//   Gemma4: `<|tool_call>call:f{key:<|"|>v<|"|>,n:5}<tool_call|>`, one block per call, back to
//           back; the arguments in Gemma 4's dictionary syntax (gemma4_args.h), sent as JSON.
//           Detected by `<|tool_call>call:` in the template (as llama.cpp detects it).
// Not described: Gemma 3, whose chat template has no tool format (its tools are prompted as
// text and its replies stay content).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace zinc::server {

enum class ToolFormat { Gemma4, Hermes, Harmony, Json };

/// How a call's head (what names the tool, before the arguments) is written.
enum class CallHead {
    JsonObject,  // `{"name": "f", "arguments": ` (or "parameters"), the call a JSON object
    Harmony,     // `[<|start|>assistant[ to=functions.f]]<|channel|>commentary|analysis
                 // [ to=functions.f][ <|constrain|>][json]<|message|>`, the arguments after it
    Gemma4,      // `call:f` right before the arguments' `{` (after the open marker)
};

struct ToolFormatSpec {
    ToolFormat format;
    std::string_view name;  // "gemma4", "hermes", "harmony", "json": for messages and docs
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
    /// Not "": a template of this format that lacks this text takes a call's results inside
    /// the assistant turn that made it (`tool_responses`, older Gemma 4 templates), not as
    /// `tool` messages, so fold_tool_turns (tool_calls.h) runs first; the official Gemma 4
    /// template has it ("{#- OpenAI Chat Completions:") and reads `tool` messages itself. As
    /// llama.cpp decides (common/chat.cpp, common/parsers/gemma4.cpp).
    std::string_view reads_tool_messages;
    /// The format's markers are control tokens in its models' vocabularies (Gemma 4's
    /// `<|tool_call>`, `<tool_call|>`, `<|channel>`, ...), whose text the detokenizer leaves out
    /// unless asked: a request with tools gets every control token that does not end the
    /// generation rendered in its replies (llama.cpp's server renders the format's preserved
    /// tokens), so the calls can be read.
    bool renders_control_tokens = false;
    /// What the forced-call grammar writes between two calls (a GBNF fragment, `""` for
    /// nothing); "": one call a turn (the format's call ends the generation).
    std::string_view grammar_separator;
    /// Under tool_choice auto, the text from which on the reply is a call: the call grammar
    /// applies lazily from its first occurrence (engine/grammar_matcher.h), so the arguments
    /// follow their schema while the text before stays free. It is the start of the grammar's
    /// block ("" : auto replies are not constrained; Json's calls have no marker).
    std::string_view lazy_trigger;
};

/// Every described format, in detection order (the last one is the fallback).
std::span<const ToolFormatSpec> tool_format_specs();

/// The descriptor of `f`.
const ToolFormatSpec& tool_format_spec(ToolFormat f);

/// The format a chat template writes calls in: the first descriptor whose `detect` text occurs
/// in `template_source`, else the fallback.
ToolFormat tool_format_for_template(std::string_view template_source);

/// Whether a template's conversation must be folded first (reads_tool_messages above).
bool template_folds_tool_turns(std::string_view template_source);

}  // namespace zinc::server
