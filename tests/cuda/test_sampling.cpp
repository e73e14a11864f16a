// zinc/tests/cuda/test_sampling.cpp — sampling on the device (sampling.cu) against the CPU
// sampler (engine/sampler.cpp), on a GPU.
//
//   cuda_test_sampling [--ctest] [--model FILE.gguf]
//
// 1. Kernel vs CPU: for random logits rows (vocabularies 1000 .. 262144; Gaussian logits of
//    several spreads, rows with many exact ties, rows with NaN and -inf) and each sampler
//    setting (greedy, temperature, top-k, top-p, min-p, their combinations, penalties), the
//    device token must equal engine::Sampler's token for the same logits and the same uniform,
//    two consecutive steps per sampler (so the RNG streams stay aligned through device_row /
//    device_done), the `used` flag must be right and the logprob must match
//    engine::token_logprobs within 1e-5. Outputs are poisoned before each launch.
// 2. Distribution: one fixed row sampled 40000 times with independent uniforms; chi-square of
//    the token counts against the probabilities computed here in float64 (sorted candidates,
//    top-k, nucleus, min-p, softmax at the temperature); p < 1e-4 fails; no token outside the
//    kept set may appear.
// 3. With --model: the CUDA Runner's forward_sample equals forward + the CPU sampler on the same
//    logits for 16 sequences x 24 steps (settings varying per sequence).
// Prints PASS/FAIL lines, the kernel time for 16 rows, and a summary; exits 77 without a device.
#include <cuda_runtime.h>

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
#include "backend/cuda/kernels.h"
#include "engine/engine.h"
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/model.h"
#include "gpu_test.h"

using namespace zinc;
namespace cu = zinc::cuda;

namespace {

using namespace zinc::gpu_test;

int g_fail = 0, g_pass = 0;
void report(bool ok, const std::string& what) {
    std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    if (!ok) ++g_fail;
    else ++g_pass;
}


// Device buffers for up to `rows` rows of n_vocab logits.
struct Dev {
    int rows = 0, n_vocab = 0, pen_cap = 0;
    float* logits = nullptr;
    cu::SampleRowParams* prm = nullptr;
    int32_t* ids = nullptr;
    int32_t* counts = nullptr;
    float* orig = nullptr;
    cu::SampleOut* out = nullptr;
    Dev(int r, int v, int pen) : rows(r), n_vocab(v), pen_cap(std::max(pen, 1)) {
        CK(cudaMalloc(&logits, sizeof(float) * r * static_cast<size_t>(v)));
        CK(cudaMalloc(&prm, sizeof(cu::SampleRowParams) * r));
        CK(cudaMalloc(&ids, sizeof(int32_t) * pen_cap));
        CK(cudaMalloc(&counts, sizeof(int32_t) * pen_cap));
        CK(cudaMalloc(&orig, sizeof(float) * pen_cap));
        CK(cudaMalloc(&out, sizeof(cu::SampleOut) * r));
    }
    ~Dev() {
        cudaFree(logits);
        cudaFree(prm);
        cudaFree(ids);
        cudaFree(counts);
        cudaFree(orig);
        cudaFree(out);
    }
    // Run the kernel on host rows; returns the outputs.
    std::vector<cu::SampleOut> run(const std::vector<float>& l, int n_rows,
                                   const std::vector<cu::SampleRowParams>& p,
                                   const std::vector<int32_t>& pid, const std::vector<int32_t>& pc,
                                   bool want_lp) {
        CK(cudaMemcpy(logits, l.data(), sizeof(float) * l.size(), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(prm, p.data(), sizeof(p[0]) * p.size(), cudaMemcpyHostToDevice));
        if (!pid.empty()) {
            CK(cudaMemcpy(ids, pid.data(), sizeof(int32_t) * pid.size(), cudaMemcpyHostToDevice));
            CK(cudaMemcpy(counts, pc.data(), sizeof(int32_t) * pc.size(), cudaMemcpyHostToDevice));
        }
        CK(cudaMemset(out, 0xff, sizeof(cu::SampleOut) * n_rows));  // poison: token -1, NaN
        cu::sample_rows(logits, n_rows, n_vocab, prm, ids, counts, orig, out, want_lp, nullptr);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<cu::SampleOut> o(n_rows);
        CK(cudaMemcpy(o.data(), out, sizeof(cu::SampleOut) * n_rows, cudaMemcpyDeviceToHost));
        return o;
    }
};

struct Setting {
    const char* name;
    engine::SamplerOptions o;
};

engine::SamplerOptions opts(float t, int k, float p, float m, float rep = 1.f, float pres = 0.f,
                            float freq = 0.f, int last_n = 64) {
    engine::SamplerOptions o;
    o.temperature = t;
    o.top_k = k;
    o.top_p = p;
    o.min_p = m;
    o.repeat_penalty = rep;
    o.presence_penalty = pres;
    o.frequency_penalty = freq;
    o.penalty_last_n = last_n;
    return o;
}

// A row of logits: kind 0 Gaussian (spread sigma), 1 coarse values (many exact ties), 2 with
// NaN and -inf sprinkled, 3 one dominant token, 4 nearly flat.
std::vector<float> make_row(std::mt19937& rng, int n, int kind, float sigma) {
    std::normal_distribution<float> g(0.f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = g(rng);
    if (kind == 1)
        for (auto& x : v) x = std::round(x * 2.f) / 2.f;
    if (kind == 2) {
        std::uniform_int_distribution<int> u(0, n - 1);
        for (int i = 0; i < n / 50 + 1; ++i) v[u(rng)] = NAN;
        for (int i = 0; i < n / 20 + 1; ++i) v[u(rng)] = -INFINITY;
    }
    if (kind == 3) v[std::uniform_int_distribution<int>(0, n - 1)(rng)] += 30.f;
    if (kind == 4)
        for (auto& x : v) x *= 1e-3f;
    return v;
}

cu::SampleRowParams params_of(const model::RowSampling& r) {
    return cu::sample_row_params(r.temperature, r.top_k, r.top_p, r.min_p, r.repeat_penalty,
                                 r.presence_penalty, r.frequency_penalty, r.uniform);
}

// Part 1: kernel tokens == CPU sampler tokens.
void kernel_vs_cpu(std::mt19937& rng) {
    const std::vector<Setting> settings = {
        {"greedy", opts(0.f, 40, 0.95f, 0.05f)},
        {"greedy+penalties", opts(0.f, 0, 1.f, 0.f, 1.3f, 0.4f, 0.3f)},
        {"temp 1 (plain softmax)", opts(1.f, 0, 1.f, 0.f)},
        {"temp 0.7", opts(0.7f, 0, 1.f, 0.f)},
        {"temp 1.5 top-k 40", opts(1.5f, 40, 1.f, 0.f)},
        {"top-k 1", opts(1.f, 1, 1.f, 0.f)},
        {"top-k 5000", opts(1.f, 5000, 1.f, 0.f)},
        {"top-p 0.9", opts(1.f, 0, 0.9f, 0.f)},
        {"top-p 0.5", opts(0.8f, 0, 0.5f, 0.f)},
        {"top-p 0.999", opts(1.f, 0, 0.999f, 0.f)},
        {"top-p 0", opts(1.f, 0, 0.f, 0.f)},
        {"top-k 100 top-p 0.8", opts(1.f, 100, 0.8f, 0.f)},
        {"min-p 0.05", opts(1.f, 0, 1.f, 0.05f)},
        {"min-p 0.3 temp 2", opts(2.f, 0, 1.f, 0.3f)},
        {"defaults (t 0.8, k 40, p 0.95, min-p 0.05)", opts(0.8f, 40, 0.95f, 0.05f)},
        {"k 2000 p 0.95 min-p 0.01", opts(1.1f, 2000, 0.95f, 0.01f)},
        {"penalties + defaults", opts(0.8f, 40, 0.95f, 0.05f, 1.3f, 0.5f, 0.2f)},
        {"penalties, no truncation", opts(1.f, 0, 1.f, 0.f, 1.2f, 0.3f, 0.1f, -1)},
        {"tiny temperature", opts(1e-4f, 0, 1.f, 0.f)},
    };
    const int vocabs[] = {1000, 49152, 151936, 262144};
    const int kRows = 16;
    for (int V : vocabs) {
        Dev dev(kRows, V, kRows * 256);
        const int n_batches = V >= 100000 ? 1 : 3;  // host-side time: ~CPU sampler x rows
        for (const Setting& st : settings) {
            int rows = 0, bad = 0, bad_used = 0;
            double worst_lp = 0.0;
            std::string first_bad;
            for (int b = 0; b < n_batches; ++b) {
                // Per row: a CPU sampler and a device sampler with the same seed, two steps each.
                std::vector<engine::Sampler> cpu, gpu;
                std::vector<std::vector<int32_t>> hist(kRows);
                for (int r = 0; r < kRows; ++r) {
                    engine::SamplerOptions o = st.o;
                    o.seed = rng();
                    cpu.emplace_back(o);
                    gpu.emplace_back(o);
                    std::uniform_int_distribution<int> u(0, V - 1);
                    const int hn = r % 4 == 0 ? 0 : 1 + static_cast<int>(rng() % 100);
                    for (int i = 0; i < hn; ++i) hist[r].push_back(i % 3 == 0 ? u(rng) % 50 : u(rng));
                }
                for (int step = 0; step < 2; ++step) {
                    std::vector<float> l(static_cast<size_t>(kRows) * V);
                    for (int r = 0; r < kRows; ++r) {
                        const int kind = (r + step + b) % 5;
                        const float sigma = 0.5f + static_cast<float>(r % 6);
                        auto row = make_row(rng, V, kind, sigma);
                        std::copy(row.begin(), row.end(), l.begin() + static_cast<size_t>(r) * V);
                    }
                    std::vector<cu::SampleRowParams> p(kRows);
                    std::vector<int32_t> pid, pc;
                    for (int r = 0; r < kRows; ++r) {
                        const model::RowSampling rs = gpu[r].device_row(hist[r], V);
                        p[r] = params_of(rs);
                        const bool any = rs.repeat_penalty != 1.f || rs.presence_penalty != 0.f ||
                                         rs.frequency_penalty != 0.f;
                        p[r].pen_off = static_cast<int32_t>(pid.size());
                        p[r].pen_n = any ? static_cast<int32_t>(rs.penalty_ids.size()) : 0;
                        for (int j = 0; j < p[r].pen_n; ++j) {
                            pid.push_back(rs.penalty_ids[j]);
                            pc.push_back(rs.penalty_counts[j]);
                        }
                    }
                    const auto out = dev.run(l, kRows, p, pid, pc, true);
                    for (int r = 0; r < kRows; ++r) {
                        std::span<const float> row(l.data() + static_cast<size_t>(r) * V, V);
                        const int32_t want = cpu[r].sample(row, hist[r]);
                        bool any_finite = false;
                        for (float x : row) any_finite |= std::isfinite(x) || x == INFINITY;
                        const bool want_used = st.o.temperature > 0.f && any_finite;
                        model::SampledToken t;
                        t.id = out[r].token;
                        t.used_uniform = out[r].used != 0;
                        gpu[r].device_done(t);
                        ++rows;
                        if (out[r].token != want) {
                            if (!bad) first_bad = fmt("row %d step %d kind %d: gpu %d cpu %d", r, step,
                                                      (r + step + b) % 5, out[r].token, want);
                            ++bad;
                        }
                        if (t.used_uniform != want_used || (out[r].used != 0 && out[r].used != 1)) ++bad_used;
                        engine::GeneratedToken g;
                        if (want >= 0 && want < V) {
                            engine::token_logprobs(row, want, 0, g);
                            const double d = std::fabs(static_cast<double>(out[r].logprob) - g.logprob);
                            if (std::isfinite(g.logprob))
                                worst_lp = std::isnan(d) ? INFINITY : std::max(worst_lp, d);
                        }
                        hist[r].push_back(want);
                    }
                }
            }
            report(bad == 0 && bad_used == 0 && worst_lp <= 1e-5,
                   fmt("kernel == CPU sampler, vocab %d, %s: %d rows, %d token mismatches, %d "
                       "used-flag errors, max |dlogprob| %.2g%s%s",
                       V, st.name, rows, bad, bad_used, worst_lp, bad ? "; first: " : "",
                       first_bad.c_str()));
        }
    }
}

// Part 2: the distribution of one row against float64 probabilities.
void distribution(std::mt19937& rng) {
    const int V = 4000, kRows = 4000, kLaunches = 10;
    const float T = 0.9f, P = 0.9f, M = 0.02f;
    const int K = 64;
    std::vector<float> row = make_row(rng, V, 0, 2.0f);
    for (int i = 0; i < 8; ++i) row[100 + i] = row[7];  // ties at the top
    // float64 reference: order by (logit desc, id asc), top-k, nucleus, min-p, softmax(l / T).
    std::vector<int> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) {
        return row[a] != row[b] ? row[a] > row[b] : a < b;
    });
    idx.resize(K);
    const double mx = row[idx[0]];
    double z = 0;
    for (int i : idx) z += std::exp(row[i] - mx);
    double cum = 0;
    size_t keep = idx.size();
    for (size_t j = 0; j < idx.size(); ++j) {
        cum += std::exp(row[idx[j]] - mx);
        if (cum >= P * z) {
            keep = j + 1;
            break;
        }
    }
    idx.resize(keep);
    std::vector<int> kept;
    for (int i : idx)
        if (row[i] >= mx + std::log(M)) kept.push_back(i);
    std::vector<double> prob(V, 0.0);
    double zt = 0;
    for (int i : kept) zt += std::exp((row[i] - mx) / T);
    for (int i : kept) prob[i] = std::exp((row[i] - mx) / T) / zt;

    Dev dev(kRows, V, 1);
    std::vector<float> l(static_cast<size_t>(kRows) * V);
    for (int r = 0; r < kRows; ++r) std::copy(row.begin(), row.end(), l.begin() + static_cast<size_t>(r) * V);
    std::vector<long> count(V, 0);
    std::mt19937_64 u64(12345);
    long n = 0;
    for (int it = 0; it < kLaunches; ++it) {
        std::vector<cu::SampleRowParams> p(kRows);
        for (auto& q : p)
            q = cu::sample_row_params(T, K, P, M, 1.f, 0.f, 0.f,
                                      static_cast<double>(u64() >> 11) * 0x1.0p-53);
        const auto out = dev.run(l, kRows, p, {}, {}, false);
        for (const auto& o : out) {
            if (o.token >= 0 && o.token < V) ++count[o.token];
            ++n;
        }
    }
    double chi2 = 0;
    long outside = 0;
    int dof = -1;
    for (int i = 0; i < V; ++i) {
        if (prob[i] == 0.0) {
            outside += count[i];
            continue;
        }
        const double e = prob[i] * static_cast<double>(n);
        chi2 += (count[i] - e) * (count[i] - e) / e;
        ++dof;
    }
    // Wilson-Hilferty: the chi-square quantile at p = 1e-4 (z = 3.719).
    const double k = std::max(dof, 1);
    const double crit = k * std::pow(1 - 2 / (9 * k) + 3.719 * std::sqrt(2 / (9 * k)), 3);
    long poisoned = n;
    for (long c : count) poisoned -= c;
    report(outside == 0 && poisoned == 0 && chi2 < crit,
           fmt("distribution: %ld draws over %zu kept tokens (t %.1f, k %d, p %.1f, min-p %.2f): "
               "chi2 %.1f (dof %d, critical %.1f at p=1e-4), %ld outside the kept set, %ld invalid",
               n, kept.size(), T, K, P, M, chi2, dof, crit, outside, poisoned));
}

// Kernel time for 16 rows of a large vocabulary (the decode-step cost of sampling).
void timing(std::mt19937& rng) {
    for (int V : {49152, 128256, 262144}) {
        const int R = 16;
        Dev dev(R, V, R * 64);
        std::vector<float> l(static_cast<size_t>(R) * V);
        for (int r = 0; r < R; ++r) {
            auto row = make_row(rng, V, 0, 3.f);
            std::copy(row.begin(), row.end(), l.begin() + static_cast<size_t>(r) * V);
        }
        CK(cudaMemcpy(dev.logits, l.data(), sizeof(float) * l.size(), cudaMemcpyHostToDevice));
        for (int mode = 0; mode < 3; ++mode) {
            std::vector<cu::SampleRowParams> p(R);
            for (auto& q : p)
                q = mode == 0   ? cu::sample_row_params(0.f, 0, 1.f, 0.f, 1.f, 0.f, 0.f, 0.5)
                    : mode == 1 ? cu::sample_row_params(0.8f, 40, 0.95f, 0.05f, 1.f, 0.f, 0.f, 0.5)
                                : cu::sample_row_params(1.f, 0, 0.9f, 0.f, 1.f, 0.f, 0.f, 0.5);
            CK(cudaMemcpy(dev.prm, p.data(), sizeof(p[0]) * R, cudaMemcpyHostToDevice));
            cudaEvent_t a, b;
            CK(cudaEventCreate(&a));
            CK(cudaEventCreate(&b));
            const int iters = 20;
            cu::sample_rows(dev.logits, R, V, dev.prm, dev.ids, dev.counts, dev.orig, dev.out, false, nullptr);
            CK(cudaEventRecord(a));
            for (int i = 0; i < iters; ++i)
                cu::sample_rows(dev.logits, R, V, dev.prm, dev.ids, dev.counts, dev.orig, dev.out, false, nullptr);
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, a, b));
            std::printf("time %s vocab %d, 16 rows: %.1f us per launch\n",
                        mode == 0 ? "greedy" : mode == 1 ? "t0.8 k40 p0.95 minp0.05" : "t1 p0.9 (no top-k)",
                        V, 1000.0 * ms / iters);
            cudaEventDestroy(a);
            cudaEventDestroy(b);
        }
    }
}

// Part 3: the Runner's forward_sample against forward + the CPU sampler.
void runner_check(const std::string& path) {
    auto f = gguf::File::open(path);
    if (!f) {
        report(false, "open " + path + ": " + f.error().message);
        return;
    }
    auto m = model::Model::load(*f.value(), {});
    if (!m) {
        report(false, "load " + path + ": " + m.error().message);
        return;
    }
    const model::Model& M = *m.value();
    const int V = M.n_vocab();
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = 256;
    ro.n_blocks = 16 * 4 * 2;
    ro.max_batch_tokens = 256;
    ro.max_seqs = 16;
    // Two runners on the same device: A samples on the device, B returns logits.
    auto ra = cu::create_runner(M, ro, {});
    auto rb = cu::create_runner(M, ro, {});
    if (!ra || !rb) {
        report(false, "cuda runner: " + (ra ? rb.error().message : ra.error().message));
        return;
    }
    model::Runner& A = *ra.value();
    model::Runner& B = *rb.value();
    report(A.samples_on_device(), "CudaRunner::samples_on_device() is true by default");
    const int S = 16, steps = 24, plen = 5;
    std::vector<std::vector<int32_t>> toks(S), bt(S);
    std::vector<engine::Sampler> cpu, gpu;
    for (int s = 0; s < S; ++s) {
        for (int i = 0; i < plen; ++i) toks[s].push_back(static_cast<int32_t>((s * 131 + i * 17) % V));
        for (int b = 0; b < 4; ++b) bt[s].push_back(s * 4 + b);
        engine::SamplerOptions o =
            s % 4 == 0 ? opts(0.f, 0, 1.f, 0.f)
            : s % 4 == 1 ? opts(0.8f, 40, 0.95f, 0.05f)
            : s % 4 == 2 ? opts(1.2f, 0, 0.9f, 0.f, 1.3f, 0.2f, 0.1f)
                         : opts(1.0f, 0, 1.f, 0.1f);
        o.seed = 1000 + s;
        cpu.emplace_back(o);
        gpu.emplace_back(o);
    }
    int bad = 0, n = 0;
    std::vector<float> logits(static_cast<size_t>(S) * V);
    for (int step = 0; step < steps; ++step) {
        std::vector<int32_t> rows_tok;
        std::vector<model::BatchSeq> seqs(S);
        for (int s = 0; s < S; ++s) {
            const int pos0 = step == 0 ? 0 : static_cast<int>(toks[s].size()) - 1;
            seqs[s].row0 = static_cast<int32_t>(rows_tok.size());
            seqs[s].n_tokens = static_cast<int32_t>(toks[s].size()) - pos0;
            seqs[s].pos0 = pos0;
            seqs[s].block_table = bt[s];
            for (size_t i = pos0; i < toks[s].size(); ++i) rows_tok.push_back(toks[s][i]);
        }
        const model::Batch batch{rows_tok, seqs};
        if (auto r = B.forward(batch, logits.data()); !r) {
            report(false, "forward: " + r.error().message);
            return;
        }
        std::vector<model::RowSampling> rs(S);
        for (int s = 0; s < S; ++s) rs[s] = gpu[s].device_row(toks[s], V);
        std::vector<model::SampledToken> out(S);
        for (auto& o : out) o.id = -1;
        if (auto r = A.forward_sample(batch, rs, out.data(), false); !r) {
            report(false, "forward_sample: " + r.error().message);
            return;
        }
        for (int s = 0; s < S; ++s) {
            std::span<const float> row(logits.data() + static_cast<size_t>(s) * V, V);
            const int32_t want = cpu[s].sample(row, toks[s]);
            gpu[s].device_done(out[s]);
            ++n;
            if (out[s].id != want) ++bad;
            toks[s].push_back(want);  // both continue on the CPU sampler's token
        }
    }
    report(bad == 0, fmt("runner forward_sample == forward + CPU sampler: %d sequences x %d steps "
                         "(%d rows), %d mismatches",
                         S, steps, n, bad));
}

}  // namespace

int main(int argc, char** argv) {
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_sampling: %s\n", p.reason.c_str());
        return 77;
    }
    const auto& d = p.devices.front();
    std::printf("device: %s, cc %d.%d\n", d.name.c_str(), d.cc_major, d.cc_minor);
    std::mt19937 rng(20261129);
    std::string model;
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "--model" && i + 1 < argc) model = argv[++i];
    kernel_vs_cpu(rng);
    distribution(rng);
    timing(rng);
    if (!model.empty()) runner_check(model);
    std::printf("%s: %d passed, %d failed\n", g_fail ? "FAIL" : "PASS", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
