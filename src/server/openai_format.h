// zinc/server/openai_format.h — response bodies and stream chunks in OpenAI's wire format:
// chat.completion / chat.completion.chunk, text_completion (whole and streamed), usage, and
// logprobs in both shapes (chat: content[] of {token, logprob, bytes, top_logprobs}; completions:
// tokens / token_logprobs / top_logprobs / text_offset).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/completion_request.h"
#include "tokenizer/tokenizer.h"

namespace zinc::server {

/// What every response of one request shares.
struct ResponseMeta {
    ApiKind kind = ApiKind::Chat;
    std::string id;       // "chatcmpl-..." / "cmpl-..."
    int64_t created = 0;  // Unix seconds
    std::string model;
};

struct UsageCounts {
    int32_t prompt_tokens = 0;
    int32_t completion_tokens = 0;
    int32_t cached_prompt_tokens = 0;
};
nlohmann::json usage_json(const UsageCounts& u);

/// Chat logprobs entries ({"token", "logprob", "bytes", "top_logprobs"}) for `tokens`.
nlohmann::json chat_logprob_entries(const tokenizer::Tokenizer& tok,
                                    const std::vector<engine::GeneratedToken>& tokens,
                                    int32_t top_n);

/// Completions logprobs, accumulated across chunks of one choice.
struct CompletionLogprobs {
    nlohmann::json tokens = nlohmann::json::array();
    nlohmann::json token_logprobs = nlohmann::json::array();
    nlohmann::json top_logprobs = nlohmann::json::array();
    nlohmann::json text_offset = nlohmann::json::array();
    size_t offset = 0;  // bytes of token text so far (text_offset of the next token)
    /// Append `tokens`' entries; returns the object for just these (a stream chunk's).
    nlohmann::json add(const tokenizer::Tokenizer& tok,
                       const std::vector<engine::GeneratedToken>& tokens, int32_t top_n);
    nlohmann::json whole() const;
};

/// One streamed chunk of one choice. Chat: `role_delta` adds "role": "assistant" (first chunk);
/// `text` is the content delta (omitted when empty and not the first). `logprobs`: null or the
/// per-kind object. `with_usage_null`: add "usage": null (when include_usage is set).
nlohmann::json stream_chunk(const ResponseMeta& meta, int32_t index, const std::string& text,
                            bool role_delta, nlohmann::json logprobs,
                            const std::optional<std::string>& finish_reason, bool with_usage_null);

/// One entry of a chat chunk's `delta.tool_calls`: the call's first (with `id`, "type":
/// "function" and `function.name`) when `id` is set, else a further `function.arguments`
/// fragment. `index`: the call's position in the choice's tool_calls.
nlohmann::json tool_call_delta(int index, const std::string* id, const std::string& name,
                               const std::string& arguments);

/// The final usage chunk: "choices": [] and the usage object.
nlohmann::json usage_chunk(const ResponseMeta& meta, const UsageCounts& u);

/// One choice of a whole (non-streamed) response.
struct ChoiceResult {
    std::string text;
    std::string finish_reason;
    nlohmann::json logprobs;    // null or the per-kind object
    nlohmann::json tool_calls;  // null, or chat's message.tool_calls (content null when empty)
};
nlohmann::json whole_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                              const UsageCounts& u);

/// Serialise for the wire: compact, invalid UTF-8 (a token that is half a character) replaced.
std::string dump(const nlohmann::json& j);

}  // namespace zinc::server
