// Unit tests for src/chat: the public ChatTemplate API, Python formatting of values, error
// positions, limits (never a crash on hostile templates) and GGUF template lookup. Expected
// strings come from CPython 3.11 / jinja2 3.1 (checked by hand) or from the ChatML format
// definition, not from zinc's own output. The byte-for-byte corpus lives in
// tests/py/test_jinja_parity.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "chat/chat_template.h"
#include "gguf/gguf.h"

using namespace zinc::chat;

namespace {

std::string render(const std::string& src, const std::vector<std::pair<std::string, Value>>& vars = {},
                   RenderOptions opt = {}) {
    auto t = ChatTemplate::parse(src, "t");
    EXPECT_TRUE(t.ok()) << t.error().message;
    if (!t.ok()) return "<parse error>";
    auto r = t->render(vars, opt);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? r.value() : "<render error>";
}

std::string render_error(const std::string& src, RenderOptions opt = {}) {
    auto t = ChatTemplate::parse(src, "t");
    if (!t.ok()) return t.error().message;
    auto r = t->render({}, opt);
    EXPECT_FALSE(r.ok()) << "rendered: " << r.value();
    return r.ok() ? std::string() : r.error().message;
}

}  // namespace

TEST(ChatValue, FloatReprMatchesCPython) {
    EXPECT_EQ(py_float_repr(1.0), "1.0");
    EXPECT_EQ(py_float_repr(1e16), "1e+16");
    EXPECT_EQ(py_float_repr(1e22), "1e+22");
    EXPECT_EQ(py_float_repr(123456789012345678.0), "1.2345678901234568e+17");
    EXPECT_EQ(py_float_repr(0.0001), "0.0001");
    EXPECT_EQ(py_float_repr(0.00001), "1e-05");
    EXPECT_EQ(py_float_repr(0.1 + 0.2), "0.30000000000000004");
    EXPECT_EQ(py_float_repr(-0.0), "-0.0");
    EXPECT_EQ(py_float_repr(5e-324), "5e-324");
    EXPECT_EQ(py_float_repr(100.0), "100.0");
    EXPECT_EQ(py_float_repr(123456789.123), "123456789.123");
    EXPECT_EQ(py_float_repr(1.0 / 0.0), "inf");
}

TEST(ChatValue, StrReprMatchesCPython) {
    EXPECT_EQ(py_str_repr("a'b"), "\"a'b\"");
    EXPECT_EQ(py_str_repr("x\ny"), "'x\\ny'");
    EXPECT_EQ(py_str_repr("\xc3\xa9\xc2\xa0"), "'\xc3\xa9\\xa0'");  // é stays, NBSP escaped
    EXPECT_EQ(py_str_repr("a\"b'c"), "'a\"b\\'c'");
    Value v = Value::list({Value::integer(1), Value::list({Value::integer(2)}, SeqKind::Tuple),
                           Value::dict({{Value::string("k"), Value::none()}})});
    EXPECT_EQ(v.to_str(), "[1, (2,), {'k': None}]");
}

TEST(ChatTemplate, ChatMLFallbackFormat) {
    auto t = ChatTemplate::parse(fallback_chatml_template(), "fallback");
    ASSERT_TRUE(t.ok()) << t.error().message;
    ApplyOptions opt;
    auto r = t->apply({{"system", "Be brief."}, {"user", "Hi"}}, opt);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value(),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n");
    opt.add_generation_prompt = false;
    r = t->apply({{"user", ""}}, opt);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), "<|im_start|>user\n<|im_end|>\n");
}

TEST(ChatTemplate, ApplyPassesTransformersVariables) {
    auto t = ChatTemplate::parse(
        "{{ bos_token }}|{{ eos_token }}|{{ tools is none }}|{{ documents is none }}|"
        "{{ add_generation_prompt }}|{{ enable_thinking is defined }}|{{ enable_thinking }}|{{ extra }}");
    ASSERT_TRUE(t.ok());
    ApplyOptions opt;
    opt.bos_token = "<s>";
    opt.eos_token = "</s>";
    opt.extra_vars.emplace_back("extra", Value::integer(7));
    auto r = t->apply({}, opt);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value(), "<s>|</s>|True|True|True|False||7");
    opt.enable_thinking = false;
    r = t->apply({}, opt);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(), "<s>|</s>|True|True|True|True|False|7");
}

TEST(ChatTemplate, Semantics) {
    // Loop scoping, namespaces, macros, whitespace control (values from jinja2 3.1).
    EXPECT_EQ(render("{% set x = 0 %}{% for i in [1,2,3] %}{{ x }}{% set x = i %}{% endfor %}{{ x }}"), "0000");
    EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}"),
              "<Namespace {'a': 1, 'me': <Namespace {...}>}>");
    EXPECT_EQ(render("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ z }}{% endmacro %}{% set z = 5 %}{{ m(1) }}{{ m(1, b=3) }}"),
              "125135");
    EXPECT_EQ(render("  {% if true %}\n    x\n  {% endif %}\n  y  {%- if true -%}  z  {%- endif %}"), "    x\n  yz");
    EXPECT_EQ(render("{{ 7 // -2 }} {{ -7 % 3 }} {{ 2 ** -1 }} {{ -2 ** 2 }} {{ 'ab' * 2 }}"), "-4 2 0.5 4 abab");
    EXPECT_EQ(render("{{ s|length }},{{ s[::-1] }},{{ s|upper }}", {{"s", Value::string("h\xc3\xa9llo\xf0\x9f\x98\x80")}}),
              "6,\xf0\x9f\x98\x80oll\xc3\xa9h,H\xc3\x89LLO\xf0\x9f\x98\x80");
    EXPECT_EQ(render("{{ {'b': 1, 'a': [1.5, none, true, '\xc3\xa9']}|tojson }}"),
              "{\"b\": 1, \"a\": [1.5, null, true, \"\xc3\xa9\"]}");
    EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(ChatTemplate, InvalidUtf8PassesThroughByteExact) {
    const std::string bad = "a\xff\xfe b\xc3";
    EXPECT_EQ(render("[{{ s }}]{{ s|length }}", {{"s", Value::string(bad)}}), "[" + bad + "]6");
    EXPECT_EQ(render("{{ s|trim }}", {{"s", Value::string(bad)}}), bad);
}

TEST(ChatTemplate, ErrorsCarryLineAndColumn) {
    EXPECT_EQ(render_error("line one\n  {{ raise_exception('bad role: ' ~ 'x') }}"),
              "t:2:6: template raised an exception: bad role: x");
    EXPECT_EQ(render_error("{% include 'x' %}"),
              "t:1:4: unsupported construct '{% include %}' (chat templates are rendered alone)");
    EXPECT_EQ(render_error("{{ a | nope }}"), "t:1:8: unknown filter 'nope'");
    EXPECT_EQ(render_error("ok\n{% if %}"), "t:2:7: expected an expression, got end of statement block");
    const std::string e = render_error("{{ 1 +\n\n 'a' }}");
    EXPECT_EQ(e, "t:1:6: unsupported operand type(s) for +: 'int' and 'str'");
}

TEST(ChatTemplate, HostileTemplatesFailCleanly) {
    // Deep nesting: parse limit, not a stack overflow.
    EXPECT_NE(render_error("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"),
              std::string::npos);
    EXPECT_NE(render_error("{{ " + std::string(3000, '[') + std::string(3000, ']') + " }}").find("nested too deeply"),
              std::string::npos);
    // Values nested through a namespace in a loop.
    EXPECT_NE(render_error("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}")
                  .find("nested too deeply"),
              std::string::npos);
    // Unbounded recursion and endless work.
    EXPECT_NE(render_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").find("recursion"), std::string::npos);
    RenderOptions small;
    small.max_steps = 100000;
    EXPECT_NE(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", small)
                  .find("step budget"),
              std::string::npos);
    EXPECT_NE(render_error("{{ 'x' * 1000000000000 }}").find("too large"), std::string::npos);
    EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
}

TEST(ChatTemplate, StrftimeNowUsesPinnedClock) {
    RenderOptions opt;
    opt.now_unix = 86400LL * 365 * 2;  // mid-1972 wherever the local time zone is
    EXPECT_EQ(render("{{ strftime_now('%Y') }}", {}, opt), "1972");
}

TEST(ChatTemplate, TemplateFromGguf) {
    const std::filesystem::path models = std::filesystem::path(ZINC_SOURCE_DIR) / "models";
    const auto smol = models / "SmolLM2-135M-Instruct.Q4_1.gguf";
    const auto gemma = models / "gemma-3-270m-q4_k_m.gguf";
    if (!std::filesystem::exists(smol) || !std::filesystem::exists(gemma)) GTEST_SKIP() << "models missing";
    auto f = zinc::gguf::File::open(smol.string());
    ASSERT_TRUE(f.ok());
    auto src = template_from_gguf(*f.value());
    ASSERT_TRUE(src.ok());
    EXPECT_FALSE(src->is_fallback);
    auto t = ChatTemplate::parse(src->text);
    ASSERT_TRUE(t.ok()) << t.error().message;
    ApplyOptions opt;
    auto r = t->apply({{"user", "Hi"}}, opt);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value(),
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
              "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

    auto g = zinc::gguf::File::open(gemma.string());
    ASSERT_TRUE(g.ok());
    auto gsrc = template_from_gguf(*g.value());
    ASSERT_TRUE(gsrc.ok());
    EXPECT_TRUE(gsrc->is_fallback);
    EXPECT_EQ(gsrc->text, std::string(fallback_chatml_template()));
}
