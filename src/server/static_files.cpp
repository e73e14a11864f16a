// zinc/server/static_files.cpp — see static_files.h.
#include "server/static_files.h"

#include <cstdint>
#include <cstdio>
#include <map>

namespace zinc::server {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// FNV-1a, 64 bits: the ETag only has to change when the bytes do.
uint64_t fnv1a(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

const std::map<std::string, StaticFile, std::less<>>& files() {
    static const auto table = [] {
        std::map<std::string, StaticFile, std::less<>> t;
        for (const StaticAsset& a : webchat_assets()) {
            char tag[24];
            std::snprintf(tag, sizeof tag, "\"%016llx\"",
                          static_cast<unsigned long long>(fnv1a(a.data, a.size)));
            t[a.name] = StaticFile{&a, content_type_for(a.name), tag};
        }
        return t;
    }();
    return table;
}

}  // namespace

std::string content_type_for(std::string_view name) {
    if (ends_with(name, ".html")) return "text/html; charset=utf-8";
    if (ends_with(name, ".css")) return "text/css; charset=utf-8";
    if (ends_with(name, ".js")) return "text/javascript; charset=utf-8";
    if (ends_with(name, ".json")) return "application/json";
    if (ends_with(name, ".svg")) return "image/svg+xml";
    if (ends_with(name, ".png")) return "image/png";
    if (ends_with(name, ".ico")) return "image/x-icon";
    return "application/octet-stream";
}

const StaticFile* find_static(std::string_view path) {
    std::string_view name;
    if (path == "/")
        name = "index.html";
    else if (path.starts_with("/webchat/"))
        name = path.substr(9);
    else
        return nullptr;
    // Names are flat (no folders): anything with a slash, or empty, is not one of ours.
    if (name.empty() || name.find('/') != std::string_view::npos) return nullptr;
    const auto& t = files();
    auto it = t.find(name);
    return it == t.end() ? nullptr : &it->second;
}

bool etag_matches(std::string_view inm, std::string_view etag) {
    size_t i = 0;
    while (i < inm.size()) {
        while (i < inm.size() && (inm[i] == ' ' || inm[i] == ',' || inm[i] == '\t')) ++i;
        size_t j = i;
        while (j < inm.size() && inm[j] != ',') ++j;
        std::string_view tag = inm.substr(i, j - i);
        while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
        if (tag == "*") return true;
        if (tag.starts_with("W/")) tag.remove_prefix(2);  // weak comparison (RFC 9110 13.1.2)
        if (!tag.empty() && tag == etag) return true;
        i = j + 1;
    }
    return false;
}

}  // namespace zinc::server
