// zinc/cli/default_model.cpp — locating the default model, and fetching it on first use with the
// repository's scripts/fetch-models (which pins its sha256 and shows a progress bar).
#include "cli/default_model.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace zinc::cli {

namespace {

bool is_regular_file(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string cache_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
        return std::string(x) + "/zinc/models";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/zinc/models";
    return "";
}

}  // namespace

std::vector<std::string> default_model_dirs() {
    std::vector<std::string> dirs{"models"};
#ifdef ZINC_SOURCE_DIR
    dirs.emplace_back(ZINC_SOURCE_DIR "/models");
#endif
    if (auto c = cache_dir(); !c.empty()) dirs.push_back(c);
    return dirs;
}

std::string find_default_model() {
    for (const auto& d : default_model_dirs()) {
        std::string p = d + "/" + kDefaultModelFile;
        if (is_regular_file(p)) return p;
    }
    return "";
}

Result<std::string> find_or_fetch_default_model() {
    if (auto p = find_default_model(); !p.empty()) return p;
    const std::string dir = cache_dir();
    if (dir.empty()) return make_error("no -m given and no HOME to cache the default model in");
#ifdef ZINC_SOURCE_DIR
    const std::string script = ZINC_SOURCE_DIR "/scripts/fetch-models";
#else
    const std::string script;
#endif
    if (script.empty() || !is_regular_file(script))
        return make_error("no -m given, the default model " + std::string(kDefaultModelFile) +
                          " is not in ./models or " + dir +
                          ", and scripts/fetch-models is not "
                          "available to fetch it; pass -m FILE");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return make_error("cannot create the model cache " + dir + ": " + ec.message());
    std::fprintf(stderr, "zinc: no -m given; fetching the default model %s into %s\n",
                 kDefaultModelFile, dir.c_str());
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid < 0) return make_error("cannot start scripts/fetch-models (fork failed)");
    if (pid == 0) {
        ::dup2(2, 1);  // the script's messages go to stderr: stdout carries only generated text
        ::execlp("python3", "python3", script.c_str(), "--dir", dir.c_str(), "smollm2",
                 static_cast<char*>(nullptr));
        std::perror("zinc: cannot run python3");
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return make_error("lost track of scripts/fetch-models (waitpid failed)");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return make_error("fetching the default model failed (" + script + " --dir " + dir +
                          " smollm2); run it by hand or pass -m FILE");
    std::string p = dir + "/" + kDefaultModelFile;
    if (!is_regular_file(p))
        return make_error("scripts/fetch-models succeeded but " + p + " is missing");
    return p;
}

Result<std::string> resolve_model_path(const std::string& model_path) {
    if (!model_path.empty()) return model_path;
    return find_or_fetch_default_model();
}

}  // namespace zinc::cli
