// zinc/server/auth.cpp — see auth.h.
#include "server/auth.h"

namespace zinc::server {

namespace {

bool same(std::string_view a, std::string_view b) {
    // Length is not secret; the content comparison touches every byte.
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i)
        diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
    return diff == 0;
}

bool iequals_prefix(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != prefix[i]) return false;
    }
    return true;
}

}  // namespace

bool route_needs_key(std::string_view path) {
    // The web chat's static files (GET / and /webchat/*) hold no secret: the page asks for the
    // key and sends it with its API calls.
    if (path == "/" || path.starts_with("/webchat/")) return false;
    return path != "/health" && path != "/metrics";
}

bool api_key_ok(const std::vector<std::string>& keys, std::string_view authorization,
                std::string_view x_api_key) {
    if (keys.empty()) return true;
    std::string_view presented;
    if (iequals_prefix(authorization, "bearer ")) {
        presented = authorization.substr(7);
        while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
        while (!presented.empty() && presented.back() == ' ') presented.remove_suffix(1);
    } else if (!x_api_key.empty()) {
        presented = x_api_key;
    } else {
        return false;
    }
    if (presented.empty()) return false;
    bool ok = false;
    for (const auto& k : keys) ok |= same(presented, k);  // no early exit
    return ok;
}

}  // namespace zinc::server
