// tests/tools/model_bench.cpp — prefill and decode throughput of zinc's CPU forward pass.
//
//   model_bench --model FILE [--pp 512] [--tg 128] [--reps 3] [--threads T] [--n-batch B]
//
// pp: one eval of `pp` tokens into an empty context (tokens/s = pp / seconds).
// tg: `tg` single-token evals after a 1-token prompt (as llama-bench's tg).
// Prints one JSON line per test with mean and sd over the repetitions.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"

namespace {

int fail(const std::string& msg) {
    std::fprintf(stderr, "model_bench: %s\n", msg.c_str());
    return 2;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void report(const char* name, int n, const std::vector<double>& tps) {
    double mean = 0, sd = 0;
    for (double v : tps) mean += v;
    mean /= static_cast<double>(tps.size());
    for (double v : tps) sd += (v - mean) * (v - mean);
    sd = tps.size() > 1 ? std::sqrt(sd / static_cast<double>(tps.size() - 1)) : 0.0;
    std::printf("{\"test\": \"%s%d\", \"tokens_per_s\": %.2f, \"sd\": %.2f, \"reps\": %zu}\n", name,
                n, mean, sd, tps.size());
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    std::string path;
    int pp = 512, tg = 128, reps = 3, threads = 0, n_batch = 512;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--model")
            path = v;
        else if (a == "--pp")
            pp = std::stoi(v);
        else if (a == "--tg")
            tg = std::stoi(v);
        else if (a == "--reps")
            reps = std::stoi(v);
        else if (a == "--threads")
            threads = std::stoi(v);
        else if (a == "--n-batch")
            n_batch = std::stoi(v);
        else
            return fail("unknown argument " + a);
    }
    if (path.empty()) return fail("--model is required");
    auto file = zinc::gguf::File::open(path);
    if (!file.ok()) return fail(file.error().message);
    auto model = zinc::model::Model::load(*file.value(), {});
    if (!model.ok()) return fail(model.error().message);
    zinc::model::ContextOptions co;
    co.n_ctx = pp + tg + 8;
    co.n_threads = threads;
    co.n_batch = n_batch;
    auto ctx = zinc::model::Context::create(*model.value(), co);
    if (!ctx.ok()) return fail(ctx.error().message);
    zinc::model::Context& c = *ctx.value();
    const int n_vocab = model.value()->n_vocab();
    std::vector<int32_t> toks(std::max(pp, 16));
    for (int i = 0; i < static_cast<int>(toks.size()); ++i)
        toks[i] = static_cast<int32_t>((1000 + 7919LL * i) % n_vocab);

    // Warm-up (page in the weights).
    c.reset();
    if (auto r = c.eval(std::span<const int32_t>(toks.data(), 16)); !r.ok())
        return fail(r.error().message);

    if (pp > 0) {
        std::vector<double> tps;
        for (int r = 0; r < reps; ++r) {
            c.reset();
            const double t0 = now_s();
            if (auto e = c.eval(std::span<const int32_t>(toks.data(), pp)); !e.ok())
                return fail(e.error().message);
            tps.push_back(pp / (now_s() - t0));
        }
        report("pp", pp, tps);
    }
    if (tg > 0) {
        std::vector<double> tps;
        for (int r = 0; r < reps; ++r) {
            c.reset();
            int32_t t = toks.empty() ? 1 : toks[0];
            if (auto e = c.eval(std::span<const int32_t>(&t, 1)); !e.ok())
                return fail(e.error().message);
            const double t0 = now_s();
            for (int i = 0; i < tg; ++i) {
                t = static_cast<int32_t>((t + 31) % n_vocab);
                if (auto e = c.eval(std::span<const int32_t>(&t, 1)); !e.ok())
                    return fail(e.error().message);
            }
            tps.push_back(tg / (now_s() - t0));
        }
        report("tg", tg, tps);
    }
    return 0;
}
