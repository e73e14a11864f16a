// zinc/cli/model_loader.cpp — GGUF -> Model + Tokenizer for the CLI, with a load progress bar.
#include "cli/model_loader.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace zinc::cli {

void prefault_weights(const gguf::File& file, bool progress) {
    progress = progress && ::isatty(2);
    uint64_t total = 0;
    for (const auto& t : file.tensors()) total += t.n_bytes;
    uint64_t done = 0;
    int last_pct = -1;
    volatile uint8_t sink = 0;
    constexpr size_t kPage = 4096;
    for (const auto& t : file.tensors()) {
        uint8_t acc = 0;
        for (size_t off = 0; off < t.n_bytes; off += kPage) acc ^= t.data[off];
        sink = sink ^ acc;
        done += t.n_bytes;
        if (progress && total > 0) {
            const int pct = static_cast<int>(done * 100 / total);
            if (pct != last_pct) {
                last_pct = pct;
                const int width = 30, fill = pct * width / 100;
                std::fprintf(stderr, "\rloading %s [%.*s%*s] %3d%%", file.path().c_str(), fill,
                             "##############################", width - fill, "", pct);
                std::fflush(stderr);
            }
        }
    }
    if (progress && total > 0) std::fprintf(stderr, "\r\033[K");  // clear the bar
    (void)sink;
}

namespace {

// Model and tokenizer errors name tensors and keys; make sure the file is named too.
Error with_path(const Error& e, const std::string& path) {
    if (e.message.find(path) != std::string::npos) return e;
    return make_error(path + ": " + e.message);
}

}  // namespace

Result<LoadedModel> load_model(const std::string& path, const LoaderOptions& opts) {
    LoadedModel m;
    auto f = gguf::File::open(path);
    if (!f) return f.error();
    m.file = std::move(f.value());
    if (opts.prefault) prefault_weights(*m.file, opts.progress);
    model::LoadOptions lo;
    lo.n_threads = opts.n_threads;
    auto md = model::Model::load(*m.file, lo);
    if (!md) return with_path(md.error(), path);
    m.model = std::move(md.value());
    if (opts.tokenizer) {
        auto t = tokenizer::Tokenizer::from_gguf(*m.file);
        if (!t) return with_path(t.error(), path);
        m.tok = std::move(t.value());
    }
    return m;
}

}  // namespace zinc::cli
