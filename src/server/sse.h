// zinc/server/sse.h — Server-Sent Events framing (WHATWG HTML, "Server-sent events", 9.2) as
// OpenAI streams use it: each JSON chunk is one "data:" event, the stream ends with
// "data: [DONE]", and comment lines (": ...") keep an idle connection alive without an event.
#pragma once

#include <string>
#include <string_view>

namespace zinc::server {

/// One event carrying `data`; a payload with line breaks becomes several "data:" lines, which
/// the client joins back with "\n" (compact JSON never has raw line breaks).
std::string sse_event(std::string_view data);
/// The end-of-stream event OpenAI clients wait for: "data: [DONE]\n\n".
std::string sse_done();
/// A comment line clients ignore (heartbeat): ": TEXT\n\n".
std::string sse_comment(std::string_view text);

}  // namespace zinc::server
