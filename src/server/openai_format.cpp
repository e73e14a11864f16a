// zinc/server/openai_format.cpp — see openai_format.h.
#include "server/openai_format.h"

namespace zinc::server {

using nlohmann::json;

std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_json(const UsageCounts& u) {
    return {{"prompt_tokens", u.prompt_tokens},
            {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

namespace {

json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char ch : s) b.push_back(int(ch));
    return b;
}

// A token's text for logprobs: its raw bytes (may be part of a UTF-8 character; `bytes` keeps
// them exact, the string form gets U+FFFD on serialisation).
std::string piece(const tokenizer::Tokenizer& tok, int32_t id) {
    return tok.token_to_piece(id, /*special=*/true);
}

}  // namespace

json chat_logprob_entries(const tokenizer::Tokenizer& tok,
                          const std::vector<engine::GeneratedToken>& tokens, int32_t top_n) {
    json out = json::array();
    for (const auto& t : tokens) {
        const std::string p = piece(tok, t.id);
        json top = json::array();
        for (size_t k = 0; k < t.top.size() && static_cast<int32_t>(k) < top_n; ++k) {
            const std::string tp = piece(tok, t.top[k].id);
            top.push_back({{"token", tp}, {"logprob", t.top[k].logprob}, {"bytes", bytes_of(tp)}});
        }
        out.push_back(
            {{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}, {"top_logprobs", top}});
    }
    return out;
}

json CompletionLogprobs::add(const tokenizer::Tokenizer& tok,
                             const std::vector<engine::GeneratedToken>& toks, int32_t top_n) {
    json c_tokens = json::array(), c_lp = json::array(), c_top = json::array(),
         c_off = json::array();
    for (const auto& t : toks) {
        const std::string p = piece(tok, t.id);
        json top = json::object();
        for (size_t k = 0; k < t.top.size() && static_cast<int32_t>(k) < top_n; ++k)
            top[piece(tok, t.top[k].id)] = t.top[k].logprob;
        // OpenAI's legacy format always carries the sampled token too (up to logprobs + 1).
        if (top_n > 0 && !top.contains(p)) top[p] = t.logprob;
        c_tokens.push_back(p);
        c_lp.push_back(t.logprob);
        c_top.push_back(top_n > 0 ? top : json(nullptr));
        c_off.push_back(offset);
        offset += p.size();
    }
    for (const auto& v : c_tokens) tokens.push_back(v);
    for (const auto& v : c_lp) token_logprobs.push_back(v);
    for (const auto& v : c_top) top_logprobs.push_back(v);
    for (const auto& v : c_off) text_offset.push_back(v);
    return {{"tokens", c_tokens},
            {"token_logprobs", c_lp},
            {"top_logprobs", c_top},
            {"text_offset", c_off}};
}

json CompletionLogprobs::whole() const {
    return {{"tokens", tokens},
            {"token_logprobs", token_logprobs},
            {"top_logprobs", top_logprobs},
            {"text_offset", text_offset}};
}

json stream_chunk(const ResponseMeta& meta, int32_t index, const std::string& text, bool role_delta,
                  json logprobs, const std::optional<std::string>& finish_reason,
                  bool with_usage_null) {
    json choice;
    choice["index"] = index;
    if (meta.kind == ApiKind::Chat) {
        json delta = json::object();
        if (role_delta) delta["role"] = "assistant";
        if (role_delta || !text.empty()) delta["content"] = text;
        choice["delta"] = std::move(delta);
    } else {
        choice["text"] = text;
    }
    choice["logprobs"] = std::move(logprobs);
    choice["finish_reason"] = finish_reason ? json(*finish_reason) : json(nullptr);
    json j = {{"id", meta.id},
              {"object", meta.kind == ApiKind::Chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta.created},
              {"model", meta.model},
              {"choices", json::array({std::move(choice)})}};
    if (with_usage_null) j["usage"] = nullptr;
    return j;
}

json tool_call_delta(int index, const std::string* id, const std::string& name,
                     const std::string& arguments) {
    if (!id) return {{"index", index}, {"function", {{"arguments", arguments}}}};
    return {{"index", index},
            {"id", *id},
            {"type", "function"},
            {"function", {{"name", name}, {"arguments", arguments}}}};
}

json usage_chunk(const ResponseMeta& meta, const UsageCounts& u) {
    return {{"id", meta.id},
            {"object", meta.kind == ApiKind::Chat ? "chat.completion.chunk" : "text_completion"},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", json::array()},
            {"usage", usage_json(u)}};
}

json whole_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                    const UsageCounts& u) {
    json arr = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        const ChoiceResult& c = choices[i];
        json choice = {{"index", static_cast<int>(i)}};
        if (meta.kind == ApiKind::Chat) {
            choice["message"] = {{"role", "assistant"}, {"content", c.text}};
            if (!c.tool_calls.is_null()) {
                if (c.text.empty()) choice["message"]["content"] = nullptr;
                choice["message"]["tool_calls"] = c.tool_calls;
            }
        } else
            choice["text"] = c.text;
        choice["logprobs"] = c.logprobs;
        choice["finish_reason"] = c.finish_reason;
        arr.push_back(std::move(choice));
    }
    return {{"id", meta.id},
            {"object", meta.kind == ApiKind::Chat ? "chat.completion" : "text_completion"},
            {"created", meta.created},
            {"model", meta.model},
            {"choices", std::move(arr)},
            {"usage", usage_json(u)}};
}

}  // namespace zinc::server
