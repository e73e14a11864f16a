// Tests for server/tool_calls.h (parsing calls back from model text, the forced-call grammar)
// and server/json_schema_grammar.h (schemas as grammars, checked by matching texts).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "server/json_schema_grammar.h"
#include "server/tool_calls.h"

namespace zinc::server {
namespace {

using nlohmann::json;

const std::vector<std::string> kNames = {"get_weather", "get_time"};

TEST(ToolCalls, HermesBlocks) {
    auto r = parse_tool_calls(
        "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": "
        "\\\"UTC\\\"}\"}"
        "</tool_call>",
        ToolFormat::Hermes, kNames);
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Paris"}}));
    EXPECT_EQ(r.calls[1].name, "get_time");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json({{"tz", "UTC"}}));
    EXPECT_EQ(r.content, "Sure.");
}

TEST(ToolCalls, HermesUnknownOrBrokenStaysText) {
    const std::string t = "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>";
    auto r = parse_tool_calls(t, ToolFormat::Hermes, kNames);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, t);
    // Tags that were control tokens (not in the text): the bare call.
    auto bare =
        parse_tool_calls("{\"name\": \"get_time\", \"arguments\": {}}", ToolFormat::Hermes, kNames);
    EXPECT_EQ(bare.calls.size(), 1u);
    auto b = parse_tool_calls("<tool_call>{\"name\": \"get_time\"", ToolFormat::Hermes, kNames);
    EXPECT_TRUE(b.calls.empty());
    // Unterminated but complete JSON (max_tokens cut the closing tag): still a call.
    auto u = parse_tool_calls("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n",
                              ToolFormat::Hermes, kNames);
    ASSERT_EQ(u.calls.size(), 1u);
    EXPECT_EQ(u.calls[0].arguments, "{}");
}

TEST(ToolCalls, LlamaJson) {
    auto r = parse_tool_calls("{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}",
                              ToolFormat::Json, kNames);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"tz", "CET"}}));
    auto two = parse_tool_calls(
        "{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": "
        "{}}",
        ToolFormat::Json, kNames);
    EXPECT_EQ(two.calls.size(), 2u);
    auto text = parse_tool_calls("The time is {\"name\": 1}", ToolFormat::Json, kNames);
    EXPECT_TRUE(text.calls.empty());
    EXPECT_EQ(text.content, "The time is {\"name\": 1}");
}

// Does the grammar accept `text` (fed byte by byte)?
bool grammar_accepts(const std::string& gbnf, const std::string& text) {
    auto g = engine::parse_grammar(gbnf);
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << gbnf;
    if (!g.ok()) return false;
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    auto c = std::make_shared<engine::GrammarConstraint>();
    c->grammar = std::make_shared<engine::Grammar>(std::move(g.value()));
    c->vocab = std::make_shared<engine::GrammarVocab>(pieces, std::vector<int32_t>{});
    engine::GrammarMatcher m(c);
    for (unsigned char ch : text)
        if (!m.accept(ch)) return false;
    return m.complete();
}

TEST(JsonSchemaGrammar, ObjectsRequiredOptionalAndTypes) {
    const json schema = {
        {"type", "object"},
        {"properties",
         {{"a", {{"type", "integer"}}},
          {"b",
           {{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1}, {"maxItems", 2}}},
          {"c", {{"type", {"number", "null"}}}},
          {"d", {{"enum", {"x", 1, true}}}}}},
        {"required", {"a", "d"}},
        {"additionalProperties", false}};
    auto g = json_schema_to_gbnf(schema, "s");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(grammar_accepts(g.value(), R"({"a": -12, "d": "x"})"));
    EXPECT_TRUE(grammar_accepts(
        g.value(), "{\n  \"a\": 0,\n  \"b\": [\"q\"],\n  \"c\": 1.5e3,\n  \"d\": true\n}"));
    EXPECT_TRUE(grammar_accepts(g.value(), R"({"a":1,"c":null,"d":1})"));
    EXPECT_FALSE(grammar_accepts(g.value(), R"({"d": "x"})"));                 // a missing
    EXPECT_FALSE(grammar_accepts(g.value(), R"({"a": 1, "b": [], "d": 1})"));  // minItems
    EXPECT_FALSE(grammar_accepts(g.value(), R"({"a": 01, "d": 1})"));          // leading zero
    EXPECT_FALSE(grammar_accepts(g.value(), R"({"a": 1, "d": "y"})"));         // not in enum
    EXPECT_FALSE(grammar_accepts(g.value(), R"({"a": 1, "d": 1, "e": 2})"));   // extra
}

TEST(JsonSchemaGrammar, StringEscapesAndLengths) {
    auto g = json_schema_to_gbnf({{"type", "string"}, {"minLength", 2}, {"maxLength", 3}}, "s");
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(grammar_accepts(g.value(), R"("ab")"));
    EXPECT_TRUE(grammar_accepts(g.value(), R"("a\n\u00e9")"));
    EXPECT_TRUE(grammar_accepts(g.value(), "\"\xC3\xA9t\xC3\xA9\""));
    EXPECT_FALSE(grammar_accepts(g.value(), R"("a")"));
    EXPECT_FALSE(grammar_accepts(g.value(), R"("abcd")"));
    EXPECT_FALSE(grammar_accepts(g.value(), "\"a\nb\""));  // raw control character
}

TEST(JsonSchemaGrammar, RecursiveRef) {
    const json schema = json::parse(R"({"$defs": {"n": {"type": "object", "properties": {
        "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}, "v": {"type": "integer"}},
        "required": ["v"]}}, "$ref": "#/$defs/n"})");
    auto g = json_schema_to_gbnf(schema, "s");
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(grammar_accepts(g.value(), R"({"k": [{"k": [{"v": 3}], "v": 2}], "v": 1})"));
    EXPECT_FALSE(grammar_accepts(g.value(), R"({"k": [{"k": [{}], "v": 2}], "v": 1})"));
}

TEST(JsonSchemaGrammar, Errors) {
    auto e = json_schema_to_gbnf({{"type", "integer"}, {"minimum", 0}}, "rf.schema");
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().param.value_or(""), "rf.schema.minimum");
    auto r = json_schema_to_gbnf({{"$ref", "http://x/y"}}, "s");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().param.value_or(""), "s.$ref");
    auto t = json_schema_to_gbnf(
        {{"type", "array"}, {"items", json::array({{{"type", "integer"}}})}}, "s");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.error().param.value_or(""), "s.items");
}

TEST(ToolCalls, ForcedCallGrammar) {
    const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time"}}])");
    const json req = "required";
    auto t = parse_tools(&tools, &req);
    ASSERT_TRUE(t.ok()) << t.error().message;
    auto g = tool_call_grammar(t.value(), ToolFormat::Hermes);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(grammar_accepts(g.value(),
                                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                "{\"city\": \"Rome\"}}\n</tool_call>"));
    EXPECT_TRUE(
        grammar_accepts(g.value(),
                        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
                        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(grammar_accepts(
        g.value(), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(grammar_accepts(g.value(), "Hello"));

    const json named = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
    auto n = parse_tools(&tools, &named);
    ASSERT_TRUE(n.ok());
    auto gj = tool_call_grammar(n.value(), ToolFormat::Json);
    ASSERT_TRUE(gj.ok());
    EXPECT_TRUE(grammar_accepts(gj.value(), "{\"name\": \"get_time\", \"parameters\": {}}"));
    EXPECT_FALSE(grammar_accepts(gj.value(), "{\"name\": \"get_weather\", \"parameters\": {}}"));

    // parallel_tool_calls false: "required" is exactly one call.
    t.value().parallel = false;
    auto one = tool_call_grammar(t.value(), ToolFormat::Hermes);
    ASSERT_TRUE(one.ok()) << one.error().message;
    EXPECT_TRUE(grammar_accepts(
        one.value(), "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(
        grammar_accepts(one.value(),
                        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
                        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
}

TEST(ToolCalls, ForcedCallGrammarHarmony) {
    // gpt-oss writes one call a turn (its <|call|> ends the generation): the header, then the
    // arguments by their schema.
    const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time"}}])");
    const json req = "required";
    auto t = parse_tools(&tools, &req);
    ASSERT_TRUE(t.ok());
    auto g = tool_call_grammar(t.value(), ToolFormat::Harmony);
    ASSERT_TRUE(g.ok()) << g.error().message;
    const std::string call =
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        "{\"city\": \"Rome\"}";
    EXPECT_TRUE(grammar_accepts(g.value(), call));
    EXPECT_FALSE(grammar_accepts(g.value(), call + call));
    EXPECT_FALSE(grammar_accepts(
        g.value(),
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}"));
    // The reply that grammar produces is read back as that call.
    auto r = parse_tool_calls(call, ToolFormat::Harmony, kNames);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Rome\"}");
    EXPECT_EQ(r.content, "");
}

// Does the lazy constraint (free until `trigger`, then the grammar) accept `text` byte by byte?
bool lazy_accepts(const std::string& gbnf, std::vector<engine::GrammarTrigger> triggers,
                  const std::string& text) {
    auto g = engine::parse_grammar(gbnf);
    EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message) << "\n" << gbnf;
    if (!g.ok()) return false;
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    auto c = engine::make_grammar_constraint(
        std::move(g.value()),
        std::make_shared<engine::GrammarVocab>(pieces, std::vector<int32_t>{}),
        std::move(triggers));
    engine::GrammarMatcher m(c);
    for (unsigned char ch : text)
        if (!m.accept(ch)) return false;
    return m.complete();
}

TEST(ToolCalls, AutoCallGrammarIsLazyFromTheFormatsTriggers) {
    const json tools = json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}},
         "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time"}}])");
    const json autoc = "auto";
    auto t = parse_tools(&tools, &autoc);
    ASSERT_TRUE(t.ok()) << t.error().message;
    auto g = tool_call_grammar(t.value(), ToolFormat::Hermes);
    ASSERT_TRUE(g.ok()) << g.error().message;
    const auto hermes = tool_call_triggers(t.value(), ToolFormat::Hermes);
    ASSERT_EQ(hermes.size(), 9u);  // <tool_call>, and 4 bare heads a tool
    EXPECT_EQ(hermes[0].text, "<tool_call>");
    EXPECT_FALSE(hermes[0].at_start);
    EXPECT_EQ(hermes[1].text, "{\"name\": \"get_weather\"");
    EXPECT_TRUE(hermes[1].at_start);
    const std::string call =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Rome\"}}\n</tool_call>";
    EXPECT_TRUE(lazy_accepts(g.value(), hermes, "No tool needed: hello."));  // free text only
    EXPECT_TRUE(lazy_accepts(g.value(), hermes, "Let me check.\n" + call));
    EXPECT_TRUE(lazy_accepts(g.value(), hermes, call + "\n" + call));  // parallel calls
    // From the marker on, the arguments follow the schema, and no text follows the calls.
    EXPECT_FALSE(lazy_accepts(g.value(), hermes,
                              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                              "{\"city\": \"Berlin\"}}\n</tool_call>"));
    EXPECT_FALSE(lazy_accepts(g.value(), hermes, call + " Done."));
    // A bare call at the start of the reply (what a small Qwen writes) is held to it too; one
    // later in the text, or a JSON object that is not a call, stays free text.
    const std::string bare = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}";
    EXPECT_TRUE(lazy_accepts(g.value(), hermes, bare));
    EXPECT_TRUE(
        lazy_accepts(g.value(), hermes, "\n{\n  \"name\": \"get_time\", \"arguments\": {}}"));
    EXPECT_FALSE(lazy_accepts(g.value(), hermes,
                              "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"));
    EXPECT_TRUE(
        lazy_accepts(g.value(), hermes,
                     "Like: {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"));
    EXPECT_TRUE(lazy_accepts(g.value(), hermes, "{\"name\": \"John\", \"age\": 3}"));
    // Llama 3's JSON format: bare calls only, at the start.
    auto gj = tool_call_grammar(t.value(), ToolFormat::Json);
    ASSERT_TRUE(gj.ok());
    const auto json_triggers = tool_call_triggers(t.value(), ToolFormat::Json);
    ASSERT_EQ(json_triggers.size(), 8u);
    EXPECT_TRUE(lazy_accepts(gj.value(), json_triggers,
                             "{\"name\": \"get_time\", \"parameters\": {}}; "
                             "{\"name\": \"get_time\", \"parameters\": {}}"));
    EXPECT_FALSE(lazy_accepts(gj.value(), json_triggers,
                              "{\"name\": \"get_weather\", \"parameters\": {}}"));  // city
    // Every format's triggers start its auto grammar (harmony: the call's header).
    for (const ToolFormatSpec& spec : tool_format_specs()) {
        if (spec.lazy_trigger.empty()) continue;
        auto gf = tool_call_grammar(t.value(), spec.format);
        ASSERT_TRUE(gf.ok()) << spec.name;
        EXPECT_FALSE(lazy_accepts(gf.value(), tool_call_triggers(t.value(), spec.format),
                                  "Text, then " + std::string(spec.lazy_trigger) + "nope"))
            << spec.name;
    }
    EXPECT_TRUE(lazy_accepts(tool_call_grammar(t.value(), ToolFormat::Harmony).value(),
                             tool_call_triggers(t.value(), ToolFormat::Harmony),
                             "<|channel|>analysis<|message|>thinking<|end|><|start|>assistant"
                             "<|channel|>commentary to=functions.get_time <|constrain|>json"
                             "<|message|>{}"));
}

TEST(ToolCalls, AutoToolWithAnUnenforceableSchemaTakesAnyObjectUnlessStrict) {
    auto tools = json::parse(R"([
      {"type": "function", "function": {"name": "mail", "parameters":
        {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}}}])");
    const json autoc = "auto", req = "required";
    auto t = parse_tools(&tools, &autoc);
    ASSERT_TRUE(t.ok());
    auto g = tool_call_grammar(t.value(), ToolFormat::Hermes);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(lazy_accepts(g.value(), tool_call_triggers(t.value(), ToolFormat::Hermes),
                             "<tool_call>\n{\"name\": \"mail\", \"arguments\": {\"to\": 5}}\n"
                             "</tool_call>"));
    auto r = parse_tools(&tools, &req);
    ASSERT_TRUE(r.ok());
    auto gr = tool_call_grammar(r.value(), ToolFormat::Hermes);
    ASSERT_FALSE(gr.ok());
    EXPECT_EQ(gr.error().param, "tools[0].function.parameters.properties.to.format");
    tools[0]["function"]["strict"] = true;
    auto s = parse_tools(&tools, &autoc);
    ASSERT_TRUE(s.ok());
    auto gs = tool_call_grammar(s.value(), ToolFormat::Hermes);
    ASSERT_FALSE(gs.ok());
    EXPECT_EQ(gs.error().param, "tools[0].function.parameters.properties.to.format");
    tools[0]["function"]["strict"] = "yes";
    auto bad = parse_tools(&tools, &autoc);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().param, "tools[0].function.strict");
}

}  // namespace
}  // namespace zinc::server
