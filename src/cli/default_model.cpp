// zinc/cli/default_model.cpp — -m resolution (paths and model names) and the default model,
// pulled on first use with zinc pull's code (cli/pull.h).
#include "cli/default_model.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "cli/catalog.h"
#include "cli/llama_compat.h"
#include "cli/model_store.h"
#include "cli/pull.h"
#include "util/utf8.h"

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

namespace {

// The catalog's default entry (`"default": true`); null when the catalog is unreadable or marks
// none (then the file name kDefaultModelFile is searched for).
const CatalogEntry* default_entry() {
    auto cat = load_catalog();
    return cat ? cat.value()->default_entry() : nullptr;
}

}  // namespace

std::string find_default_model() {
    if (const CatalogEntry* e = default_entry()) return find_pulled(*e, models_dir());
    std::vector<std::string> dirs = default_model_dirs();
    if (auto d = models_dir(); !d.empty()) dirs.insert(dirs.begin(), d);
    for (const auto& d : dirs)
        if (std::string p = d + "/" + kDefaultModelFile; is_regular_file(p)) return p;
    return "";
}

Result<std::string> find_or_fetch_default_model() {
    if (auto p = find_default_model(); !p.empty()) return p;
    auto cat = load_catalog();
    if (!cat) return cat.error();
    const CatalogEntry* e = cat.value()->default_entry();
    if (!e) return make_error("no -m given, and the model catalog marks no default model");
    PullOptions po;
    po.dir = models_dir();
    po.quiet = !log_info();
    if (log_info()) {
        std::fprintf(stderr, "zinc: no -m given; pulling the default model %s into %s\n",
                     e->full_name().c_str(), po.dir.c_str());
        std::fflush(stderr);
    }
    auto p = pull_model(*e, po);
    if (!p)
        return make_error("no -m given, and pulling the default model failed: " +
                          p.error().message);
    return p;
}

Result<std::string> resolve_model_path(const std::string& arg, ModelArg* how, bool fetch) {
    ModelArg local;
    ModelArg& h = how ? *how : local;
    h = ModelArg{};
    if (arg.empty()) {
        if (!fetch) {
            std::string p = find_default_model();
            if (p.empty()) return make_error("the default model is not pulled yet");
            return h.path = p;
        }
        auto p = find_or_fetch_default_model();
        if (p) h.path = p.value();
        return p;
    }
    if (is_regular_file(arg)) return h.path = arg;
    const bool looks_like_path = arg.find('/') != std::string::npos ||
                                 (arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".gguf") == 0);
    const std::string dir = models_dir();
    auto cat = load_catalog();
    if (!cat) {
        h.bad_input = true;
        return cat.error();
    }
    if (const CatalogEntry* e = cat.value()->find(arg)) {
        h.name = arg;
        if (std::string p = find_pulled(*e, dir); !p.empty()) return h.path = p;
        h.bad_input = true;
        return make_error("the model " + e->full_name() + " is not pulled yet; run `zinc pull " +
                          utf8::escape_for_terminal(arg) + "` (" + human_size(e->size) + ") first" +
                          (dir.empty() ? std::string() : ", it goes to " + dir));
    }
    if (std::string p = find_local_file(dir, arg); !p.empty()) {
        h.name = arg;
        return h.path = p;
    }
    if (looks_like_path) return h.path = arg;  // the loader names the missing file
    h.bad_input = true;
    std::string msg = utf8::escape_for_terminal(arg) +
                      ": no such file, and no model of that name in the catalog or " +
                      (dir.empty() ? std::string("the models directory") : dir);
    if (std::string s = cat.value()->suggest(arg); !s.empty()) msg += "; did you mean " + s + "?";
    return make_error(msg + " (zinc list shows the pulled models, zinc list --catalog all)");
}

}  // namespace zinc::cli
