// zinc/server/http_server.h — the OpenAI-compatible HTTP server over one Engine: routes, auth,
// body limit, error shapes, SSE streaming, /v1/embeddings, /health, /metrics, /tokenize,
// /detokenize, and the web chat's static files at / and /webchat/* (static_files.h).
//
// HTTP is cpp-httplib (Debian's libcpp-httplib, 0.11): a thread pool where each connection is
// served by one thread for its lifetime, so a stream holds a thread while it runs; the pool is
// sized from ServerOptions::http_threads. JSON is nlohmann-json. Endpoints, parameters, errors,
// limits and metric names are documented in docs/server.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "model/pooling.h"
#include "runtime/evidence.h"
#include "server/completion_request.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace zinc::server {

class Tenancy;

/// Template variables a chat request sets beside its messages.
struct ChatRenderOptions {
    /// chat_template_kwargs.enable_thinking: passed as `enable_thinking` only when set.
    std::optional<bool> enable_thinking;
};

/// Renders a conversation into prompt token ids with the model's chat template (with the
/// generation prompt). An Err is the template's own message (a 400 on "messages").
using ChatRenderer = std::function<Result<std::vector<int32_t>>(
    const std::vector<chat::Message>& messages, const ChatRenderOptions& options)>;

/// As ChatRenderer, with the template's `tools` variable (tool calling; docs/server.md).
using ChatToolsRenderer = std::function<Result<std::vector<int32_t>>(
    const std::vector<chat::Message>& messages, const chat::Value& tools,
    const ChatRenderOptions& options)>;

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                    // 0: any free port (see HttpServer::port())
    std::vector<std::string> api_keys;  // empty: no auth
    /// Tenants (server/tenancy.h): keys name the tenant, quotas, usage; null: one default
    /// tenant and `api_keys` as above.
    std::shared_ptr<Tenancy> tenancy;
    size_t max_body_bytes = 8u << 20;   // larger bodies get 413
    int http_threads = 0;               // connection threads; 0: 2 * max(parallel, 16) + 32
    std::string model_id;               // the name /v1/models lists and responses carry
    /// A request naming another model: false (default, as Ollama and llama.cpp's server) serves
    /// it with the loaded model, and the response's `model` says which one answered; true
    /// (--strict-model) refuses it with 404 model_not_found. "model": "" is always a 404.
    bool strict_model = false;
    engine::SamplerOptions sampling;    // defaults for fields a request leaves out (not seed)
    /// Seed for requests that give none (choice j: seed + j); absent: a random one each.
    std::optional<uint64_t> default_seed;
    RequestLimits limits;
    /// CORS: the Access-Control-Allow-Origin value of every response and of OPTIONS preflight
    /// answers ("*" by default, as llama.cpp's server; a browser page of any origin may call the
    /// API, which still needs the API key when keys are set). Empty: no CORS headers (browsers
    /// then refuse cross-origin calls); preflights are still answered 204 with Allow.
    std::string cors_origin = "*";
    int heartbeat_ms = 2000;   // idle streams get an SSE comment this often (finds gone clients)
    int idle_keepalive_s = 5;  // an idle keep-alive connection is closed after this long
};

/// What the server serves. Everything must outlive the HttpServer.
struct ServedModel {
    engine::Engine* engine = nullptr;
    const tokenizer::Tokenizer* tok = nullptr;
    ChatRenderer render_chat;
    /// Optional: rendering with tools; empty: requests with tools are a 400.
    ChatToolsRenderer render_chat_tools;
    /// The chat template's source, to tell how the model writes tool calls (tool_calls.h).
    std::string chat_template_source;
    /// Stop strings the template implies (e.g. ChatML markers as text), added to every chat
    /// request's own.
    std::vector<std::string> chat_stop_strings;
    /// /v1/embeddings: the pooling of the served model's hidden states (the file's
    /// <arch>.pooling_type, or zinc serve --pooling; mean by default) and their width (n_embd);
    /// 0: the route answers 400 (no model to embed with).
    model::Pooling pooling = model::Pooling::Mean;
    int64_t embedding_dim = 0;
    /// Bytes of one KV block (all layers), reported by /health; 0: unknown.
    size_t kv_block_bytes = 0;
    /// The Runner's evidence (runtime/evidence.h): an "evidence" object in /health and
    /// zinc_evidence_* series in /metrics; null: neither.
    std::shared_ptr<runtime::Evidence> evidence;
    /// /health's "device_memory": the Runner's device bytes as JSON (runtime/checked_runner.h
    /// device_memory_json: weights, KV pool, scratch; "null" on the CPU tier); empty: left out.
    std::string device_memory_json;
    /// `created` of /v1/models (Unix seconds): the model file's modification time; 0: the time
    /// the server was created.
    int64_t created = 0;
};

/// Why host:port cannot be listened on, as one line ("127.0.0.1:8080 is already in use by
/// another program; stop it or choose another --port (--port 0 picks a free one)"), or ok when a
/// probe socket binds it. Used before the model is loaded so a busy port fails fast.
Result<void> check_listen_address(const std::string& host, int port);

class HttpServer {
  public:
    /// Set up the routes and bind host:port. Error: the address cannot be bound (in use, bad
    /// host), invalid options.
    static Result<std::unique_ptr<HttpServer>> create(ServedModel model, ServerOptions opts);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    /// The bound port (the chosen one when ServerOptions::port was 0).
    int port() const;
    /// Serve until stop(). Returns false when the accept loop failed.
    bool run();
    /// Stop accepting and end the accept loop; open streams are cut. Thread-safe, idempotent;
    /// may be called before run().
    void stop();
    /// Wait until every open stream has written its end (after Engine::shutdown() they all end
    /// within a poll), or `timeout` passes. Returns whether all ended. Call before stop() so
    /// clients get a complete body ending in `data: [DONE]` rather than a cut connection.
    bool drain(std::chrono::milliseconds timeout);
    /// Refuse new work while what is in flight finishes: completion requests get 503
    /// `shutting_down` (with Retry-After and Connection: close), GET /health answers 503 with
    /// status "draining". Thread-safe, idempotent; the listener stays open until stop().
    void begin_drain();
    /// Completion requests in flight: open streams plus whole requests not yet answered.
    int in_flight() const;

  private:
    struct Impl;
    explicit HttpServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace zinc::server
