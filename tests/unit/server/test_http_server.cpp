// tests/unit/server/test_http_server.cpp — the HTTP server end to end over a FakeEngine (no
// model): routes, status codes and error shapes, auth, the body limit, SSE streams, stop
// strings cancelling the engine request, a client disconnect cancelling it, queue full.
// The tokenizer and chat template are SmolLM2's real ones.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "chat/chat_template.h"
#include "fake_engine.h"
#include "gguf/gguf.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

using nlohmann::json;
using namespace zinc;

namespace {

const char* kReply = "Hello there! The answer is 42. Goodbye.";

struct Model {
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<tokenizer::Tokenizer> tok;
    std::optional<chat::ChatTemplate> tmpl;
};

Model& model() {
    static Model m = [] {
        Model m;
        const char* src = std::getenv("ZINC_SOURCE_DIR");
        auto path = std::filesystem::path(src ? src : ZINC_SOURCE_DIR) / "models" /
                    "SmolLM2-135M-Instruct.Q4_1.gguf";
        auto f = gguf::File::open(path.string());
        if (!f.ok()) return m;
        m.file = std::move(f.value());
        m.tok = std::move(tokenizer::Tokenizer::from_gguf(*m.file).value());
        auto src_t = chat::template_from_gguf(*m.file);
        m.tmpl = chat::ChatTemplate::parse(src_t.value().text).value();
        return m;
    }();
    return m;
}

class HttpServerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (!model().tok) GTEST_SKIP() << "models/SmolLM2-135M-Instruct.Q4_1.gguf missing";
    }
    void TearDown() override {
        if (server_) server_->stop();
        if (thread_.joinable()) thread_.join();
        server_.reset();
        if (engine_) engine_->shutdown();
    }

    void start(test::FakeEngine::Options eo = {}, server::ServerOptions so = {}) {
        const tokenizer::Tokenizer& tok = *model().tok;
        if (eo.reply.empty()) eo.reply = tok.encode(kReply, false, false);
        engine_ = std::make_unique<test::FakeEngine>(eo);
        server::ServedModel sm;
        sm.engine = engine_.get();
        sm.tok = &tok;
        sm.render_chat = [&tok](const std::vector<chat::Message>& msgs,
                                const server::ChatRenderOptions&) -> Result<std::vector<int32_t>> {
            auto text = model().tmpl->apply(msgs, chat::ApplyOptions{});
            if (!text.ok()) return text.error();
            return tok.encode(text.value(), false, true);
        };
        if (hermes_tools_ || !tools_template_.empty()) {
            // tools accepted (not rendered: the reply is scripted anyway)
            sm.render_chat_tools = [r = sm.render_chat](
                                       const std::vector<chat::Message>& msgs, const chat::Value&,
                                       const server::ChatRenderOptions& o) { return r(msgs, o); };
            sm.chat_template_source =
                tools_template_.empty() ? "{% if tools %}<tool_call>{% endif %}" : tools_template_;
        }
        so.host = "127.0.0.1";
        so.port = 0;
        if (so.model_id.empty()) so.model_id = "smol";
        so.heartbeat_ms = 100;
        auto s = server::HttpServer::create(std::move(sm), so);
        ASSERT_TRUE(s.ok()) << s.error().message;
        server_ = std::move(s.value());
        thread_ = std::thread([this] { server_->run(); });
        client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
        client_->set_read_timeout(10, 0);
        for (int i = 0; i < 200 && !client_->Get("/health"); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }

    httplib::Result post(const std::string& path, const json& body, httplib::Headers h = {}) {
        return client_->Post(path.c_str(), h, body.dump(), "application/json");
    }

    static json chat(json extra = json::object()) {
        json b = {{"model", "smol"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
        for (auto& [k, v] : extra.items()) b[k] = v;
        return b;
    }

    // The "data:" payloads of an SSE body, in order.
    static std::vector<std::string> sse_data(const std::string& body) {
        std::vector<std::string> out;
        size_t pos = 0;
        while ((pos = body.find("data: ", pos)) != std::string::npos) {
            size_t end = body.find("\n\n", pos);
            out.push_back(body.substr(pos + 6, end - pos - 6));
            pos = end;
        }
        return out;
    }

    static void expect_error(const httplib::Result& r, int status, const std::string& param = "") {
        ASSERT_TRUE(r) << "no response";
        EXPECT_EQ(r->status, status) << r->body;
        json j = json::parse(r->body, nullptr, false);
        ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
        EXPECT_TRUE(j["error"]["message"].is_string());
        EXPECT_TRUE(j["error"]["type"].is_string());
        if (!param.empty()) {
            EXPECT_EQ(j["error"]["param"], param) << r->body;
        }
    }

    bool hermes_tools_ = false;   // start(): a Hermes tool-calling template
    std::string tools_template_;  // start(): this tool-calling template's source instead
    std::unique_ptr<test::FakeEngine> engine_;
    std::unique_ptr<server::HttpServer> server_;
    std::unique_ptr<httplib::Client> client_;
    std::thread thread_;
};

TEST_F(HttpServerTest, HealthModelsMetrics) {
    start();
    auto h = client_->Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    json j = json::parse(h->body);
    EXPECT_EQ(j["status"], "ok");
    EXPECT_EQ(j["slots"]["idle"], 4);
    EXPECT_EQ(j["kv_blocks"]["total"], 64);
    EXPECT_EQ(j["kv_blocks"]["used"], 0);
    auto m = client_->Get("/v1/models");
    ASSERT_TRUE(m);
    json mj = json::parse(m->body);
    EXPECT_EQ(mj["object"], "list");
    EXPECT_EQ(mj["data"][0]["id"], "smol");
    EXPECT_EQ(json::parse(client_->Get("/v1/models/smol")->body)["id"], "smol");
    expect_error(client_->Get("/v1/models/other"), 404);
    // httplib's logger (which counts the request) runs after the response is written, so the
    // count may land just after the client has read the 404: poll for it (at most ~2 s).
    const std::string want = "zinc_requests_total{endpoint=\"/v1/models\",status=\"404\"} 1";
    std::string body;
    for (int i = 0; i < 100; ++i) {
        auto t = client_->Get("/metrics");
        ASSERT_TRUE(t);
        EXPECT_EQ(t->status, 200);
        body = t->body;
        if (body.find(want) != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_NE(body.find(want), std::string::npos) << body;
}

TEST_F(HttpServerTest, ChatWholeAndStreamed) {
    start();
    auto r = post("/v1/chat/completions", chat({{"max_tokens", 100}}));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
    EXPECT_EQ(j["choices"][0]["message"]["content"], kReply);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    const auto n_reply = static_cast<int>(model().tok->encode(kReply, false, false).size());
    EXPECT_EQ(j["usage"]["completion_tokens"], n_reply);
    EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 3);
    EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());

    // The prompt the engine got is the template's rendering.
    auto subs = engine_->submitted();
    ASSERT_EQ(subs.size(), 1u);
    const std::string prompt = model().tok->decode(subs[0].prompt, true);
    EXPECT_NE(prompt.find("<|im_start|>user\nHi<|im_end|>"), std::string::npos) << prompt;
    EXPECT_EQ(subs[0].top_logprobs, -1);
    EXPECT_EQ(subs[0].max_tokens, 100);

    // max_tokens cuts: finish_reason "length".
    auto l = post("/v1/chat/completions", chat({{"max_tokens", 3}}));
    json lj = json::parse(l->body);
    EXPECT_EQ(lj["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(lj["usage"]["completion_tokens"], 3);

    auto s = post("/v1/chat/completions",
                  chat({{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
    ASSERT_TRUE(s);
    ASSERT_EQ(s->status, 200);
    EXPECT_EQ(s->get_header_value("Content-Type"), "text/event-stream");
    auto data = sse_data(s->body);
    ASSERT_GE(data.size(), 4u);
    EXPECT_EQ(data.back(), "[DONE]");
    std::string text;
    json first = json::parse(data[0]);
    EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
    for (size_t i = 0; i + 2 < data.size(); ++i) {
        json c = json::parse(data[i]);
        EXPECT_EQ(c["object"], "chat.completion.chunk");
        EXPECT_TRUE(c["usage"].is_null());
        const bool last = i + 3 == data.size();
        EXPECT_EQ(c["choices"][0]["finish_reason"].is_null(), !last) << data[i];
        if (c["choices"][0]["delta"].contains("content"))
            text += c["choices"][0]["delta"]["content"].get<std::string>();
    }
    EXPECT_EQ(text, kReply);
    json usage = json::parse(data[data.size() - 2]);
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"]["completion_tokens"], n_reply);
}

// With tools, the streamed deltas (content, delta.tool_calls by index) concatenate to the whole
// response's message, and the calls arrive in pieces as the tokens do.
TEST_F(HttpServerTest, ToolCallsStreamedConcatenateToTheWholeResponse) {
    hermes_tools_ = true;
    test::FakeEngine::Options eo;
    eo.reply = model().tok->encode(
        "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Zürich\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
        "{\"tz\": \"CET\"}}\n</tool_call>",
        false, false);
    start(eo);
    json tools = json::array();
    for (const char* n : {"get_weather", "get_time"})
        tools.push_back({{"type", "function"}, {"function", {{"name", n}}}});
    auto r = post("/v1/chat/completions", chat({{"tools", tools}}));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json m = json::parse(r->body)["choices"][0];
    EXPECT_EQ(m["finish_reason"], "tool_calls");
    EXPECT_EQ(m["message"]["content"], "Checking.");
    ASSERT_EQ(m["message"]["tool_calls"].size(), 2u) << m;
    EXPECT_EQ(m["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Zürich\"}");

    auto s = post("/v1/chat/completions", chat({{"tools", tools}, {"stream", true}}));
    ASSERT_TRUE(s);
    ASSERT_EQ(s->status, 200);
    std::string content, finish;
    json calls = json::array();
    int fragments = 0;
    for (const auto& d : sse_data(s->body)) {
        if (d == "[DONE]") break;
        const json c = json::parse(d)["choices"][0];
        if (c["finish_reason"].is_string()) finish = c["finish_reason"];
        const json& delta = c["delta"];
        if (delta.contains("content")) content += delta["content"].get<std::string>();
        if (!delta.contains("tool_calls")) continue;
        ASSERT_EQ(delta["tool_calls"].size(), 1u) << d;
        const json& tc = delta["tool_calls"][0];
        const size_t k = tc["index"].get<size_t>();
        if (k == calls.size()) {  // a call's first delta
            EXPECT_EQ(tc["type"], "function") << d;
            EXPECT_EQ(tc["id"].get<std::string>().rfind("call_", 0), 0u) << d;
            calls.push_back({{"type", "function"},
                             {"function", {{"name", tc["function"]["name"]}, {"arguments", ""}}}});
        } else {
            ASSERT_EQ(k + 1, calls.size()) << d;
            EXPECT_FALSE(tc.contains("id")) << d;
        }
        auto& a = calls[k]["function"]["arguments"];
        a = a.get<std::string>() + tc["function"]["arguments"].get<std::string>();
        ++fragments;
    }
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_EQ(content, "Checking.");
    json want = m["message"]["tool_calls"];
    for (auto& c : want) c.erase("id");
    EXPECT_EQ(calls, want);
    EXPECT_GT(fragments, 4);  // token by token, not one piece per call
}

// parallel_tool_calls false: one call, the rest of the reply dropped, and its generation stopped
// after the first call (the engine request cancelled long before the scripted reply's end),
// streamed and whole alike.
TEST_F(HttpServerTest, ParallelToolCallsFalseStopsAfterTheFirstCall) {
    hermes_tools_ = true;
    test::FakeEngine::Options eo;
    const std::string first =
        "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Zürich\"}}";
    std::string rest =
        "\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
        "{\"tz\": \"CET\"}}\n</tool_call>";
    for (int i = 0; i < 6; ++i) rest += " More text after the calls.";
    eo.reply = model().tok->encode(first + rest, false, false);
    eo.tokens_per_step = 4;  // the call ends inside an event: the tokens after it are not counted
    const auto n_reply = static_cast<int64_t>(eo.reply.size());
    start(eo);
    json tools = json::array();
    for (const char* n : {"get_weather", "get_time"})
        tools.push_back({{"type", "function"}, {"function", {{"name", n}}}});
    const json body = chat({{"tools", tools}, {"parallel_tool_calls", false}});
    auto r = post("/v1/chat/completions", body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    const json m = j["choices"][0];
    EXPECT_EQ(m["finish_reason"], "tool_calls");
    EXPECT_EQ(m["message"]["content"], "Checking.");
    ASSERT_EQ(m["message"]["tool_calls"].size(), 1u) << m;
    EXPECT_EQ(m["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Zürich\"}");
    EXPECT_LT(j["usage"]["completion_tokens"].get<int64_t>(), n_reply / 2);
    // Exactly the tokens through the one that completes the call (the fake engine sends four an
    // event, and a poll may hold several events: counting must not depend on that).
    int64_t through_call = 0;
    while (model()
               .tok->decode(std::vector<int32_t>(eo.reply.begin(), eo.reply.begin() + through_call))
               .size() < first.size())
        ++through_call;
    EXPECT_NE(through_call % eo.tokens_per_step, 0) << "the call must end inside an event";
    EXPECT_EQ(j["usage"]["completion_tokens"], through_call);
    for (int i = 0; i < 100 && engine_->n_cancelled() < 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(engine_->n_cancelled(), 1u);

    json sb = body;
    sb["stream"] = true;
    sb["stream_options"] = {{"include_usage", true}};
    auto s = post("/v1/chat/completions", sb);
    ASSERT_TRUE(s);
    ASSERT_EQ(s->status, 200);
    std::string content, finish, name, args;
    int n_calls = 0;
    json usage;
    for (const auto& d : sse_data(s->body)) {
        if (d == "[DONE]") break;
        const json chunk = json::parse(d);
        if (chunk["usage"].is_object()) usage = chunk["usage"];
        if (chunk["choices"].empty()) continue;
        const json c = chunk["choices"][0];
        if (c["finish_reason"].is_string()) finish = c["finish_reason"];
        const json& delta = c["delta"];
        if (delta.contains("content")) content += delta["content"].get<std::string>();
        if (!delta.contains("tool_calls")) continue;
        const json& tc = delta["tool_calls"][0];
        EXPECT_EQ(tc["index"], 0) << d;
        if (tc.contains("id")) ++n_calls;
        if (tc["function"].contains("name")) name += tc["function"]["name"].get<std::string>();
        args += tc["function"]["arguments"].get<std::string>();
    }
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_EQ(content, "Checking.");
    EXPECT_EQ(n_calls, 1);
    EXPECT_EQ(name, "get_weather");
    EXPECT_EQ(args, "{\"city\": \"Zürich\"}");
    EXPECT_EQ(usage["completion_tokens"], through_call);  // as the whole response's
    for (int i = 0; i < 100 && engine_->n_cancelled() < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(engine_->n_cancelled(), 2u);
}

// Gemma 4's call markers are control tokens in its vocabulary, which replies leave out: with its
// format and tools, control tokens that do not end the generation are rendered (else the calls
// could not be read); without tools, or with another format, they stay out. SmolLM2's
// <|im_start|> (control, not end-of-generation) stands in for <|tool_call>.
TEST_F(HttpServerTest, Gemma4FormatRendersControlTokensInToolReplies) {
    const tokenizer::Tokenizer& tok = *model().tok;
    const std::vector<int32_t> marker = tok.encode("<|im_start|>", false, true);
    ASSERT_EQ(marker.size(), 1u);
    ASSERT_FALSE(tok.is_eog(marker[0]));
    test::FakeEngine::Options eo;
    eo.reply = tok.encode("Done", false, false);
    eo.reply.push_back(marker[0]);
    for (int32_t t : tok.encode(" ok", false, false)) eo.reply.push_back(t);
    tools_template_ = "{{- '<|tool_call>call:' + name + '{' -}}";
    start(eo);
    const json tools = json::array({{{"type", "function"}, {"function", {{"name", "get_time"}}}}});
    auto content_of = [&](const json& body) {
        auto r = post("/v1/chat/completions", body);
        EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
        return r ? json::parse(r->body)["choices"][0]["message"]["content"] : json();
    };
    EXPECT_EQ(content_of(chat({{"tools", tools}})), "Done<|im_start|> ok");
    EXPECT_EQ(content_of(chat()), "Done ok");
    EXPECT_EQ(content_of(chat({{"tools", tools}, {"tool_choice", "none"}})), "Done ok");
    // Streamed alike.
    auto s = post("/v1/chat/completions", chat({{"tools", tools}, {"stream", true}}));
    ASSERT_TRUE(s);
    std::string streamed;
    for (const auto& d : sse_data(s->body)) {
        if (d == "[DONE]") break;
        const json c = json::parse(d)["choices"][0]["delta"];
        if (c.contains("content") && c["content"].is_string())
            streamed += c["content"].get<std::string>();
    }
    EXPECT_EQ(streamed, "Done<|im_start|> ok");
}

TEST_F(HttpServerTest, StopStringCancelsTheEngineRequest) {
    start();
    auto r = post("/v1/chat/completions", chat({{"stop", {"answer", "zzz"}}}));
    ASSERT_TRUE(r);
    json j = json::parse(r->body);
    EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello there! The ");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    for (int i = 0; i < 100 && engine_->n_cancelled() < 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(engine_->n_cancelled(), 1u);
}

TEST_F(HttpServerTest, CompletionsNLogprobsAndSeeds) {
    start();
    auto r = post(
        "/v1/completions",
        json{{"prompt", {"a", "b"}}, {"n", 2}, {"seed", 7}, {"logprobs", 2}, {"max_tokens", 4}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["object"], "text_completion");
    ASSERT_EQ(j["choices"].size(), 4u);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(j["choices"][i]["index"], i);
        EXPECT_EQ(j["choices"][i]["finish_reason"], "length");
        const json& lp = j["choices"][i]["logprobs"];
        EXPECT_EQ(lp["tokens"].size(), 4u);
        EXPECT_EQ(lp["token_logprobs"].size(), 4u);
        EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
        EXPECT_EQ(lp["text_offset"][0], 0);
    }
    auto subs = engine_->submitted();
    ASSERT_EQ(subs.size(), 4u);
    EXPECT_EQ(subs[0].sampling.seed, 7u);
    EXPECT_EQ(subs[1].sampling.seed, 8u);
    EXPECT_EQ(subs[2].sampling.seed, 7u);
    EXPECT_EQ(subs[0].top_logprobs, 2);
    EXPECT_EQ(j["usage"]["completion_tokens"], 16);

    auto c = post("/v1/chat/completions",
                  chat({{"logprobs", true}, {"top_logprobs", 3}, {"max_tokens", 2}}));
    json cj = json::parse(c->body);
    const json& content = cj["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), 2u);
    EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
    EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
    EXPECT_TRUE(content[0]["bytes"].is_array());
}

TEST_F(HttpServerTest, BadRequestsGetCleanErrorsAndTheServerKeepsServing) {
    server::ServerOptions so;
    so.max_body_bytes = 1 << 20;
    start({}, so);
    expect_error(client_->Post("/v1/chat/completions", "{\"messages\": [", "application/json"),
                 400);
    expect_error(post("/v1/chat/completions", chat({{"temperature", "x"}})), 400, "temperature");
    expect_error(post("/v1/chat/completions", chat({{"messages", json::array()}})), 400,
                 "messages");
    expect_error(
        post("/v1/chat/completions", chat({{"messages", {{{"role", "robot"}, {"content", "x"}}}}})),
        400, "messages[0].role");
    // (another model's name is served by the loaded one unless strict_model; "" never is)
    expect_error(post("/v1/chat/completions", chat({{"model", ""}})), 404, "model");
    expect_error(post("/v1/completions", json{{"prompt", {1, 999999}}}), 400, "prompt[1]");
    expect_error(post("/v1/completions", json{{"prompt", ""}}), 400, "prompt");
    // 256-position context: prompt + max_tokens must fit.
    auto cl = post("/v1/chat/completions", chat({{"max_tokens", 300}}));
    expect_error(cl, 400, "max_tokens");
    EXPECT_EQ(json::parse(cl->body)["error"]["code"], "context_length_exceeded");
    expect_error(client_->Get("/nope"), 404);
    expect_error(client_->Get("/v1/chat/completions"), 405);
    std::string big(2 << 20, 'x');
    expect_error(client_->Post("/v1/chat/completions", big, "application/json"), 413);
    // Unknown top-level fields are ignored.
    auto ok = post("/v1/chat/completions", chat({{"frobnicate", true}, {"max_tokens", 2}}));
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200);
    auto h = client_->Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
}

TEST_F(HttpServerTest, ApiKeys) {
    server::ServerOptions so;
    so.api_keys = {"sk-test"};
    start({}, so);
    expect_error(post("/v1/chat/completions", chat()), 401);
    expect_error(post("/v1/chat/completions", chat(), {{"Authorization", "Bearer wrong"}}), 401);
    expect_error(client_->Get("/v1/models"), 401);
    auto ok = post("/v1/chat/completions", chat({{"max_tokens", 2}}),
                   {{"Authorization", "Bearer sk-test"}});
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200);
    EXPECT_EQ(client_->Get("/health")->status, 200);
}

TEST_F(HttpServerTest, QueueFullIs429WithRetryAfter) {
    test::FakeEngine::Options eo;
    eo.max_queue = 2;
    start(eo);
    engine_->set_paused(true);
    // Two requests wait in the queue (their HTTP calls block on other threads).
    std::vector<std::thread> waiters;
    for (int i = 0; i < 2; ++i)
        waiters.emplace_back([this] {
            httplib::Client c("127.0.0.1", server_->port());
            c.set_read_timeout(10, 0);
            c.Post("/v1/chat/completions", chat({{"max_tokens", 2}}).dump(), "application/json");
        });
    for (int i = 0; i < 400 && engine_->stats().queue_depth < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(engine_->stats().queue_depth, 2);
    auto r = post("/v1/chat/completions", chat());
    expect_error(r, 429);
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    // n=2 needs two slots in the queue: all or nothing.
    engine_->set_paused(false);
    for (auto& t : waiters) t.join();
    EXPECT_EQ(post("/v1/chat/completions", chat({{"max_tokens", 2}}))->status, 200);
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamCancels) {
    test::FakeEngine::Options eo;
    eo.step = std::chrono::microseconds(2000);
    eo.reply.assign(100000 / 1000 * 10, 0);  // long reply; token ids replaced below
    for (size_t i = 0; i < eo.reply.size(); ++i) eo.reply[i] = 1000 + static_cast<int32_t>(i % 50);
    eo.n_ctx = 4096;
    start(eo);
    for (int round = 0; round < 5; ++round) {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(server_->port()));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        const std::string body = chat({{"stream", true}, {"max_tokens", 900}}).dump();
        const std::string req =
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
            "application/json\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
        std::string got;
        char buf[4096];
        while (got.find("\"content\"", got.find("assistant") + 1) == std::string::npos) {
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            ASSERT_GT(n, 0);
            got.append(buf, static_cast<size_t>(n));
        }
        ::close(fd);
    }
    // Every stream's request is cancelled and its blocks freed within a few steps.
    for (int i = 0; i < 400 && (engine_->n_cancelled() < 5 || engine_->stats().kv_blocks_used); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(engine_->n_cancelled(), 5u);
    EXPECT_EQ(engine_->stats().kv_blocks_used, 0);
    auto m = client_->Get("/metrics");
    EXPECT_NE(m->body.find("zinc_client_disconnects_total 5"), std::string::npos);
}

TEST_F(HttpServerTest, TokenizeDetokenize) {
    start();
    auto t = post("/tokenize", json{{"content", "Hello world"}, {"with_pieces", true}});
    ASSERT_TRUE(t);
    ASSERT_EQ(t->status, 200) << t->body;
    json j = json::parse(t->body);
    const auto want = model().tok->encode("Hello world", true, true);
    EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), want);
    EXPECT_EQ(j["pieces"].size(), want.size());
    auto d = post("/detokenize", json{{"tokens", want}});
    EXPECT_EQ(json::parse(d->body)["content"], "Hello world");
    auto m = post("/tokenize", json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
    const std::string rendered =
        model().tok->decode(json::parse(m->body)["tokens"].get<std::vector<int32_t>>(), true);
    EXPECT_NE(rendered.find("<|im_start|>assistant\n"), std::string::npos) << rendered;
    expect_error(post("/detokenize", json{{"tokens", {1, "x"}}}), 400, "tokens[1]");
    expect_error(post("/detokenize", json{{"tokens", {-1}}}), 400, "tokens[0]");
    expect_error(post("/tokenize", json{{"content", 5}}), 400, "content");
}

}  // namespace

// CORS preflights, 405 with Allow on every route, /v1/models `created`, check_listen_address.
TEST_F(HttpServerTest, OptionsCorsAllowAndCreated) {
    start();
    auto r = client_->Options("/v1/chat/completions",
                              {{"Origin", "http://x"}, {"Access-Control-Request-Method", "POST"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 204);
    EXPECT_EQ(r->get_header_value("Allow"), "POST, OPTIONS");
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*");
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "POST, OPTIONS");
    r = client_->Options("/nope");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    r = client_->Delete("/v1/completions");
    expect_error(r, 405);
    EXPECT_EQ(r->get_header_value("Allow"), "POST, OPTIONS");
    r = client_->Post("/metrics", "{}", "application/json");
    expect_error(r, 405);
    EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD, OPTIONS");
    r = client_->Get("/v1/models");
    ASSERT_TRUE(r);
    const int64_t created = json::parse(r->body)["data"][0]["created"].get<int64_t>();
    EXPECT_GT(created, 1700000000);  // the server's start time here (no model file given)
    // The port this server holds cannot be listened on again: one line saying why.
    auto busy = server::check_listen_address("127.0.0.1", server_->port());
    ASSERT_FALSE(busy.ok());
    EXPECT_NE(busy.error().message.find("already in use"), std::string::npos)
        << busy.error().message;
    EXPECT_FALSE(server::check_listen_address("no-such-host.invalid", 1).ok());
}
