// zinc/server/sse.cpp — see sse.h.
#include "server/sse.h"

namespace zinc::server {

std::string sse_event(std::string_view data) {
    std::string out;
    out.reserve(data.size() + 16);
    size_t start = 0;
    while (true) {
        // A line ends at "\r\n", "\n" or "\r" (all three end a line in the SSE grammar).
        size_t end = data.find_first_of("\r\n", start);
        out += "data: ";
        out.append(data.substr(start, end == std::string_view::npos ? end : end - start));
        out += '\n';
        if (end == std::string_view::npos) break;
        start = end + 1;
        if (data[end] == '\r' && start < data.size() && data[start] == '\n') ++start;
    }
    out += '\n';
    return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_comment(std::string_view text) {
    std::string out = ": ";
    for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
    out += "\n\n";
    return out;
}

}  // namespace zinc::server
