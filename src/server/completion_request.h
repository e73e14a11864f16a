// zinc/server/completion_request.h — validate the body of POST /v1/chat/completions and
// POST /v1/completions into one request description, before any tokenizing.
//
// Field names, types and ranges follow OpenAI's API reference (plus vLLM's common extensions
// top_k, min_p, repetition_penalty). Unknown top-level fields are ignored, as vLLM and
// llama.cpp's server do (clients send provider-specific extras); fields we know but do not
// implement (logit_bias, echo, suffix, best_of != n, vLLM's guided_regex)
// are a 400 rather than silently dropped. Structured output (response_format, grammar,
// json_schema, guided_json, guided_grammar, guided_choice; on both APIs) becomes one GBNF
// grammar (server/json_schema_grammar.h). Every error names the JSON path of the bad field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "engine/sampler.h"
#include "server/api_error.h"
#include "server/tool_calls.h"

namespace zinc::server {

enum class ApiKind { Chat, Completion };

/// One prompt of a completions request as sent: text, or token ids.
struct PromptInput {
    bool is_tokens = false;
    std::string text;             // when !is_tokens
    std::vector<int32_t> tokens;  // when is_tokens (ids not yet range-checked)
    std::string path;             // JSON path, for errors ("prompt", "prompt[1]")
};

struct CompletionRequest {
    ApiKind kind = ApiKind::Chat;
    std::string model;                    // "" when absent
    bool has_model = false;               // the field was given (an empty string included)
    std::vector<chat::Message> messages;  // Chat: >= 1, roles checked
    std::vector<PromptInput> prompts;     // Completion: >= 1
    int32_t n = 1;                        // choices per prompt
    std::optional<int32_t>
        max_tokens;                   // absent: the rest of the context (chat) or 16 (completions)
    std::string max_tokens_param;     // the field it came from, for errors
    engine::SamplerOptions sampling;  // server defaults overridden by the request
    std::optional<uint64_t> seed;     // absent: the server draws one
    std::vector<std::string> stop;    // stop strings (non-empty ones)
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool logprobs = false;
    int32_t top_logprobs = 0;  // alternatives per token (0..20) when logprobs
    std::string user;
    bool ignore_eos = false;  // llama.cpp / vLLM extension: generate past end-of-generation
    /// Structured output: GBNF the generated text must match ("" none), from response_format,
    /// or llama.cpp's grammar / json_schema, or vLLM's guided_json / guided_grammar /
    /// guided_choice fields.
    std::string grammar;
    std::string grammar_param;  // the field it came from, for errors ("response_format")
    /// Not empty: the grammar applies lazily, from the first of these on (tool_choice auto's
    /// calls: tool_calls.h)
    std::vector<engine::GrammarTrigger> grammar_triggers;
    /// Chat: the request's tools and tool_choice (tool_calls.h); `use_tools` when there are
    /// tools and tool_choice is not "none" (they are rendered and calls parsed back).
    ToolsRequest tools;
    bool use_tools = false;
    /// Chat: chat_template_kwargs.enable_thinking, passed to the template only when given.
    std::optional<bool> enable_thinking;
};

/// Limits on what one request may ask for (docs/server.md, "Limits").
struct RequestLimits {
    int32_t max_n = 64;            // n
    int32_t max_prompts = 64;      // prompts in one completions request
    int32_t max_stop = 16;         // stop strings
    size_t max_stop_bytes = 1024;  // bytes in one stop string
    int32_t max_logprobs = 20;     // top_logprobs / completions logprobs
};

/// Parse a request body: malformed JSON (with the byte offset) or a non-object is a 400.
ApiResult<nlohmann::json> parse_json_body(std::string_view body);

/// POST /v1/chat/completions. Roles: system, developer (rendered as system), user, assistant,
/// tool; content: a string, an array of {"type": "text", "text": ...} parts, or null (assistant).
ApiResult<CompletionRequest> parse_chat_request(const nlohmann::json& body,
                                                const engine::SamplerOptions& defaults,
                                                const RequestLimits& limits = {});

/// POST /v1/completions. prompt: a string, an array of strings, an array of token ids, or an
/// array of arrays of token ids.
ApiResult<CompletionRequest> parse_completion_request(const nlohmann::json& body,
                                                      const engine::SamplerOptions& defaults,
                                                      const RequestLimits& limits = {});

}  // namespace zinc::server
