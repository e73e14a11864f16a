// zinc/cli/check.cpp — the --check report. Each item is one line "READY|WARN|FAIL <item>: ...";
// a FAIL means zinc cannot run this model here, a WARN that it can but something is off.
#include "cli/check.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "chat/chat_template.h"
#include "cli/cli.h"
#include "cli/default_model.h"
#include "cli/host_info.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/tier.h"
#include "tokenizer/tokenizer.h"

namespace zinc::cli {

namespace {

// Memory zinc needs beyond the weights and the KV cache: activations, logits, scratch, code.
constexpr uint64_t kOverheadBytes = 64ull << 20;

class Report {
  public:
    void ready(const std::string& item, const std::string& msg) { line("READY", item, msg); }
    void warn(const std::string& item, const std::string& msg) {
        ++n_warn_;
        line("WARN", item, msg);
    }
    void fail(const std::string& item, const std::string& msg) {
        ++n_fail_;
        line("FAIL", item, msg);
    }
    int finish() const {
        std::printf("zinc --check: %s (%d warning%s, %d failure%s)\n",
                    n_fail_   ? "FAIL"
                    : n_warn_ ? "WARN"
                              : "READY",
                    n_warn_, n_warn_ == 1 ? "" : "s", n_fail_, n_fail_ == 1 ? "" : "s");
        return n_fail_ ? kExitFailure : kExitOk;
    }

  private:
    static void line(const char* level, const std::string& item, const std::string& msg) {
        std::printf("%-5s %s: %s\n", level, item.c_str(), msg.c_str());
        std::fflush(stdout);
    }
    int n_warn_ = 0, n_fail_ = 0;
};

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
    return s.empty() ? "(none)" : s;
}

}  // namespace

int run_check(const CheckOptions& o) {
    Report r;
    const HostInfo h = probe_host();

    // Host.
    std::string host = h.cpu_model + ", " + std::to_string(h.n_threads) + " hardware threads";
    if (h.mem_total)
        host += ", " + format_bytes(h.mem_total) + " RAM (" + format_bytes(h.mem_available) +
                " available)";
    if (h.mem_available == 0)
        r.warn("host", host + "; available memory unknown (/proc/meminfo)");
    else
        r.ready("host", host);
    if (o.n_threads > h.n_threads)
        r.warn("threads", "-t " + std::to_string(o.n_threads) + " exceeds the " +
                              std::to_string(h.n_threads) + " hardware threads");

    // CPU features.
    if (!h.missing.empty())
        r.fail("cpu", "this binary uses " + join(h.build_features) + " but the CPU lacks " +
                          join(h.missing) + "; rebuild with -DZINC_CPU_ARCH= (portable)");
    else
        r.ready("cpu", "simd " + join(h.cpu_features) + "; binary uses " + join(h.build_features));

    // Model file.
    std::string path = o.model_path;
    if (path.empty()) {
        path = find_default_model();
        if (path.empty()) {
            r.warn("model", std::string("no -m given and the default model ") + kDefaultModelFile +
                                " is not downloaded yet; the first run pulls it (~94 MiB; or zinc "
                                "pull smollm2-135m)");
            return r.finish();
        }
    } else if (auto named = resolve_model_path(path, nullptr, /*fetch=*/false); named) {
        path = named.value();  // -m NAME: the pulled catalog model or models-directory file
    } else {
        r.fail("model", named.error().message);
        return r.finish();
    }
    auto f = gguf::File::open(path);
    if (!f) {
        r.fail("model", f.error().message);
        return r.finish();
    }
    const gguf::File& file = *f.value();
    uint64_t weight_bytes = 0;
    for (const auto& t : file.tensors()) weight_bytes += t.n_bytes;
    r.ready("model", path + ": GGUF v" + std::to_string(file.version()) + ", " +
                         std::to_string(file.tensors().size()) + " tensors, " +
                         format_bytes(weight_bytes) + " of weights");

    model::LoadOptions mo;
    mo.n_threads = o.n_threads;
    auto md = model::Model::load(file, mo);
    if (!md) {
        r.fail("weights", md.error().message);
        return r.finish();
    }
    const model::Model& model = *md.value();
    r.ready("weights", "architecture " + model.arch_name() +
                           ", every tensor has the expected "
                           "name, shape and type; " +
                           std::to_string(model.n_vocab()) + " vocab, trained context " +
                           std::to_string(model.n_ctx_train()));

    auto tok = tokenizer::Tokenizer::from_gguf(file);
    if (!tok) {
        r.fail("tokenizer", tok.error().message);
    } else {
        const auto& t = *tok.value();
        std::string msg = std::to_string(t.n_vocab()) + " tokens, bos " + std::to_string(t.bos()) +
                          ", eos " + std::to_string(t.eos());
        const auto probe = t.encode("Hello, world!", false, false);
        for (const std::string& w : t.warnings()) r.warn("tokenizer", w);
        if (probe.empty())
            r.fail("tokenizer", msg + "; encoding \"Hello, world!\" gave no tokens");
        else if (t.n_vocab() != model.n_vocab())
            r.warn("tokenizer",
                   msg + "; the model's output has " + std::to_string(model.n_vocab()) + " logits");
        else
            r.ready("tokenizer",
                    msg + "; \"Hello, world!\" -> " + std::to_string(probe.size()) + " tokens");
    }

    // Chat template (only --chat needs it, so problems are warnings).
    if (auto src = chat::template_from_gguf(file); !src) {
        r.warn("chat template", src.error().message);
    } else if (auto tmpl = chat::ChatTemplate::parse(src.value().text, "tokenizer.chat_template");
               !tmpl) {
        r.warn("chat template", tmpl.error().message + "; --chat will not work");
    } else if (src.value().is_fallback) {
        r.warn("chat template",
               "the file has none; --chat uses ChatML, which may not be the "
               "format the model was trained on");
    } else {
        r.ready("chat template", "tokenizer.chat_template parses (" +
                                     std::to_string(src.value().text.size()) + " bytes)");
    }

    // Context and memory fit.
    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : model.n_ctx_train();
    if (n_ctx > model.n_ctx_train())
        r.warn("context", "-c " + std::to_string(n_ctx) + " exceeds the trained context " +
                              std::to_string(model.n_ctx_train()) +
                              "; quality will degrade past it");
    const uint64_t kv = model.kv_cache_bytes(n_ctx);
    const uint64_t need = file.file_size() + kv + kOverheadBytes;
    const std::string msg = "model file " + format_bytes(file.file_size()) + " + KV cache " +
                            format_bytes(kv) + " (-c " + std::to_string(n_ctx) + ") + " +
                            format_bytes(kOverheadBytes) + " overhead = " + format_bytes(need);
    if (h.mem_available == 0)
        r.warn("memory", msg + "; available memory unknown");
    else if (need > h.mem_available)
        r.fail("memory", msg + " > " + format_bytes(h.mem_available) + " available; lower -c");
    else if (need > h.mem_available / 10 * 8)
        r.warn("memory", msg + ", over 80% of the " + format_bytes(h.mem_available) + " available");
    else
        r.ready("memory", msg + " of " + format_bytes(h.mem_available) + " available");

    // GPU (backend/cuda/cuda_tier.h): devices, driver and runtime versions, or why none.
    const cuda::Probe p = cuda::probe();
    if (p.devices.empty()) {
        r.ready("gpu", "none usable (" + p.reason + "); the CPU tier runs");
    } else {
        for (const auto& d : p.devices)
            r.ready("gpu", "device " + std::to_string(d.index) + ": " + d.name + ", compute " +
                               std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor) +
                               ", " + std::to_string(d.n_sm) + " SMs, " +
                               format_bytes(d.mem_total) + " (" + format_bytes(d.mem_free) +
                               " free); driver CUDA " + cuda::version_string(p.driver_version) +
                               ", runtime " + cuda::version_string(p.runtime_version));
    }
    // Execution tier (runtime/tier.h): what `zinc --prompt` would run on, and why.
    // The device line names the device a run would use (-d / ZINC_DEVICE / 0).
    if (auto ro = runtime::runtime_options(o.tier, o.device,
                                           [](const char* k) { return std::getenv(k); });
        !ro) {
        r.fail("tier", ro.error().message);
    } else {
        const runtime::RuntimeOptions& rt = ro.value();
        auto c = runtime::choose_tier(rt.tier, rt.tier_source, p,
                                      cuda::device_bytes_needed(model, n_ctx), rt.device,
                                      rt.device_source);
        if (!c) {
            r.fail("tier", c.error().message);
        } else {
            r.ready("tier",
                    std::string(runtime::to_string(c.value().tier)) + ": " + c.value().reason);
            std::string dev;
            if (c.value().tier == runtime::Tier::Cuda) {
                for (const auto& d : p.devices)
                    if (d.index == c.value().device)
                        dev = "cuda:" + std::to_string(d.index) + " (" + d.name + ")";
            } else {
                dev = "cpu";
                if (rt.device_source != "default")
                    dev += " (" + rt.device_source + " " + std::to_string(rt.device) +
                           " not used: the CPU tier runs)";
            }
            r.ready("device", dev + "; devices found: " + runtime::describe_devices(p));
        }
    }
    return r.finish();
}

}  // namespace zinc::cli
