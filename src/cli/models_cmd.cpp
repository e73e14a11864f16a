// zinc/cli/models_cmd.cpp — model management commands, as Ollama users know them:
// `zinc pull NAME...` (catalog model -> models directory), `zinc list` (pulled models;
// --catalog: every catalog model), `zinc rm NAME...` (refused while a running server uses it),
// `zinc ps` (running zinc servers and their models). docs/cli.md, "Model management".
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/catalog.h"
#include "cli/cli.h"
#include "cli/http_fetch.h"
#include "cli/llama_compat.h"
#include "cli/model_store.h"
#include "cli/pull.h"
#include "cli/server_registry.h"
#include "util/utf8.h"

namespace zinc::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Columns padded to their widest cell, three spaces apart; the last column is not padded.
void print_table(const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> w;
    for (const auto& r : rows)
        for (size_t i = 0; i < r.size(); ++i) {
            if (w.size() <= i) w.push_back(0);
            w[i] = std::max(w[i], r[i].size());
        }
    for (const auto& r : rows) {
        std::string line;
        for (size_t i = 0; i < r.size(); ++i) {
            line += r[i];
            if (i + 1 < r.size()) line += std::string(w[i] - r[i].size() + 3, ' ');
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        std::printf("%s\n", line.c_str());
    }
}

std::string format_time(int64_t t) {
    const time_t tt = static_cast<time_t>(t);
    std::tm tm{};
    localtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
    return buf;
}

std::string format_duration(int64_t s) {
    if (s < 60) return std::to_string(s) + " s";
    if (s < 3600) return std::to_string(s / 60) + " min";
    if (s < 86400) return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
    return std::to_string(s / 86400) + " days";
}

int64_t now_epoch() {
    return static_cast<int64_t>(std::time(nullptr));
}

uint64_t tree_size(const std::string& dir) {
    uint64_t n = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) n += it->file_size(ec);
    return n;
}

bool same_file(const std::string& a, const std::string& b) {
    std::error_code ec;
    return fs::equivalent(a, b, ec);
}

// The catalog, or the exit status after printing its error.
const Catalog* catalog_or_report(int& rc) {
    auto cat = load_catalog();
    if (!cat) {
        rc = report_error(cat.error().message);
        return nullptr;
    }
    return cat.value();
}

std::string unknown_name(const Catalog& cat, const std::string& name) {
    std::string msg = "unknown model '" + utf8::escape_for_terminal(name) +
                      "': not in the catalog (" + cat.names() + ")";
    if (std::string s = cat.suggest(name); !s.empty()) msg += "; did you mean " + s + "?";
    return msg;
}

void add_models_dir_flag(CLI::App& app, std::string& dir) {
    app.add_option("--models-dir", dir,
                   "the models directory (default: $ZINC_MODELS, else "
                   "$XDG_DATA_HOME/zinc/models or ~/.local/share/zinc/models)");
}

}  // namespace

int pull_main(int argc, char** argv) {
    CLI::App app{
        "zinc pull: download catalog models into the models directory (zinc list "
        "--catalog shows them)",
        "zinc pull"};
    std::vector<std::string> names;
    std::string dir;
    app.add_option("names", names, "catalog model names (name, name:tag or alias)")->required();
    add_models_dir_flag(app, dir);
    add_verbosity_flags(app);
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    int rc = 0;
    const Catalog* cat = catalog_or_report(rc);
    if (!cat) return rc;
    std::vector<const CatalogEntry*> entries;
    for (const auto& n : names) {
        const CatalogEntry* e = cat->find(n);
        if (!e) return report_error(unknown_name(*cat, n));
        entries.push_back(e);
    }
    PullOptions po;
    po.dir = models_dir(dir);
    po.quiet = !log_info();
    for (const CatalogEntry* e : entries) {
        auto p = pull_model(*e, po);
        if (!p) return report_error(p.error().message, kExitFailure);
        std::printf("%s ready: %s (%s, sha256 ok)\n", e->full_name().c_str(), p.value().c_str(),
                    human_size(e->size).c_str());
        std::fflush(stdout);
    }
    return kExitOk;
}

int list_main(int argc, char** argv) {
    CLI::App app{
        "zinc list: the models in the models directory (--catalog: every model zinc "
        "pull can fetch)",
        "zinc list"};
    std::string dir;
    bool show_catalog = false, as_json = false;
    add_models_dir_flag(app, dir);
    app.add_flag("--catalog", show_catalog,
                 "list the catalog instead: every model zinc pull knows");
    app.add_flag("--json", as_json, "one JSON document instead of the table");
    add_verbosity_flags(app);
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    int rc = 0;
    const Catalog* cat = catalog_or_report(rc);
    if (!cat) return rc;
    dir = models_dir(dir);
    if (show_catalog) {
        json arr = json::array();
        std::vector<std::vector<std::string>> rows{
            {"NAME", "SIZE", "PULLED", "PACKAGES", "DESCRIPTION"}};
        for (const auto& e : cat->entries) {
            // PULLED: in the models directory, or where -m NAME finds it otherwise (a source
            // tree's models/, filled by scripts/fetch-models).
            const bool pulled = fs::is_regular_file(dir + "/" + e.file);
            const std::string found = find_pulled(e, dir);
            const std::string where = pulled          ? "yes"
                                      : found.empty() ? "no"
                                                      : fs::path(found).parent_path().string();
            std::string pkgs = e.parts[0].package + "==" + e.parts[0].version;
            if (e.parts.size() > 1) pkgs += " (+" + std::to_string(e.parts.size() - 1) + " parts)";
            rows.push_back({e.full_name(), human_size(e.size), where, pkgs, e.description});
            json parts = json::array();
            for (const auto& p : e.parts)
                parts.push_back(
                    {{"package", p.package}, {"version", p.version}, {"member", p.member}});
            arr.push_back({{"name", e.name},
                           {"tag", e.tag},
                           {"aliases", e.aliases},
                           {"file", e.file},
                           {"size", e.size},
                           {"sha256", e.sha256},
                           {"default", e.is_default},
                           {"pulled", pulled},
                           {"path", found.empty() ? json(nullptr) : json(found)},
                           {"parts", parts},
                           {"description", e.description}});
        }
        if (as_json)
            std::printf("%s\n", json{{"catalog", cat->source}, {"models", arr}}.dump(2).c_str());
        else
            print_table(rows);
        return kExitOk;
    }
    const auto models = list_local_models(dir, *cat);
    json arr = json::array();
    std::vector<std::vector<std::string>> rows{{"NAME", "SIZE", "QUANT", "MODIFIED", "FILE"}};
    for (const auto& m : models) {
        rows.push_back({m.name, human_size(m.size), m.quant, format_time(m.mtime),
                        fs::path(m.path).filename().string()});
        arr.push_back({{"name", m.name},
                       {"path", m.path},
                       {"size", m.size},
                       {"quant", m.quant},
                       {"modified", m.mtime},
                       {"catalog", m.entry != nullptr}});
    }
    // Pulls that stopped part way (DIR/.partial/<file>): zinc pull resumes them.
    json partial = json::array();
    for (const auto& e : cat->entries)
        if (const std::string w = partial_dir(dir, e); fs::is_directory(w))
            partial.push_back({{"name", e.full_name()}, {"bytes", tree_size(w)}});
    if (as_json) {
        std::printf(
            "%s\n",
            json{{"models_dir", dir}, {"models", arr}, {"partial", partial}}.dump(2).c_str());
        return kExitOk;
    }
    print_table(rows);
    for (const auto& p : partial)
        std::printf("(partial: %s, %s so far; zinc pull resumes it, zinc rm drops it)\n",
                    p["name"].get<std::string>().c_str(),
                    human_size(p["bytes"].get<uint64_t>()).c_str());
    if (models.empty() && log_info())
        std::fprintf(stderr,
                     "zinc: no models in %s yet; zinc pull NAME fetches one (zinc list "
                     "--catalog shows them)\n",
                     dir.c_str());
    return kExitOk;
}

int rm_main(int argc, char** argv) {
    CLI::App app{"zinc rm: delete models from the models directory", "zinc rm"};
    std::vector<std::string> names;
    std::string dir;
    bool force = false;
    app.add_option("names", names, "model names, as zinc list shows them")->required();
    add_models_dir_flag(app, dir);
    app.add_flag("--force", force, "delete even a model a running zinc server has loaded");
    add_verbosity_flags(app);
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    int rc = 0;
    const Catalog* cat = catalog_or_report(rc);
    if (!cat) return rc;
    dir = models_dir(dir);
    struct Target {
        std::string name, path, partial;
    };
    std::vector<Target> targets;
    for (const auto& n : names) {
        Target t;
        t.name = n;
        if (const CatalogEntry* e = cat->find(n)) {
            t.name = e->full_name();
            if (fs::is_regular_file(dir + "/" + e->file)) t.path = dir + "/" + e->file;
            if (fs::is_directory(partial_dir(dir, *e))) t.partial = partial_dir(dir, *e);
        } else {
            t.path = find_local_file(dir, n);
        }
        if (t.path.empty() && t.partial.empty()) {
            std::string msg = "'" + utf8::escape_for_terminal(n) + "' is not in " + dir +
                              " (zinc list shows what is)";
            std::vector<std::pair<std::string, std::string>> cands;
            for (const auto& m : list_local_models(dir, *cat)) {
                cands.emplace_back(m.name, m.name);
                if (m.entry) cands.emplace_back(m.entry->name, m.name);
            }
            if (std::string s = closest_match(n, cands); !s.empty())
                msg += "; did you mean " + s + "?";
            return report_error(msg);
        }
        if (!t.path.empty() && !force)
            for (const auto& s : live_servers())
                if (same_file(s.path, t.path))
                    return report_error(t.name + " is in use by the zinc server pid " +
                                            std::to_string(s.pid) + " on " + server_url(s) +
                                            "; stop it first, or pass --force (the server keeps "
                                            "its copy until it stops)",
                                        kExitFailure);
        targets.push_back(std::move(t));
    }
    for (const auto& t : targets) {
        std::error_code ec;
        if (!t.partial.empty()) {
            fs::remove_all(t.partial, ec);
            fs::remove(dir + "/.partial", ec);  // only when empty
            if (t.path.empty()) std::printf("deleted the partial download of %s\n", t.name.c_str());
        }
        if (!t.path.empty()) {
            if (!fs::remove(t.path, ec) || ec)
                return report_error("cannot delete " + t.path + ": " + ec.message(), kExitFailure);
            std::printf("deleted %s (%s)\n", t.name.c_str(), t.path.c_str());
        }
    }
    return kExitOk;
}

int ps_main(int argc, char** argv) {
    CLI::App app{"zinc ps: the running zinc servers and the models they have loaded", "zinc ps"};
    bool as_json = false;
    app.add_flag("--json", as_json, "one JSON document instead of the table");
    add_verbosity_flags(app);
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    json arr = json::array();
    std::vector<std::vector<std::string>> rows{
        {"NAME", "PID", "ADDRESS", "SIZE", "STATUS", "UPTIME", "MODEL FILE"}};
    for (const auto& s : live_servers()) {
        // /health needs no API key; its "model" is what the server serves now.
        std::string status = "not responding", model = s.model;
        if (auto h = http_get_text(server_url(s) + "/health", 2.0); h) {
            json j = json::parse(h.value(), nullptr, false);
            if (j.is_object()) {
                status = j.value("status", std::string("ok"));
                model = j.value("model", model);
            }
        }
        uint64_t size = 0;
        std::error_code ec;
        if (fs::is_regular_file(s.path, ec)) size = fs::file_size(s.path, ec);
        const int64_t up = now_epoch() - s.started;
        rows.push_back({model, std::to_string(s.pid), server_url(s), human_size(size), status,
                        format_duration(up < 0 ? 0 : up), s.path});
        arr.push_back({{"name", model},
                       {"pid", s.pid},
                       {"url", server_url(s)},
                       {"path", s.path},
                       {"size", size},
                       {"status", status},
                       {"started", s.started}});
    }
    if (as_json)
        std::printf("%s\n", json{{"servers", arr}}.dump(2).c_str());
    else
        print_table(rows);
    return kExitOk;
}

}  // namespace zinc::cli
