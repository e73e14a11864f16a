// zinc/cli/chat_prompt.h — from a conversation to prompt tokens through the model's own chat
// template: shared by `zinc --chat` (run.cpp) and `zinc chat` (chat_repl.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "cli/model_loader.h"
#include "util/result.h"

namespace zinc::cli {

/// Parse the model's template (LoadedModel::chat_template, loaded with
/// LoaderOptions::chat_template). Prints a note on stderr when the file has none (ChatML is
/// used). Error: the template's own error (name:line:column).
Result<chat::ChatTemplate> parse_model_template(const LoadedModel& m);

/// Render `messages` with add_generation_prompt (bos/eos tokens from the tokenizer; enable_thinking
/// passed only when set) and tokenize: special-token text is parsed in the template's own text
/// only, never in the messages' roles and content (they are data). The template writes BOS
/// itself where the model wants it (e.g. Gemma's "{{ bos_token }}"), so BOS is only added when
/// the model asks for it and the rendering did not start with it. `tools`: the template's
/// `tools` variable (a list of OpenAI tool objects, data), None when null.
Result<std::vector<int32_t>> chat_tokens(const LoadedModel& m, const chat::ChatTemplate& tmpl,
                                         const std::vector<chat::Message>& messages,
                                         std::optional<bool> enable_thinking,
                                         const chat::Value* tools = nullptr);

/// Stop strings implied by the template, added to the user's --stop ones: with the ChatML
/// fallback on a model whose vocabulary lacks ChatML's special tokens (e.g. Gemma 3 here), the
/// end-of-turn marker "<|im_end|>" (and a new turn's "<|im_start|>") arrive as plain text, not
/// as an EOG token, so they are matched as text. Empty for a model's own template, whose
/// end-of-turn token is an EOG token (Tokenizer::is_eog).
std::vector<std::string> template_stop_strings(const LoadedModel& m);

}  // namespace zinc::cli
