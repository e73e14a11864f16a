// zinc/tests/cuda/test_deltanet.cpp — qwen35's kernels on the device (ssm_conv.cu, deltanet.cu,
// gated_norm.cu) against the CPU tier's kernels on the same random inputs (tests/cuda/qwen35_ref.h;
// outputs poisoned with NaN first, NaN never passes):
//   ssm_conv        bit for bit (outputs and every slot's conv state), d_conv 2 / 4 / 7, channel
//                   counts past one block, sequences without rows, Qwen3.5-9B's 8192 channels
//                   over a mixed step;
//   delta_net       max |gpu - cpu| / max |cpu| <= 3e-5 (outputs, states): the emulation's head
//                   shapes, sequences without rows, Qwen3.5-9B's (16 q/k heads, 32 v heads,
//                   128 x 128) over a step of a 300-row prefill from 0, a 64-row continuation
//                   and 6 decode rows, and 48 decode steps of 4 sequences (one call per token)
//                   against the CPU's one call each;
//   gated_rms_norm  bit for bit; split_gate bit for bit; sigmoid_mul <= 1e-6 relative (the
//                   device's expf against libm's), elementwise and per row, and past 2^20
//                   elements (the grid-stride loops).
// Then timings (CUDA events, median of 20 after a warm-up) of the 9B shapes: DeltaNet decode for
// 1 and 32 sequences (state bytes read + written per second) and a 512-row prefill, ssm_conv
// decode and prefill (buffers sized from the shapes: the data carry no reference there). Exit 0
// when every case passes, 1 otherwise, 77 without a device.
//
//   cuda_test_deltanet [--no-bench]      (--ctest, as ctest runs it: --no-bench)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "gpu_test.h"
#include "quant/quant.h"
#include "qwen35_ref.h"

using namespace zinc;
namespace cu = zinc::cuda;
namespace qt = zinc::qwen35_test;
using namespace zinc::gpu_test;

namespace {

constexpr double kDeltaTol = 3e-5, kSigmoidTol = 1e-6;
int g_pass = 0, g_fail = 0;

void report(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    (ok ? g_pass : g_fail)++;
}

struct DevSeqs {
    int32_t *row0, *slot, *row_pos;
    int n;
};
DevSeqs dev_seqs(const qt::SeqTable& t) {
    return {dev_copy(t.row0), dev_copy(t.slot), dev_copy(t.row_pos),
            static_cast<int>(t.slot.size())};
}
cu::RecurrentSeqs seqs_of(const DevSeqs& s) {
    cu::RecurrentSeqs r;
    r.row0 = s.row0;
    r.slot = s.slot;
    r.row_pos = s.row_pos;
    r.n_seqs = s.n;
    return r;
}

// ---- DeltaNet

struct DevDelta {
    float *qkv, *beta, *alpha, *dt_bias, *a, *out, *state;
};
cu::DeltaNetJob delta_job(const qt::DeltaNetData& d, const DevDelta& m, const DevSeqs& s) {
    cu::DeltaNetJob j;
    j.qkv = m.qkv;
    j.qkv_ld = d.qkv_ld;
    j.beta = m.beta;
    j.alpha = m.alpha;
    j.dt_bias = m.dt_bias;
    j.a = m.a;
    j.out = m.out;
    j.out_ld = d.out_ld;
    j.state = m.state;
    j.slot_floats = d.slot_floats;
    j.n_k_heads = d.c.n_k;
    j.n_v_heads = d.c.n_v;
    j.head_k_dim = d.c.dk;
    j.head_v_dim = d.c.dv;
    j.eps = d.eps;
    j.seqs = seqs_of(s);
    return j;
}
DevDelta dev_delta(const qt::DeltaNetData& d) {
    return {dev_copy(d.qkv),     dev_copy(d.beta), dev_copy(d.alpha),
            dev_copy(d.dt_bias), dev_copy(d.a),    dev_poisoned<float>(d.out_floats()),
            dev_copy(d.state0)};
}

void delta_step(const qt::DeltaNetCase& c, uint32_t seed) {
    const qt::DeltaNetData d = qt::make_delta_net(c, seed);
    const DevDelta m = dev_delta(d);
    const DevSeqs s = dev_seqs(d.t);
    const bool launched = cu::delta_net_recurrent(delta_job(d, m, s), nullptr);
    const auto out = host_copy(m.out, d.out_floats());
    const auto st = host_copy(m.state, d.state.size());
    const double eo = qt::rel_err(out, d.out), es = qt::rel_err(st, d.state);
    report(launched && eo <= kDeltaTol && es <= kDeltaTol,
           fmt("delta_net %s: rel err out %.2e state %.2e (bound %.0e)", c.name.c_str(), eo, es,
               kDeltaTol));
}

// Decode steps: step s holds row s of every sequence (equal lengths), one call each.
void delta_decode_steps(const qt::DeltaNetCase& c, uint32_t seed) {
    const qt::DeltaNetData d = qt::make_delta_net(c, seed);
    const int n_seq = static_cast<int>(c.step.seqs.size()), n_t = c.step.seqs[0].second;
    DevDelta m = dev_delta(d);
    std::vector<float> out(d.out_floats());
    float* o = dev_poisoned<float>(static_cast<size_t>(n_seq) * d.out_ld);
    for (int s = 0; s < n_t; ++s) {
        qt::SeqTable t;
        std::vector<float> qkv, beta, alpha;
        for (int i = 0; i < n_seq; ++i) {
            const int row = d.t.row0[static_cast<size_t>(i)] + s;
            t.row0.push_back(i);
            t.slot.push_back(d.t.slot[static_cast<size_t>(i)]);
            t.row_pos.push_back(d.t.row_pos[static_cast<size_t>(row)]);
            auto take = [&](const std::vector<float>& src, int w, std::vector<float>& dst) {
                dst.insert(dst.end(), src.begin() + int64_t{row} * w,
                           src.begin() + int64_t{row + 1} * w);
            };
            take(d.qkv, d.qkv_ld, qkv);
            take(d.beta, c.n_v, beta);
            take(d.alpha, c.n_v, alpha);
        }
        t.row0.push_back(n_seq);
        DevDelta ms = m;
        ms.qkv = dev_copy(qkv);
        ms.beta = dev_copy(beta);
        ms.alpha = dev_copy(alpha);
        ms.out = o;
        CK(cudaMemset(o, 0xff, static_cast<size_t>(n_seq) * d.out_ld * sizeof(float)));
        const DevSeqs ds = dev_seqs(t);
        if (!cu::delta_net_recurrent(delta_job(d, ms, ds), nullptr)) {
            report(false, "delta_net " + c.name + ": not launched");
            return;
        }
        const auto os = host_copy(o, static_cast<size_t>(n_seq) * d.out_ld);
        for (int i = 0; i < n_seq; ++i) {
            const int row = d.t.row0[static_cast<size_t>(i)] + s;
            std::copy_n(os.begin() + int64_t{i} * d.out_ld, d.out_ld,
                        out.begin() + int64_t{row} * d.out_ld);
        }
        CK(cudaFree(ms.qkv));
        CK(cudaFree(ms.beta));
        CK(cudaFree(ms.alpha));
    }
    const auto st = host_copy(m.state, d.state.size());
    const double eo = qt::rel_err(out, d.out), es = qt::rel_err(st, d.state);
    report(eo <= kDeltaTol && es <= kDeltaTol,
           fmt("delta_net %s, %d decode steps: rel err out %.2e state %.2e (bound %.0e)",
               c.name.c_str(), n_t, eo, es, kDeltaTol));
}

// ---- SsmConv

void conv_step(const qt::SsmConvCase& c, uint32_t seed) {
    const qt::SsmConvData d = qt::make_ssm_conv(c, seed);
    float* x = dev_copy(d.x);
    float* w = dev_copy(d.w);
    float* y = dev_poisoned<float>(d.y_floats());
    float* st = dev_copy(d.state0);
    const DevSeqs s = dev_seqs(d.t);
    cu::SsmConvJob j;
    j.x = x;
    j.w = w;
    j.y = y;
    j.state = st;
    j.slot_floats = d.slot_floats;
    j.ch = c.ch;
    j.d_conv = c.d_conv;
    j.seqs = seqs_of(s);
    const bool launched = cu::ssm_conv(j, nullptr);
    const auto yo = host_copy(y, d.y_floats());
    const auto so = host_copy(st, d.state.size());
    report(launched && qt::same_bits(yo, d.y) && qt::same_bits(so, d.state),
           fmt("ssm_conv %s: bitwise (outputs rel err %.2e, states rel err %.2e)", c.name.c_str(),
               qt::rel_err(yo, d.y), qt::rel_err(so, d.state)));
}

// ---- the gating ops

void gated_norm(int rows, int heads, int hd) {
    const qt::GatedNormData d = qt::make_gated_norm(rows, heads, hd, 10 + hd);
    float* x = dev_copy(d.x);
    float* z = dev_copy(d.z);
    float* w = dev_copy(d.w);
    cu::gated_rms_norm(x, z, w, rows, d.width, hd, d.eps, nullptr);
    const auto y = host_copy(x, d.y.size());
    report(qt::same_bits(y, d.y), fmt("gated_rms_norm %dx%dx%d: bitwise (rel err %.2e)", rows,
                                      heads, hd, qt::rel_err(y, d.y)));
}

void split(int rows, int heads, int hd) {
    const qt::SplitGateData d = qt::make_split_gate(rows, heads, hd, 20 + hd);
    float* in = dev_copy(d.in);
    float* q = dev_poisoned<float>(d.q.size());
    float* g = dev_poisoned<float>(d.gate.size());
    cu::split_gate(in, q, g, rows, heads, hd, nullptr);
    report(qt::same_bits(host_copy(q, d.q.size()), d.q) &&
               qt::same_bits(host_copy(g, d.gate.size()), d.gate),
           fmt("split_gate %dx%dx%d: bitwise", rows, heads, hd));
}

void sigmoid(int rows, int width, int gw) {
    const qt::SigmoidMulData d = qt::make_sigmoid_mul(rows, width, gw, 30 + gw);
    float* x = dev_copy(d.x);
    float* g = dev_copy(d.gate);
    cu::sigmoid_mul(x, g, rows, width, gw, nullptr);
    const double e = qt::rel_err(host_copy(x, d.y.size()), d.y);
    report(e <= kSigmoidTol, fmt("sigmoid_mul %dx%d gate width %d: rel err %.2e (bound %.0e)", rows,
                                 width, gw, e, kSigmoidTol));
}

// ---- timings

template <class F>
float median_ms(F launch) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) launch();
    std::vector<float> ms;
    for (int i = 0; i < 20; ++i) {
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t = 0.f;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CK(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Qwen3.5-9B's DeltaNet layer: 16 q/k heads, 32 v heads of 128 x 128, conv over 8192 channels.
void bench(int n_seqs, int rows_per_seq) {
    qt::DeltaNetCase c{"9b", 16, 32, 128, 128, {}};
    for (int i = 0; i < n_seqs; ++i)
        c.step.seqs.push_back({rows_per_seq == 1 ? 100 : 0, rows_per_seq});
    const qt::DeltaNetData d = qt::make_delta_net(c, 99, false);
    const DevDelta m = dev_delta(d);
    const DevSeqs s = dev_seqs(d.t);
    const cu::DeltaNetJob j = delta_job(d, m, s);
    const float ms = median_ms([&] { cu::delta_net_recurrent(j, nullptr); });
    const double bytes = 2.0 * 4.0 * n_seqs * static_cast<double>(d.slot_floats);
    std::printf("BENCH delta_net 9B shape: %d seq x %d rows: %.4f ms (state %.2f GB/s)\n", n_seqs,
                rows_per_seq, ms, bytes / (ms * 1e6));
    // the conv of the same layer
    qt::SsmConvCase cc{"9b", 8192, 4, c.step};
    const qt::SsmConvData cd = qt::make_ssm_conv(cc, 98, false);
    const DevSeqs cs = dev_seqs(cd.t);
    cu::SsmConvJob cj;
    cj.x = dev_copy(cd.x);
    cj.w = dev_copy(cd.w);
    cj.y = dev_poisoned<float>(cd.y_floats());
    cj.state = dev_copy(cd.state0);
    cj.slot_floats = cd.slot_floats;
    cj.ch = cc.ch;
    cj.d_conv = cc.d_conv;
    cj.seqs = seqs_of(cs);
    const float cms = median_ms([&] { cu::ssm_conv(cj, nullptr); });
    std::printf("BENCH ssm_conv 9B shape: %d seq x %d rows: %.4f ms\n", n_seqs, rows_per_seq, cms);
}

}  // namespace

int main(int argc, char** argv) {
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_deltanet: %s\n", p.reason.c_str());
        return 77;
    }
    bool no_bench = false;  // --no-bench, or ctest's --ctest: the checks only
    for (int i = 1; i < argc; ++i)
        no_bench |= std::strcmp(argv[i], "--no-bench") == 0 || std::strcmp(argv[i], "--ctest") == 0;
    std::printf("device: %s; CPU kernels: %s\n", p.devices.front().name.c_str(),
                quant::simd_level());

    conv_step({"ch13 k4", 13, 4, {{{0, 5}, {6, 1}, {2, 3}}}}, 1);
    conv_step({"ch300 k4", 300, 4, {{{0, 1}, {17, 2}}}}, 2);
    conv_step({"ch40 k2", 40, 2, {{{0, 7}, {1, 1}}}}, 3);
    conv_step({"ch9 k7", 9, 7, {{{3, 2}, {0, 12}}}}, 4);
    conv_step({"ch13 k4, empty seqs", 13, 4, {{{3, 0}, {0, 2}, {7, 0}, {5, 1}, {9, 0}}}}, 6);
    conv_step({"ch8192 k4 (9B)", 8192, 4, {{{0, 300}, {40, 64}, {7, 1}, {0, 1}, {99, 1}}}}, 5);

    delta_step({"dk128 dv128 nk2 nv4", 2, 4, 128, 128, {{{0, 6}, {5, 1}, {0, 1}}}}, 1);
    delta_step({"dk40 dv24 nk3 nv6", 3, 6, 40, 24, {{{0, 9}, {12, 4}, {3, 1}}}}, 2);
    delta_step({"dk20 dv5 nk1 nv2", 1, 2, 20, 5, {{{7, 5}, {0, 2}}}}, 3);
    delta_step({"dk200 dv17 nk1 nv1", 1, 1, 200, 17, {{{0, 3}}}}, 4);
    delta_step(
        {"dk40 dv24 nk2 nv4, empty seqs", 2, 4, 40, 24, {{{3, 0}, {0, 2}, {7, 0}, {5, 1}, {9, 0}}}},
        8);
    // Qwen3.5-9B's heads: a 300-row prefill from 0, a 64-row continuation, 6 decode rows
    qt::Step mixed{{{0, 300}, {40, 64}, {7, 1}, {0, 1}, {99, 1}, {3, 1}, {1000, 1}, {12, 1}}};
    delta_step({"9B: dk128 dv128 nk16 nv32", 16, 32, 128, 128, mixed}, 6);
    delta_decode_steps({"dk36 dv20 nk1 nv2", 1, 2, 36, 20, {{{0, 24}, {9, 24}}}}, 5);
    qt::Step four{{{0, 48}, {9, 48}, {0, 48}, {300, 48}}};
    delta_decode_steps({"9B: dk128 dv128 nk16 nv32", 16, 32, 128, 128, four}, 7);

    for (auto [rows, heads, hd] : {std::tuple{2, 4, 128}, std::tuple{3, 3, 20},
                                   std::tuple{7, 2, 45}, std::tuple{300, 32, 128}})
        gated_norm(rows, heads, hd);
    split(3, 4, 16);
    split(2, 3, 33);
    split(600, 16, 256);  // 600 x 16 x 256 > 2^20: the grid-stride loop
    sigmoid(3, 100, 100);
    sigmoid(5, 37, 1);
    sigmoid(600, 4096, 4096);  // past 2^20 elements
    sigmoid(1, (1 << 20) + 300, 1);

    if (!no_bench) {
        bench(1, 1);
        bench(32, 1);
        bench(1, 512);
    }
    std::printf("%s: %d passed, %d failed\n", g_fail ? "FAIL" : "PASS", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
