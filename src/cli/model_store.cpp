// zinc/cli/model_store.cpp — the models directory and its contents (see model_store.h).
#include "cli/model_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/default_model.h"
#include "gguf/gguf.h"

namespace zinc::cli {

namespace fs = std::filesystem;

namespace {

bool regular_size(const std::string& p, uint64_t& size) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    size = static_cast<uint64_t>(st.st_size);
    return true;
}

// llama.cpp's general.file_type values (enum llama_ftype) as their usual quant names.
std::string file_type_name(int64_t t) {
    static constexpr const char* kNames[] = {
        "F32",    "F16",    "Q4_0",  "Q4_1",    nullptr,  nullptr,  nullptr,  "Q8_0",
        "Q5_0",   "Q5_1",   "Q2_K",  "Q3_K_S",  "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
        "Q5_K_S", "Q5_K_M", "Q6_K",  "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS",
        "IQ1_S",  "IQ4_NL", "IQ3_S", "IQ3_M",   "IQ2_S",  "IQ2_M",  "IQ4_XS", "IQ1_M",
        "BF16",   nullptr,  nullptr, nullptr,   "TQ1_0",  "TQ2_0"};
    if (t >= 0 && t < static_cast<int64_t>(std::size(kNames)) && kNames[t]) return kNames[t];
    return "type " + std::to_string(t);
}

std::string quant_of_file(const std::string& path) {
    auto f = gguf::File::open(path);
    if (!f) return "?";
    auto t = f.value()->get_int("general.file_type");
    if (!t || !t.value()) return "-";
    return file_type_name(*t.value());
}

}  // namespace

std::string models_dir(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* m = std::getenv("ZINC_MODELS"); m && *m) return m;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x)
        return std::string(x) + "/zinc/models";
    if (const char* h = std::getenv("HOME"); h && *h)
        return std::string(h) + "/.local/share/zinc/models";
    return "";
}

std::string partial_dir(const std::string& dir, const CatalogEntry& e) {
    return dir + "/.partial/" + e.file;
}

std::vector<LocalModel> list_local_models(const std::string& dir, const Catalog& cat) {
    std::vector<LocalModel> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string file = it->path().filename().string();
        if (file.size() <= 5 || file.compare(file.size() - 5, 5, ".gguf") != 0 || file[0] == '.')
            continue;
        LocalModel m;
        m.path = it->path().string();
        if (!regular_size(m.path, m.size)) continue;
        struct stat st {};
        if (::stat(m.path.c_str(), &st) == 0) m.mtime = st.st_mtime;
        m.entry = cat.find_file(file);
        if (m.entry) {
            m.name = m.entry->full_name();
            m.quant = m.entry->tag;
            for (char& c : m.quant)
                c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        } else {
            m.name = file.substr(0, file.size() - 5);
            m.quant = quant_of_file(m.path);
        }
        out.push_back(std::move(m));
    }
    std::sort(out.begin(), out.end(),
              [](const LocalModel& a, const LocalModel& b) { return a.name < b.name; });
    return out;
}

std::string find_pulled(const CatalogEntry& e, const std::string& dir) {
    std::vector<std::string> dirs;
    if (!dir.empty()) dirs.push_back(dir);
    for (auto& d : default_model_dirs()) dirs.push_back(d);
    for (const auto& d : dirs) {
        const std::string p = d + "/" + e.file;
        uint64_t size = 0;
        if (regular_size(p, size) && size == e.size) return p;
    }
    return "";
}

std::string find_local_file(const std::string& dir, const std::string& name) {
    if (dir.empty() || name.empty() || name.find('/') != std::string::npos || name[0] == '.')
        return "";
    uint64_t size = 0;
    const bool has_ext = name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0;
    const std::string p = dir + "/" + name + (has_ext ? "" : ".gguf");
    return regular_size(p, size) ? p : "";
}

std::string human_size(uint64_t b) {
    char buf[32];
    if (b >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.1f GiB", b / double(1ull << 30));
    else if (b >= (1ull << 20))
        std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
    else if (b >= 1024)
        std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
    else
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
    return buf;
}

}  // namespace zinc::cli
