// fuzz_jinja — libFuzzer target for the chat-template interpreter: any bytes as a template,
// rendered over a small conversation with tight limits. Parse and render may fail (Result), but
// must never crash, hang, leak or read out of bounds (ASan/UBSan).
//
//   build: cmake -DZINC_FUZZ=ON (clang), target fuzz_jinja
//   run:   ./fuzz_jinja -dict=tests/fuzz/jinja.dict -max_len=4096 -timeout=10 CORPUS tests/data/jinja
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zinc::chat;
    const std::string_view src(reinterpret_cast<const char*>(data), size);
    auto t = ChatTemplate::parse(src, "fuzz");
    if (!t.ok()) return 0;
    ApplyOptions opt;
    opt.bos_token = "<s>";
    opt.eos_token = "</s>";
    opt.enable_thinking = size % 2 == 0;
    opt.render.now_unix = 1721995200;
    opt.render.max_steps = 200000;
    opt.render.max_output_bytes = 1u << 20;
    const std::vector<Message> conv = {
        {"system", "Be brief."}, {"user", "h\xc3\xa9llo \xf0\x9f\x98\x80"}, {"assistant", "<think>x</think>ok"},
        {"user", "\xff bad utf8"}};
    auto r = t->apply(conv, opt);
    (void)r;
    return 0;
}
