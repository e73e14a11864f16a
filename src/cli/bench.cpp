// zinc/cli/bench.cpp — `zinc bench`: prompt processing (ppN) and token generation (tgN) speed,
// measured the way llama-bench measures them, so the two can be compared on one file:
//   ppN: from an empty KV cache, one eval of N tokens (BOS then random ids), timed.
//   tgN: from an empty KV cache, N single-token evals (BOS then random ids, no sampling), timed.
//   --n-depth D (llama-bench's -d; here -d stays the CUDA device): the same tests with D random
//   tokens already in the KV cache (evaluated untimed first), named "pp512 @ d4096" as
//   llama-bench names them; a comma list runs every depth.
// One untimed warm-up of each, then -r repetitions; tokens/s is reported as mean ± sample
// standard deviation over repetitions. Also reports peak resident memory (getrusage) and the
// runtime evidence (runtime/evidence.h): the tier, ops per device, fallbacks, validation and
// shortcuts, per test in --json and as one line at the end; on the CUDA tier the device memory
// the runner holds (weights, KV pool, scratch: "device_memory" in --json, null on the CPU).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/default_model.h"
#include "cli/host_info.h"
#include "cli/llama_compat.h"
#include "cli/model_loader.h"
#include "cli/validators.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "runtime/run_context.h"

namespace zinc::cli {

namespace {

struct BenchOptions {
    std::string model_path;
    int n_prompt = 512;
    int n_gen = 128;
    std::vector<int> depths = {0};  // --n-depth: KV positions filled before each test
    int reps = 5;
    int n_threads = 0;
    int n_batch = 512;
    bool json = false;
    std::string tier;    // --tier; empty: ZINC_TIER or auto
    bool exact = false;  // --exact
    int device = -1;     // -d/--device; < 0: ZINC_DEVICE, else 0
    int tensor_parallel = 0;  // --tensor-parallel/-tp, -sm, -ts: apply_tensor_parallel
};

struct TestResult {
    std::string name;  // "pp512" / "tg128", "pp512 @ d4096" at a depth
    int n_prompt = 0, n_gen = 0, n_depth = 0;
    std::vector<double> samples_ns;
    std::vector<double> samples_ts;
    std::string evidence_json;  // this test's evidence (warm-up and repetitions)
    double avg_ts() const {
        double s = 0;
        for (double x : samples_ts) s += x;
        return samples_ts.empty() ? 0 : s / static_cast<double>(samples_ts.size());
    }
    double sd_ts() const {
        if (samples_ts.size() < 2) return 0;
        const double m = avg_ts();
        double s = 0;
        for (double x : samples_ts) s += (x - m) * (x - m);
        return std::sqrt(s / static_cast<double>(samples_ts.size() - 1));
    }
    double avg_ns() const {
        double s = 0;
        for (double x : samples_ns) s += x;
        return samples_ns.empty() ? 0 : s / static_cast<double>(samples_ns.size());
    }
};

using Clock = std::chrono::steady_clock;

std::string json_escape(const std::string& s) {
    std::string o;
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            o += buf;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o;
}

std::string json_array(const std::vector<double>& v, const char* fmt) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        char buf[64];
        std::snprintf(buf, sizeof buf, fmt, v[i]);
        s += (i ? ", " : "") + std::string(buf);
    }
    return s + "]";
}

class Runner {
  public:
    Runner(model::Context& ctx, int32_t n_vocab, int32_t bos)
        : ctx_(ctx), n_vocab_(n_vocab), bos_(bos), rng_(1234) {}

    // Time one test; returns nanoseconds, or an error message.
    Result<double> pp(int n, int depth) {
        if (auto r = fill(depth); !r) return r.error();
        std::vector<int32_t> toks(static_cast<size_t>(n));
        for (auto& t : toks) t = random_token();
        if (bos_ >= 0 && depth == 0) toks[0] = bos_;
        const auto t0 = Clock::now();
        if (auto r = ctx_.eval(toks); !r) return r.error();
        return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    }
    Result<double> tg(int n, int depth) {
        if (auto r = fill(depth); !r) return r.error();
        int32_t tok = bos_ >= 0 && depth == 0 ? bos_ : random_token();
        const auto t0 = Clock::now();
        for (int i = 0; i < n; ++i) {
            const int32_t one[1] = {tok};
            if (auto r = ctx_.eval(one); !r) return r.error();
            tok = random_token();
        }
        return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    }

  private:
    // Empty the KV cache, then evaluate `depth` tokens (BOS then random ids) untimed.
    Result<void> fill(int depth) {
        ctx_.reset();
        if (depth == 0) return {};
        std::vector<int32_t> toks(static_cast<size_t>(depth));
        for (auto& t : toks) t = random_token();
        if (bos_ >= 0) toks[0] = bos_;
        return ctx_.eval(toks);
    }
    int32_t random_token() {
        return static_cast<int32_t>(rng_() % static_cast<uint64_t>(n_vocab_));
    }
    model::Context& ctx_;
    int32_t n_vocab_;
    int32_t bos_;
    std::mt19937_64 rng_;
};

}  // namespace

int bench_main(int argc, char** argv) {
    BenchOptions o;
    CLI::App app{"zinc bench: prompt processing and generation speed, like llama-bench",
                 "zinc bench"};
    app.add_option("-m,--model", o.model_path,
                   "GGUF model file, or a model name (zinc list; default: SmolLM2-135M-Instruct)");
    app.add_option("-p,--n-prompt", o.n_prompt, "prompt tokens for the pp test; 0: skip")
        ->check(int_in(0, 1 << 20))
        ->capture_default_str();
    app.add_option("-n,--n-gen", o.n_gen, "generated tokens for the tg test; 0: skip")
        ->check(int_in(0, 1 << 20))
        ->capture_default_str();
    app.add_option("--n-depth", o.depths,
                   "KV positions filled before each test, comma-separated (llama-bench's -d)")
        ->delimiter(',')
        ->check(int_in(0, 1 << 20))
        ->capture_default_str();
    app.add_option("-r,--repetitions", o.reps, "timed repetitions of each test")
        ->check(int_in(1, 1000))
        ->capture_default_str();
    app.add_option("-t,--threads", o.n_threads, "threads; 0: all hardware threads")
        ->check(int_in(0, 1024))
        ->capture_default_str();
    app.add_option("-b,--batch-size", o.n_batch, "max tokens per forward chunk")
        ->check(int_in(1, 1 << 20))
        ->capture_default_str();
    app.add_flag("--json", o.json, "print JSON (an array, one object a test) instead of a table");
    app.add_flag("--exact", o.exact,
                 "the CUDA tier computes the CPU tier's exact bits (slower; default: ZINC_EXACT, "
                 "else the fast kernels)");
    app.add_option("--tier", o.tier,
                   "execution tier: auto, cuda or cpu (default: ZINC_TIER, else auto)");
    app.add_option("-d,--device", o.device,
                   "CUDA device index for the cuda tier (default: ZINC_DEVICE, else 0)")
        ->check(int_in(0, 1023));
    std::string gpu_layers;
    add_gpu_layers_flag(app, gpu_layers);
    TensorParallelFlags tp_flags;
    add_tensor_parallel_flags(app, tp_flags);
    add_verbosity_flags(app);
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    if (auto e = apply_gpu_layers(gpu_layers, o.tier); !e.empty()) return report_error(e);
    if (auto e = apply_tensor_parallel(tp_flags, o.tensor_parallel); !e.empty())
        return report_error(e);

    if (o.n_prompt == 0 && o.n_gen == 0)
        return report_error("-p 0 and -n 0 leave nothing to measure; set -p or -n above 0");

    ModelArg how;
    auto resolved = resolve_model_path(o.model_path, &how);
    if (!resolved)
        return report_error(resolved.error().message, how.bad_input ? kExitBadInput : kExitFailure);
    const std::string path = resolved.value();
    const int n_threads = o.n_threads > 0 ? o.n_threads : probe_host().n_threads;
    LoaderOptions lo;
    lo.n_threads = n_threads;
    lo.progress = !o.json;
    lo.release_metadata = true;  // nothing below reads it; the measured peak is the engine's
    auto loaded = load_model(path, lo);
    if (!loaded) return report_error(loaded.error().message);
    LoadedModel& m = loaded.value();

    model::ContextOptions co;
    const int max_depth = *std::max_element(o.depths.begin(), o.depths.end());
    co.n_ctx = max_depth + o.n_prompt + o.n_gen;
    co.n_threads = n_threads;
    co.n_batch = o.n_batch;
    if (auto fit = check_memory_fit(*m.model, m.file->file_size(), co.n_ctx, "-p/-n/--n-depth");
        !fit)
        return report_error(fit.error().message);
    warn_if_oversubscribed(o.n_threads);  // once the run is known to go ahead
    std::unique_ptr<model::Context> ctx_owner;
    runtime::RunContext rc;
    try {
        runtime::RunContextOptions rco;
        rco.n_ctx = co.n_ctx;
        rco.n_threads = co.n_threads;
        rco.n_batch = co.n_batch;
        rco.tier_flag = o.tier;
        rco.device_flag = o.device;
        rco.exact_flag = o.exact;
        rco.tensor_parallel = o.tensor_parallel;
        auto ctx_r = runtime::create_run_context(*m.model, rco);
        if (!ctx_r) return report_error(ctx_r.error().message);
        rc = std::move(ctx_r.value());
        ctx_owner = std::move(rc.ctx);
        if (log_info())
            std::fprintf(stderr, "zinc: tier %s: %s\n", runtime::to_string(rc.choice.tier),
                         rc.choice.reason.c_str());
    } catch (const std::bad_alloc&) {
        return report_error("out of memory allocating a context of " + std::to_string(co.n_ctx) +
                            " positions (KV cache " +
                            format_bytes(m.model->kv_cache_bytes(co.n_ctx)) + "); lower -p/-n");
    }
    model::Context& ctx = *ctx_owner;
    Runner run(ctx, m.model->n_vocab(), m.tok->bos());

    std::vector<TestResult> results;
    for (int d : o.depths) {
        const std::string at = d > 0 ? " @ d" + std::to_string(d) : "";
        if (o.n_prompt > 0)
            results.push_back(
                {"pp" + std::to_string(o.n_prompt) + at, o.n_prompt, 0, d, {}, {}, {}});
        if (o.n_gen > 0)
            results.push_back({"tg" + std::to_string(o.n_gen) + at, 0, o.n_gen, d, {}, {}, {}});
    }

    uint64_t weight_bytes = 0, n_params = 0;
    for (const auto& t : m.file->tensors()) {
        weight_bytes += t.n_bytes;
        n_params += static_cast<uint64_t>(t.n_elements());
    }
    const std::string model_desc =
        m.model->arch_name() + " " + path.substr(path.find_last_of('/') + 1);
    if (!o.json) {
        std::printf("| %-40s | %10s | %9s | %-7s | %7s | %14s | %18s |\n", "model", "size",
                    "params", "backend", "threads", "test", "t/s");
        std::printf("| %.40s | %.10s | %.9s | %.7s | %.7s | %.14s | %.18s |\n",
                    "----------------------------------------",
                    "----------:", "---------:", "-------",
                    "------:", "-------------:", "-----------------:");
        std::fflush(stdout);
    }
    for (auto& t : results) {
        const int n = t.n_prompt > 0 ? t.n_prompt : t.n_gen;
        const int d = t.n_depth;
        auto once = [&]() { return t.n_prompt > 0 ? run.pp(n, d) : run.tg(n, d); };
        const runtime::EvidenceSnapshot ev0 = rc.evidence->snapshot();
        // Warm-up (untimed), as llama-bench does: one pp of the same size, or one tg token.
        if (auto w = t.n_prompt > 0 ? run.pp(n, d) : run.tg(1, d); !w)
            return report_error(w.error().message, kExitFailure);
        for (int r = 0; r < o.reps; ++r) {
            auto ns = once();
            if (!ns) return report_error(ns.error().message, kExitFailure);
            t.samples_ns.push_back(ns.value());
            t.samples_ts.push_back(1e9 * n / ns.value());
        }
        t.evidence_json =
            runtime::evidence_json(runtime::evidence_delta(rc.evidence->snapshot(), ev0));
        if (!o.json) {
            char ts[64];
            std::snprintf(ts, sizeof ts, "%.2f ± %.2f", t.avg_ts(), t.sd_ts());
            std::printf("| %-40s | %10s | %7.2f M | %-7s | %7d | %14s | %18s |\n",
                        model_desc.c_str(), format_bytes(weight_bytes).c_str(),
                        static_cast<double>(n_params) / 1e6,
                        rc.choice.tier == runtime::Tier::Cuda ? "CUDA" : "CPU", n_threads,
                        t.name.c_str(), ts);
            std::fflush(stdout);
        }
    }

    const uint64_t rss = peak_rss_bytes();
    const uint64_t kv = m.model->kv_cache_bytes(ctx.n_ctx());
    const uint64_t budget = m.file->file_size() + kv + (64ull << 20);
    const std::string dev_mem = runtime::device_memory_json(rc.device_memory);
    if (o.json) {
        std::printf("[\n");
        for (size_t i = 0; i < results.size(); ++i) {
            const auto& t = results[i];
            std::printf(
                "  {\"engine\": \"zinc\", \"build\": \"%s\", \"kernels\": \"%s\", "
                "\"model_filename\": \"%s\", "
                "\"model_type\": \"%s\", \"model_size\": %" PRIu64 ", \"model_n_params\": %" PRIu64
                ", \"model_file_bytes\": %zu, \"n_threads\": %d, \"n_batch\": %d, "
                "\"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"n_ctx\": %d, \"test\": "
                "\"%s\", "
                "\"avg_ns\": %.0f, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"samples_ns\": %s, "
                "\"samples_ts\": %s, \"peak_rss_bytes\": %" PRIu64 ", \"kv_cache_bytes\": %" PRIu64
                ", \"device_memory\": %s, \"evidence\": %s}%s\n",
                json_escape(version_line()).c_str(), quant::simd_level(), json_escape(path).c_str(),
                json_escape(model_desc).c_str(), weight_bytes, n_params, m.file->file_size(),
                n_threads, o.n_batch, t.n_prompt, t.n_gen, t.n_depth, ctx.n_ctx(), t.name.c_str(),
                t.avg_ns(), t.avg_ts(), t.sd_ts(), json_array(t.samples_ns, "%.0f").c_str(),
                json_array(t.samples_ts, "%.6f").c_str(), rss, kv, dev_mem.c_str(),
                t.evidence_json.c_str(), i + 1 < results.size() ? "," : "");
        }
        std::printf("]\n");
    } else {
        std::printf(
            "\npeak RSS %s; budget: model file %s + KV cache %s (n_ctx %d) + 64 MiB = %s "
            "(%s)\n",
            format_bytes(rss).c_str(), format_bytes(m.file->file_size()).c_str(),
            format_bytes(kv).c_str(), ctx.n_ctx(), format_bytes(budget).c_str(),
            rss <= budget ? "within" : "OVER");
        if (rc.device_memory.on_device) {
            const auto& d = rc.device_memory;
            std::printf("device memory: weights %s + KV pool %s + scratch %s = %s\n",
                        format_bytes(d.weight_bytes).c_str(), format_bytes(d.kv_bytes).c_str(),
                        format_bytes(d.scratch_bytes).c_str(),
                        format_bytes(d.weight_bytes + d.kv_bytes + d.scratch_bytes).c_str());
        }
    }
    std::fflush(stdout);
    if (log_info())
        std::fprintf(stderr, "%s\n", runtime::evidence_line(rc.evidence->snapshot()).c_str());
    return kExitOk;
}

}  // namespace zinc::cli
