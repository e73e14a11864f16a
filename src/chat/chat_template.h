// zinc/chat/chat_template.h — render a model's chat template (Jinja, from the GGUF key
// `tokenizer.chat_template`) into the prompt text, exactly as Hugging Face transformers'
// apply_chat_template(tokenize=False) does.
//
// Semantics: jinja2 3.1 ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols]) with transformers' globals raise_exception(msg) and
// strftime_now(fmt) and its tojson override (json.dumps, ensure_ascii=False). The variables
// apply() passes mirror transformers: messages, tools (None), documents (None),
// add_generation_prompt, bos_token, eos_token, plus any extras (e.g. enable_thinking).
// The supported subset and the known differences are listed in docs/chat-templates.md.
//
// Data and control (taint.h): every string of the messages (roles and content) is data; the
// template's own text, bos_token and eos_token are control. apply_prompt()/render_prompt() say
// which bytes of the rendered text are data, so that the tokenizer reads special tokens only in
// control text (docs/chat-templates.md, "Data and control").
//
// Errors: parse errors, template runtime errors and raise_exception() all come back as
// zinc::Error with "NAME:LINE:COLUMN: message" (1-based; column in characters). Nothing here
// throws or aborts on any template or input.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/value.h"
#include "util/result.h"

namespace zinc::gguf {
class File;
}

namespace zinc::chat {

struct Node;

/// One chat turn. `role` is usually "system", "user", "assistant" or "tool".
struct Message {
    Message() = default;
    Message(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
    std::string role;
    std::string content;
    /// Further keys of the message dict, e.g. an assistant turn's "tool_calls" or a tool turn's
    /// "tool_call_id" and "name" (OpenAI's fields, as HF templates read them). Data, as content.
    std::vector<std::pair<std::string, Value>> extra;
};

struct RenderOptions {
    /// Clock for strftime_now(): seconds since the Unix epoch, formatted in local time; the
    /// real clock when absent. Tests pin it.
    std::optional<int64_t> now_unix;
    uint64_t max_steps = 50'000'000;       // evaluation budget (statements + expressions)
    size_t max_output_bytes = 256u << 20;  // rendered text cap
};

struct ApplyOptions {
    bool add_generation_prompt = true;
    std::string bos_token;
    std::string eos_token;
    /// Passed as `enable_thinking` only when set (Qwen3-style templates read it).
    std::optional<bool> enable_thinking;
    /// Further variables, added after (and overriding) the standard ones.
    std::vector<std::pair<std::string, Value>> extra_vars;
    RenderOptions render;
};

/// A rendered prompt: the text and the byte ranges of it that came from input values.
struct RenderedPrompt {
    std::string text;
    DataSpans data;  // sorted, disjoint: tokenize as plain text (no special tokens)
};

/// A parsed template, cheap to copy (shared, immutable) and safe to render from several threads.
class ChatTemplate {
  public:
    /// Parse `source`. `name` prefixes error messages (e.g. "tokenizer.chat_template").
    static Result<ChatTemplate> parse(std::string_view source, std::string name = "chat template");

    /// Render with arbitrary variables (insertion-ordered name -> value). Strings in `vars` are
    /// control unless made data (mark_data, Value::data_string).
    Result<RenderedPrompt> render_prompt(const std::vector<std::pair<std::string, Value>>& vars,
                                         const RenderOptions& opt = {}) const;
    Result<std::string> render(const std::vector<std::pair<std::string, Value>>& vars,
                               const RenderOptions& opt = {}) const;

    /// Render a conversation the way transformers' apply_chat_template does; the messages are
    /// data, extra_vars as given.
    Result<RenderedPrompt> apply_prompt(const std::vector<Message>& messages,
                                        const ApplyOptions& opt) const;
    Result<std::string> apply(const std::vector<Message>& messages, const ApplyOptions& opt) const;

    const std::string& name() const { return name_; }

  private:
    std::shared_ptr<const Node> root_;
    std::string name_;
};

/// The messages as the `messages` variable: a list of {"role": ..., "content": ...} dicts whose
/// role and content strings are data.
Value messages_value(const std::vector<Message>& messages);

/// The documented default used when a GGUF carries no `tokenizer.chat_template`: ChatML
/// ("<|im_start|>role\ncontent<|im_end|>\n" per message, then "<|im_start|>assistant\n" when
/// add_generation_prompt), the same default transformers used for templates-less tokenizers.
std::string_view fallback_chatml_template();

/// The template source of a model: `tokenizer.chat_template` when present (and a string),
/// otherwise the ChatML fallback with `is_fallback` set.
struct TemplateSource {
    std::string text;
    bool is_fallback = false;
};
Result<TemplateSource> template_from_gguf(const gguf::File& file);

}  // namespace zinc::chat
