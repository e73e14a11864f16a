// Tests for server/tool_call_stream.h: replies fed in every chunking (each split point, each
// pair of split points for short replies, byte by byte) give the same content and calls as the
// whole reply (parse_tool_calls, which the non-streamed response uses), every piece is whole
// UTF-8, text is not held back longer than the rules say, and the whole results are pinned.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/tool_call_stream.h"
#include "server/tool_calls.h"
#include "tool_stream_check.h"

namespace zinc::server {
namespace {

using nlohmann::json;
using namespace tool_stream_check;

// Greedy Qwen2.5-Coder-0.5B-Instruct replies through zinc (its template mentions <tool_call>,
// so Hermes; tests/py/test_tools.py's TOOLS): a bare call object ("What is the weather in Paris
// in celsius? Use the tool."), a call in a fenced block, which is text ("Weather in Oslo?"), a
// text reply ("Hi! Who are you?"), and the two blocks tool_choice "required" gave for "What is
// the weather in Paris and the time in Tokyo?" (the forced-call grammar's layout).
const std::string kQwenBare =
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}";
const std::string kQwenFenced =
    "```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\n    \"city\": \"Oslo\",\n    "
    "\"unit\": \"c\"\n  }\n}\n```";
const std::string kQwenText =
    "I'm an Alibaba Cloud developed AI assistant. How can I assist you today?";
const std::string kQwenRequired =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
    "\"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": "
    "\"Tokyo\"}}\n</tool_call>";
// The shapes other replies take, with multi-byte text in content and arguments.
const std::string kOneCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
    "\"c\"}}\n</tool_call>";
const std::string kTwoCalls =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"unit\": "
    "\"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": "
    "\"Europe/Zürich\"}}\n</tool_call>";
const std::string kTextThenCall =
    "Je vérifie la météo 🌦 pour vous.\n\n<tool_call>\n{\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Köln\", \"unit\": \"c\"}}\n</tool_call>";
const std::string kStringArguments =
    "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"K\\u00f6ln "
    "\\ud83c\\udf27\\\"}\"}</tool_call>";
// Braces inside strings, a key with an escaped quote after the arguments (skipped).
const std::string kBracesInStrings =
    "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"a\": \"}]\\\"{\"}, \"k\\\"\": [1, "
    "{\"b\": \"}\"}]}</tool_call>";
const std::string kPlainText = "Bonjour ! Il fait 21 °C à Paris — <b>beau</b> temps.\n";

TEST(ToolCallStream, EveryChunkingGivesTheWholeReply) {
    for (const std::string& t :
         {kQwenBare, kQwenFenced, kQwenText, kQwenRequired, kOneCall, kTwoCalls, kTextThenCall,
          kStringArguments, kPlainText,
          // malformed and unterminated ones
          std::string("<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call> ok"),
          std::string("<tool_call>\n{\"name\": \"get_ti"),
          std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa"),
          std::string("<tool_call>not json</tool_call>\n") + kOneCall, kBracesInStrings,
          std::string("Use <tool_cal to call.  "), std::string("{\"answer\": 42}"),
          std::string("  \n{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}")})
        expect_split_invariant(t);
    for (const std::string& t :
         {std::string("{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}; "
                      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"),
          std::string("{\"name\": \"get_time\", \"parameters\": null}\nDone."),
          std::string("The time is {\"name\": 1}")})
        expect_split_invariant(t, ToolFormat::Json);
}

TEST(ToolCallStream, RealReplies) {
    Result r = whole(kQwenBare);  // no tags (they may be control tokens): a bare call
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\", \"unit\": \"c\"}");
    EXPECT_EQ(r.content, "");
    // Markdown around a call object: not a call (text first), the reply exactly.
    EXPECT_EQ(whole(kQwenFenced), (Result{kQwenFenced, {}, false}));
    EXPECT_EQ(whole(kQwenText), (Result{kQwenText, {}, false}));
    r = whole(kQwenRequired);
    ASSERT_EQ(r.calls.size(), 2u) << r;
    EXPECT_EQ(r.calls[1].name, "get_time");
    EXPECT_EQ(r.calls[1].arguments, "{\"tz\": \"Tokyo\"}");
    EXPECT_EQ(r.content, "");
}

TEST(ToolCallStream, WholeResults) {
    Result r = whole(kOneCall);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(r.calls[0].name, "get_weather");
    // The arguments exactly as generated, not re-serialised.
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\", \"unit\": \"c\"}");
    EXPECT_FALSE(r.truncated);

    r = whole(kTwoCalls);  // parallel calls
    ASSERT_EQ(r.calls.size(), 2u) << r;
    EXPECT_EQ(r.content, "");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Zürich"}, {"unit", "c"}}));
    EXPECT_EQ(r.calls[1].name, "get_time");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json({{"tz", "Europe/Zürich"}}));

    r = whole(kTextThenCall);  // the whitespace before the call is dropped
    EXPECT_EQ(r.content, "Je vérifie la météo 🌦 pour vous.");
    ASSERT_EQ(r.calls.size(), 1u);

    r = whole(kStringArguments);  // arguments as JSON text in a string: decoded
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].arguments, "{\"tz\": \"Köln 🌧\"}");

    r = whole(kBracesInStrings);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].arguments, "{\"a\": \"}]\\\"{\"}");
    EXPECT_EQ(r.content, "");

    // Without calls the reply is its text exactly (markup and trailing whitespace included).
    EXPECT_EQ(whole(kPlainText), (Result{kPlainText, {}, false}));
    EXPECT_EQ(whole("Use <tool_cal to call.  ").content, "Use <tool_cal to call.  ");
}

TEST(ToolCallStream, MalformedAndUnterminated) {
    // An unknown tool: the whole block is text, through its close marker.
    Result r = whole("<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call> ok");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call> ok");
    // A block that is not JSON is text; the good block after it is a call.
    r = whole("<tool_call>not json</tool_call>\n" + kOneCall);
    EXPECT_EQ(r.content, "<tool_call>not json</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    // Generation that ends before the arguments start: text.
    r = whole("<tool_call>\n{\"name\": \"get_ti");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "<tool_call>\n{\"name\": \"get_ti");
    r = whole("<tool_call>{\"name\": \"get_time\"");
    EXPECT_TRUE(r.calls.empty());
    // ... and inside them: the call, its arguments as far as generated, marked truncated.
    r = whole("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Pa");
    EXPECT_TRUE(r.truncated);
    // A complete object without its close marker (max_tokens cut it): a complete call.
    r = whole("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{}");
    EXPECT_FALSE(r.truncated);
    // Markup inside the arguments (not in a string) ends them; text after a call is content.
    r = whole("<tool_call>{\"name\": \"get_time\", \"arguments\": {\"tz\": 1</tool_call>Done");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"tz\": 1");
    EXPECT_EQ(r.content, "Done");
    // A bare object that is not a call is text, and so is everything after it.
    r = whole("{\"answer\": 42}");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "{\"answer\": 42}");
    // No arguments, or null: "{}"; keys after the arguments are skipped.
    r = whole("<tool_call>{\"name\": \"get_time\"}</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{}");
    r = whole(
        "<tool_call>{\"name\": \"get_time\", \"arguments\": null, \"id\": \"x\"}</tool_call>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{}");
}

TEST(ToolCallStream, JsonFormat) {
    Result r = whole(
        "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}; "
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
        ToolFormat::Json);
    ASSERT_EQ(r.calls.size(), 2u) << r;
    EXPECT_EQ(r.calls[1].arguments, "{\"city\": \"Oslo\"}");
    EXPECT_EQ(r.content, "");
    r = whole("{\"name\": \"get_time\", \"parameters\": null}\nDone.", ToolFormat::Json);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.content, "Done.");
    // Calls only from the start of the reply: text first means no calls.
    r = whole("Here: {\"name\": \"get_time\", \"parameters\": {}}", ToolFormat::Json);
    EXPECT_TRUE(r.calls.empty());
    // Json has no markers: <tool_call> is text there.
    EXPECT_TRUE(whole(kOneCall, ToolFormat::Json).calls.empty());
}

// Text that cannot start a call is sent at once; only a possible marker prefix, whitespace and
// half a character wait.
TEST(ToolCallStream, HoldsBackOnlyWhatMightStartACall) {
    ToolCallStream s(ToolFormat::Hermes, kNames);
    auto text_of = [](const std::vector<ToolStreamPiece>& ps) {
        std::string t;
        for (const auto& p : ps) t += p.call < 0 ? p.text : "";
        return t;
    };
    EXPECT_EQ(text_of(s.feed("Sure, here <b")), "Sure, here <b");
    EXPECT_EQ(text_of(s.feed(">bold</b> <to")), ">bold</b>");  // " " and "<to" wait
    EXPECT_EQ(text_of(s.feed("day")), " <today");              // not the marker
    EXPECT_EQ(text_of(s.feed(" \xC3")), " ");                  // half of "é" waits
    EXPECT_EQ(text_of(s.feed("\xA9t\xC3\xA9")), "été");
    EXPECT_EQ(text_of(s.feed("\n<tool_call>\n{\"name\": ")), "");
    auto p = s.feed("\"get_time\", \"arguments\": {\"tz\"");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_TRUE(p[0].starts_call);
    EXPECT_EQ(p[0].name, "get_time");
    EXPECT_EQ(p[0].text, "{\"tz\"");  // the arguments stream from their first byte
    p = s.feed(": \"Asia/Tōkyō\"}}\n</tool_call>\n");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].text, ": \"Asia/Tōkyō\"}");
    EXPECT_TRUE(s.finish().empty());
    EXPECT_EQ(s.n_calls(), 1);
    EXPECT_FALSE(s.truncated());
}

TEST(ToolCallStream, UnknownNameIsRefusedAtItsFirstWrongByte) {
    ToolCallStream s(ToolFormat::Hermes, kNames);
    EXPECT_TRUE(s.feed("<tool_call>{\"name\": \"get_").empty());
    auto p = s.feed("x");  // no tool is named "get_x...": the block is text from here
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].call, -1);
    EXPECT_EQ(p[0].text, "<tool_call>{\"name\": \"get_x");
}

// parallel_tool_calls false: the reply ends with its first call; a second call, a close marker
// and text after it are dropped, in every chunking.
TEST(ToolCallStream, NotParallelKeepsTheFirstCallOnly) {
    const std::string text_around =
        "Voilà 🌦.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n"
        "</tool_call>\nAnd then <tool_call>{\"name\": \"get_weather\"}</tool_call>";
    const std::string json_two =
        "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"CET\"}}; "
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
    for (const std::string& t : {kTwoCalls, kQwenRequired, text_around, kTextThenCall, kPlainText,
                                 std::string("<tool_call>\n{\"name\": \"get_weather\", "
                                             "\"arguments\": {\"city\": \"Pa")})
        expect_split_invariant(t, ToolFormat::Hermes, false);
    expect_split_invariant(json_two, ToolFormat::Json, false);

    Result r = whole(kTwoCalls, ToolFormat::Hermes, false);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Zürich"}, {"unit", "c"}}));
    EXPECT_EQ(r.content, "");
    r = whole(text_around, ToolFormat::Hermes, false);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.content, "Voilà 🌦.");
    EXPECT_EQ(r.calls[0].arguments, "{\"tz\": \"CET\"}");
    r = whole(json_two, ToolFormat::Json, false);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].name, "get_time");
    // Parallel (the default), the same replies keep both calls.
    EXPECT_EQ(whole(kTwoCalls).calls.size(), 2u);
    EXPECT_EQ(whole(json_two, ToolFormat::Json).calls.size(), 2u);
    // Without a call, nothing changes.
    EXPECT_EQ(whole(kPlainText, ToolFormat::Hermes, false), whole(kPlainText));

    // done() as soon as the call's object closes, so generation can stop there.
    ToolCallStream s(ToolFormat::Hermes, kNames, false);
    s.feed("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}");
    EXPECT_FALSE(s.done());
    auto p = s.feed("}\n</tool_call>\n<tool_call>");
    EXPECT_TRUE(s.done());
    EXPECT_TRUE(p.empty());
    EXPECT_TRUE(s.feed("{\"name\": \"get_weather\"}").empty());
    EXPECT_TRUE(s.finish().empty());
    EXPECT_EQ(s.n_calls(), 1);
    ToolCallStream parallel(ToolFormat::Hermes, kNames);
    parallel.feed(kOneCall);
    EXPECT_FALSE(parallel.done());
}

// gpt-oss (harmony): the text zinc's detokenizer gives (its <|channel|>, <|message|>,
// <|start|>, <|constrain|> and, in harmony, <|end|> are rendered; <|call|> and <|return|> end
// the generation and are not), in the shapes llama.cpp's common/chat.cpp reads.
const std::string kHarmonyAfterAnalysis =
    "<|channel|>analysis<|message|>The user wants the weather in Paris. Call get_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    "<|message|>{\"city\": \"Paris\", \"unit\": \"c\"}";
const std::string kHarmonyFirst =
    "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"tz\":\"Tōkyō\"}"
    "<|call|>";
const std::string kHarmonyRoleRecipient =
    "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{\"tz\": "
    "\"CET\"}";
const std::string kHarmonyFinal =
    "<|channel|>analysis<|message|>Just greet.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Hello! 👋 <b>hi</b>";

TEST(ToolCallStream, HarmonyEveryChunking) {
    for (const std::string& t :
         {kHarmonyAfterAnalysis, kHarmonyFirst, kHarmonyRoleRecipient, kHarmonyFinal,
          std::string("<|channel|>commentary to=functions.rm_rf <|constrain|>json<|message|>{}"),
          std::string("<|channel|>commentary to=functions.get_weather<|message|>{\"city\": \"Pa"),
          std::string("<|channel|>commentary<|message|>Checking.<|end|>") + "<|start|>assistant" +
              kHarmonyFirst,
          std::string("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>"),
          std::string("<|chan <|start|>assist <|channel|>commentary to=functions.get_ti")})
        expect_split_invariant(t, ToolFormat::Harmony);
    expect_split_invariant(kHarmonyFirst + "<|start|>assistant" + kHarmonyFirst,
                           ToolFormat::Harmony, false);
}

TEST(ToolCallStream, HarmonyWholeResults) {
    Result r = whole(kHarmonyAfterAnalysis, ToolFormat::Harmony);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Paris\", \"unit\": \"c\"}");
    // The call's message, from its <|start|>assistant, is the call; the analysis before it is
    // content as generated (zinc does not split harmony's channels).
    EXPECT_EQ(r.content,
              "<|channel|>analysis<|message|>The user wants the weather in Paris. Call "
              "get_weather.<|end|>");
    EXPECT_FALSE(r.truncated);

    r = whole(kHarmonyFirst, ToolFormat::Harmony);  // <|call|> as text is the close marker
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].name, "get_time");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"tz", "Tōkyō"}}));
    EXPECT_EQ(r.content, "");

    r = whole(kHarmonyRoleRecipient, ToolFormat::Harmony);  // recipient in the role header
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].name, "get_time");
    EXPECT_EQ(r.calls[0].arguments, "{\"tz\": \"CET\"}");
    EXPECT_EQ(r.content, "");

    // A final answer, a preamble, an unknown function: content exactly.
    EXPECT_EQ(whole(kHarmonyFinal, ToolFormat::Harmony), (Result{kHarmonyFinal, {}, false}));
    const std::string unknown =
        "<|channel|>commentary to=functions.rm_rf <|constrain|>json<|message|>{}";
    EXPECT_EQ(whole(unknown, ToolFormat::Harmony), (Result{unknown, {}, false}));
    r = whole("<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant" + kHarmonyFirst,
              ToolFormat::Harmony);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.content, "<|channel|>commentary<|message|>Checking.<|end|>");

    // max_tokens inside the arguments: the call as far as generated, truncated.
    r = whole("<|channel|>commentary to=functions.get_weather<|message|>{\"city\": \"Pa",
              ToolFormat::Harmony);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].arguments, "{\"city\": \"Pa");
    EXPECT_TRUE(r.truncated);
    // ... and before them (the header incomplete): content.
    EXPECT_TRUE(
        whole("<|channel|>commentary to=functions.get_ti", ToolFormat::Harmony).calls.empty());

    // Harmony's markers mean nothing to Hermes, and <tool_call> nothing to harmony.
    EXPECT_TRUE(whole(kHarmonyFirst).calls.empty());
    EXPECT_TRUE(whole(kOneCall, ToolFormat::Harmony).calls.empty());
}

TEST(ToolCallStream, HarmonyHoldsBackOnlyMarkers) {
    ToolCallStream s(ToolFormat::Harmony, kNames);
    auto text_of = [](const std::vector<ToolStreamPiece>& ps) {
        std::string t;
        for (const auto& p : ps) t += p.call < 0 ? p.text : "";
        return t;
    };
    EXPECT_EQ(text_of(s.feed("<|channel|>analysis<|mess")), "<|channel|>analysis<|mess");
    EXPECT_EQ(text_of(s.feed("age|>Think.<|end|><|sta")), "age|>Think.<|end|>");
    EXPECT_EQ(text_of(s.feed("rt|>assistant<|channel|>commentary to=functions.get_")), "");
    auto p = s.feed("time <|constrain|>json<|message|>{\"tz\"");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_TRUE(p[0].starts_call);
    EXPECT_EQ(p[0].name, "get_time");
    EXPECT_EQ(p[0].text, "{\"tz\"");
    p = s.feed(": \"UTC\"}");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].text, ": \"UTC\"}");
    EXPECT_TRUE(s.finish().empty());
    EXPECT_FALSE(s.truncated());
}

TEST(ToolCallStream, FormatsComeFromOneTable) {
    EXPECT_EQ(tool_format_for_template("{% if tools %}<tool_call>{% endif %}"), ToolFormat::Hermes);
    EXPECT_EQ(tool_format_for_template("{{- '<|start|>assistant<|channel|>' }}"),
              ToolFormat::Harmony);
    EXPECT_EQ(tool_format_for_template("{{ messages }}"), ToolFormat::Json);
    const ToolFormatSpec& h = tool_format_spec(ToolFormat::Hermes);
    EXPECT_EQ(h.open, "<tool_call>");
    EXPECT_EQ(h.close, "</tool_call>");
    EXPECT_EQ(tool_format_specs().back().detect, "");  // the fallback detects nothing
}

}  // namespace
}  // namespace zinc::server
