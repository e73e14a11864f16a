// Tests for Gemma 4's tool calls: its arguments' dictionary syntax read as JSON
// (server/gemma4_args.h), calls read from replies in every chunking (tool_call_stream.h), the
// forced-call grammar (tool_calls.h, json_schema_grammar.h's Gemma4 syntax), and the tool turns
// folded into the model's turn as its template takes them. The syntax is llama.cpp's peg-gemma4
// (common/parsers/gemma4.cpp); the JSON is its gemma4_to_json mapper's (compact).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "server/gemma4_args.h"
#include "server/json_schema_grammar.h"
#include "server/tool_calls.h"
#include "tool_stream_check.h"

namespace zinc::server {
namespace {

using nlohmann::json;
using namespace tool_stream_check;

constexpr ToolFormat G = ToolFormat::Gemma4;

// Replies in Gemma 4's shapes: one call; two back to back (parallel); text, then a call; the
// thought channel before a call (content as generated: zinc does not split channels); nested
// values with every kind of literal, a string holding quotes, a backslash, '<' and control
// characters, multi-byte text.
const std::string kOne =
    "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|>";
const std::string kTwo =
    "<|tool_call>call:get_weather{city:<|\"|>Zürich<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|>"
    "<|tool_call>call:get_time{tz:<|\"|>Europe/Zürich<|\"|>}<tool_call|>";
const std::string kTextThenCall =
    "Je vérifie la météo 🌦.\n<|tool_call>call:get_weather{city:<|\"|>Köln<|\"|>,unit:<|\"|>c"
    "<|\"|>}<tool_call|>";
const std::string kThought =
    "<|channel>thought\nThe user wants Oslo's weather.<channel|><|tool_call>call:get_weather{city:"
    "<|\"|>Oslo<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|>";
const std::string kNested =
    "<|tool_call>call:get_time{opts:{deep:{n:-1.5e3,ok:true,none:null},list:[1, <|\"|>a \"q\" "
    "\\ b<c <|x<|\"|>,[],{}]}, tz:<|\"|>line1\nline2\ttab é<|\"|> }<tool_call|>";
const json kNestedArgs = {
    {"opts",
     {{"deep", {{"n", -1.5e3}, {"ok", true}, {"none", nullptr}}},
      {"list", json::array({1, "a \"q\" \\ b<c <|x", json::array(), json::object()})}}},
    {"tz", "line1\nline2\ttab é"}};

TEST(Gemma4Args, ReadsTheDictionarySyntaxAsCompactJson) {
    Result r = whole(kOne, G);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Paris\",\"unit\":\"c\"}");
    EXPECT_EQ(r.content, "");
    EXPECT_FALSE(r.truncated);

    r = whole(kNested, G);
    ASSERT_EQ(r.calls.size(), 1u) << r;
    EXPECT_EQ(json::parse(r.calls[0].arguments), kNestedArgs);
    // Compact as llama.cpp's mapper writes it; string bytes escaped, others as they are.
    EXPECT_EQ(r.calls[0].arguments,
              "{\"opts\":{\"deep\":{\"n\":-1.5e3,\"ok\":true,\"none\":null},\"list\":[1,\"a "
              "\\\"q\\\" \\\\ b<c <|x\",[],{}]},\"tz\":\"line1\\nline2\\ttab é\"}");

    r = whole("<|tool_call>call:get_time{}<tool_call|>", G);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{}");
    r = whole("<|tool_call>call:get_time{ tz : <|\"|>CET<|\"|> , n: [ ] }<tool_call|>", G);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"tz \":\"CET\",\"n\":[]}");  // a key is what precedes ':'
}

TEST(Gemma4Args, ControlBytesAreEscaped) {
    Gemma4ArgsReader g;
    size_t used = 0;
    std::string out;
    const std::string in = std::string("{k:<|\"|>a\x01\x1f\r\b\f<|\"|>}rest");
    EXPECT_EQ(g.read(in, used, out), Gemma4ArgsReader::Status::Done);
    EXPECT_EQ(in.substr(used), "rest");
    EXPECT_EQ(out, "{\"k\":\"a\\u0001\\u001f\\r\\b\\f\"}");
    EXPECT_EQ(json::parse(out)["k"], "a\x01\x1f\r\b\f");
}

TEST(Gemma4Args, LeavesOnlyAPossibleQuoteUnread) {
    Gemma4ArgsReader g;
    size_t used = 0;
    std::string out;
    EXPECT_EQ(g.read("{tz:<|", used, out), Gemma4ArgsReader::Status::More);
    EXPECT_EQ(used, 4u);  // "<|" may open a string
    EXPECT_EQ(out, "{\"tz\":");
    out.clear();
    EXPECT_EQ(g.read("<|\"|>Asia/T<|\"", used, out), Gemma4ArgsReader::Status::More);
    EXPECT_EQ(used, 11u);  // "<|\"" may close it
    EXPECT_EQ(out, "\"Asia/T");
    EXPECT_EQ(g.at_end("<|\""), "<|\\\"");  // ended there: the bytes were the string's
    out.clear();
    EXPECT_EQ(g.read("<|\"x", used, out), Gemma4ArgsReader::Status::More);
    EXPECT_EQ(out, "<|\\\"x");  // not the delimiter: text
    out.clear();
    EXPECT_EQ(g.read("<|\"|>}", used, out), Gemma4ArgsReader::Status::Done);
    EXPECT_EQ(out, "\"}");
}

TEST(Gemma4Args, StopsAtTheFirstByteOutsideTheSyntax) {
    for (const auto& [in, at, json_so_far] :
         std::vector<std::tuple<std::string, size_t, std::string>>{
             {"{tz::}", 4, "{\"tz\":"},          // a value cannot start with ':'
             {"{:1}", 1, "{"},                   // nor a key
             {"{a:1,}", 5, "{\"a\":1,"},         // a trailing comma
             {"{a}", 2, "{\"a"},                 // a key without ':'
             {"{a:1]", 4, "{\"a\":1"},           // the wrong closer
             {"{a:<tool_call|>", 3, "{\"a\":"},  // markup where a value starts
             {"{a:<|\"|>x<|\"|><tool_call|>", 14, "{\"a\":\"x\""}}) {
        Gemma4ArgsReader g;
        size_t used = 0;
        std::string out;
        EXPECT_EQ(g.read(in, used, out), Gemma4ArgsReader::Status::Failed) << in;
        EXPECT_EQ(used, at) << in;
        EXPECT_EQ(out, json_so_far) << in;
    }
}

TEST(Gemma4Calls, EveryChunkingGivesTheWholeReply) {
    for (const std::string& t :
         {kOne, kTwo, kTextThenCall, kThought, kNested,
          // unknown tool, broken, unterminated, not a call
          std::string("<|tool_call>call:rm_rf{path:<|\"|>/<|\"|>}<tool_call|> ok"),
          std::string("<|tool_call>call:get_time{tz::}<tool_call|>Done"),
          std::string("<|tool_call>call:get_time{tz:<|\"|>CET<|\"|><tool_call|>"),
          std::string("<|tool_call>call:get_weather{city:<|\"|>Pa"),
          std::string("<|tool_call>call:get_weather{city:<|\"|>Pa<|\""),
          std::string("<|tool_call>call:get_ti"), std::string("<|tool_call>call:get_time "),
          std::string("<|tool_call>hello<tool_call|>") + kOne,
          std::string("Use <|tool to call. <tool_call|> {a:1}"),
          std::string("Bonjour ! 21 °C à Paris — <b>beau</b>.\n")})
        expect_split_invariant(t, G);
    for (const std::string& t : {kTwo, kTextThenCall, kOne + " and more"})
        expect_split_invariant(t, G, false);
}

TEST(Gemma4Calls, WholeResults) {
    Result r = whole(kTwo, G);  // parallel calls, back to back
    ASSERT_EQ(r.calls.size(), 2u) << r;
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Zürich"}, {"unit", "c"}}));
    EXPECT_EQ(r.calls[1].name, "get_time");
    EXPECT_EQ(json::parse(r.calls[1].arguments), json({{"tz", "Europe/Zürich"}}));
    EXPECT_EQ(r.content, "");

    r = whole(kTextThenCall, G);  // the whitespace before the call is dropped
    EXPECT_EQ(r.content, "Je vérifie la météo 🌦.");
    ASSERT_EQ(r.calls.size(), 1u);
    r = whole(kThought, G);
    EXPECT_EQ(r.content, "<|channel>thought\nThe user wants Oslo's weather.<channel|>");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Oslo\",\"unit\":\"c\"}");

    // An unknown tool, or a block that is not a call: text through its close marker.
    const std::string unknown = "<|tool_call>call:rm_rf{path:<|\"|>/<|\"|>}<tool_call|> ok";
    EXPECT_EQ(whole(unknown, G), (Result{unknown, {}, false}));
    r = whole("<|tool_call>hello<tool_call|>" + kOne, G);
    EXPECT_EQ(r.content, "<|tool_call>hello<tool_call|>");
    ASSERT_EQ(r.calls.size(), 1u);
    // Generation that ends before the arguments: text; inside them: the call so far, truncated.
    EXPECT_TRUE(whole("<|tool_call>call:get_ti", G).calls.empty());
    r = whole("<|tool_call>call:get_weather{city:<|\"|>Pa", G);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"city\":\"Pa");
    EXPECT_TRUE(r.truncated);
    // Text that leaves the syntax ends the call there, and is read as what follows it.
    r = whole("<|tool_call>call:get_time{tz:<|\"|>CET<|\"|><tool_call|>", G);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"tz\":\"CET\"");
    EXPECT_FALSE(r.truncated);
    EXPECT_EQ(r.content, "");
    r = whole("<|tool_call>call:get_time{tz::}<tool_call|>Done", G);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arguments, "{\"tz\":");
    EXPECT_EQ(r.content, ":}<tool_call|>Done");

    // Not parallel: the first call only.
    r = whole(kTwo, G, false);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "get_weather");
    // Gemma 4's markers mean nothing to the other formats, and theirs nothing to it.
    EXPECT_TRUE(whole(kOne).calls.empty());
    EXPECT_TRUE(whole("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", G)
                    .calls.empty());
}

TEST(Gemma4Calls, StreamsArgumentsAsTheyCome) {
    ToolCallStream s(G, kNames);
    auto text_of = [](const std::vector<ToolStreamPiece>& ps) {
        std::string t;
        for (const auto& p : ps) t += p.call < 0 ? p.text : "";
        return t;
    };
    EXPECT_EQ(text_of(s.feed("Sure <b>x</b> <|tool")), "Sure <b>x</b>");
    EXPECT_EQ(text_of(s.feed("_call>call:get_")), "");
    auto p = s.feed("time{tz:<|\"|>Asia/");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_TRUE(p[0].starts_call);
    EXPECT_EQ(p[0].name, "get_time");
    EXPECT_EQ(p[0].text, "{\"tz\":\"Asia/");
    p = s.feed("Tōkyō<|");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].text, "Tōkyō");  // "<|" waits: it may close the string
    p = s.feed("\"|>}<tool_call|>");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].text, "\"}");
    EXPECT_TRUE(s.finish().empty());
    EXPECT_EQ(s.n_calls(), 1);
    EXPECT_FALSE(s.truncated());

    ToolCallStream one(G, kNames, false);  // done() once the first call's dictionary closes
    one.feed("<|tool_call>call:get_time{tz:<|\"|>CET<|\"|>");
    EXPECT_FALSE(one.done());
    one.feed("}");
    EXPECT_TRUE(one.done());
}

TEST(Gemma4Calls, DetectedByItsTemplate) {
    EXPECT_EQ(tool_format_for_template("{{- '<|tool_call>call:' + function['name'] + '{' -}}"),
              ToolFormat::Gemma4);
    // Gemma 3's template (no tool format) stays Json, the fallback.
    EXPECT_EQ(tool_format_for_template("{{ '<start_of_turn>' + role }}"), ToolFormat::Json);
    // Older Gemma 4 templates take tool results in the model's turn; the official one, which
    // says "OpenAI Chat Completions:", reads `tool` messages itself; other formats never fold.
    EXPECT_TRUE(template_folds_tool_turns("{{ '<|tool_call>call:' }}{{ m.tool_responses }}"));
    EXPECT_FALSE(template_folds_tool_turns(
        "{{ '<|tool_call>call:' }}{#- OpenAI Chat Completions: forward-scan role:tool -#}"));
    EXPECT_FALSE(template_folds_tool_turns("{% if tools %}<tool_call>{% endif %}"));
}

// Does the grammar accept `text` (fed byte by byte)?
bool accepts(const std::string& gbnf, const std::string& text) {
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

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters":
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
     "Unit": {"enum": ["c", "f"]}, "days": {"type": "integer"},
     "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
     "tags": {"type": "array", "items": {"type": "string"}}},
     "required": ["city", "Unit"]}}},
  {"type": "function", "function": {"name": "get_time"}}])");

TEST(Gemma4Grammar, ForcedCallsInGemmaSyntaxByTheSchema) {
    const json req = "required";
    auto t = parse_tools(&kTools, &req);
    ASSERT_TRUE(t.ok()) << t.error().message;
    auto g = tool_call_grammar(t.value(), G);
    ASSERT_TRUE(g.ok()) << g.error().message;
    // Properties in dictsort order (case-insensitive: city, days, opts, tags, Unit).
    const std::string call =
        "<|tool_call>call:get_weather{city:<|\"|>Rome<|\"|>,days:3,opts:{deep:true},"
        "tags:[<|\"|>a<|\"|>, <|\"|>b c<|\"|>],Unit:<|\"|>c<|\"|>}<tool_call|>";
    EXPECT_TRUE(accepts(g.value(), call));
    EXPECT_TRUE(accepts(g.value(),
                        "<|tool_call>call:get_weather{city:<|\"|>Rome<|\"|>, Unit: "
                        "<|\"|>f<|\"|>}<tool_call|>"));
    EXPECT_TRUE(accepts(g.value(), call + "<|tool_call>call:get_time{}<tool_call|>"));  // parallel
    // Free-form arguments (no schema): any dictionary.
    EXPECT_TRUE(accepts(
        g.value(), "<|tool_call>call:get_time{tz:<|\"|>a<b<|\"|>,n:[1,{x:null}]}<tool_call|>"));
    EXPECT_FALSE(accepts(g.value(), "<|tool_call>call:get_time<tool_call|>"));
    EXPECT_FALSE(accepts(g.value(),  // a required property missing
                         "<|tool_call>call:get_weather{city:<|\"|>Rome<|\"|>}<tool_call|>"));
    EXPECT_FALSE(accepts(g.value(),  // not in the enum
                         "<|tool_call>call:get_weather{city:<|\"|>Rome<|\"|>,Unit:<|\"|>k<|\"|>}"
                         "<tool_call|>"));
    EXPECT_FALSE(accepts(g.value(),  // maxLength 10
                         "<|tool_call>call:get_weather{city:<|\"|>Rome Rome Rome<|\"|>,Unit:"
                         "<|\"|>c<|\"|>}<tool_call|>"));
    EXPECT_FALSE(accepts(g.value(),  // JSON is not Gemma 4's syntax
                         "<|tool_call>call:get_weather{\"city\":\"Rome\",\"Unit\":\"c\"}"
                         "<tool_call|>"));
    EXPECT_FALSE(accepts(g.value(),  // a string cannot hold the delimiter's start
                         "<|tool_call>call:get_time{tz:<|\"|>a<|b<|\"|>}<tool_call|>"));
    // Whatever the grammar produces reads back as the call, with JSON arguments.
    auto r = parse_tool_calls(call, G, kNames);
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments), json({{"city", "Rome"},
                                                       {"days", 3},
                                                       {"opts", {{"deep", true}}},
                                                       {"tags", {"a", "b c"}},
                                                       {"Unit", "c"}}));

    t.value().parallel = false;  // exactly one call
    auto one = tool_call_grammar(t.value(), G);
    ASSERT_TRUE(one.ok());
    EXPECT_FALSE(accepts(one.value(), call + "<|tool_call>call:get_time{}<tool_call|>"));
    EXPECT_TRUE(accepts(one.value(), call));

    const json named = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
    auto n = parse_tools(&kTools, &named);
    ASSERT_TRUE(n.ok());
    auto gn = tool_call_grammar(n.value(), G);
    ASSERT_TRUE(gn.ok());
    EXPECT_TRUE(accepts(gn.value(), "<|tool_call>call:get_time{}<tool_call|>"));
    EXPECT_FALSE(accepts(gn.value(), call));
}

TEST(Gemma4Grammar, UnwritableSchemasAre400s) {
    // A property name that cannot be a bare key, a const string holding the delimiter.
    for (const auto& [params, param] : std::vector<std::pair<json, std::string>>{
             {{{"type", "object"}, {"properties", {{"a:b", {{"type", "string"}}}}}},
              "tools[0].function.parameters.properties.a:b"},
             {{{"type", "object"}, {"properties", {{"a", {{"const", "x<|\"|>y"}}}}}},
              "tools[0].function.parameters.properties.a.const"},
             {{{"type", "object"}, {"properties", {{"a", {{"enum", {"ok", "<|\"|>"}}}}}}},
              "tools[0].function.parameters.properties.a.enum[1]"}}) {
        const json tools = {
            {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", params}}}}};
        const json req = "required";
        auto t = parse_tools(&tools, &req);
        ASSERT_TRUE(t.ok());
        auto g = tool_call_grammar(t.value(), G);
        ASSERT_FALSE(g.ok()) << params.dump();
        EXPECT_EQ(g.error().param.value_or(""), param);
        EXPECT_NE(g.error().message.find("Gemma 4"), std::string::npos) << g.error().message;
        // The same schema is fine for the JSON formats.
        EXPECT_TRUE(tool_call_grammar(t.value(), ToolFormat::Hermes).ok());
    }
    // const values are written in the syntax: objects with bare, dictsorted keys.
    const json tools = json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"o": {"const": {"b": [1, "x"], "A": true}}},
        "required": ["o"]}}}])");
    const json req = "required";
    auto t = parse_tools(&tools, &req);
    ASSERT_TRUE(t.ok());
    auto g = tool_call_grammar(t.value(), G);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE(
        accepts(g.value(), "<|tool_call>call:f{o:{A:true,b:[1,<|\"|>x<|\"|>]}}<tool_call|>"));
}

chat::Message with(chat::Message m, std::string key, chat::Value v) {
    m.extra.emplace_back(std::move(key), std::move(v));
    return m;
}

TEST(Gemma4Turns, ToolMessagesFoldIntoTheModelTurn) {
    const json calls = json::parse(R"([
      {"id": "call_1", "type": "function", "function": {"name": "get_weather",
       "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "get_time",
       "arguments": "{\"tz\": \"CET\"}"}}])");
    std::vector<chat::Message> msgs = {
        {"user", "Weather and time in Paris?"},
        with({"assistant", "Let me check."}, "tool_calls", tool_calls_value(calls)),
        with({"tool", "{\"temp\": 21}"}, "tool_call_id", chat::Value::data_string("call_1")),
        with({"tool", "12:00"}, "tool_call_id", chat::Value::data_string("call_2")),
        {"assistant", "21 °C at 12:00."},
        {"user", "Thanks!"}};
    const std::vector<chat::Message> out = fold_tool_turns(msgs);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].role, "user");
    EXPECT_EQ(out[1].role, "assistant");
    EXPECT_EQ(out[1].content, "21 °C at 12:00.");  // the next turn's (the first one's dropped)
    ASSERT_EQ(out[1].extra.size(), 2u);
    EXPECT_EQ(out[1].extra[0].first, "tool_calls");
    EXPECT_EQ(out[1].extra[1].first, "tool_responses");
    const auto& rs = out[1].extra[1].second.list_data().items;
    ASSERT_EQ(rs.size(), 2u);
    EXPECT_EQ(rs[0].dict_data().find("name")->str(), "get_weather");
    const chat::Value* resp = rs[0].dict_data().find("response");
    ASSERT_TRUE(resp->is_dict());  // JSON content parsed
    EXPECT_EQ(resp->dict_data().find("temp")->as_int(), 21);
    EXPECT_EQ(rs[1].dict_data().find("name")->str(), "get_time");
    EXPECT_EQ(rs[1].dict_data().find("response")->str(), "12:00");  // not JSON: the text
    EXPECT_EQ(out[2].content, "Thanks!");

    // The last turn: no content follows; more tool messages than calls take their id's name.
    msgs = {{"user", "?"},
            with({"assistant", ""}, "tool_calls", tool_calls_value(json::array({calls[0]}))),
            with({"tool", "1"}, "tool_call_id", chat::Value::data_string("call_1")),
            with({"tool", "2"}, "tool_call_id", chat::Value::data_string("call_9"))};
    const std::vector<chat::Message> last = fold_tool_turns(msgs);
    ASSERT_EQ(last.size(), 2u);
    EXPECT_EQ(last[1].content, "");
    const auto& rl = last[1].extra[1].second.list_data().items;
    ASSERT_EQ(rl.size(), 2u);
    EXPECT_EQ(rl[1].dict_data().find("name")->str(), "call_9");
    EXPECT_EQ(rl[1].dict_data().find("response")->as_int(), 2);
    // Without calls nothing changes.
    const std::vector<chat::Message> plain = {{"user", "a"}, {"assistant", "b"}};
    EXPECT_EQ(fold_tool_turns(plain).size(), 2u);
}

}  // namespace
}  // namespace zinc::server
