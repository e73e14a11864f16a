// zinc/cli/server_registry.cpp — the running-servers registry (see server_registry.h).
#include "cli/server_registry.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace zinc::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Field 22 of /proc/<pid>/stat (the start time in clock ticks); 0 when the process is gone.
uint64_t start_ticks(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto close = s.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) return 0;
    std::istringstream rest(s.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i)
        if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
    return 0;
}

bool alive(const ServerEntry& e) {
    if (e.pid <= 0) return false;
    if (::kill(e.pid, 0) != 0 && errno != EPERM) return false;
    const uint64_t t = start_ticks(e.pid);
    return e.start_ticks == 0 || t == 0 || t == e.start_ticks;
}

std::string server_runtime_base();

}  // namespace

std::string server_registry_dir() {
    return server_runtime_base() + "/servers";
}

namespace {
std::string server_runtime_base() {
    std::string base;
    if (const char* z = std::getenv("ZINC_RUNTIME_DIR"); z && *z)
        base = z;
    else if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x)
        base = std::string(x) + "/zinc";
    else
        base = "/tmp/zinc-" + std::to_string(::getuid());
    return base;
}
}  // namespace

ServerRegistration::ServerRegistration(const std::string& host, int port, const std::string& model,
                                       const std::string& path) {
    const std::string dir = server_registry_dir();
    std::error_code ec;
    fs::create_directories(dir, ec);
    // The /tmp fallback is private to this user, as $XDG_RUNTIME_DIR is.
    if (!ec && !std::getenv("ZINC_RUNTIME_DIR") && !std::getenv("XDG_RUNTIME_DIR"))
        fs::permissions(server_runtime_base(), fs::perms::owner_all, ec);
    const int pid = static_cast<int>(::getpid());
    json j = {{"pid", pid},
              {"start_ticks", start_ticks(pid)},
              {"host", host},
              {"port", port},
              {"model", model},
              {"path", fs::absolute(path, ec).string()},
              {"started", std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count()}};
    const std::string file = dir + "/" + std::to_string(pid) + ".json";
    const std::string tmp = file + ".tmp";
    {
        std::ofstream f(tmp);
        f << j.dump() << "\n";
        if (!f) {
            std::fprintf(stderr,
                         "zinc: warning: cannot register in %s (zinc ps will not list this "
                         "server)\n",
                         dir.c_str());
            return;
        }
    }
    fs::rename(tmp, file, ec);
    if (!ec) file_ = file;
}

ServerRegistration::~ServerRegistration() {
    if (!file_.empty()) {
        std::error_code ec;
        fs::remove(file_, ec);
    }
}

std::vector<ServerEntry> live_servers() {
    std::vector<ServerEntry> out;
    std::error_code ec;
    const std::string dir = server_registry_dir();
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string f = it->path().string();
        if (it->path().extension() != ".json") continue;
        std::ifstream in(f);
        json j = json::parse(in, nullptr, false);
        ServerEntry e;
        e.file = f;
        if (j.is_object()) {
            e.pid = j.value("pid", 0);
            e.start_ticks = j.value("start_ticks", uint64_t{0});
            e.host = j.value("host", std::string());
            e.port = j.value("port", 0);
            e.model = j.value("model", std::string());
            e.path = j.value("path", std::string());
            e.started = j.value("started", int64_t{0});
        }
        if (!alive(e)) {  // a killed server's entry (or a broken file): drop it
            std::error_code rm;
            fs::remove(f, rm);
            continue;
        }
        out.push_back(std::move(e));
    }
    std::sort(out.begin(), out.end(),
              [](const ServerEntry& a, const ServerEntry& b) { return a.pid < b.pid; });
    return out;
}

std::string server_url(const ServerEntry& e) {
    std::string h = e.host;
    if (h.empty() || h == "0.0.0.0") h = "127.0.0.1";
    if (h == "::" || h == "[::]") h = "::1";
    if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";
    return "http://" + h + ":" + std::to_string(e.port);
}

}  // namespace zinc::cli
