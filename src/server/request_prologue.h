// zinc/server/request_prologue.h — private to src/server: the start every model-serving POST
// handler shares (/v1/chat/completions, /v1/completions, /v1/embeddings): counting the request
// for the drain, refusing new work while draining, the JSON body, and the `model` check.
// (Keys and tenants are checked before the handler, in http_server.cpp; the completions
// handler's tenant quotas need its parsed request and stay there.)
#pragma once

#include <httplib.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/serving_context.h"

namespace zinc::server {

/// Counts a request in ServingContext::open_requests for as long as it lives
/// (HttpServer::in_flight). Made before the draining check, so a request that passes it is seen
/// by the drain (both atomics are sequentially consistent).
class CountedRequest {
  public:
    explicit CountedRequest(std::atomic<int>& n) : n_(n) { ++n_; }
    ~CountedRequest() { --n_; }
    CountedRequest(const CountedRequest&) = delete;
    CountedRequest& operator=(const CountedRequest&) = delete;

  private:
    std::atomic<int>& n_;
};

/// The request's body as JSON, or nullopt when `res` has been answered: 503 shutting_down with
/// Connection: close while the server drains (SIGINT/SIGTERM: a balancer tries another replica,
/// nginx's proxy_next_upstream http_503, docs/deploy.md), or the body's 400.
std::optional<nlohmann::json> request_body(const ServingContext& ctx, const httplib::Request& req,
                                           httplib::Response& res);

/// The 404 model_not_found for a request's `model`, or nullopt when it is served: the served
/// model's id, another one (served by the loaded model unless --strict-model; the response's
/// `model` names the one that answered), or no `model` at all. "" names no model: a 404.
std::optional<ApiError> refuse_model(const ServingContext& ctx, bool has_model,
                                     const std::string& model);

}  // namespace zinc::server
