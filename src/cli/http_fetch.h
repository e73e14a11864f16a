// zinc/cli/http_fetch.h — HTTP(S) for zinc pull and zinc ps, over libcurl: a small text GET (an
// index page, a server's /health) and a resumable file download (HTTP Range on a .partial file)
// with a progress display. Proxies (https_proxy, ...) apply as libcurl reads them; PIP_CERT names
// the CA bundle and PIP_DEFAULT_TIMEOUT the stall timeout, as they do for pip.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace zinc::cli {

/// A progress display on stderr: a redrawn bar when stderr is a terminal, else one plain line at
/// each 25% (a CI log gets at most four short lines), nothing when quiet.
class Progress {
  public:
    Progress(std::string label, uint64_t total, bool quiet);
    void update(uint64_t done);  // bytes done so far, of total (0: unknown)
    void finish();               // end the bar's line
    void set_total(uint64_t total) { total_ = total; }
    uint64_t total() const { return total_; }

  private:
    std::string label_;
    uint64_t total_;
    bool quiet_, tty_;
    int last_quarter_ = 0;
    double last_draw_ = -1, start_;
    bool drawn_ = false;
};

/// GET `url` and return the body. Errors (one line) name the URL: the transport error, or the
/// HTTP status. `timeout_s` bounds the whole request.
Result<std::string> http_get_text(const std::string& url, double timeout_s = 60,
                                  std::string* effective_url = nullptr);

struct DownloadOptions {
    uint64_t expected_size = 0;  // 0: unknown (then the server's length counts)
    int attempts = 3;            // a connection lost mid-transfer is resumed this many times
    bool quiet = false;
    std::string label;  // what the progress display calls it
};

/// Download `url` into `partial` (created, or appended to from its current length with an HTTP
/// Range request: an interrupted download resumes). On success `partial` holds the whole file.
/// Errors (one line) name the URL and the cause (transport error, HTTP status, a write error with
/// the OS's reason, e.g. "No space left on device"), and say how many bytes the .partial keeps.
Result<void> download_resumable(const std::string& url, const std::string& partial,
                                const DownloadOptions& o);

/// `url` with any user:password replaced by "****", for messages (an index URL may carry a
/// token, as pip's may).
std::string redact_url(const std::string& url);

/// `rel` resolved against `base` (an index page's links are often relative); rel itself if it is
/// absolute or cannot be resolved.
std::string resolve_url(const std::string& base, const std::string& rel);

}  // namespace zinc::cli
