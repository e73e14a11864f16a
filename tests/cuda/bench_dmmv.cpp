// zinc/tests/cuda/bench_dmmv.cpp — correctness and bandwidth of the fast matrix-vector kernels
// (dmmv_v2 in dmmv.cu, dmmv_fast in dmmv_fast.cu) on the Llama-3-8B decode shapes, for 1, 2, 4,
// 8 and 16 activation rows. docs/perf-notes.md ("dmmv") has the command line and the results.
//
//   cuda_bench_dmmv [--quick] [--filter SUBSTR] [--variants A,B,...] [--acts N,M,...]
//                   [--no-time] [--reps N]
//
// Per case (weight type, layout, shape; up to 3 fused matrices, the first with a bias) and row
// count: fresh random weights and activations; each variant (v2, v3 with its own thread mapping,
// v3 with 8 and 32 lanes per row, v3 launched with PDL; --variants picks some, --acts the row
// counts) runs on NaN-poisoned outputs and then again in accumulate mode, and both results are
// compared with quant::vec_dot on the same packed activations (dmmv_check.h; relative L2 error
// <= 1e-4 and largest element error <= 1e-3 of the reference RMS; a non-finite output fails).
// Then the timing: the launch replayed from a CUDA graph of 20+ launches that rotate over enough
// copies of the weights to exceed the 60 MB L2, median of --reps replays; GB/s counts the weight
// bytes only, and % is of the device-to-device copy
// bandwidth measured first (1 GiB cudaMemcpy, read + write bytes). A table of all cases closes
// the output. Exit status: 0 when every check passed, 1 otherwise, 77 without a CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/repack.h"
#include "dmmv_check.h"
#include "gpu_test.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace {

using namespace zinc;
using namespace zinc::gpu_test;
using namespace zinc::dmmv_check;
namespace cu = zinc::cuda;

struct Case {
    const char* model;
    const char* name;
    GgmlType t;
    bool repack;  // upload in repack.h's layout
    int k;
    std::vector<int> n_out;  // fused matrices
};

struct Variant {
    const char* name;
    int lpr;   // -1: dmmv_v2; 0: dmmv_fast's choice; 8 / 32: forced lanes per row
    bool pdl;  // launched with programmatic dependent launch (timed back to back in the graph)
};
const Variant kVariants[] = {{"v2", -1, false},
                             {"v3", 0, false},
                             {"v3-l8", 8, false},
                             {"v3-l32", 32, false},
                             {"v3-pdl", 0, true}};
constexpr int kNV = 5;

std::vector<Case> cases() {
    const int E = 4096, F = 14336, KV = 1024, V = 128256;
    std::vector<Case> c;
    for (bool rp : {false, true}) {
        c.push_back({"8B q4_k_m", "v (Q6_K layers)", GgmlType::Q6_K, rp, E, {KV}});
        c.push_back({"8B q4_k_m", "down (Q6_K layers)", GgmlType::Q6_K, rp, F, {E}});
        c.push_back({"8B q4_k_m", "lm_head", GgmlType::Q6_K, rp, E, {V}});
    }
    c.push_back({"8B q4_k_m", "qkv", GgmlType::Q4_K, false, E, {E, KV, KV}});
    c.push_back({"8B q4_k_m", "wo", GgmlType::Q4_K, false, E, {E}});
    c.push_back({"8B q4_k_m", "gate+up", GgmlType::Q4_K, false, E, {F, F}});
    c.push_back({"8B q4_k_m", "down (Q4_K layers)", GgmlType::Q4_K, false, F, {E}});
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0})
        for (bool rp : {false, true}) {
            const char* m = t == GgmlType::Q4_0 ? "8B q4_0" : "8B q8_0";
            c.push_back({m, "qkv", t, rp, E, {E, KV, KV}});
            c.push_back({m, "wo", t, rp, E, {E}});
            c.push_back({m, "gate+up", t, rp, E, {F, F}});
            c.push_back({m, "down", t, rp, F, {E}});
        }
    for (GgmlType t : {GgmlType::Q5_K, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                       GgmlType::Q2_K, GgmlType::Q3_K}) {
        c.push_back({"8B shapes", "wo", t, false, E, {E}});
        c.push_back({"8B shapes", "gate+up", t, false, E, {F, F}});
    }
    // gpt-oss-20b's MXFP4 experts (n_embd 2880, expert width 2880): one expert's gate+up, down
    c.push_back({"gpt-oss-20b", "expert gate+up", GgmlType::MXFP4, false, 2880, {2880, 2880}});
    c.push_back({"gpt-oss-20b", "expert down", GgmlType::MXFP4, false, 2880, {2880}});
    return c;
}

template <class F>
void parallel_rows(int64_t n, F f) {
    const int nt =
        static_cast<int>(std::max(1u, std::min(32u, std::thread::hardware_concurrency())));
    std::vector<std::thread> ts;
    for (int i = 0; i < nt; ++i) {
        const int64_t a = n * i / nt, b = n * (i + 1) / nt;
        if (a < b) ts.emplace_back([=] { f(a, b); });
    }
    for (auto& t : ts) t.join();
}

float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double copy_bandwidth() {
    const size_t n = size_t(1) << 30;
    void *a = nullptr, *b = nullptr;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = 0; i < 13; ++i) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (i >= 3) ms.push_back(t);
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * static_cast<double>(n) / (median(ms) * 1e-3) / 1e9;
}

struct Row {  // one line of the closing table
    std::string what;
    int n_act;
    double mb;
    float us[kNV];  // 0: not timed (failed check or capture); -1: not covered
    bool ok;
};

bool run_variant(const Variant& v, int dt, const std::vector<cu::MatJob>& jobs, int k,
                 const int8_t* aq, const float4* ad, int n_act, bool acc, cudaStream_t s) {
    if (v.lpr < 0) {
        cu::dmmv_v2(dt, jobs.data(), static_cast<int>(jobs.size()), k, aq, ad, nullptr, n_act, acc,
                    s);
        return true;
    }
    return cu::dmmv_fast(dt, jobs.data(), static_cast<int>(jobs.size()), k, aq, ad, n_act, acc, s,
                         v.lpr, v.pdl);
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false, time_it = true;
    int reps = 15;
    std::string filter, variants, acts_opt;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--quick")
            quick = true;
        else if (a == "--no-time")
            time_it = false;
        else if (a == "--filter" && i + 1 < argc)
            filter = argv[++i];
        else if (a == "--variants" && i + 1 < argc)
            variants = std::string(",") + argv[++i] + ",";
        else if (a == "--acts" && i + 1 < argc)
            acts_opt = argv[++i];
        else if (a == "--reps" && i + 1 < argc)
            reps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--ctest") {
        } else {
            std::printf(
                "usage: %s [--quick] [--filter SUBSTR] [--variants A,B,...] [--acts N,M,...] "
                "[--no-time] [--reps N]\n",
                argv[0]);
            return 2;
        }
    }
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
        std::printf("SKIP no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize >> 20);
    const double copy_gbs = copy_bandwidth();
    std::printf("copy bandwidth (cudaMemcpy D2D 1 GiB, read + write): %.0f GB/s\n\n", copy_gbs);

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<Row> table;
    int n_fail = 0, n_check = 0;
    uint64_t seed = 1;
    std::vector<int> acts = quick ? std::vector<int>{1, 4} : std::vector<int>{1, 2, 4, 8, 16};
    if (!acts_opt.empty()) {
        acts.clear();
        for (const char* p = acts_opt.c_str(); *p;) {
            acts.push_back(std::max(1, std::atoi(p)));
            while (*p && *p != ',') ++p;
            if (*p == ',') ++p;
        }
    }
    for (const Case& c : cases()) {
        const std::string what = std::string(c.model) + " " + c.name + " " +
                                 std::string(quant::type_name(c.t)) + (c.repack ? "R" : "");
        if (!filter.empty() && what.find(filter) == std::string::npos) continue;
        if (quick && c.t != GgmlType::Q4_K && c.t != GgmlType::Q6_K) continue;
        const int k = c.k;
        const size_t rb = quant::row_size(c.t, k);
        const int nj = static_cast<int>(c.n_out.size());
        int total = 0;
        for (int n : c.n_out) total += n;
        const size_t bytes = rb * total;
        // host weights (all jobs back to back), in the upload layout for the device
        std::vector<uint8_t> w(bytes);
        const uint64_t wseed = seed++;
        parallel_rows(
            total, [&](int64_t a, int64_t b) { fill_weights(c.t, w.data(), rb, a, b, k, wseed); });
        const int dt =
            c.repack ? cu::repacked_type(static_cast<int>(c.t), k) : static_cast<int>(c.t);
        if (c.repack && dt == static_cast<int>(c.t)) {
            std::printf("FAIL %s: no repacked layout for k %d\n", what.c_str(), k);
            ++n_fail;
            continue;
        }
        std::vector<uint8_t> wd(w);
        if (c.repack)
            parallel_rows(total, [&](int64_t a, int64_t b) {
                cu::repack_rows(static_cast<int>(c.t), w.data() + a * rb, wd.data() + a * rb, b - a,
                                k);
            });
        // copies rotated by the timing so that their total exceeds the L2
        const size_t target = size_t(240) << 20;
        const int n_copy = static_cast<int>(
            std::min<size_t>(32, std::max<size_t>(1, (target + bytes - 1) / bytes)));
        std::vector<uint8_t*> dw(n_copy);
        dw[0] = dev_copy(wd);
        for (int i = 1; i < n_copy; ++i) {
            CK(cudaMalloc(&dw[i], bytes));
            CK(cudaMemcpy(dw[i], dw[0], bytes, cudaMemcpyDeviceToDevice));
        }
        std::vector<float> bias(c.n_out[0]);
        Rng brng(seed++);
        for (auto& b : bias) b = brng.normal();
        float* dbias = dev_copy(bias);
        std::printf("== %s: %d x %d in %d matri%s, %.1f MB, %d cop%s\n", what.c_str(), total, k, nj,
                    nj == 1 ? "x" : "ces", bytes / 1e6, n_copy, n_copy == 1 ? "y" : "ies");
        for (int n_act : acts) {
            const auto x = make_acts(n_act, k, seed++);
            const Acts a = pack_acts(c.t, x, n_act, k);
            std::vector<double> ref(static_cast<size_t>(n_act) * total);
            // reference per job: ref laid out (n_act, total) with job columns back to back
            std::vector<double> refj(ref.size());
            parallel_rows(total, [&](int64_t r0, int64_t r1) {
                reference(c.t, k, w.data(), rb, r0, r1, a, n_act, total, refj.data());
            });
            int8_t* daq = reinterpret_cast<int8_t*>(dev_copy(a.q_store));
            float4* dad = dev_copy(a.d);
            std::vector<float*> dy(nj);
            for (int j = 0; j < nj; ++j)
                dy[j] = dev_poisoned<float>(static_cast<size_t>(n_act) * c.n_out[j]);
            auto make_jobs = [&](int copy) {
                std::vector<cu::MatJob> jobs(nj);
                size_t off = 0;
                for (int j = 0; j < nj; ++j) {
                    jobs[j].w = dw[copy] + off;
                    jobs[j].row_bytes = rb;
                    jobs[j].n_out = c.n_out[j];
                    jobs[j].y = dy[j];
                    jobs[j].ldy = c.n_out[j];
                    jobs[j].bias = j == 0 ? dbias : nullptr;
                    off += rb * c.n_out[j];
                }
                return jobs;
            };
            Row row{what, n_act, bytes / 1e6, {}, true};
            for (int vi = 0; vi < kNV; ++vi) {
                const Variant& v = kVariants[vi];
                if (!variants.empty() &&
                    variants.find(std::string(",") + v.name + ",") == std::string::npos) {
                    row.us[vi] = -1;
                    continue;
                }
                const auto jobs = make_jobs(0);
                for (int j = 0; j < nj; ++j)
                    CK(cudaMemset(dy[j], 0xff, sizeof(float) * n_act * c.n_out[j]));
                if (!run_variant(v, dt, jobs, k, daq, dad, n_act, false, s)) {
                    row.us[vi] = -1;  // not covered
                    continue;
                }
                bool ok = true;
                std::string detail;
                for (int pass = 0; pass < 2; ++pass) {
                    if (pass == 1) run_variant(v, dt, jobs, k, daq, dad, n_act, true, s);
                    CK(cudaStreamSynchronize(s));
                    for (int j = 0, col = 0; j < nj; col += c.n_out[j], ++j) {
                        const int n = c.n_out[j];
                        auto y = host_copy(dy[j], static_cast<size_t>(n_act) * n);
                        std::vector<double> want(y.size()), add(y.size(), 0.0);
                        for (int b = 0; b < n_act; ++b)
                            for (int r = 0; r < n; ++r) {
                                want[static_cast<size_t>(b) * n + r] =
                                    refj[static_cast<size_t>(b) * total + col + r];
                                if (j == 0)
                                    add[static_cast<size_t>(b) * n + r] = (pass + 1.0) * bias[r];
                            }
                        const Err e =
                            compare(y.data(), want.data(), y.size(), pass + 1.0, add.data());
                        ++n_check;
                        if (!e.ok(1e-4, 1e-3)) {
                            ok = false;
                            ++n_fail;
                            detail += fmt(" [%s job %d: rel L2 %.2e, max/rms %.2e%s]",
                                          pass ? "accumulate" : "plain", j, e.rel_l2, e.max_rel_rms,
                                          e.finite ? "" : ", NON-FINITE");
                        } else if (pass == 0 && j == 0) {
                            detail += fmt(" rel L2 %.1e max/rms %.1e", e.rel_l2, e.max_rel_rms);
                        }
                    }
                }
                if (!ok) row.ok = false;
                float us = 0;
                if (time_it && ok) {
                    const int n_launch = std::max(20, n_copy);
                    std::vector<std::vector<cu::MatJob>> js;
                    for (int i = 0; i < n_copy; ++i) js.push_back(make_jobs(i));
                    cudaGraph_t g = nullptr;
                    cudaGraphExec_t ge = nullptr;
                    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                    for (int i = 0; i < n_launch; ++i)
                        run_variant(v, dt, js[i % n_copy], k, daq, dad, n_act, false, s);
                    // a variant whose launches cannot be captured (PDL on an older driver) is
                    // reported and skipped, not fatal
                    cudaError_t ce = cudaStreamEndCapture(s, &g);
                    if (ce == cudaSuccess) ce = cudaGraphInstantiate(&ge, g, 0);
                    if (ce != cudaSuccess) {
                        std::printf("  %-6s n_act %2d: graph capture failed: %s (not timed)\n",
                                    v.name, n_act, cudaGetErrorString(ce));
                        (void)cudaGetLastError();
                        if (g) cudaGraphDestroy(g);
                        continue;
                    }
                    std::vector<float> ms;
                    for (int r = 0; r < reps + 3; ++r) {
                        CK(cudaEventRecord(e0, s));
                        CK(cudaGraphLaunch(ge, s));
                        CK(cudaEventRecord(e1, s));
                        CK(cudaEventSynchronize(e1));
                        float t = 0;
                        CK(cudaEventElapsedTime(&t, e0, e1));
                        if (r >= 3) ms.push_back(t);
                    }
                    CK(cudaGraphExecDestroy(ge));
                    CK(cudaGraphDestroy(g));
                    us = median(ms) * 1e3f / n_launch;
                }
                row.us[vi] = us;
                const double gbs = us > 0 ? bytes / (us * 1e-6) / 1e9 : 0;
                std::printf("  %-6s n_act %2d: %s%s", v.name, n_act, ok ? "ok  " : "FAIL",
                            detail.c_str());
                if (us > 0)
                    std::printf("  %8.2f us %6.0f GB/s %5.1f %%", us, gbs, 100 * gbs / copy_gbs);
                std::printf("\n");
            }
            table.push_back(row);
            CK(cudaFree(daq));
            CK(cudaFree(dad));
            for (float* p : dy) CK(cudaFree(p));
        }
        for (uint8_t* p : dw) CK(cudaFree(p));
        CK(cudaFree(dbias));
    }

    std::printf(
        "\nweights-only GB/s; %% of the copy bandwidth %.0f GB/s; '-': variant does not cover the "
        "case\n",
        copy_gbs);
    std::printf("| case | n_act | MB |");
    for (const Variant& v : kVariants) std::printf(" %s us |", v.name);
    std::printf(" v3 GB/s | v3 %% copy | v3/v2 | best |\n| --- | ---: | ---: |");
    for (int i = 0; i < kNV; ++i) std::printf(" ---: |");
    std::printf(" ---: | ---: | ---: | --- |\n");
    for (const Row& r : table) {
        // '-': not covered; '0.00': not timed (a failed check or capture)
        auto cell = [](float us) { return us < 0 ? std::string("-") : fmt("%.2f", us); };
        const double gbs = r.us[1] > 0 ? r.mb * 1e6 / (r.us[1] * 1e-6) / 1e9 : 0;
        const std::string ratio =
            r.us[1] > 0 && r.us[0] > 0 ? fmt("%.2fx", r.us[0] / r.us[1]) : "-";
        int best = -1;
        for (int i = 0; i < kNV; ++i)
            if (r.us[i] > 0 && (best < 0 || r.us[i] < r.us[best])) best = i;
        std::printf("| %s%s | %d | %.1f |", r.what.c_str(), r.ok ? "" : " FAIL", r.n_act, r.mb);
        for (int i = 0; i < kNV; ++i) std::printf(" %s |", cell(r.us[i]).c_str());
        std::printf(" %.0f | %.1f | %s | %s |\n", gbs, 100 * gbs / copy_gbs, ratio.c_str(),
                    best >= 0 ? kVariants[best].name : "-");
    }
    std::printf("\n%s: %d of %d checks failed\n", n_fail ? "FAIL" : "PASS", n_fail, n_check);
    return n_fail ? 1 : 0;
}
