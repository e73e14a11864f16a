// zinc/server/api_error.cpp — see api_error.h.
#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace zinc::server {

using nlohmann::json;

std::string error_body(const ApiError& e) {
    json err = {{"message", e.message},
                {"type", e.type},
                {"param", e.param ? json(*e.param) : json(nullptr)},
                {"code", e.code ? json(*e.code) : json(nullptr)}};
    return json{{"error", std::move(err)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ApiError bad_request(std::string message, std::optional<std::string> param,
                     std::optional<std::string> code) {
    return ApiError{400, "invalid_request_error", std::move(message), std::move(param),
                    std::move(code), 0};
}

ApiError invalid_json(std::string message) {
    return ApiError{400, "invalid_request_error", std::move(message), std::nullopt,
                    std::string("invalid_json"), 0};
}

ApiError unauthorized() {
    return ApiError{401, "authentication_error",
                    "invalid or missing API key: send the header 'Authorization: Bearer KEY'",
                    std::nullopt, std::string("invalid_api_key"), 0};
}

ApiError not_found_route(const std::string& method, const std::string& path) {
    return ApiError{404, "not_found_error", "no route for " + method + " " + path, std::nullopt,
                    std::string("not_found"), 0};
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
    return ApiError{405, "invalid_request_error", method + " is not allowed on " + path,
                    std::nullopt, std::string("method_not_allowed"), 0};
}

ApiError model_not_found(const std::string& model) {
    return ApiError{404, "not_found_error",
                    "the model '" + model + "' does not exist (GET /v1/models lists the one served)",
                    std::string("model"), std::string("model_not_found"), 0};
}

ApiError body_too_large(size_t limit_bytes) {
    return ApiError{413, "invalid_request_error",
                    "the request body is larger than the limit of " + std::to_string(limit_bytes) +
                        " bytes",
                    std::nullopt, std::string("request_too_large"), 0};
}

ApiError context_length_exceeded(std::string message, std::string param) {
    return ApiError{400, "invalid_request_error", std::move(message), std::move(param),
                    std::string("context_length_exceeded"), 0};
}

ApiError queue_full(std::string message) {
    return ApiError{429, "rate_limit_error", std::move(message), std::nullopt,
                    std::string("queue_full"), 1};
}

ApiError shutting_down() {
    return ApiError{503, "server_error", "the server is shutting down", std::nullopt,
                    std::string("shutting_down"), 1};
}

ApiError internal_error(std::string message) {
    return ApiError{500, "server_error", std::move(message), std::nullopt,
                    std::string("internal_error"), 0};
}

}  // namespace zinc::server
