// zinc/server/http_server.cpp — see http_server.h. Routes, auth, body limit, error shapes,
// /health, /metrics, /v1/models, /tokenize, /detokenize, the web chat's files (/, /webchat/*);
// the completion endpoints are in completion_handler.cpp.
#include "server/http_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <string_view>
#include <thread>

#include "server/auth.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/serving_context.h"
#include "server/static_files.h"
#include "server/tenancy.h"

namespace zinc::server {

using nlohmann::json;

std::shared_ptr<const engine::GrammarVocab> ServingContext::grammar_vocab() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!grammar_vocab_) {
        const tokenizer::Tokenizer& tok = *model.tok;
        std::vector<std::string> pieces(static_cast<size_t>(tok.n_vocab()));
        std::vector<int32_t> eog;
        for (int32_t id = 0; id < tok.n_vocab(); ++id) {
            pieces[static_cast<size_t>(id)] = tok.token_to_piece(id, false);
            if (tok.is_eog(id)) eog.push_back(id);
        }
        grammar_vocab_ = std::make_shared<engine::GrammarVocab>(std::move(pieces), std::move(eog));
    }
    return grammar_vocab_;
}

Result<std::shared_ptr<const engine::GrammarConstraint>> ServingContext::grammar_constraint(
    const std::string& text, const std::vector<engine::GrammarTrigger>& triggers) {
    std::string key;
    for (const auto& t : triggers) key += (t.at_start ? "^" : "~") + t.text + '\0';
    key += '\0' + text;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < grammars_.size(); ++i) {
            if (grammars_[i].first != key) continue;
            auto hit = grammars_[i];
            grammars_.erase(grammars_.begin() + static_cast<std::ptrdiff_t>(i));
            grammars_.push_back(hit);
            return hit.second;
        }
    }
    auto g = engine::parse_grammar(text);
    if (!g.ok()) return g.error();
    auto c = engine::make_grammar_constraint(std::move(g.value()), grammar_vocab(), triggers);
    std::lock_guard<std::mutex> lock(mu_);
    if (grammars_.size() >= kGrammarsKept) grammars_.erase(grammars_.begin());
    grammars_.emplace_back(key, c);
    return c;
}

uint64_t ServingContext::random_u64() {
    std::lock_guard<std::mutex> lk(mu_);
    return rng_();
}

std::string ServingContext::new_id(const char* prefix) {
    uint64_t a, b;
    {
        std::lock_guard<std::mutex> lk(mu_);
        a = rng_();
        b = rng_();
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b & 0xffffffffull));
    return std::string(prefix) + buf;
}

void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    res.set_content(error_body(e), "application/json");
}

void send_json(httplib::Response& res, const json& j, int status) {
    res.status = status;
    res.set_content(dump(j), "application/json");
}

namespace {

// Routes with their own label in zinc_requests_total; anything else counts as "other" so a
// scanner cannot grow the label set.
std::string endpoint_label(const std::string& path) {
    static const char* const known[] = {
        "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize",
        "/detokenize"};
    for (const char* k : known)
        if (path == k) return k;
    if (path.rfind("/v1/models/", 0) == 0) return "/v1/models";
    if (path == "/" || path.rfind("/webchat/", 0) == 0) return "/webchat";
    if (path == "/v1/usage" || path.rfind("/v1/usage/", 0) == 0) return "/v1/usage";
    return "other";
}

// Every route and the methods it answers (OPTIONS, the CORS preflight, on all of them).
struct Route {
    const char* pattern;  // httplib regex
    const char* path;     // as matched literally (the /v1/models/{id} prefix for the regex)
    const char* allow;    // the Allow header of a 405 / OPTIONS answer
};
constexpr Route kRoutes[] = {
    {"/v1/chat/completions", "/v1/chat/completions", "POST, OPTIONS"},
    {"/v1/completions", "/v1/completions", "POST, OPTIONS"},
    {"/v1/embeddings", "/v1/embeddings", "POST, OPTIONS"},
    {"/tokenize", "/tokenize", "POST, OPTIONS"},
    {"/detokenize", "/detokenize", "POST, OPTIONS"},
    {"/v1/models", "/v1/models", "GET, HEAD, OPTIONS"},
    {"/v1/models/(.+)", "/v1/models/", "GET, HEAD, OPTIONS"},
    {"/health", "/health", "GET, HEAD, OPTIONS"},
    {"/metrics", "/metrics", "GET, HEAD, OPTIONS"},
    {"/v1/usage", "/v1/usage", "GET, HEAD, OPTIONS"},
    {"/v1/usage/(.+)", "/v1/usage/", "GET, HEAD, OPTIONS"},
    {"/", "/", "GET, HEAD, OPTIONS"},  // the web chat (static_files.h)
    {"/webchat/(.+)", "/webchat/", "GET, HEAD, OPTIONS"},
};

// The route a path belongs to, or nullptr.
const Route* route_of(const std::string& path) {
    for (const Route& r : kRoutes) {
        const std::string_view p = r.path;
        if (p.size() > 1 && p.back() == '/' ? path.size() > p.size() && path.rfind(p, 0) == 0
                                            : path == p)
            return &r;
    }
    return nullptr;
}

// Answer a CORS preflight (or a plain OPTIONS) on a known route: 204 with Allow, and when CORS
// is on the Access-Control-Allow-* headers (requested headers echoed, else the ones we read).
void answer_options(const ServerOptions& o, const Route& r, const httplib::Request& req,
                    httplib::Response& res) {
    res.status = 204;
    res.set_header("Allow", r.allow);
    if (o.cors_origin.empty()) return;
    res.set_header("Access-Control-Allow-Methods", r.allow);
    const std::string asked = req.get_header_value("Access-Control-Request-Headers");
    res.set_header("Access-Control-Allow-Headers",
                   asked.empty() ? "Authorization, Content-Type, X-Api-Key" : asked);
    res.set_header("Access-Control-Max-Age", "86400");
}

}  // namespace

Result<void> check_listen_address(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    const std::string where = host + ":" + std::to_string(port);
    if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
        return make_error("cannot listen on " + where + ": the host does not resolve (" +
                          gai_strerror(rc) + "); expected an address such as 127.0.0.1 or 0.0.0.0");
    int err = 0;
    for (addrinfo* a = res; a; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int yes = 1;  // as the server's own socket (SO_REUSEADDR, no SO_REUSEPORT)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        const bool ok = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
        err = ok ? 0 : errno;
        close(fd);
        if (ok) break;
    }
    freeaddrinfo(res);
    if (err == 0) return {};
    if (err == EADDRINUSE)
        return make_error("cannot listen on " + where +
                          ": the port is already in use (another zinc serve or program listens "
                          "there); stop it or choose another --port (--port 0 picks a free one)");
    if (err == EADDRNOTAVAIL)
        return make_error("cannot listen on " + where +
                          ": not an address of this machine; expected one of its addresses, "
                          "127.0.0.1 or 0.0.0.0");
    if (err == EACCES)
        return make_error("cannot listen on " + where +
                          ": permission denied (ports below 1024 need privileges); choose "
                          "another --port");
    return make_error("cannot listen on " + where + ": " + std::strerror(err));
}

struct HttpServer::Impl {
    Impl(ServedModel m, ServerOptions o) : ctx(std::move(m), std::move(o)) {}
    ServingContext ctx;
    httplib::Server http;
    int port = 0;

    void setup_routes();
    void health(httplib::Response& res);
    void models(const httplib::Request& req, httplib::Response& res);
    void tokenize(const httplib::Request& req, httplib::Response& res);
    void detokenize(const httplib::Request& req, httplib::Response& res);
    json model_card() const;
};

json HttpServer::Impl::model_card() const {
    const engine::EngineOptions& eo = ctx.model.engine->options();
    return {{"id", ctx.opts.model_id},
            {"object", "model"},
            {"created", ctx.model.created},
            {"owned_by", "zinc"},
            {"max_model_len", eo.n_ctx},
            // zinc's extension: the template reads chat_template_kwargs.enable_thinking
            // (Qwen3-style thinking models), so a client may offer a thinking switch.
            {"zinc",
             {{"thinking_toggle",
               ctx.model.chat_template_source.find("enable_thinking") != std::string::npos}}}};
}

void HttpServer::Impl::health(httplib::Response& res) {
    const engine::EngineStats st = ctx.model.engine->stats();
    const engine::EngineOptions& eo = ctx.model.engine->options();
    const bool draining = ctx.draining.load();
    json j = {
        {"status", draining ? "draining" : "ok"},
        {"model", ctx.opts.model_id},
        {"slots", {{"total", eo.n_parallel}, {"busy", st.slots_busy}, {"idle", st.slots_idle}}},
        {"queue_depth", st.queue_depth},
        {"max_queue", eo.max_queue},
        {"n_ctx", eo.n_ctx},
        {"kv_blocks",
         {{"total", st.kv_blocks_total},
          {"used", st.kv_blocks_used},
          {"free", st.kv_blocks_free},
          {"cached", st.kv_blocks_cached},
          {"block_size", eo.block_size},
          {"bytes_per_block", ctx.model.kv_block_bytes}}},
        {"prefix_cache", eo.prefix_cache},
        {"requests", {{"finished", st.requests_finished}, {"cancelled", st.requests_cancelled}}}};
    if (ctx.model.evidence)  // what ran where (runtime/evidence.h, docs/runtime.md)
        j["evidence"] = json::parse(runtime::evidence_json(ctx.model.evidence->snapshot()));
    if (!ctx.model.device_memory_json.empty())
        j["device_memory"] = json::parse(ctx.model.device_memory_json);
    // A draining server is not a place for new requests: a health checker takes it out.
    send_json(res, j, draining ? 503 : 200);
}

void HttpServer::Impl::models(const httplib::Request& req, httplib::Response& res) {
    if (req.matches.size() >= 2) {
        const std::string id = req.matches[1];
        if (id != ctx.opts.model_id) return send_error(res, model_not_found(id));
        return send_json(res, model_card());
    }
    send_json(res, json{{"object", "list"}, {"data", json::array({model_card()})}});
}

void HttpServer::Impl::tokenize(const httplib::Request& req, httplib::Response& res) {
    auto body = parse_json_body(req.body);
    if (!body.ok()) return send_error(res, body.error());
    const json& b = body.value();
    FieldReader r(b, "");
    bool add_special = true, with_pieces = false, parse_special = true;
    r.get_bool("add_special", add_special);
    r.get_bool("with_pieces", with_pieces);
    r.get_bool("parse_special", parse_special);  // llama.cpp's field; text only
    std::string text;
    std::vector<int32_t> ids;
    const tokenizer::Tokenizer& tok = *ctx.model.tok;
    if (r.find("messages")) {
        // The prompt a chat request with these messages would get (template + generation prompt).
        auto cr = parse_chat_request(json{{"messages", b["messages"]}}, ctx.opts.sampling,
                                     ctx.opts.limits);
        if (!cr.ok()) return send_error(res, cr.error());
        auto t = ctx.model.render_chat(cr.value().messages, ChatRenderOptions{});
        if (!t.ok())
            return send_error(
                res, bad_request("the chat template failed on these messages: " + t.error().message,
                                 std::string("messages")));
        ids = std::move(t.value());
    } else {
        const char* key = r.find("content") ? "content" : "prompt";
        if (!r.get_string(key, text) && !r.error())
            r.fail(invalid_value("content", "is required (a string), or give 'messages'"));
        if (r.error()) return send_error(res, *r.error());
        ids = tok.encode(text, add_special, parse_special);
    }
    if (r.error()) return send_error(res, *r.error());
    json j = {{"tokens", ids},
              {"count", ids.size()},
              {"max_model_len", ctx.model.engine->options().n_ctx}};
    if (with_pieces) {
        json pieces = json::array();
        for (int32_t id : ids)
            pieces.push_back({{"id", id}, {"piece", tok.token_to_piece(id, true)}});
        j["pieces"] = std::move(pieces);
    }
    send_json(res, j);
}

// GET / and GET /webchat/NAME: the embedded web chat. No key is needed (the page holds no
// secret; its API calls carry the key the user gives it). Cache-Control: no-cache with a strong
// ETag, so a browser revalidates (304) and a new zinc binary's page is never shown stale.
static void serve_static(const httplib::Request& req, httplib::Response& res) {
    const StaticFile* f = find_static(req.path);
    if (!f) return send_error(res, not_found_route(req.method, req.path));
    res.set_header("Cache-Control", "no-cache");
    res.set_header("ETag", f->etag);
    res.set_header("X-Content-Type-Options", "nosniff");
    if (f->content_type.starts_with("text/html")) {
        // Defence in depth under the page's own escaping: no inline or foreign script, no
        // network but this server, no framing by other sites.
        res.set_header("Content-Security-Policy",
                       "default-src 'none'; script-src 'self'; style-src 'self'; "
                       "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                       "form-action 'none'; frame-ancestors 'self'");
        res.set_header("Referrer-Policy", "no-referrer");
    }
    if (etag_matches(req.get_header_value("If-None-Match"), f->etag)) {
        res.status = 304;
        return;
    }
    res.status = 200;
    res.set_content(reinterpret_cast<const char*>(f->asset->data), f->asset->size,
                    f->content_type.c_str());
}

void HttpServer::Impl::detokenize(const httplib::Request& req, httplib::Response& res) {
    auto body = parse_json_body(req.body);
    if (!body.ok()) return send_error(res, body.error());
    const json& b = body.value();
    const tokenizer::Tokenizer& tok = *ctx.model.tok;
    auto it = b.find("tokens");
    if (it == b.end() || it->is_null())
        return send_error(res, invalid_value("tokens", "is required (an array of token ids)"));
    if (!it->is_array()) return send_error(res, wrong_type("tokens", "an array of token ids", *it));
    std::vector<int32_t> ids;
    for (size_t k = 0; k < it->size(); ++k) {
        const json& v = (*it)[k];
        const auto id = v.is_number() ? as_integer(v) : std::nullopt;
        if (!id)
            return send_error(res, wrong_type(path_index("tokens", k), "a token id (integer)", v));
        if (*id < 0 || *id >= tok.n_vocab())
            return send_error(res, invalid_value(path_index("tokens", k),
                                                 "token id " + std::to_string(*id) +
                                                     " is out of range (vocabulary of " +
                                                     std::to_string(tok.n_vocab()) + ")"));
        ids.push_back(static_cast<int32_t>(*id));
    }
    // Special tokens render as their text by default, so detokenize(tokenize(x)) == x.
    FieldReader r(b, "");
    bool special = true;
    r.get_bool("special", special);
    if (r.error()) return send_error(res, *r.error());
    send_json(res, json{{"content", tok.decode(ids, special)}});
}

void HttpServer::Impl::setup_routes() {
    ServingContext* c = &ctx;
    http.Post("/v1/chat/completions", [c](const httplib::Request& req, httplib::Response& res) {
        handle_completions(*c, ApiKind::Chat, req, res);
    });
    http.Post("/v1/completions", [c](const httplib::Request& req, httplib::Response& res) {
        handle_completions(*c, ApiKind::Completion, req, res);
    });
    http.Post("/v1/embeddings", [c](const httplib::Request& req, httplib::Response& res) {
        handle_embeddings(*c, req, res);
    });
    http.Get("/v1/models",
             [this](const httplib::Request& req, httplib::Response& res) { models(req, res); });
    http.Get("/v1/models/(.+)",
             [this](const httplib::Request& req, httplib::Response& res) { models(req, res); });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
    http.Get("/metrics", [c](const httplib::Request&, httplib::Response& res) {
        res.status = 200;
        std::string body = c->metrics.render(c->model.engine->stats());
        if (c->model.evidence) body += runtime::evidence_prometheus(c->model.evidence->snapshot());
        if (c->opts.tenancy) body += c->opts.tenancy->metrics();
        res.set_content(body, "text/plain; version=0.0.4; charset=utf-8");
    });
    http.Get("/v1/usage", [c](const httplib::Request& req, httplib::Response& res) {
        handle_usage(*c, req, res);
    });
    http.Get("/v1/usage/(.+)", [c](const httplib::Request& req, httplib::Response& res) {
        handle_usage(*c, req, res);
    });
    http.Get("/", serve_static);
    http.Get("/webchat/(.+)", serve_static);
    http.Post("/tokenize",
              [this](const httplib::Request& req, httplib::Response& res) { tokenize(req, res); });
    http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
        detokenize(req, res);
    });
    // The right path with the wrong method is a 405 with Allow, not a 404.
    for (const Route& r : kRoutes) {
        auto not_allowed = [allow = r.allow](const httplib::Request& req, httplib::Response& res) {
            send_error(res, method_not_allowed(req.method, req.path));
            res.set_header("Allow", allow);
        };
        if (std::string_view(r.allow).starts_with("POST"))
            http.Get(r.pattern, not_allowed);
        else
            http.Post(r.pattern, not_allowed);
        http.Put(r.pattern, not_allowed);
        http.Patch(r.pattern, not_allowed);
        http.Delete(r.pattern, not_allowed);
    }
    // CORS (docs/server.md): every response names the allowed origin; preflights are answered
    // before the API-key check (browsers send them without credentials).
    if (!ctx.opts.cors_origin.empty())
        http.set_default_headers(
            {{"Access-Control-Allow-Origin", ctx.opts.cors_origin}, {"Vary", "Origin"}});

    http.set_pre_routing_handler([c](const httplib::Request& req, httplib::Response& res) {
        // `curl -d` declares application/x-www-form-urlencoded. cpp-httplib reads such bodies as
        // forms capped at 8 KiB (a false 413 for a long prompt). Every body here is JSON whatever
        // it declares (as llama-server and OpenAI's API treat it), so the declared type is
        // replaced before the body is read; req is the server's own, non-const request object.
        if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) ==
            0) {
            auto& headers = const_cast<httplib::Request&>(req).headers;
            headers.erase("Content-Type");
            headers.emplace("Content-Type", "application/json");
        }
        if (req.method == "OPTIONS") {
            const Route* r = route_of(req.path);
            if (!r) return httplib::Server::HandlerResponse::Unhandled;  // 404
            answer_options(c->opts, *r, req, res);
            return httplib::Server::HandlerResponse::Handled;
        }
        if (c->opts.tenancy && route_needs_key(req.path)) {
            if (c->opts.tenancy->authenticate(req.get_header_value("Authorization"),
                                              req.get_header_value("X-Api-Key")))
                return httplib::Server::HandlerResponse::Unhandled;
            send_error(res, unauthorized());
            res.set_header("WWW-Authenticate", "Bearer");
            return httplib::Server::HandlerResponse::Handled;
        }
        if (c->opts.api_keys.empty() || !route_needs_key(req.path))
            return httplib::Server::HandlerResponse::Unhandled;
        if (api_key_ok(c->opts.api_keys, req.get_header_value("Authorization"),
                       req.get_header_value("X-Api-Key")))
            return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, unauthorized());
        res.set_header("WWW-Authenticate", "Bearer");
        return httplib::Server::HandlerResponse::Handled;
    });
    // Statuses httplib sets itself (no route, body over the limit, a malformed request line)
    // come without a body: give them OpenAI's error shape. Our own errors already have one.
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [c](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            ApiError e;
            if (res.status == 404)
                e = not_found_route(req.method, req.path);
            else if (res.status == 413)
                e = body_too_large(c->opts.max_body_bytes);
            else
                e = ApiError{res.status,
                             "invalid_request_error",
                             "the HTTP request could not be processed (status " +
                                 std::to_string(res.status) + ")",
                             std::nullopt,
                             std::nullopt,
                             0};
            res.set_content(error_body(e), "application/json");
            return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown exception";
            try {
                if (ep) std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            send_error(res, internal_error("internal error: " + what));
        });
    http.set_logger([c](const httplib::Request& req, const httplib::Response& res) {
        c->metrics.count_request(endpoint_label(req.path), res.status);
    });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() {
    stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::create(ServedModel model, ServerOptions opts) {
    if (!model.engine || !model.tok || !model.render_chat)
        return make_error("server: engine, tokenizer and chat renderer are required");
    if (opts.port < 0 || opts.port > 65535)
        return make_error("server: port " + std::to_string(opts.port) +
                          " is out of range 0..65535");
    if (opts.model_id.empty()) return make_error("server: the model id is empty");
    int threads = opts.http_threads;
    if (threads <= 0) threads = 2 * std::max(model.engine->options().n_parallel, 16) + 32;
    const size_t max_body = opts.max_body_bytes;
    const int keepalive = opts.idle_keepalive_s;
    const std::string host = opts.host;
    const int port = opts.port;
    if (model.created == 0) model.created = static_cast<int64_t>(std::time(nullptr));
    auto impl = std::make_unique<Impl>(std::move(model), std::move(opts));
    httplib::Server& h = impl->http;
    h.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    h.set_payload_max_length(max_body);
    h.set_keep_alive_max_count(100000);
    h.set_keep_alive_timeout(keepalive);
    // A client that stalls mid-request holds a connection thread: drop it after 5 s without a
    // byte (a partial mitigation of slowloris-style exhaustion; docs/server.md, Limits).
    h.set_read_timeout(5, 0);
    h.set_write_timeout(10, 0);
    h.set_tcp_nodelay(true);  // stream chunks go out as they are written
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
    // server bind the same port silently and take half the connections.
    h.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
    });
    impl->setup_routes();
    if (port == 0) {
        const int p = h.bind_to_any_port(host);
        if (p <= 0) return make_error("server: cannot bind " + host + " (any port)");
        impl->port = p;
    } else {
        if (!h.bind_to_port(host, port)) {
            auto why = check_listen_address(host, port);
            return make_error(why ? "cannot listen on " + host + ":" + std::to_string(port)
                                  : why.error().message);
        }
        impl->port = port;
    }
    return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const {
    return impl_->port;
}

bool HttpServer::run() {
    return impl_->http.listen_after_bind();
}

void HttpServer::stop() {
    if (impl_) impl_->http.stop();
}

bool HttpServer::drain(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (impl_->ctx.open_streams.load() > 0) {
        if (std::chrono::steady_clock::now() >= end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

void HttpServer::begin_drain() {
    impl_->ctx.draining.store(true);
}

int HttpServer::in_flight() const {
    return impl_->ctx.open_streams.load() + impl_->ctx.open_requests.load();
}

}  // namespace zinc::server
