// zinc/server/tool_format.cpp — see tool_format.h.
#include "server/tool_format.h"

#include <array>

namespace zinc::server {

namespace {

constexpr std::array<ToolFormatSpec, 4> kSpecs = {{
    {ToolFormat::Gemma4, "gemma4", "<|tool_call>call:", "<|tool_call>", "<tool_call|>", "",
     CallHead::Gemma4, /*block_to_close=*/true, /*bare_calls=*/false, "",
     /*reads_tool_messages=*/"{#- OpenAI Chat Completions:", /*renders_control_tokens=*/true,
     R"("")", /*lazy_trigger=*/"<|tool_call>call:"},
    {ToolFormat::Hermes, "hermes", "<tool_call>", "<tool_call>", "</tool_call>", "",
     CallHead::JsonObject, /*block_to_close=*/true, /*bare_calls=*/true, "arguments", "", false,
     R"("\n")", /*lazy_trigger=*/"<tool_call>"},
    {ToolFormat::Harmony, "harmony", "<|channel|>", "<|channel|>", "<|call|>", "<|start|>assistant",
     CallHead::Harmony, /*block_to_close=*/false, /*bare_calls=*/false, "", "", false, "",
     /*lazy_trigger=*/"<|channel|>commentary to=functions."},
    {ToolFormat::Json, "json", "", "", "", "", CallHead::JsonObject, /*block_to_close=*/true,
     /*bare_calls=*/true, "parameters", "", false, R"(";" ws)", /*lazy_trigger=*/""},
}};

}  // namespace

std::span<const ToolFormatSpec> tool_format_specs() {
    return kSpecs;
}

const ToolFormatSpec& tool_format_spec(ToolFormat f) {
    for (const auto& s : kSpecs)
        if (s.format == f) return s;
    return kSpecs.back();
}

ToolFormat tool_format_for_template(std::string_view src) {
    for (const auto& s : kSpecs)
        if (s.detect.empty() || src.find(s.detect) != std::string_view::npos) return s.format;
    return kSpecs.back().format;
}

bool template_folds_tool_turns(std::string_view src) {
    const ToolFormatSpec& s = tool_format_spec(tool_format_for_template(src));
    return !s.reads_tool_messages.empty() &&
           src.find(s.reads_tool_messages) == std::string_view::npos;
}

}  // namespace zinc::server
