// zinc/cli/chat_prompt.cpp — render a conversation with the model's template and tokenize it.
#include "cli/chat_prompt.h"

#include <cstdio>
#include <string>

#include "cli/llama_compat.h"

namespace zinc::cli {

Result<chat::ChatTemplate> parse_model_template(const LoadedModel& m) {
    if (!m.chat_template_error.empty()) return make_error(m.chat_template_error);
    if (m.chat_template.is_fallback && log_info())
        std::fprintf(stderr, "zinc: note: %s has no tokenizer.chat_template; using ChatML\n",
                     m.file->path().c_str());
    return chat::ChatTemplate::parse(m.chat_template.text, "tokenizer.chat_template");
}

Result<std::vector<int32_t>> chat_tokens(const LoadedModel& m, const chat::ChatTemplate& tmpl,
                                         const std::vector<chat::Message>& messages,
                                         std::optional<bool> enable_thinking,
                                         const chat::Value* tools) {
    const tokenizer::Tokenizer& tok = *m.tok;
    chat::ApplyOptions ao;
    ao.add_generation_prompt = true;
    ao.enable_thinking = enable_thinking;
    if (tok.bos() >= 0) ao.bos_token = std::string(tok.token_text(tok.bos()));
    if (tok.eos() >= 0) ao.eos_token = std::string(tok.token_text(tok.eos()));
    if (tools) ao.extra_vars.emplace_back("tools", *tools);
    auto rendered = tmpl.apply_prompt(messages, ao);
    if (!rendered) return rendered.error();
    // The trust boundary: special-token text in the template's own text becomes special tokens;
    // in the messages (data) it is plain text, so no message can close its turn or forge another.
    std::vector<tokenizer::TextRange> plain;
    plain.reserve(rendered.value().data.size());
    for (const chat::Span& s : rendered.value().data) plain.push_back({s.begin, s.end});
    std::vector<int32_t> tokens =
        tok.encode_mixed(rendered.value().text, /*add_special=*/false, plain);
    if (tok.add_bos() && tok.bos() >= 0 && (tokens.empty() || tokens[0] != tok.bos()))
        tokens.insert(tokens.begin(), tok.bos());
    return tokens;
}

std::vector<std::string> template_stop_strings(const LoadedModel& m) {
    if (!m.chat_template.is_fallback) return {};
    return {"<|im_end|>", "<|im_start|>"};
}

}  // namespace zinc::cli
