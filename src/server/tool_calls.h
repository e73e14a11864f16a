// zinc/server/tool_calls.h — OpenAI tool calling on /v1/chat/completions: the `tools` and
// `tool_choice` fields, the grammar that forces a call (tool_choice required / named), and the
// model's calls parsed back from its text.
//
// The formats (how a model writes a call, and how a template's format is found) are the
// descriptors of tool_format.h; the calls are read back by tool_call_stream.h, whose rules
// docs/server.md states.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/value.h"
#include "engine/grammar_matcher.h"
#include "server/api_error.h"
#include "server/tool_format.h"

namespace zinc::server {

enum class ToolChoice { None, Auto, Required, Named };

struct ToolsRequest {
    nlohmann::json tools = nlohmann::json::array();  // as sent (validated)
    std::vector<std::string> names;                  // function names, in order
    std::vector<bool> strict;                        // each function's `strict` (default false)
    ToolChoice choice = ToolChoice::Auto;
    std::string named;  // ToolChoice::Named: the function
    /// `parallel_tool_calls` (default true). false: at most one call: the forced-call grammar
    /// allows one, and a reply is read up to the end of its first call (what follows is
    /// dropped, and generation is stopped there: docs/server.md).
    bool parallel = true;
};

/// Validate `tools` (an array of {"type": "function", "function": {"name", "description",
/// "parameters"}}) and `tool_choice` ("none", "auto", "required" or {"type": "function",
/// "function": {"name"}}). `tool_choice` without tools is a 400 unless "none".
ApiResult<ToolsRequest> parse_tools(const nlohmann::json* tools, const nlohmann::json* choice);

/// GBNF for a reply that is one or more calls (tool_choice required; exactly one when
/// `parallel` is false or the format writes one call a turn) or exactly one call of the named
/// function, each call's arguments constrained by its `parameters` schema. For tool_choice
/// auto, the same calls, applied lazily from the format's lazy_trigger on (tool_format.h); a
/// tool whose schema has a keyword structured output cannot enforce takes any object then,
/// unless it is `strict` (a 400, as for the forced choices).
ApiResult<std::string> tool_call_grammar(const ToolsRequest& t, ToolFormat f);

/// Where tool_choice auto's call grammar starts (engine/grammar_matcher.h, lazy constraints): the
/// format's lazy_trigger anywhere, and for formats with bare calls the head of a bare call of
/// one of the tools at the start of the reply, as the grammar writes it (`{"name": "NAME"`,
/// also without the space, or on an indented next line). Empty: auto replies stay free.
std::vector<engine::GrammarTrigger> tool_call_triggers(const ToolsRequest& t, ToolFormat f);

struct ParsedCall {
    std::string name;
    std::string arguments;  // the arguments' JSON text as generated (not validated)
};
struct ParsedReply {
    std::string content;  // the text outside the calls (whitespace around calls dropped)
    std::vector<ParsedCall> calls;
    bool truncated = false;  // the text ends inside the last call's arguments
};
/// A JSON value as a template value (strings are data): tools, and tool_calls in history.
chat::Value json_to_template_value(const nlohmann::json& j);

/// An OpenAI assistant message's "tool_calls" as the template sees them: each call's
/// function.arguments JSON text parsed into an object (as transformers' templates expect).
chat::Value tool_calls_value(const nlohmann::json& calls);

/// For a format whose template takes tool results inside the model's turn (fold_tool_turns in
/// tool_format.h: Gemma 4), the conversation rewritten as llama.cpp's
/// convert_tool_responses_gemma4 does: an assistant message with tool_calls, the `tool` messages
/// right after it and a next assistant message with content and no calls become one assistant
/// message with that message's `tool_calls`, `tool_responses` (one {"name", "response"} per tool
/// message: the name of the call at the same position, else the message's tool_call_id; the
/// response its content parsed as JSON, else the text) and the later message's content (the
/// first one's own content is dropped, as there). Other messages are kept as they are.
std::vector<chat::Message> fold_tool_turns(const std::vector<chat::Message>& messages);

/// The calls in a finished reply (names not among `names` are left as text; with `parallel`
/// false, only the first call and the text before it): the whole text fed to a ToolCallStream
/// (tool_call_stream.h) at once, so a streamed reply's pieces concatenate to exactly this.
ParsedReply parse_tool_calls(const std::string& text, ToolFormat f,
                             const std::vector<std::string>& names, bool parallel = true);

}  // namespace zinc::server
