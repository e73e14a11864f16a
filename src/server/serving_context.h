// zinc/server/serving_context.h — private to src/server: the state every HTTP handler shares
// (the served model, options, metrics, an id/seed source) and the response helpers.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/grammar_matcher.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace zinc::server {

class ServingContext {
  public:
    ServingContext(ServedModel m, ServerOptions o)
        : model(std::move(m)), opts(std::move(o)), rng_(std::random_device{}()) {}

    const ServedModel model;
    const ServerOptions opts;
    Metrics metrics;
    /// Streamed responses whose body has not ended (HttpServer::drain waits for 0).
    std::atomic<int> open_streams{0};
    /// Whole (non-streamed) completion requests being answered (HttpServer::in_flight).
    std::atomic<int> open_requests{0};
    /// Set by HttpServer::begin_drain(): completion requests get 503 shutting_down and /health
    /// reports "draining" (503), so a load balancer moves new requests elsewhere.
    std::atomic<bool> draining{false};

    /// A fresh random 64-bit value (request seeds when a request gives none). Thread-safe.
    uint64_t random_u64();
    /// "PREFIX" + 24 random hex digits, e.g. "chatcmpl-3f9a...".
    std::string new_id(const char* prefix);

    /// The vocabulary as bytes for grammar-constrained requests, built on first use (once).
    std::shared_ptr<const engine::GrammarVocab> grammar_vocab();
    /// The constraint for a GBNF text (lazy from `triggers` on when not empty:
    /// engine/grammar_matcher.h): parsed once and kept, with its cached token masks
    /// (engine/grammar_mask_cache.h), for the next requests with the same text and triggers (the
    /// last kGrammarsKept). Errors: parse_grammar's. Thread-safe.
    Result<std::shared_ptr<const engine::GrammarConstraint>> grammar_constraint(
        const std::string& text, const std::vector<engine::GrammarTrigger>& triggers = {});
    static constexpr size_t kGrammarsKept = 8;

  private:
    std::mutex mu_;
    std::mt19937_64 rng_;
    std::shared_ptr<const engine::GrammarVocab> grammar_vocab_;  // guarded by mu_
    // (the triggers, each '^' (at start) or '~' + text + '\0', then '\0' + the grammar text;
    // the constraint), most recently used last; guarded by mu_
    std::vector<std::pair<std::string, std::shared_ptr<const engine::GrammarConstraint>>> grammars_;
};

/// Write `e` as the response: status, OpenAI error body, Retry-After when set.
void send_error(httplib::Response& res, const ApiError& e);
/// Write a JSON body with `status`.
void send_json(httplib::Response& res, const nlohmann::json& j, int status = 200);

/// GET /v1/usage (the caller's tenant) and /v1/usage/{tenant} (an admin key): usage_handler.cpp.
void handle_usage(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);

/// POST /v1/embeddings (embeddings.cpp).
void handle_embeddings(ServingContext& ctx, const httplib::Request& req, httplib::Response& res);

/// POST /v1/chat/completions (kind Chat) and POST /v1/completions (kind Completion).
void handle_completions(ServingContext& ctx, ApiKind kind, const httplib::Request& req,
                        httplib::Response& res);

}  // namespace zinc::server
