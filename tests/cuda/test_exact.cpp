// zinc/tests/cuda/test_exact.cpp — the CUDA tier computes the CPU tier's bits (docs/exactness.md).
//
//   cuda_test_exact [--ctest] [--tokens N] MODEL.gguf ...
//
// For each model, 5 prompts (one long enough to be a multi-row prefill) are evaluated by the CPU
// tier (model::Context) and the CUDA tier (cuda::make_runner_context over the CUDA runner, in its
// exact mode, --exact / ZINC_EXACT=1, which this program sets), then each tier continues greedily
// on its own for N tokens (default 64):
//  * every step's logits must be bitwise equal (memcmp over the vocabulary), and
//  * the greedy tokens must be identical.
// This is run with the fused paths and again with every ZINC_* opt-out at 0 (graphs off, fused
// projections off, fused norm off). It reports the first differing step and the largest
// difference when it fails. A 16-sequence batched decode (one step for all) must equal the CPU
// tier's single-sequence logits bit for bit too.
// Without a usable device it prints the reason and exits 77 (ctest: skipped). With --ctest and
// no model it uses models/SmolLM2-135M-Instruct.Q4_1.gguf when present.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "gguf/gguf.h"
#include "gpu_model.h"
#include "gpu_test.h"
#include "model/batch.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

using namespace zinc;
namespace cu = zinc::cuda;

namespace {

using namespace zinc::gpu_test;

int g_fail = 0;
void report(bool ok, const std::string& what) {
    std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    if (!ok) ++g_fail;
}

const char* kPrompts[5] = {
    "The capital of France is",
    "def fibonacci(n):", "Once upon a time, in a small village by the sea,", "1, 2, 3, 4, 5,",
    "In the beginning of the twentieth century, the rapid spread of railways and telegraph lines "
    "changed how people in small towns thought about distance, time and news. Farmers who had "
    "never left their county could now read about events in distant capitals the next morning, "
    "and merchants planned shipments by timetables rather than by the seasons. Historians"};


using Loaded = LoadedModel;
bool load(const std::string& path, Loaded& L) {
    const std::string err = load_model(path, L);
    if (!err.empty()) report(false, err);
    return err.empty();
}

int argmax(const float* l, int n) {
    return static_cast<int>(std::max_element(l, l + n) - l);
}

double max_abs_diff(const float* a, const float* b, int n) {
    double m = 0;
    for (int i = 0; i < n; ++i) {
        const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
        m = std::max(m, std::isnan(d) ? INFINITY : d);
    }
    return m;
}

void set_optouts(bool off) {
    for (const char* v : {"ZINC_CUDA_GRAPH", "ZINC_FUSED_PROJ", "ZINC_FUSED_NORM"})
        setenv(v, off ? "0" : "1", 1);
}


// Both tiers run free: each feeds back its own greedy token.
void free_running(const std::string& path, int n_tokens, bool optouts) {
    Loaded L;
    if (!load(path, L)) return;
    const int V = L.model->n_vocab();
    set_optouts(optouts);
    const int n_ctx = 512;
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = n_ctx;
    ro.n_blocks = n_ctx / 16;
    ro.max_batch_tokens = 128;
    ro.max_seqs = 4;
    auto runner = cu::create_runner(*L.model, ro, {});
    if (!runner)
        return report(false, "cuda runner " + base_name(path) + ": " + runner.error().message);
    auto ctxr = cu::make_runner_context(std::move(runner.value()), n_ctx, V);
    if (!ctxr) return report(false, ctxr.error().message);
    auto& gpu = *ctxr.value();
    int steps = 0, equal_steps = 0, same_prompts = 0;
    double worst = 0;
    std::string first_diff;
    for (int pi = 0; pi < 5; ++pi) {
        auto cpu_r = model::Context::create(*L.model, {n_ctx, 0, n_ctx});
        if (!cpu_r) return report(false, cpu_r.error().message);
        auto& cpu = *cpu_r.value();
        gpu.reset();
        const std::vector<int32_t> toks = L.tok->encode(kPrompts[pi], true, false);
        if (!cpu.eval(toks).ok() || !gpu.eval(toks).ok()) return report(false, "eval failed");
        bool same = true;
        for (int t = 0; t < n_tokens; ++t) {
            const float* lc = cpu.logits(-1);
            const float* lg = gpu.logits(-1);
            ++steps;
            if (std::memcmp(lc, lg, sizeof(float) * V) == 0) {
                ++equal_steps;
            } else {
                const double d = max_abs_diff(lc, lg, V);
                worst = std::max(worst, d);
                if (first_diff.empty())
                    first_diff =
                        fmt(" first difference: prompt %d step %d (max |d| %.3g)", pi, t, d);
            }
            const int32_t a = argmax(lc, V), b = argmax(lg, V);
            if (a != b) same = false;
            if (!same) break;  // the histories differ from here on
            const int32_t one[1] = {a};
            if (!cpu.eval(one).ok() || !gpu.eval(one).ok()) return report(false, "eval failed");
        }
        same_prompts += same;
    }
    report(equal_steps == steps && same_prompts == 5,
           fmt("exact %s%s: greedy text identical on %d/5 prompts x %d tokens; logits bitwise "
               "equal on %d/%d steps, max |d| %.3g",
               base_name(path).c_str(), optouts ? " [opt-outs]" : "", same_prompts, n_tokens,
               equal_steps, steps, worst) +
               first_diff);
}

// 16 sequences decoded in one CUDA step each, against the CPU tier run one sequence at a time.
void batch16(const std::string& path) {
    Loaded L;
    if (!load(path, L)) return;
    const int V = L.model->n_vocab();
    set_optouts(false);
    const int S = 16, steps = 12, n_ctx = 256;
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = n_ctx;
    ro.n_blocks = S * (n_ctx / 16);
    ro.max_batch_tokens = 256;
    ro.max_seqs = S;
    auto rr = cu::create_runner(*L.model, ro, {});
    if (!rr) return report(false, "cuda runner: " + rr.error().message);
    model::Runner& r = *rr.value();
    std::vector<std::vector<int32_t>> bt(S);
    std::vector<int> perm(ro.n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(11);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int s = 0; s < S; ++s)
        for (int b = 0; b < n_ctx / 16; ++b) bt[s].push_back(perm[s * (n_ctx / 16) + b]);
    std::vector<std::vector<int32_t>> prompts(S);
    std::vector<std::unique_ptr<model::Context>> cpus;
    std::vector<float> logits(static_cast<size_t>(S) * V);
    std::vector<int> pos(S);
    std::vector<int32_t> next(S);
    int unequal = 0, checked = 0;
    double worst = 0;
    for (int s = 0; s < S; ++s) {
        prompts[s] = L.tok->encode(kPrompts[s % 5], true, false);
        for (int i = 0; i < s; ++i) prompts[s].push_back((s * 131 + i * 17) % V);
        auto c = model::Context::create(*L.model, {n_ctx, 0, n_ctx});
        if (!c) return report(false, c.error().message);
        cpus.push_back(std::move(c.value()));
        if (!cpus[s]->eval(prompts[s]).ok()) return report(false, "cpu eval");
        model::BatchSeq q;
        q.n_tokens = static_cast<int>(prompts[s].size());
        q.block_table = bt[s];
        model::Batch b{prompts[s], std::span<const model::BatchSeq>(&q, 1)};
        if (!r.forward(b, logits.data()).ok()) return report(false, "cuda prefill");
        pos[s] = q.n_tokens;
        ++checked;
        if (std::memcmp(logits.data(), cpus[s]->logits(-1), sizeof(float) * V) != 0) {
            ++unequal;
            worst = std::max(worst, max_abs_diff(logits.data(), cpus[s]->logits(-1), V));
        }
        next[s] = argmax(cpus[s]->logits(-1), V);
    }
    for (int t = 0; t < steps; ++t) {
        std::vector<model::BatchSeq> seqs(S);
        for (int s = 0; s < S; ++s) {
            seqs[s].row0 = s;
            seqs[s].n_tokens = 1;
            seqs[s].pos0 = pos[s];
            seqs[s].block_table = bt[s];
        }
        model::Batch b{next, seqs};
        std::fill(logits.begin(), logits.end(), NAN);
        if (!r.forward(b, logits.data()).ok()) return report(false, "cuda batched decode");
        for (int s = 0; s < S; ++s) {
            const int32_t one[1] = {next[s]};
            if (!cpus[s]->eval(one).ok()) return report(false, "cpu eval");
            const float* lg = logits.data() + static_cast<size_t>(s) * V;
            ++checked;
            if (std::memcmp(lg, cpus[s]->logits(-1), sizeof(float) * V) != 0) {
                ++unequal;
                worst = std::max(worst, max_abs_diff(lg, cpus[s]->logits(-1), V));
            }
            pos[s] += 1;
            next[s] = argmax(cpus[s]->logits(-1), V);
        }
    }
    report(unequal == 0, fmt("exact batch16 %s: 16 sequences decoded together on CUDA vs each "
                             "alone on the CPU: %d/%d logit rows bitwise unequal, max |d| %.3g",
                             base_name(path).c_str(), unequal, checked, worst));
}

}  // namespace

int main(int argc, char** argv) {
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_exact: %s\n", p.reason.c_str());
        return 77;
    }
    int n_tokens = 64;
    std::vector<std::string> models;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--ctest") continue;
        if (a == "--tokens" && i + 1 < argc) {
            n_tokens = std::atoi(argv[++i]);
            continue;
        }
        models.push_back(a);
    }
    if (models.empty()) {
        const std::string def = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
        if (FILE* f = std::fopen(def.c_str(), "rb")) {
            std::fclose(f);
            models.push_back(def);
        } else {
            std::printf("SKIP cuda_test_exact: no model given and %s is missing\n", def.c_str());
            return 77;
        }
    }
    // The exact kernels are opt-in (--exact / ZINC_EXACT=1); this program checks them unless the
    // caller sets ZINC_EXACT itself (=0 shows how far the fast kernels are from the CPU's bits).
    setenv("ZINC_EXACT", "1", 0);
    std::printf("ZINC_EXACT=%s\n", std::getenv("ZINC_EXACT"));
    for (const std::string& m : models) {
        free_running(m, n_tokens, false);
        free_running(m, n_tokens, true);
        batch16(m);
    }
    std::printf("%s: %d failure%s\n", g_fail ? "FAIL" : "PASS", g_fail, g_fail == 1 ? "" : "s");
    return g_fail ? 1 : 0;
}
