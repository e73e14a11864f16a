// zinc/server/json_fields.h — typed reads of a request's JSON fields that name the JSON path of
// the first bad one ("messages[2].content", "stream_options.include_usage").
//
// Conventions (as OpenAI's and vLLM's validators): an absent field and an explicit null both
// mean "use the default"; integers may be written as integral floats (16.0); a number field
// accepts integers; booleans are never numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace zinc::server {

/// "a string", "an integer", "a number", "a boolean", "an array", "an object" or "null".
std::string json_type_name(const nlohmann::json& v);
/// Path of `key` inside the object at `path` ("" is the top level).
std::string path_join(const std::string& path, const std::string& key);
/// Path of element `i` of the array at `path`.
std::string path_index(const std::string& path, size_t i);
/// 400 "'PATH': expected EXPECTED, got a string" with param PATH, code "invalid_type".
ApiError wrong_type(const std::string& path, const std::string& expected, const nlohmann::json& got);
/// 400 "'PATH': WHAT" with param PATH, code "invalid_value".
ApiError invalid_value(const std::string& path, const std::string& what);

/// An integer value (integral floats included) or nullopt.
std::optional<int64_t> as_integer(const nlohmann::json& v);

/// Reads fields of one JSON object. Each get_* returns true when the field was present (not
/// null) and valid and stored into `out`; a bad field records the first error and returns false.
class FieldReader {
  public:
    /// `obj` must outlive the reader; `path` is where obj sits ("" for the body).
    FieldReader(const nlohmann::json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

    /// The field's value, or nullptr when absent or null.
    const nlohmann::json* find(const char* key) const;
    std::string path_of(const char* key) const { return path_join(path_, key); }

    bool get_bool(const char* key, bool& out);
    bool get_int(const char* key, int64_t lo, int64_t hi, int64_t& out);
    bool get_number(const char* key, double lo, double hi, double& out);
    bool get_string(const char* key, std::string& out);

    /// Record an error unless one is already recorded (the first one wins).
    void fail(ApiError e);
    const std::optional<ApiError>& error() const { return error_; }

  private:
    const nlohmann::json& obj_;
    std::string path_;
    std::optional<ApiError> error_;
};

}  // namespace zinc::server
