// zinc/cli/http_fetch.cpp — libcurl transfers for zinc pull / zinc ps (see http_fetch.h).
#include "cli/http_fetch.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace zinc::cli {

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string mib(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", b / (1024.0 * 1024.0));
    return buf;
}

void global_init() {
    static const bool done = [] {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return true;
    }();
    (void)done;
}

// The options every transfer shares: redirects (the index's files live on another host), a CA
// bundle from PIP_CERT as pip would use, and a stall timeout (PIP_DEFAULT_TIMEOUT, else 60 s:
// less than 1 byte/s for that long fails, a slow but moving download does not).
void common_options(CURL* c, const std::string& url, char* errbuf) {
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "zinc/" ZINC_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    long stall = 60;
    if (const char* t = std::getenv("PIP_DEFAULT_TIMEOUT"); t && std::atof(t) > 0)
        stall = static_cast<long>(std::atof(t));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall);
    if (const char* cert = std::getenv("PIP_CERT"); cert && *cert)
        curl_easy_setopt(c, CURLOPT_CAINFO, cert);
}

std::string curl_message(CURLcode rc, const char* errbuf) {
    return errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
}

size_t append_text(char* p, size_t size, size_t n, void* user) {
    auto* s = static_cast<std::string*>(user);
    if (s->size() > (64u << 20)) return 0;  // an index page is not this large
    s->append(p, size * n);
    return size * n;
}

struct WriteState {
    int fd = -1;
    uint64_t written = 0;  // bytes appended by this attempt
    int error = 0;         // errno of a failed write
};

size_t write_file(char* p, size_t size, size_t n, void* user) {
    auto* w = static_cast<WriteState*>(user);
    size_t left = size * n;
    while (left > 0) {
        const ssize_t k = ::write(w->fd, p, left);
        if (k < 0) {
            if (errno == EINTR) continue;
            w->error = errno;
            return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
        }
        p += k;
        left -= static_cast<size_t>(k);
        w->written += static_cast<uint64_t>(k);
    }
    return size * n;
}

// The total length a 416 response's "Content-Range: bytes */N" names; 0 when absent.
size_t read_header(char* p, size_t size, size_t n, void* user) {
    std::string line(p, size * n);
    auto* total = static_cast<uint64_t*>(user);
    if (line.size() > 14 && strncasecmp(line.c_str(), "content-range:", 14) == 0) {
        const auto star = line.find("*/");
        if (star != std::string::npos) *total = std::strtoull(line.c_str() + star + 2, nullptr, 10);
    }
    return size * n;
}

struct ProgressState {
    Progress* progress;
    uint64_t base;  // bytes present before this attempt
};

int on_progress(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
    auto* s = static_cast<ProgressState*>(user);
    // Without a known size the server's Content-Length (of the rest, when resuming) counts.
    if (s->progress->total() == 0 && dltotal > 0)
        s->progress->set_total(s->base + static_cast<uint64_t>(dltotal));
    s->progress->update(s->base + static_cast<uint64_t>(dlnow));
    return 0;
}

}  // namespace

Progress::Progress(std::string label, uint64_t total, bool quiet)
    : label_(std::move(label)), total_(total), quiet_(quiet), tty_(::isatty(2)), start_(now_s()) {}

void Progress::update(uint64_t done) {
    if (quiet_) return;
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 0.0;
    if (!tty_) {
        const int quarter = static_cast<int>(frac * 4);
        if (total_ && quarter > last_quarter_) {
            last_quarter_ = quarter;
            std::fprintf(stderr, "  %s %5.1f%% %s/%s MiB\n", label_.c_str(), frac * 100,
                         mib(done).c_str(), mib(total_).c_str());
            std::fflush(stderr);
        }
        return;
    }
    const double t = now_s();
    if (drawn_ && t - last_draw_ < 0.1 && done < total_) return;  // at most 10 redraws a second
    last_draw_ = t;
    drawn_ = true;
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(std::min(frac, 1.0) * kWidth);
    const double rate = done / std::max(t - start_, 1e-3) / (1024.0 * 1024.0);
    std::fprintf(stderr, "\r\033[K  %s [%.*s%*s] %5.1f%% %s/%s MiB %6.1f MiB/s", label_.c_str(),
                 fill, "##############################", kWidth - fill, "", frac * 100,
                 mib(done).c_str(), mib(total_).c_str(), rate);
    std::fflush(stderr);
}

void Progress::finish() {
    if (quiet_) return;
    if (tty_ && drawn_) std::fputc('\n', stderr);
    last_quarter_ = 0;
    drawn_ = false;
}

std::string redact_url(const std::string& url) {
    const auto scheme = url.find("://");
    if (scheme == std::string::npos) return url;
    const auto host = scheme + 3;
    const auto at = url.find('@', host);
    const auto slash = url.find('/', host);
    if (at == std::string::npos || (slash != std::string::npos && at > slash)) return url;
    return url.substr(0, host) + "****" + url.substr(at);
}

std::string resolve_url(const std::string& base, const std::string& rel) {
    CURLU* u = curl_url();
    std::string out = rel;
    if (curl_url_set(u, CURLUPART_URL, base.c_str(), 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_URL, rel.c_str(), 0) == CURLUE_OK) {
        char* s = nullptr;
        if (curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK) {
            out = s;
            curl_free(s);
        }
    }
    curl_url_cleanup(u);
    return out;
}

Result<std::string> http_get_text(const std::string& url, double timeout_s,
                                  std::string* effective_url) {
    global_init();
    CURL* c = curl_easy_init();
    if (!c)
        return make_error("cannot start a download of " + redact_url(url) +
                          " (curl_easy_init failed)");
    char errbuf[CURL_ERROR_SIZE] = {0};
    std::string body;
    common_options(c, url, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_text);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
    const CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (effective_url) {
        char* eff = nullptr;
        curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
        *effective_url = eff ? eff : url;
    }
    curl_easy_cleanup(c);
    if (rc != CURLE_OK)
        return make_error("cannot fetch " + redact_url(url) + ": " + curl_message(rc, errbuf));
    if (status >= 400)
        return make_error("cannot fetch " + redact_url(url) + ": HTTP status " +
                          std::to_string(status));
    return body;
}

Result<void> download_resumable(const std::string& url, const std::string& partial,
                                const DownloadOptions& o) {
    global_init();
    const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return make_error("cannot write " + partial + ": " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    auto size_now = [&]() -> uint64_t {
        struct stat st {};
        return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0;
    };
    auto restart = [&]() { return ::ftruncate(fd, 0) == 0; };
    uint64_t have = size_now();
    if (o.expected_size && have > o.expected_size) {
        if (!restart())
            return make_error("cannot truncate " + partial + ": " + std::strerror(errno));
        have = 0;
    }
    if (o.expected_size && have == o.expected_size) return {};  // complete from an earlier run
    Progress progress(o.label, o.expected_size, o.quiet);
    if (have > 0 && !o.quiet)
        std::fprintf(stderr, "zinc: resuming %s at %s MiB\n", o.label.c_str(), mib(have).c_str());
    std::string last_error;
    bool restarted = false;
    for (int attempt = 1; attempt <= std::max(1, o.attempts); ++attempt) {
        CURL* c = curl_easy_init();
        if (!c)
            return make_error("cannot start a download of " + redact_url(url) +
                              " (curl_easy_init failed)");
        char errbuf[CURL_ERROR_SIZE] = {0};
        common_options(c, url, errbuf);
        WriteState ws;
        ws.fd = fd;
        ProgressState ps{&progress, have};
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_file);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &ws);
        curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &ps);
        uint64_t range_total = 0;
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, read_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &range_total);
        if (have > 0) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(have));
        const CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        have = size_now();
        if (rc == CURLE_OK) {
            if (o.expected_size && have != o.expected_size) {
                last_error = "the server sent " + std::to_string(have) + " bytes, expected " +
                             std::to_string(o.expected_size);
                break;
            }
            progress.update(have);
            progress.finish();
            return {};
        }
        if (rc == CURLE_WRITE_ERROR && ws.error != 0) {
            progress.finish();
            return make_error("cannot write " + partial + ": " + std::strerror(ws.error) +
                              " (while downloading " + redact_url(url) + ")");
        }
        // 416 naming the file's length as what the .partial holds: a run stopped after the last
        // byte (the caller's sha256 check follows).
        if (status == 416 && have > 0 && range_total == have &&
            (!o.expected_size || have == o.expected_size)) {
            progress.finish();
            return {};
        }
        // A server that ignores Range (200 instead of 206), or a .partial longer than the file
        // (416): start again from byte 0, once.
        if ((rc == CURLE_RANGE_ERROR || status == 416) && have > 0 && !restarted) {
            restarted = true;
            if (!restart())
                return make_error("cannot truncate " + partial + ": " + std::strerror(errno));
            have = 0;
            --attempt;
            continue;
        }
        last_error = curl_message(rc, errbuf);
        if (rc == CURLE_HTTP_RETURNED_ERROR && status > 0 && status < 500) break;  // 404, 403...
        const bool lost = rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR ||
                          rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
                          rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_HTTP_RETURNED_ERROR;
        if (!lost || attempt == o.attempts) break;
        progress.finish();
        if (!o.quiet)
            std::fprintf(stderr, "zinc: %s: %s; resuming at %s MiB (attempt %d of %d)\n",
                         o.label.c_str(), last_error.c_str(), mib(have).c_str(), attempt + 1,
                         o.attempts);
        std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
    }
    progress.finish();
    return make_error("cannot download " + redact_url(url) + ": " + last_error + " (" +
                      std::to_string(have) + " bytes kept in " + partial +
                      "; zinc pull again resumes)");
}

}  // namespace zinc::cli
