// zinc/server/static_files.h — the web chat's static files (src/server/webchat/), served by zinc
// itself at GET / and GET /webchat/<name>: no build step, no network, no install dir. The bytes
// are embedded into the binary at build time (cmake/embed_files.cmake writes
// webchat_assets.cpp), so the page is there whether zinc runs from its build dir, a clean clone
// or anywhere it was copied. docs/server.md, "Web chat".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::server {

/// One embedded file: its name under src/server/webchat/ ("index.html", "chat.js").
struct StaticAsset {
    const char* name;
    const unsigned char* data;
    size_t size;
};

/// Every embedded file (generated at build time from src/server/webchat/*).
const std::vector<StaticAsset>& webchat_assets();

/// The Content-Type of a file name by its extension ("text/html; charset=utf-8", ...);
/// application/octet-stream for an unknown one.
std::string content_type_for(std::string_view name);

/// A served file: the asset, its Content-Type and strong ETag (a hash of the bytes, quoted).
struct StaticFile {
    const StaticAsset* asset = nullptr;
    std::string content_type;
    std::string etag;
};

/// The file a request path names: "/" is index.html, "/webchat/NAME" is NAME; nullptr for any
/// other path or an unknown name (a 404).
const StaticFile* find_static(std::string_view path);

/// Whether `if_none_match` (the request's If-None-Match header: "*", or a list of ETags, weak
/// ones included) matches `etag`, so the answer is 304 Not Modified.
bool etag_matches(std::string_view if_none_match, std::string_view etag);

}  // namespace zinc::server
