// zinc/chat/fallback.cpp — the default chat template for GGUFs without
// `tokenizer.chat_template`: ChatML, as documented in docs/chat-templates.md.
#include "chat/chat_template.h"

namespace zinc::chat {

std::string_view fallback_chatml_template() {
    // One "<|im_start|>ROLE\nCONTENT<|im_end|>\n" block per message, then the assistant header
    // when a reply is wanted. Whitespace control keeps the template readable without adding
    // any text of its own.
    static constexpr std::string_view kChatML =
        "{%- for message in messages -%}\n"
        "    {{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ message['content'] ~ '<|im_end|>\\n' -}}\n"
        "{%- endfor -%}\n"
        "{%- if add_generation_prompt -%}\n"
        "    {{- '<|im_start|>assistant\\n' -}}\n"
        "{%- endif -%}\n";
    return kChatML;
}

}  // namespace zinc::chat
