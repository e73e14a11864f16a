// zinc/server/tool_calls.h — OpenAI tool calling on /v1/chat/completions: the `tools` and
// `tool_choice` fields, the grammar that forces a call (tool_choice required / named), and the
// model's calls parsed back from its text.
//
// Formats (how the model writes a call; chosen from the chat template's text):
//   Hermes: `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`, one block per call
//           (Qwen 2.5 / Qwen 3, Hermes, and every template that mentions <tool_call>); a reply
//           without blocks is also read as Json (the tags may be control tokens, not text);
//   Json:   a bare `{"name": "f", "parameters": {...}}` ("arguments" accepted too) as the whole
//           reply, several separated by ";" or newlines (Llama 3.x's JSON tool calling).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/value.h"
#include "server/api_error.h"

namespace zinc::server {

enum class ToolFormat { Hermes, Json };
enum class ToolChoice { None, Auto, Required, Named };

struct ToolsRequest {
    nlohmann::json tools = nlohmann::json::array();  // as sent (validated)
    std::vector<std::string> names;                  // function names, in order
    ToolChoice choice = ToolChoice::Auto;
    std::string named;  // ToolChoice::Named: the function
};

/// Validate `tools` (an array of {"type": "function", "function": {"name", "description",
/// "parameters"}}) and `tool_choice` ("none", "auto", "required" or {"type": "function",
/// "function": {"name"}}). `tool_choice` without tools is a 400 unless "none".
ApiResult<ToolsRequest> parse_tools(const nlohmann::json* tools, const nlohmann::json* choice);

/// The format the template writes calls in.
ToolFormat tool_format_for_template(const std::string& template_source);

/// GBNF for a reply that is one or more calls (tool_choice required) or exactly one call of
/// the named function, each call's arguments constrained by its `parameters` schema.
ApiResult<std::string> tool_call_grammar(const ToolsRequest& t, ToolFormat f);

struct ParsedCall {
    std::string name;
    std::string arguments;  // JSON text of the arguments object
};
struct ParsedReply {
    std::string content;  // the text outside the calls (trimmed)
    std::vector<ParsedCall> calls;
};
/// A JSON value as a template value (strings are data): tools, and tool_calls in history.
chat::Value json_to_template_value(const nlohmann::json& j);

/// An OpenAI assistant message's "tool_calls" as the template sees them: each call's
/// function.arguments JSON text parsed into an object (as transformers' templates expect).
chat::Value tool_calls_value(const nlohmann::json& calls);

/// The calls in a finished reply (names not among `names` are left as text).
ParsedReply parse_tool_calls(const std::string& text, ToolFormat f,
                             const std::vector<std::string>& names);

}  // namespace zinc::server
