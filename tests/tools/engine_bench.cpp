// tests/tools/engine_bench.cpp — aggregate throughput of the Engine (continuous batching on the
// CPU tier) at several concurrency levels.
//
//   engine_bench --model FILE [--threads 2] [--concurrency 1,4,8,16] [--prompt 32] [--gen 64]
//                [--block-size 16] [--max-batch-tokens 512] [--reps 1]
//
// For each concurrency c: one engine with c slots, c greedy requests (distinct pseudo-random
// prompts of --prompt tokens, --gen tokens each, EOS ignored) submitted at once. Reported per c
// (one JSON line, best of --reps): decode_tps = tokens generated after each request's first
// token / time from the last first token to the last token (all c sequences decoding together);
// total_tps = all generated tokens / wall time from submission; ttft_ms = mean time to first
// token; steps = engine steps; cpu_s = CPU seconds (user + sys) the process used for the run and
// tokens_per_cpu_s = generated tokens / cpu_s (on a shared, loaded machine wall-clock rates
// swing with the load, CPU time much less; with --threads 1 it is a clean cost measure).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace {

using Clock = std::chrono::steady_clock;

int fail(const std::string& msg) {
    std::fprintf(stderr, "engine_bench: %s\n", msg.c_str());
    return 2;
}

struct Run {
    double decode_tps = 0, total_tps = 0, ttft_ms = 0, cpu_s = 0;
    long tokens = 0;
    uint64_t steps = 0;
};

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
    };
    return s(u.ru_utime) + s(u.ru_stime);
}

Run run_once(const zinc::model::Model& model, int c, int n_prompt, int n_gen, int threads,
             int block_size, int max_batch_tokens, int rep) {
    zinc::engine::EngineOptions o;
    o.n_parallel = c;
    o.n_ctx = n_prompt + n_gen + 1;
    o.block_size = block_size;
    o.max_batch_tokens = max_batch_tokens;
    o.n_threads = threads;
    o.prefix_cache = false;  // distinct prompts anyway; measure compute, not cache hits
    auto eng = zinc::engine::Engine::create(model, o);
    if (!eng.ok()) {
        std::fprintf(stderr, "engine_bench: %s\n", eng.error().message.c_str());
        std::exit(2);
    }
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    std::vector<Clock::time_point> first(static_cast<size_t>(c)), last(static_cast<size_t>(c));
    std::vector<int> got(static_cast<size_t>(c), 0);
    const Clock::time_point t0 = Clock::now();
    const double cpu0 = cpu_seconds();
    const int32_t nv = model.n_vocab();
    for (int i = 0; i < c; ++i) {
        zinc::engine::RequestParams p;
        uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1 + 1000 * rep);
        for (int k = 0; k < n_prompt; ++k) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            p.prompt.push_back(static_cast<int32_t>((x * 2685821657736338717ull) % (nv - 100)) +
                               50);
        }
        p.max_tokens = n_gen;
        p.sampling.temperature = 0.0f;
        p.ignore_eos = true;
        auto r = eng.value()->submit(std::move(p), [&, i](const zinc::engine::Event& ev) {
            const Clock::time_point now = Clock::now();
            std::lock_guard<std::mutex> lk(mu);
            for (size_t k = 0; k < ev.tokens.size(); ++k) {
                if (got[i]++ == 0) first[i] = now;
                last[i] = now;
            }
            if (ev.finished) {
                ++done;
                cv.notify_all();
            }
        });
        if (!std::holds_alternative<zinc::engine::RequestId>(r)) {
            std::fprintf(stderr, "engine_bench: submit refused: %s\n",
                         std::get<zinc::engine::SubmitError>(r).message.c_str());
            std::exit(2);
        }
    }
    {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return done == c; });
    }
    auto s = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    const Clock::time_point first_max = *std::max_element(first.begin(), first.end());
    const Clock::time_point last_max = *std::max_element(last.begin(), last.end());
    Run r;
    long decode_tokens = 0, total = 0;
    double ttft = 0;
    for (int i = 0; i < c; ++i) {
        total += got[i];
        ttft += s(first[i] - t0);
        // tokens produced after every sequence had its first token
        decode_tokens += got[i] - 1;
    }
    r.decode_tps = static_cast<double>(decode_tokens) / std::max(1e-9, s(last_max - first_max));
    r.total_tps = static_cast<double>(total) / std::max(1e-9, s(last_max - t0));
    r.ttft_ms = 1000.0 * ttft / c;
    r.cpu_s = cpu_seconds() - cpu0;
    r.tokens = total;
    r.steps = eng.value()->stats().steps;
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    std::string path, conc = "1,4,8,16";
    int threads = 2, n_prompt = 32, n_gen = 64, block_size = 16, mbt = 512, reps = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        try {
            if (a == "--model")
                path = v;
            else if (a == "--concurrency")
                conc = v;
            else if (a == "--threads")
                threads = std::stoi(v);
            else if (a == "--prompt")
                n_prompt = std::stoi(v);
            else if (a == "--gen")
                n_gen = std::stoi(v);
            else if (a == "--block-size")
                block_size = std::stoi(v);
            else if (a == "--max-batch-tokens")
                mbt = std::stoi(v);
            else if (a == "--reps")
                reps = std::stoi(v);
            else
                return fail("unknown argument " + a);
        } catch (const std::exception&) {
            return fail("bad number for " + a + ": " + v);
        }
    }
    if (path.empty()) return fail("--model is required");
    if (n_prompt < 1 || n_gen < 2 || reps < 1)
        return fail("--prompt >= 1, --gen >= 2, --reps >= 1");
    auto file = zinc::gguf::File::open(path);
    if (!file.ok()) return fail(file.error().message);
    auto model = zinc::model::Model::load(*file.value(), {});
    if (!model.ok()) return fail(model.error().message);
    std::vector<int> cs;
    std::stringstream ss(conc);
    for (std::string t; std::getline(ss, t, ',');) cs.push_back(std::stoi(t));
    run_once(*model.value(), 1, 8, 4, threads, block_size, mbt, 99);  // warm-up: page in weights
    for (int c : cs) {
        Run best;
        for (int r = 0; r < reps; ++r) {
            const Run x = run_once(*model.value(), c, n_prompt, n_gen, threads, block_size, mbt, r);
            if (x.decode_tps > best.decode_tps) best = x;
        }
        std::printf(
            "{\"concurrency\": %d, \"prompt\": %d, \"gen\": %d, \"threads\": %d, "
            "\"decode_tps\": %.1f, \"total_tps\": %.1f, \"ttft_ms\": %.1f, \"steps\": %llu, "
            "\"cpu_s\": %.2f, \"tokens_per_cpu_s\": %.1f}\n",
            c, n_prompt, n_gen, threads, best.decode_tps, best.total_tps, best.ttft_ms,
            static_cast<unsigned long long>(best.steps), best.cpu_s,
            static_cast<double>(best.tokens) / std::max(1e-9, best.cpu_s));
        std::fflush(stdout);
    }
    return 0;
}
