// zinc/server/api_error.h — errors in OpenAI's wire shape, and the result type request handling
// returns.
//
// OpenAI (and vLLM, llama.cpp's server) answer every failed request with
//   {"error": {"message": "...", "type": "...", "param": "..." | null, "code": "..." | null}}
// and an HTTP status that says whose fault it was. `param` carries the JSON path of the bad
// field ("messages[1].role", "stop[2]") so a client can point at it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace zinc::server {

struct ApiError {
    int status = 400;                  // HTTP status
    std::string type;                  // e.g. "invalid_request_error"
    std::string message;               // one line
    std::optional<std::string> param;  // JSON path of the offending field
    std::optional<std::string> code;   // machine-readable, e.g. "context_length_exceeded"
    int retry_after_s = 0;             // > 0: send a Retry-After header (429 / 503)
};

/// The response body: {"error": {...}} serialised (UTF-8, invalid bytes replaced).
std::string error_body(const ApiError& e);

// Constructors for the errors the server sends (docs/server.md, "Errors").
ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt,
                     std::optional<std::string> code = std::nullopt);
ApiError invalid_json(std::string message);
ApiError unauthorized();
ApiError not_found_route(const std::string& method, const std::string& path);
ApiError method_not_allowed(const std::string& method, const std::string& path);
ApiError model_not_found(const std::string& model);
ApiError body_too_large(size_t limit_bytes);
ApiError context_length_exceeded(std::string message, std::string param);
ApiError queue_full(std::string message);
ApiError shutting_down();
ApiError internal_error(std::string message);

/// A value or the ApiError that replaces it.
template <class T>
class [[nodiscard]] ApiResult {
  public:
    ApiResult(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
    ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
    bool ok() const { return v_.index() == 0; }
    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    const ApiError& error() const { return std::get<1>(v_); }

  private:
    std::variant<T, ApiError> v_;
};

}  // namespace zinc::server
