// tests/unit/server/test_request_parsing.cpp — request validation (JSON paths, types, ranges,
// OpenAI defaults), error shapes, SSE framing, auth and the metrics text, without HTTP.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/completion_request.h"
#include "server/metrics.h"
#include "server/sse.h"

using nlohmann::json;
using namespace zinc::server;

namespace {

zinc::engine::SamplerOptions defaults() {
    zinc::engine::SamplerOptions s;
    s.temperature = 0.8f;
    s.top_k = 40;
    return s;
}

json chat_body(json extra = json::object()) {
    json b = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    for (auto& [k, v] : extra.items()) b[k] = v;
    return b;
}

// The error a chat body gives (fails the test when it parses).
ApiError chat_error(const json& body) {
    auto r = parse_chat_request(body, defaults());
    EXPECT_FALSE(r.ok()) << body.dump();
    return r.ok() ? ApiError{} : r.error();
}

ApiError completion_error(const json& body) {
    auto r = parse_completion_request(body, defaults());
    EXPECT_FALSE(r.ok()) << body.dump();
    return r.ok() ? ApiError{} : r.error();
}

}  // namespace

TEST(ServerParse, MalformedJsonNamesTheByte) {
    auto r = parse_json_body("{\"model\": \"m\", \"messages\": [}");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().code.value_or(""), "invalid_json");
    EXPECT_NE(r.error().message.find("byte offset 29"), std::string::npos) << r.error().message;
    for (const char* bad : {"", "[1,2]", "\"x\"", "12", "{\"a\":1", "{\"a\":\"\xff\"}"}) {
        auto b = parse_json_body(bad);
        EXPECT_FALSE(b.ok()) << bad;
        if (!b.ok()) {
            EXPECT_EQ(b.error().status, 400);
        }
    }
    EXPECT_TRUE(parse_json_body("  {\"a\": 1}\n").ok());
}

TEST(ServerParse, DeepNestingIsAnErrorOrValueNotACrash) {
    std::string deep(100000, '[');
    auto r = parse_json_body(deep);
    EXPECT_FALSE(r.ok());
    // Nesting past 64 levels is refused at parse time (a recursive walk of such a value, e.g.
    // to describe it in an error message, overflowed the stack at ~60,000 levels).
    std::string too_deep = "{\"x\":" + std::string(5000, '[') + std::string(5000, ']') + "}";
    auto d = parse_json_body(too_deep);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().status, 400);
    EXPECT_NE(d.error().message.find("deeper than 64 levels"), std::string::npos) << d.error().message;
    std::string ok = "{\"x\":" + std::string(60, '[') + std::string(60, ']') + "}";
    auto b = parse_json_body(ok);
    ASSERT_TRUE(b.ok());
    auto c = parse_chat_request(b.value(), defaults());
    EXPECT_FALSE(c.ok());  // no messages
}

TEST(ServerParse, ChatDefaultsAndFields) {
    auto r = parse_chat_request(chat_body(), defaults());
    ASSERT_TRUE(r.ok());
    const CompletionRequest& c = r.value();
    EXPECT_EQ(c.model, "m");
    EXPECT_EQ(c.n, 1);
    EXPECT_FALSE(c.max_tokens);
    EXPECT_FLOAT_EQ(c.sampling.temperature, 0.8f);
    EXPECT_EQ(c.sampling.top_k, 40);
    EXPECT_FALSE(c.seed);
    ASSERT_EQ(c.messages.size(), 1u);
    EXPECT_EQ(c.messages[0].role, "user");
    EXPECT_EQ(c.messages[0].content, "hi");

    auto f = parse_chat_request(
        chat_body({{"temperature", 0},
                   {"top_p", 0.5},
                   {"top_k", -1},
                   {"min_p", 0.1},
                   {"seed", 42},
                   {"n", 3},
                   {"max_tokens", 7},
                   {"stop", "END"},
                   {"presence_penalty", 1.5},
                   {"frequency_penalty", -1},
                   {"logprobs", true},
                   {"top_logprobs", 5},
                   {"stream", true},
                   {"stream_options", {{"include_usage", true}}},
                   {"user", "u1"},
                   {"some_vendor_field", {1, 2, 3}}}),  // unknown: ignored
        defaults());
    ASSERT_TRUE(f.ok()) << f.error().message;
    const CompletionRequest& g = f.value();
    EXPECT_FLOAT_EQ(g.sampling.temperature, 0.0f);
    EXPECT_FLOAT_EQ(g.sampling.top_p, 0.5f);
    EXPECT_EQ(g.sampling.top_k, 0);
    EXPECT_FLOAT_EQ(g.sampling.min_p, 0.1f);
    EXPECT_EQ(g.seed.value(), 42u);
    EXPECT_EQ(g.n, 3);
    EXPECT_EQ(g.max_tokens.value(), 7);
    EXPECT_EQ(g.max_tokens_param, "max_tokens");
    EXPECT_EQ(g.stop, std::vector<std::string>{"END"});
    EXPECT_FLOAT_EQ(g.sampling.presence_penalty, 1.5f);
    EXPECT_FLOAT_EQ(g.sampling.frequency_penalty, -1.0f);
    EXPECT_TRUE(g.logprobs);
    EXPECT_EQ(g.top_logprobs, 5);
    EXPECT_TRUE(g.stream);
    EXPECT_TRUE(g.include_usage);
    EXPECT_EQ(g.user, "u1");

    // max_completion_tokens wins over max_tokens; nulls mean "default"; integral floats count.
    auto m = parse_chat_request(
        chat_body({{"max_tokens", 5}, {"max_completion_tokens", 9.0}, {"temperature", nullptr}}),
        defaults());
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m.value().max_tokens.value(), 9);
    EXPECT_EQ(m.value().max_tokens_param, "max_completion_tokens");
    EXPECT_FLOAT_EQ(m.value().sampling.temperature, 0.8f);
}

TEST(ServerParse, WrongTypesNameTheJsonPath) {
    struct Case {
        json extra;
        std::string param;
    };
    const Case cases[] = {
        {{{"temperature", "hot"}}, "temperature"},
        {{{"max_tokens", 1.5}}, "max_tokens"},
        {{{"max_tokens", true}}, "max_tokens"},
        {{{"n", "2"}}, "n"},
        {{{"stream", 1}}, "stream"},
        {{{"stop", 5}}, "stop"},
        {{{"stop", {"a", 3}}}, "stop[1]"},
        {{{"seed", "x"}}, "seed"},
        {{{"logprobs", "yes"}}, "logprobs"},
        {{{"stream", true}, {"stream_options", {{"include_usage", "no"}}}},
         "stream_options.include_usage"},
        {{{"messages", "hi"}}, "messages"},
        {{{"messages", {42}}}, "messages[0]"},
        {{{"messages", {{{"role", 1}, {"content", "x"}}}}}, "messages[0].role"},
        {{{"messages", {{{"role", "user"}, {"content", 3}}}}}, "messages[0].content"},
        {{{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", {1}}}}}},
         "messages[1].content[0]"},
        {{{"user", 7}}, "user"},
        {{{"model", json::object()}}, "model"},
    };
    for (const auto& c : cases) {
        ApiError e = chat_error(chat_body(c.extra));
        EXPECT_EQ(e.status, 400) << c.extra.dump();
        EXPECT_EQ(e.type, "invalid_request_error");
        EXPECT_EQ(e.param.value_or("<none>"), c.param) << c.extra.dump() << " -> " << e.message;
        EXPECT_NE(e.message.find("'" + c.param + "'"), std::string::npos) << e.message;
    }
}

TEST(ServerParse, OutOfRangeAndSemanticErrors) {
    struct Case {
        json extra;
        std::string param;
    };
    const Case cases[] = {
        {{{"temperature", 2.5}}, "temperature"},
        {{{"temperature", -0.1}}, "temperature"},
        {{{"top_p", -0.01}}, "top_p"},
        {{{"top_p", 1.01}}, "top_p"},
        {{{"min_p", -1}}, "min_p"},
        {{{"top_k", -2}}, "top_k"},
        {{{"presence_penalty", 3}}, "presence_penalty"},
        {{{"frequency_penalty", -2.5}}, "frequency_penalty"},
        {{{"n", 0}}, "n"},
        {{{"n", 1000}}, "n"},
        {{{"max_tokens", 0}}, "max_tokens"},
        {{{"max_completion_tokens", -5}}, "max_completion_tokens"},
        {{{"top_logprobs", 3}}, "top_logprobs"},  // without logprobs
        {{{"logprobs", true}, {"top_logprobs", 21}}, "top_logprobs"},
        {{{"stream_options", {{"include_usage", true}}}}, "stream_options"},  // without stream
        {{{"messages", json::array()}}, "messages"},
        {{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, "messages[0].role"},
        {{{"messages", {{{"content", "x"}}}}}, "messages[0].role"},
        {{{"messages", {{{"role", "user"}}}}}, "messages[0].content"},
        {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
         "messages[0].content[0].type"},
        {{{"tools", {{{"type", "function"}}}}}, "tools[0].function"},
        {{{"tool_choice", "required"}}, "tool_choice"},  // without tools
        {{{"response_format", {{"type", "xml"}}}}, "response_format.type"},
        {{{"response_format",
           {{"type", "json_schema"},
            {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}}},
         "response_format.json_schema.schema.pattern"},
        {{{"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "integer"}}}}, "json_schema"},
        {{{"logit_bias", {{"50256", -100}}}}, "logit_bias"},
        {{{"stop", std::vector<std::string>(17, "x")}}, "stop"},
    };
    for (const auto& c : cases) {
        ApiError e = chat_error(chat_body(c.extra));
        EXPECT_EQ(e.status, 400) << c.extra.dump();
        EXPECT_EQ(e.param.value_or("<none>"), c.param) << c.extra.dump() << " -> " << e.message;
    }
    ApiError missing = chat_error(json{{"model", "m"}});
    EXPECT_EQ(missing.param.value_or(""), "messages");
}

TEST(ServerParse, ChatContentForms) {
    auto r = parse_chat_request(
        chat_body({{"messages",
                    {{{"role", "developer"}, {"content", "be brief"}},
                     {{"role", "user"},
                      {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
                     {{"role", "assistant"}, {"content", nullptr}},
                     {{"role", "user"}, {"content", ""}, {"name", "bob"}}}}}),
        defaults());
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto& m = r.value().messages;
    ASSERT_EQ(m.size(), 4u);
    EXPECT_EQ(m[0].role, "system");
    EXPECT_EQ(m[1].content, "ab");
    EXPECT_EQ(m[2].role, "assistant");
    EXPECT_EQ(m[2].content, "");
    EXPECT_EQ(m[3].content, "");
}

TEST(ServerParse, CompletionPromptForms) {
    auto s = parse_completion_request(json{{"prompt", "hello"}}, defaults());
    ASSERT_TRUE(s.ok());
    ASSERT_EQ(s.value().prompts.size(), 1u);
    EXPECT_FALSE(s.value().prompts[0].is_tokens);
    EXPECT_EQ(s.value().prompts[0].text, "hello");
    EXPECT_FALSE(s.value().logprobs);

    auto t = parse_completion_request(json{{"prompt", {1, 2, 3}}, {"logprobs", 2}}, defaults());
    ASSERT_TRUE(t.ok());
    ASSERT_EQ(t.value().prompts.size(), 1u);
    EXPECT_TRUE(t.value().prompts[0].is_tokens);
    EXPECT_EQ(t.value().prompts[0].tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_TRUE(t.value().logprobs);
    EXPECT_EQ(t.value().top_logprobs, 2);

    auto l = parse_completion_request(json{{"prompt", {"a", "b"}}}, defaults());
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l.value().prompts.size(), 2u);
    EXPECT_EQ(l.value().prompts[1].path, "prompt[1]");
    auto ll = parse_completion_request(json{{"prompt", {{1, 2}, {3}}}}, defaults());
    ASSERT_TRUE(ll.ok());
    EXPECT_EQ(ll.value().prompts[1].tokens, std::vector<int32_t>{3});

    EXPECT_EQ(completion_error(json::object()).param.value_or(""), "prompt");
    EXPECT_EQ(completion_error(json{{"prompt", 5}}).param.value_or(""), "prompt");
    EXPECT_EQ(completion_error(json{{"prompt", json::array()}}).param.value_or(""), "prompt");
    EXPECT_EQ(completion_error(json{{"prompt", {1, "x"}}}).param.value_or(""), "prompt[1]");
    EXPECT_EQ(completion_error(json{{"prompt", {1, -4}}}).param.value_or(""), "prompt[1]");
    EXPECT_EQ(completion_error(json{{"prompt", {"a", 3}}}).param.value_or(""), "prompt[1]");
    EXPECT_EQ(completion_error(json{{"prompt", {{1}, {2, "z"}}}}).param.value_or(""), "prompt[1][1]");
    EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"logprobs", 30}}).param.value_or(""), "logprobs");
    EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"logprobs", true}}).param.value_or(""), "logprobs");
    EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"echo", true}}).param.value_or(""), "echo");
    EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"best_of", 3}}).param.value_or(""), "best_of");
    EXPECT_TRUE(parse_completion_request(json{{"prompt", "x"}, {"best_of", 1}, {"echo", false}},
                                         defaults()).ok());
}

TEST(ServerErrors, OpenAIShape) {
    ApiError e = bad_request("bad thing", std::string("messages[0].role"), std::string("invalid_value"));
    json j = json::parse(error_body(e));
    ASSERT_TRUE(j.contains("error"));
    EXPECT_EQ(j["error"]["message"], "bad thing");
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["param"], "messages[0].role");
    EXPECT_EQ(j["error"]["code"], "invalid_value");
    json n = json::parse(error_body(unauthorized()));
    EXPECT_TRUE(n["error"]["param"].is_null());
    EXPECT_EQ(unauthorized().status, 401);
    EXPECT_EQ(body_too_large(8).status, 413);
    EXPECT_EQ(queue_full("q").status, 429);
    EXPECT_GT(queue_full("q").retry_after_s, 0);
    EXPECT_EQ(shutting_down().status, 503);
    EXPECT_EQ(model_not_found("x").status, 404);
    EXPECT_EQ(context_length_exceeded("m", "max_tokens").code.value_or(""), "context_length_exceeded");
    // Invalid UTF-8 in a message never breaks the body.
    json u = json::parse(error_body(bad_request(std::string("bad \xff byte"))));
    EXPECT_EQ(u["error"]["message"], "bad \xef\xbf\xbd byte");
}

TEST(ServerSse, Framing) {
    EXPECT_EQ(sse_event("{\"a\":1}"), "data: {\"a\":1}\n\n");
    EXPECT_EQ(sse_event("a\nb"), "data: a\ndata: b\n\n");
    EXPECT_EQ(sse_event("a\r\nb\rc"), "data: a\ndata: b\ndata: c\n\n");
    EXPECT_EQ(sse_event(""), "data: \n\n");
    EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
    EXPECT_EQ(sse_comment("keep\nalive"), ": keep alive\n\n");
}

TEST(ServerAuth, Keys) {
    const std::vector<std::string> keys = {"sk-one", "sk-two"};
    EXPECT_TRUE(api_key_ok({}, "", ""));
    EXPECT_TRUE(api_key_ok(keys, "Bearer sk-one", ""));
    EXPECT_TRUE(api_key_ok(keys, "bearer  sk-two ", ""));
    EXPECT_TRUE(api_key_ok(keys, "", "sk-two"));
    EXPECT_FALSE(api_key_ok(keys, "Bearer sk-on", ""));
    EXPECT_FALSE(api_key_ok(keys, "Bearer sk-one1", ""));
    EXPECT_FALSE(api_key_ok(keys, "Basic sk-one", ""));
    EXPECT_FALSE(api_key_ok(keys, "Bearer ", ""));
    EXPECT_FALSE(api_key_ok(keys, "", ""));
    EXPECT_TRUE(route_needs_key("/v1/chat/completions"));
    EXPECT_TRUE(route_needs_key("/tokenize"));
    EXPECT_FALSE(route_needs_key("/health"));
    EXPECT_FALSE(route_needs_key("/metrics"));
}

TEST(ServerMetrics, HistogramIsCumulative) {
    Histogram h({0.1, 1.0});
    h.observe(0.05);
    h.observe(0.1);  // on the bound: counted in le="0.1"
    h.observe(0.5);
    h.observe(7);
    std::string out;
    h.render("x", out);
    EXPECT_NE(out.find("x_bucket{le=\"0.1\"} 2\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_count 4\n"), std::string::npos) << out;
    EXPECT_NE(out.find("x_sum 7.65\n"), std::string::npos) << out;
}

TEST(ServerMetrics, ExpositionText) {
    Metrics m;
    m.count_request("/v1/chat/completions", 200);
    m.count_request("/v1/chat/completions", 200);
    m.count_request("/v1/chat/completions", 400);
    m.count_tokens(10, 5);
    m.observe_ttft(0.2);
    zinc::engine::EngineStats st;
    st.kv_blocks_total = 100;
    st.kv_blocks_used = 25;
    st.kv_blocks_free = 70;
    st.kv_blocks_cached = 5;
    st.queue_depth = 3;
    st.prefix_hits_blocks = 11;
    st.prefix_miss_evicted = 2;
    const std::string t = m.render(st);
    for (const char* want :
         {"zinc_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2\n",
          "zinc_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1\n",
          "zinc_prompt_tokens_total 10\n", "zinc_generation_tokens_total 5\n",
          "zinc_time_to_first_token_seconds_count 1\n", "zinc_queue_depth 3\n",
          "zinc_kv_blocks{state=\"used\"} 25\n", "zinc_kv_blocks{state=\"cached\"} 5\n",
          "zinc_kv_usage_ratio 0.25\n", "zinc_prefix_cache_hits_total 11\n",
          "zinc_prefix_cache_misses_total{reason=\"evicted\"} 2\n",
          "# TYPE zinc_inter_token_latency_seconds histogram\n",
          "# TYPE zinc_time_per_output_token_seconds histogram\n"})
        EXPECT_NE(t.find(want), std::string::npos) << want;
    // Every sample line belongs to a family declared with # TYPE before it.
    std::string declared;
    size_t pos = 0;
    while (pos < t.size()) {
        size_t end = t.find('\n', pos);
        std::string line = t.substr(pos, end - pos);
        pos = end + 1;
        if (line.rfind("# TYPE ", 0) == 0) {
            declared = line.substr(7, line.find(' ', 7) - 7);
        } else if (line[0] != '#') {
            EXPECT_EQ(line.rfind(declared, 0), 0u) << line;
        }
    }
}

TEST(ServerParse, TopPZeroAndAnEmptyModelAreKept) {
    // top_p 0 is OpenAI's "only the most likely token" (the sampler keeps one candidate).
    auto r = parse_chat_request(chat_body({{"top_p", 0}}), defaults());
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value().sampling.top_p, 0.0f);
    // "model": "" is given (and then not the served id); an absent model is not.
    auto e = parse_chat_request(chat_body({{"model", ""}}), defaults());
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE(e.value().has_model);
    EXPECT_EQ(e.value().model, "");
    json no_model = chat_body();
    no_model.erase("model");
    auto a = parse_chat_request(no_model, defaults());
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(a.value().has_model);
}
