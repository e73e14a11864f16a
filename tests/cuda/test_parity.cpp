// zinc/tests/cuda/test_parity.cpp — the CUDA tier against the CPU tier, on a GPU.
//
//   cuda_test_parity [--ctest] [--ops] [--e2e MODEL.gguf ...] [--batch MODEL.gguf]
//
// --ops: per-op parity on fresh random inputs (outputs poisoned with NaN before each run; NaN
//   never passes): quantized matrix-vector products for every weight type (vs float64 dot
//   products of the CPU dequantization), the cuBLAS prefill path, RMS norm + int8 pack, GLU,
//   dequantization (embedding rows), argmax, and paged attention (vs a float64 reference).
// --e2e: 5 prompts x 64 greedy tokens, teacher-forced on the CPU tier's tokens: at every step
//   the CUDA argmax must equal the CPU argmax and the logits must agree within the stated
//   tolerance; run with the fused paths and again with every ZINC_* opt-out at 0. --e2e and
//   --batch run the fast kernels (ZINC_EXACT=0, cuBLAS prefill), which agree with the CPU tier
//   within a tolerance only; the exact default mode is checked bit for bit by test_exact.cpp
//   (end to end) and test_exact_ops.cpp (per op).
// --batch: 16 sequences decoded together (shuffled, non-contiguous KV blocks) give the same
//   tokens and logits as each sequence decoded alone.
// Without a usable device it prints the reason and exits 77 (ctest: skipped).
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
#include "backend/cuda/repack.h"
#include "gguf/gguf.h"
#include "gpu_model.h"
#include "gpu_test.h"
#include "model/batch.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/types.h"
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

// ||a - b|| / ||b||; NaN or Inf anywhere in a gives +inf.
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<float> randn(std::mt19937& rng, size_t n, float sigma = 1.0f, float mean = 0.f) {
    std::normal_distribution<float> d(mean, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// ---------------------------------------------------------------------------------------- ops

void test_dmmv(std::mt19937& rng, quant::GgmlType t, int n_act, bool gemm,
               bool repacked_off = false) {
    const int k = 2048, n_out = 384;
    const size_t rb = quant::row_size(t, k);
    std::vector<uint8_t> w(rb * n_out);
    std::vector<float> wf(static_cast<size_t>(k) * n_out);
    for (int r = 0; r < n_out; ++r) {
        auto row = randn(rng, k, 0.5f, r % 3 == 0 ? 0.2f : 0.f);
        quant::quantize_row(t, row.data(), w.data() + r * rb, k);
        quant::dequantize_row(t, w.data() + r * rb, wf.data() + static_cast<size_t>(r) * k, k);
    }
    auto x = randn(rng, static_cast<size_t>(n_act) * k);
    std::vector<double> ref(static_cast<size_t>(n_act) * n_out);
    for (int j = 0; j < n_act; ++j)
        for (int r = 0; r < n_out; ++r) {
            double s = 0;
            for (int i = 0; i < k; ++i)
                s += static_cast<double>(wf[static_cast<size_t>(r) * k + i]) *
                     x[static_cast<size_t>(j) * k + i];
            ref[static_cast<size_t>(j) * n_out + r] = s;
        }
    // the device layout (repack.h), as the runner uploads it
    const int dt = cu::repacked_type(static_cast<int>(t), k, !repacked_off);
    std::vector<uint8_t> wd(w);
    if (dt != static_cast<int>(t))
        cu::repack_rows(static_cast<int>(t), w.data(), wd.data(), n_out, k);
    uint8_t* dw = dev_copy(wd);
    float* dx = dev_copy(x);
    float* dy = dev_poisoned<float>(ref.size());
    cu::RowOut o;
    o.f = dev_poisoned<float>(x.size());
    o.q = dev_poisoned<int8_t>(x.size());
    o.d = dev_poisoned<float4>(x.size() / 32);
    o.h = dev_poisoned<uint16_t>(x.size());
    o.mode = cu::pack_mode_for(static_cast<int>(t));  // the CPU tier's vec_dot type
    cu::pack_rows(dx, n_act, k, o, nullptr);
    double tol;
    if (gemm) {
        uint16_t* wh = dev_poisoned<uint16_t>(wf.size());
        cu::dequant_f16(dt, dw, rb, n_out, k, wh, nullptr);
        // cuBLAS through the runner's loader is exercised end to end; here the dequantized f16
        // weights are checked against the CPU dequantization instead.
        auto whh = host_copy(wh, wf.size());
        double num = 0, den = 0;
        bool finite = true;
        for (size_t i = 0; i < wf.size(); ++i) {
            const float v = quant::fp16_to_fp32(whh[i]);
            finite &= std::isfinite(v);
            num += (v - wf[i]) * (v - wf[i]);
            den += static_cast<double>(wf[i]) * wf[i];
        }
        const double e = finite ? std::sqrt(num / den) : INFINITY;
        report(e < 1e-3, fmt("dequant_f16 %-5s rel err %.2e (tol 1e-3)",
                             std::string(quant::type_name(t)).c_str(), e));
        cudaFree(wh);
        tol = 0;
    } else {
        cu::MatJob job;
        job.w = dw;
        job.row_bytes = rb;
        job.n_out = n_out;
        job.y = dy;
        job.ldy = n_out;
        cu::dmmv(dt, &job, 1, k, o.q, o.d, o.f, n_act, false, nullptr);
        auto y = host_copy(dy, ref.size());
        // The CPU tier's product: activations packed by quantize_row(vec_dot_type), vec_dot.
        // Same int8 codes on both tiers, so only float rounding may differ.
        {
            const auto vt = quant::type_traits(t).vec_dot_type;
            const size_t prb = quant::row_size(vt, k);
            std::vector<uint8_t> packed(prb * n_act);
            for (int j = 0; j < n_act; ++j)
                quant::quantize_row(vt, x.data() + static_cast<size_t>(j) * k,
                                    packed.data() + j * prb, k);
            std::vector<double> cref(ref.size());
            for (int j = 0; j < n_act; ++j)
                for (int r = 0; r < n_out; ++r)
                    cref[static_cast<size_t>(j) * n_out + r] =
                        quant::vec_dot(t, k, w.data() + r * rb, packed.data() + j * prb);
            const double ec = rel_err(y, cref);
            report(ec < 1e-5,
                   fmt("dmmv %-5s x %2d rows vs CPU vec_dot (same codes): rel err %.2e (tol 1e-5)",
                       std::string(quant::type_name(t)).c_str(), n_act, ec));
        }
        const bool fl =
            t == quant::GgmlType::F32 || t == quant::GgmlType::F16 || t == quant::GgmlType::BF16;
        tol = fl ? 1e-5 : 1.5e-2;  // int8 activations: ~0.5% per element, averaged
        const double e = rel_err(y, ref);
        report(e < tol, fmt("dmmv %-5s%s x %2d rows: rel err %.2e (tol %.0e)",
                            std::string(quant::type_name(t)).c_str(),
                            dt != static_cast<int>(t) ? " (repacked)" : "", n_act, e, tol));
        // accumulate mode: y += W x  (y already holds W x)
        cu::dmmv(dt, &job, 1, k, o.q, o.d, o.f, n_act, true, nullptr);
        auto y2 = host_copy(dy, ref.size());
        std::vector<double> ref2(ref);
        for (auto& v : ref2) v *= 2;
        const double e2 = rel_err(y2, ref2);
        report(e2 < tol, fmt("dmmv %-5s accumulate: rel err %.2e",
                             std::string(quant::type_name(t)).c_str(), e2));
    }
    cudaFree(dw);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(o.f);
    cudaFree(o.q);
    cudaFree(o.d);
    cudaFree(o.h);
}

void test_rows_ops(std::mt19937& rng) {
    const int n = 7, dim = 2048;
    auto x = randn(rng, static_cast<size_t>(n) * dim, 2.0f);
    auto w = randn(rng, dim, 0.3f, 1.0f);
    auto u = randn(rng, static_cast<size_t>(n) * dim);
    float* dx = dev_copy(x);
    float* dw = dev_copy(w);
    float* du = dev_copy(u);
    cu::RowOut o;
    o.f = dev_poisoned<float>(x.size());
    o.q = dev_poisoned<int8_t>(x.size());
    o.d = dev_poisoned<float4>(x.size() / 32);
    // exact: canon's f64 chains (bitwise in test_exact_ops); fast: the block-wide f32 tree
    for (bool exact : {true, false}) {
        CK(cudaMemset(o.f, 0xff, x.size() * 4));
        cu::rms_norm_out(dx, dw, 1e-6f, n, dim, o, exact, nullptr);
        const char* mode = exact ? "exact" : "fast";
        auto y = host_copy(o.f, x.size());
        auto q = host_copy(o.q, x.size());
        auto d = host_copy(o.d, x.size() / 32);
        std::vector<double> ref(x.size()), deq(x.size());
        for (int r = 0; r < n; ++r) {
            double ss = 0;
            for (int i = 0; i < dim; ++i)
                ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
            const double sc = 1.0 / std::sqrt(ss / dim + 1e-6);
            for (int i = 0; i < dim; ++i) ref[r * dim + i] = x[r * dim + i] * sc * w[i];
        }
        for (size_t i = 0; i < x.size(); ++i) deq[i] = d[i / 32].x * q[i];
        report(rel_err(y, ref) < 1e-5,
               fmt("rms_norm (%s) f32 rel err %.2e (tol 1e-5)", mode, rel_err(y, ref)));
        std::vector<float> deqf(deq.begin(), deq.end());
        report(rel_err(deqf, ref) < 1e-2,
               fmt("rms_norm (%s) int8 pack rel err %.2e (tol 1e-2)", mode, rel_err(deqf, ref)));
        // half sums
        double worst = 0;
        for (size_t c = 0; c < d.size(); ++c) {
            double s0 = 0, s1 = 0;
            for (int i = 0; i < 16; ++i) s0 += q[c * 32 + i], s1 += q[c * 32 + 16 + i];
            worst =
                std::max({worst, std::fabs(d[c].y - d[c].x * s0), std::fabs(d[c].z - d[c].x * s1)});
        }
        report(worst < 1e-3, fmt("pack (%s) half sums max err %.2e", mode, worst));
    }

    for (bool gelu : {false, true}) {
        CK(cudaMemset(o.f, 0xff, x.size() * 4));
        cu::glu_out(dx, du, dim, gelu, n, dim, o, nullptr);
        auto g = host_copy(o.f, x.size());
        std::vector<double> gr(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
            const double a = x[i];
            const double act =
                gelu ? 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))
                     : a / (1 + std::exp(-a));
            gr[i] = act * u[i];
        }
        report(rel_err(g, gr) < 1e-5,
               fmt("%s rel err %.2e (tol 1e-5)", gelu ? "geglu" : "swiglu", rel_err(g, gr)));
    }
    // argmax with a planted tie (first index wins)
    const int V = 50000;
    auto l = randn(rng, static_cast<size_t>(n) * V);
    for (int r = 0; r < n; ++r) l[r * V + 100 + r] = l[r * V + 40000] = 50.f;
    float* dl = dev_copy(l);
    int32_t* dt = dev_poisoned<int32_t>(n);
    void* scratch = dev_poisoned<uint8_t>(cu::argmax_scratch_bytes(n, V));
    cu::argmax_rows(dl, n, V, dt, scratch, nullptr);
    auto t = host_copy(dt, n);
    bool ok = true;
    for (int r = 0; r < n; ++r) ok &= t[r] == 100 + r;
    report(ok, "argmax per row, ties to the first index (across stage-1 spans)");
    cudaFree(scratch);
    cudaFree(dl);
    cudaFree(dt);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(du);
    cudaFree(o.f);
    cudaFree(o.q);
    cudaFree(o.d);
}

// Paged attention vs float64, 3 sequences with shuffled blocks, GQA, optional window.
void test_attention(std::mt19937& rng, int hd, int window) {
    const int n_head = 8, n_kv = 2, bs = 16, n_blocks = 64;
    const int lens[3] = {37, 1, 200};
    const int kvd = n_kv * hd;
    auto kc = randn(rng, static_cast<size_t>(n_blocks) * bs * kvd);
    auto vc = randn(rng, static_cast<size_t>(n_blocks) * bs * kvd);
    std::vector<uint16_t> kh(kc.size()), vh(vc.size());
    for (size_t i = 0; i < kc.size(); ++i) {
        kh[i] = quant::fp32_to_fp16(kc[i]);
        vh[i] = quant::fp32_to_fp16(vc[i]);
        kc[i] = quant::fp16_to_fp32(kh[i]);
        vc[i] = quant::fp16_to_fp32(vh[i]);
    }
    std::vector<int> perm(n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    // rows: the last 4 positions of seq 0, the one of seq 1, the last 3 of seq 2
    std::vector<int32_t> bt, row_pos, row_bt;
    int used = 0;
    std::vector<int> seq_bt_off;
    for (int s = 0; s < 3; ++s) {
        seq_bt_off.push_back(static_cast<int>(bt.size()));
        for (int b = 0; b < (lens[s] + bs - 1) / bs; ++b) bt.push_back(perm[used++]);
    }
    const int take[3] = {4, 1, 3};
    for (int s = 0; s < 3; ++s)
        for (int i = lens[s] - take[s]; i < lens[s]; ++i) {
            row_pos.push_back(i);
            row_bt.push_back(seq_bt_off[s]);
        }
    const int n_rows = static_cast<int>(row_pos.size());
    auto q = randn(rng, static_cast<size_t>(n_rows) * n_head * hd);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<double> ref(static_cast<size_t>(n_rows) * n_head * hd);
    for (int r = 0; r < n_rows; ++r)
        for (int h = 0; h < n_head; ++h) {
            const int hk = h / (n_head / n_kv), p = row_pos[r];
            const int lo = window > 0 ? std::max(0, p - window + 1) : 0;
            std::vector<double> sc;
            for (int j = lo; j <= p; ++j) {
                const size_t slot = static_cast<size_t>(bt[row_bt[r] + j / bs]) * bs + j % bs;
                double d = 0;
                for (int i = 0; i < hd; ++i)
                    d += static_cast<double>(q[(r * n_head + h) * hd + i]) *
                         kc[slot * kvd + hk * hd + i];
                sc.push_back(d * scale);
            }
            const double mx = *std::max_element(sc.begin(), sc.end());
            double sum = 0;
            for (auto& v : sc) sum += (v = std::exp(v - mx));
            for (int i = 0; i < hd; ++i) {
                double o = 0;
                for (int j = lo; j <= p; ++j) {
                    const size_t slot = static_cast<size_t>(bt[row_bt[r] + j / bs]) * bs + j % bs;
                    o += sc[j - lo] * vc[slot * kvd + hk * hd + i];
                }
                ref[(r * n_head + h) * hd + i] = o / sum;
            }
        }
    cu::AttnJob j;
    j.q = dev_copy(q);
    j.q_ld = n_head * hd;
    float* out = dev_poisoned<float>(ref.size());
    j.out = out;
    j.out_ld = n_head * hd;
    j.k_cache = dev_copy(kh);
    j.v_cache = dev_copy(vh);
    j.n_head = n_head;
    j.n_head_kv = n_kv;
    j.head_dim = j.head_dim_v = hd;
    j.scale = scale;
    j.window = window;
    j.block_size = bs;
    j.row_pos = dev_copy(row_pos);
    j.row_bt = dev_copy(row_bt);
    j.bt = dev_copy(bt);
    j.max_pos = 1024;
    CK(cu::attention_prepare(j.max_pos, hd));
    cu::attention(j, n_rows, nullptr);
    auto o = host_copy(out, ref.size());
    const double e = rel_err(o, ref);
    report(e < 1e-5,
           fmt("paged attention hd %d window %d, %d rows of 3 seqs: rel err %.2e (tol 1e-5)", hd,
               window, n_rows, e));
}

int run_ops() {
    std::mt19937 rng(std::random_device{}());
    using T = quant::GgmlType;
    for (T t : {T::F32, T::F16, T::BF16, T::Q4_0, T::Q4_1, T::Q5_0, T::Q5_1, T::Q8_0, T::Q2_K,
                T::Q3_K, T::Q4_K, T::Q5_K, T::Q6_K}) {
        for (int n_act : {1, 3, 16}) test_dmmv(rng, t, n_act, false);
        test_dmmv(rng, t, 1, true);
        if (cu::repacked_type(static_cast<int>(t), 2048) != static_cast<int>(t)) {
            test_dmmv(rng, t, 1, false, true);  // the GGUF layout (the default, ZINC_REPACK unset)
            test_dmmv(rng, t, 1, true, true);
        }
    }
    test_rows_ops(rng);
    for (int hd : {64, 128, 256}) test_attention(rng, hd, 0);
    test_attention(rng, 128, 20);
    return 0;
}

// ---------------------------------------------------------------------------------------- e2e

const char* kPrompts[5] = {
    "The capital of France is",
    "def fibonacci(n):", "Once upon a time, in a small village by the sea,", "1, 2, 3, 4, 5,",
    // long enough to take the prefill GEMM path (> 16 rows)
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

constexpr float kNearTie = 0.5f;    // logits
constexpr double kLogitRel = 5e-2;  // ||gpu - cpu|| / ||cpu|| per step (runtime's threshold)

void set_optouts(bool off) {
    for (const char* v : {"ZINC_CUDA_GRAPH", "ZINC_FUSED_PROJ", "ZINC_FUSED_NORM"})
        setenv(v, off ? "0" : "1", 1);
    setenv("ZINC_EXACT", "0", 1);  // the tolerance mode (see the header)
}

// Teacher-forced on the CPU tier's greedy tokens.
void e2e(const std::string& path, bool optouts) {
    Loaded L;
    if (!load(path, L)) return;
    const int V = L.model->n_vocab();
    const std::string base = path.substr(path.find_last_of('/') + 1);
    set_optouts(optouts);
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = 512;
    ro.n_blocks = 32;
    ro.max_batch_tokens = 128;
    ro.max_seqs = 4;
    auto runner = cu::create_runner(*L.model, ro, {});
    if (!runner) {
        report(false, "cuda runner " + base + ": " + runner.error().message);
        return;
    }
    auto ctxr = cu::make_runner_context(std::move(runner.value()), 512, V);
    if (!ctxr) {
        report(false, ctxr.error().message);
        return;
    }
    auto& gpu = *ctxr.value();
    int steps = 0, mismatches = 0, ties = 0, same_free = 0;
    double worst_abs = 0, worst_rel = 0;
    std::string notes;
    for (const char* prompt : kPrompts) {
        auto cpu_r = model::Context::create(*L.model, {512, 0, 512});
        if (!cpu_r) {
            report(false, cpu_r.error().message);
            return;
        }
        auto& cpu = *cpu_r.value();
        gpu.reset();
        std::vector<int32_t> toks = L.tok->encode(prompt, true, false);
        std::vector<int32_t> cpu_greedy;
        if (!cpu.eval(toks).ok() || !gpu.eval(toks).ok()) {
            report(false, "eval failed");
            return;
        }
        for (int t = 0; t < 64; ++t) {
            const float* lc = cpu.logits(-1);
            const float* lg = gpu.logits(-1);
            double num = 0, den = 0, mx = 0;
            bool finite = true;
            for (int i = 0; i < V; ++i) {
                finite &= std::isfinite(lg[i]);
                const double d = static_cast<double>(lg[i]) - lc[i];
                num += d * d;
                den += static_cast<double>(lc[i]) * lc[i];
                mx = std::max(mx, std::fabs(d));
            }
            const double rel = finite ? std::sqrt(num / den) : INFINITY;
            worst_abs = std::max(worst_abs, finite ? mx : INFINITY);
            worst_rel = std::max(worst_rel, rel);
            const int a = argmax(lc, V), b = argmax(lg, V);
            cpu_greedy.push_back(a);
            ++steps;
            if (a != b) {
                std::vector<float> s(lc, lc + V);
                std::nth_element(s.begin(), s.begin() + 1, s.end(), std::greater<float>());
                if (s[0] - s[1] < kNearTie)
                    ++ties;
                else
                    ++mismatches;
                notes += fmt(" [step %d: cpu %d gpu %d, cpu top-2 margin %.4f]", steps, a, b,
                             s[0] - s[1]);
            }
            const int32_t one[1] = {a};
            if (!cpu.eval(one).ok() || !gpu.eval(one).ok()) {
                report(false, "eval failed");
                return;
            }
        }
        // Free-running: the CUDA tier's own greedy continuation vs the CPU tier's.
        gpu.reset();
        if (!gpu.eval(toks).ok()) return report(false, "eval failed");
        bool same = true;
        for (int t = 0; t < 64 && same; ++t) {
            const int32_t b = argmax(gpu.logits(-1), V);
            same = b == cpu_greedy[t];
            const int32_t one[1] = {b};
            if (!gpu.eval(one).ok()) return report(false, "eval failed");
        }
        same_free += same;
    }
    // Tolerance: both tiers pack activations to the same int8 codes (Q8_0/Q8_1/Q8_K) and keep an
    // f16 KV cache; what differs is float summation order, exp/sin/cos, and the int8 codes and
    // f16 KV entries that a last-bit difference moves across a rounding boundary. On random-
    // weight models those flips compound: the CPU tier's own SIMD and scalar paths differ by
    // 0.12 in logits and diverge at a 0.04 margin within 27 tokens (docs/cuda.md). So a
    // different argmax counts only where the CPU's top-2 margin is at least kNearTie.
    report(mismatches == 0 && worst_rel < kLogitRel && worst_abs < kNearTie,
           fmt("e2e %s%s: %d teacher-forced greedy steps (5 prompts x 64): %d argmax "
               "differences beyond near-ties, %d near-ties (cpu margin < %.1f); free-running: "
               "%d/5 prompts give the same 64 tokens; logits max |d| %.4f (tol %.1f), worst rel "
               "err %.2e (tol %.0e)",
               base.c_str(), optouts ? " [opt-outs]" : "", steps, mismatches, ties, kNearTie,
               same_free, worst_abs, kNearTie, worst_rel, kLogitRel) +
               notes);
}

// 16 sequences decoded together == each alone.
void batch16(const std::string& path) {
    Loaded L;
    if (!load(path, L)) return;
    const int V = L.model->n_vocab();
    set_optouts(false);
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = 256;
    ro.n_blocks = 16 * 16 + 8;
    ro.max_batch_tokens = 256;
    ro.max_seqs = 16;
    auto rr = cu::create_runner(*L.model, ro, {});
    if (!rr) {
        report(false, "cuda runner: " + rr.error().message);
        return;
    }
    model::Runner& r = *rr.value();
    const int S = 16, steps = 24;
    std::mt19937 rng(7);
    std::vector<int> perm(ro.n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    // two disjoint sets of block tables: solo runs and the batched run
    std::vector<std::vector<int32_t>> bt_solo(S), bt_batch(S);
    for (int s = 0; s < S; ++s)
        for (int b = 0; b < 8; ++b) {
            bt_solo[s].push_back(perm[s * 8 + b]);
            bt_batch[s].push_back(perm[128 + s * 8 + b]);
        }
    std::vector<std::vector<int32_t>> prompts(S);
    for (int s = 0; s < S; ++s) {
        prompts[s] = L.tok->encode(kPrompts[s % 5], true, false);
        for (int i = 0; i < s; ++i) prompts[s].push_back((s * 131 + i * 17) % V);  // vary lengths
    }
    // solo
    std::vector<std::vector<int32_t>> solo_tok(S);
    std::vector<std::vector<float>> solo_logits(S,
                                                std::vector<float>(static_cast<size_t>(steps) * V));
    for (int s = 0; s < S; ++s) {
        int pos = 0;
        std::vector<int32_t> cur = prompts[s];
        for (int t = 0; t < steps; ++t) {
            model::BatchSeq q;
            q.row0 = 0;
            q.n_tokens = static_cast<int>(cur.size());
            q.pos0 = pos;
            q.block_table = bt_solo[s];
            model::Batch b{cur, std::span<const model::BatchSeq>(&q, 1)};
            float* l = solo_logits[s].data() + static_cast<size_t>(t) * V;
            if (!r.forward(b, l).ok()) {
                report(false, "batch16 solo forward");
                return;
            }
            pos += q.n_tokens;
            const int32_t nt = argmax(l, V);
            solo_tok[s].push_back(nt);
            cur = {nt};
        }
    }
    // batched: each prompt prefilled alone (the same path as solo), then the decodes of all 16
    // sequences together in one step each (a captured graph of 16 rows), fed the solo runs'
    // tokens; every step's argmax and logits must equal the solo run's.
    std::vector<float> logits(static_cast<size_t>(S) * V);
    std::vector<int> pos(S, 0);
    std::vector<int32_t> next(S);
    double worst = 0;
    int diff = 0;
    auto compare = [&](int s, int t, const float* l) {
        const float* ref = solo_logits[s].data() + static_cast<size_t>(t) * V;
        for (int i = 0; i < V; ++i)
            worst =
                std::max(worst, std::isfinite(l[i]) ? static_cast<double>(std::fabs(l[i] - ref[i]))
                                                    : INFINITY);
        diff += argmax(l, V) != solo_tok[s][t];
    };
    for (int s = 0; s < S; ++s) {
        model::BatchSeq q;
        q.n_tokens = static_cast<int>(prompts[s].size());
        q.block_table = bt_batch[s];
        model::Batch b{prompts[s], std::span<const model::BatchSeq>(&q, 1)};
        if (!r.forward(b, logits.data()).ok()) {
            report(false, "batch16 prefill forward");
            return;
        }
        pos[s] = q.n_tokens;
        compare(s, 0, logits.data());
    }
    for (int t = 1; t < steps; ++t) {
        std::vector<model::BatchSeq> seqs(S);
        for (int s = 0; s < S; ++s) {
            seqs[s].row0 = s;
            seqs[s].n_tokens = 1;
            seqs[s].pos0 = pos[s];
            seqs[s].block_table = bt_batch[s];
            next[s] = solo_tok[s][t - 1];
        }
        model::Batch b{next, seqs};
        std::fill(logits.begin(), logits.end(), NAN);
        if (!r.forward(b, logits.data()).ok()) {
            report(false, "batch16 batched forward");
            return;
        }
        for (int s = 0; s < S; ++s) {
            pos[s] += 1;
            compare(s, t, logits.data() + static_cast<size_t>(s) * V);
        }
    }
    const auto st = cu::runner_stats(r);
    report(diff == 0 && worst < 1e-3,
           fmt("batch16 %s: 16 seqs x %d steps batched vs alone: %d argmax differences, logits "
               "max |d| %.2e (tol 1e-3); graphs captured %lld",
               path.substr(path.find_last_of('/') + 1).c_str(), steps, diff, worst,
               static_cast<long long>(st.graph_captures)));
}

}  // namespace

int main(int argc, char** argv) {
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_parity: %s\n", p.reason.c_str());
        return 77;
    }
    const auto& d = p.devices.front();
    std::printf("device: %s, cc %d.%d, %zu MiB, driver %s, runtime %s\n", d.name.c_str(),
                d.cc_major, d.cc_minor, d.mem_total >> 20,
                cu::version_string(p.driver_version).c_str(),
                cu::version_string(p.runtime_version).c_str());
    bool any = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--ctest") continue;
        if (a == "--ops") {
            run_ops();
            any = true;
        } else if (a == "--e2e" || a == "--batch") {
            for (++i; i < argc && argv[i][0] != '-'; ++i) {
                if (a == "--e2e") {
                    e2e(argv[i], false);
                    e2e(argv[i], true);
                } else {
                    batch16(argv[i]);
                }
            }
            --i;
            any = true;
        }
    }
    if (!any) run_ops();
    std::printf("%s: %d failure%s\n", g_fail ? "FAIL" : "PASS", g_fail, g_fail == 1 ? "" : "s");
    return g_fail ? 1 : 0;
}
