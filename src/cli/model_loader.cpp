// zinc/cli/model_loader.cpp — GGUF -> Model + Tokenizer for the CLI, with a load progress bar.
#include "cli/model_loader.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <new>

#include "cli/host_info.h"
#include "cli/llama_compat.h"
#include "util/utf8.h"

namespace zinc::cli {

void prefault_weights(const gguf::File& file, bool progress) {
    progress = progress && ::isatty(2) && log_info();
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

namespace {

// This process's virtual size in bytes (/proc/self/statm, first field in pages); 0 if unknown.
uint64_t current_vm_bytes() {
    std::ifstream f("/proc/self/statm");
    uint64_t pages = 0;
    if (!(f >> pages)) return 0;
    return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

Result<void> check_memory_fit(const model::Model& model, size_t file_size, int n_ctx,
                              const std::string& flag) {
    const uint64_t kv = model.kv_cache_bytes(n_ctx);
    const uint64_t need = file_size + kv + kWorkspaceBytes;
    const std::string what = "a context of " + std::to_string(n_ctx) + " positions needs " +
                             format_bytes(need) + " (model file " + format_bytes(file_size) +
                             " + KV cache " + format_bytes(kv) + " + " +
                             format_bytes(kWorkspaceBytes) + " workspace)";
    if (const uint64_t avail = probe_host().mem_available; avail > 0 && need > avail)
        return make_error(what + ", more than the " + format_bytes(avail) +
                          " of memory available; lower " + flag);
    rlimit rl{};
    if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        const uint64_t limit = rl.rlim_cur, used = current_vm_bytes();
        const uint64_t left = limit > used ? limit - used : 0;
        if (kv + kWorkspaceBytes > left)
            return make_error(what + ", more than the " + format_bytes(left) +
                              " left under the address-space limit (ulimit -v " +
                              std::to_string(limit / 1024) + "); lower " + flag);
    }
    return {};
}

Result<LoadedModel> load_model(const std::string& path, const LoaderOptions& opts) {
    LoadedModel m;
    auto f = gguf::File::open(path);
    if (!f) return f.error();
    m.file = std::move(f.value());
    model::LoadOptions lo;
    lo.n_threads = opts.n_threads;
    auto md = model::Model::load(*m.file, lo);
    if (!md) return with_path(md.error(), path);
    m.model = std::move(md.value());
    if (opts.tokenizer) {
        auto t = tokenizer::Tokenizer::from_gguf(*m.file);
        if (!t) return with_path(t.error(), path);
        m.tok = std::move(t.value());
        for (const std::string& w : m.tok->warnings())
            std::fprintf(stderr, "zinc: warning: %s: %s\n", utf8::escape_for_terminal(path).c_str(),
                         w.c_str());
    }
    if (opts.chat_template) {
        if (auto src = chat::template_from_gguf(*m.file); src)
            m.chat_template = std::move(src.value());
        else
            m.chat_template_error = src.error().message;
    }
    if (opts.release_metadata) m.file->release_metadata();
    // Paged in after binding: binding reads only tensor headers, and with the metadata already
    // released the parsed metadata and the resident weights never coexist.
    if (opts.prefault) prefault_weights(*m.file, opts.progress);
    return m;
}

Result<runtime::RunContext> open_run_context(const model::Model& model, int n_ctx, int n_threads,
                                             const std::string& tier_flag, int device_flag,
                                             bool exact, int tensor_parallel,
                                             int state_checkpoints) {
    runtime::RunContextOptions co;
    co.n_ctx = n_ctx;
    co.n_threads = n_threads;
    co.tier_flag = tier_flag;
    co.device_flag = device_flag;
    co.exact_flag = exact;
    co.tensor_parallel = tensor_parallel;
    co.n_state_checkpoints = state_checkpoints;
    try {
        return runtime::create_run_context(model, co);
    } catch (const std::bad_alloc&) {
        return make_error("out of memory allocating a context of " + std::to_string(n_ctx) +
                          " positions (KV cache " + format_bytes(model.kv_cache_bytes(n_ctx)) +
                          "); lower -c/--context");
    }
}

}  // namespace zinc::cli
