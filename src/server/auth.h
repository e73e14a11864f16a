// zinc/server/auth.h — API-key checks. With keys configured, a request must carry one of them
// as "Authorization: Bearer KEY" (what OpenAI clients send) or "X-Api-Key: KEY"; /health and
// /metrics stay open so load balancers and Prometheus need no secret (docs/server.md, "Auth").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zinc::server {

/// Whether `path` needs a key when keys are configured (everything but /health, /metrics and the
/// web chat's static files, / and /webchat/*).
bool route_needs_key(std::string_view path);

/// Whether the headers carry one of `keys`. No keys configured: always true. Compares in time
/// independent of where the first difference is (no timing oracle for guessing a key).
bool api_key_ok(const std::vector<std::string>& keys, std::string_view authorization,
                std::string_view x_api_key);

}  // namespace zinc::server
