// zinc/server/json_fields.cpp — see json_fields.h.
#include "server/json_fields.h"

#include <cmath>
#include <cstdio>

namespace zinc::server {

using nlohmann::json;

namespace {

std::string fmt_number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

std::string describe(const json& v) {
    // A short rendering of the offending value for the message (never the whole body). Arrays
    // and objects are summarised, not dumped: dump() recurses, and a deeply nested value would
    // take the whole server down with it.
    if (v.is_array()) return "an array of " + std::to_string(v.size()) + " element(s)";
    if (v.is_object()) return "an object of " + std::to_string(v.size()) + " member(s)";
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

}  // namespace

std::string json_type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "an integer";
        case json::value_t::number_float: return "a number";
        case json::value_t::string: return "a string";
        case json::value_t::array: return "an array";
        case json::value_t::object: return "an object";
        default: return "an unsupported value";
    }
}

std::string path_join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
}

std::string path_index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
}

ApiError wrong_type(const std::string& path, const std::string& expected, const json& got) {
    return bad_request("'" + path + "': expected " + expected + ", got " + json_type_name(got) +
                           " (" + describe(got) + ")",
                       path, std::string("invalid_type"));
}

ApiError invalid_value(const std::string& path, const std::string& what) {
    return bad_request("'" + path + "': " + what, path, std::string("invalid_value"));
}

std::optional<int64_t> as_integer(const json& v) {
    if (v.is_number_integer()) {
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) return std::nullopt;
        return v.get<int64_t>();
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18)
            return static_cast<int64_t>(d);
    }
    return std::nullopt;
}

const json* FieldReader::find(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
}

void FieldReader::fail(ApiError e) {
    if (!error_) error_ = std::move(e);
}

bool FieldReader::get_bool(const char* key, bool& out) {
    const json* v = find(key);
    if (!v) return false;
    if (!v->is_boolean()) {
        fail(wrong_type(path_of(key), "a boolean", *v));
        return false;
    }
    out = v->get<bool>();
    return true;
}

bool FieldReader::get_int(const char* key, int64_t lo, int64_t hi, int64_t& out) {
    const json* v = find(key);
    if (!v) return false;
    const auto i = v->is_number() ? as_integer(*v) : std::nullopt;
    if (!i) {
        fail(wrong_type(path_of(key), "an integer", *v));
        return false;
    }
    if (*i < lo || *i > hi) {
        fail(invalid_value(path_of(key), "must be between " + std::to_string(lo) + " and " +
                                             std::to_string(hi) + ", got " + std::to_string(*i)));
        return false;
    }
    out = *i;
    return true;
}

bool FieldReader::get_number(const char* key, double lo, double hi, double& out) {
    const json* v = find(key);
    if (!v) return false;
    if (!v->is_number()) {
        fail(wrong_type(path_of(key), "a number", *v));
        return false;
    }
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
        fail(invalid_value(path_of(key), "must be between " + fmt_number(lo) + " and " +
                                             fmt_number(hi) + ", got " + fmt_number(d)));
        return false;
    }
    out = d;
    return true;
}

bool FieldReader::get_string(const char* key, std::string& out) {
    const json* v = find(key);
    if (!v) return false;
    if (!v->is_string()) {
        fail(wrong_type(path_of(key), "a string", *v));
        return false;
    }
    out = v->get<std::string>();
    return true;
}

}  // namespace zinc::server
