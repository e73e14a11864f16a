// zinc/tests/cuda/test_exact_gemm.cpp — the tiled exact prefill GEMM (dmmv_exact_gemm.cu) against
// the CPU tier and against dmmv_exact's per-row kernels, bit for bit, and its speed.
//
//   cuda_test_exact_gemm [--ctest] [--no-timing] [--verbose]
//
// Prints FAIL lines, the timing lines and a summary (--verbose: every PASS line too).
// Correctness, for every type the GEMM covers (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K):
// random weights (quantized Gaussians and random payload bytes with random f16 scales) and
// activations (outliers, zero stretches, rounding ties) packed on the device by pack.cu; row
// counts that are not multiples of the tiles, two fused jobs (the second with a bias and an
// unaligned weight pointer), n_act 17 / 33 / 100 / 512, block counts odd and even, k from 256 to
// 14336. Every output buffer is poisoned with NaN first. The GEMM's outputs must equal
//  (a) quant::gemm_tile on the CPU (vec_dot's bits) on the CPU's own quantize_row packing, plus
//      the bias as one rounded add, memcmp; and
//  (b) dmmv_exact's per-row kernels (called 16 activation rows at a time, so the routing to the
//      GEMM, n_act > 16, does not apply), memcmp;
// and with accumulate = true over random initial outputs, y0 + (v + bias), one rounded add each.
// Types it does not cover must be refused (return false, nothing written).
// Every tile variant (dmmv_exact_gemm_variant; 0 is the routed one) is checked the same way on a
// subset of the cases.
// Timing: 4096 x 4096 and 14336 x 4096 Q4_K and Q4_0 matrices (plus Q6_K 4096 x 14336, Q8_0 and
// Q4_1 4096 x 4096) at 512 activation rows, median of 5 runs after a warm-up, each tile variant
// vs dmmv_exact's kernels (32 launches of 16 rows), in GOP/s (2 * rows * k * n_act per run); the
// results must be bitwise equal too.
// Without a usable device it prints the reason and exits 77 (ctest: skipped).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "quant/quant.h"
#include "quant/types.h"
#include "gpu_test.h"

using namespace zinc;
namespace cu = zinc::cuda;
using quant::GgmlType;

namespace {

using namespace zinc::gpu_test;

int g_fail = 0, g_pass = 0;
std::vector<std::string> g_summary;  // one line per timed matrix
std::vector<std::string> g_failed;   // repeated at the end (the output's tail is what is kept)
bool g_verbose = false;  // --verbose: every PASS line too (else failures, timings and totals)
void report(bool ok, const std::string& what) {
    if (!ok || g_verbose || what.rfind("timing", 0) == 0)
        std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    ok ? ++g_pass : ++g_fail;
    if (!ok) g_failed.push_back(what);
}


std::string tname(GgmlType t) {
    return std::string(quant::type_name(t));
}

struct Cmp {
    bool equal = true;
    double max_diff = 0;
    size_t n_diff = 0, first = 0;
};
Cmp compare(const float* got, const float* want, size_t n) {
    Cmp c;
    for (size_t i = 0; i < n; ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0) {
            if (c.equal) c.first = i;
            c.equal = false;
            ++c.n_diff;
            const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
            c.max_diff = std::max(c.max_diff, std::isfinite(d) ? d : INFINITY);
        }
    }
    return c;
}
std::string verdict(const Cmp& c) {
    return fmt("max |diff| %.3g, bitwise equal: %s", c.max_diff, c.equal ? "yes" : "no") +
           (c.equal ? "" : fmt(" (%zu differ, first at %zu)", c.n_diff, c.first));
}

uint16_t rand_half(std::mt19937& rng) {
    const uint32_t r = rng();
    const uint16_t sign = (r & 1) ? 0x8000 : 0;
    const uint16_t mant = static_cast<uint16_t>((r >> 1) & 0x3FF);
    if ((r >> 11) % 16 == 0) return sign | mant;         // subnormal or zero
    const int e = 1 + static_cast<int>((r >> 15) % 22);  // up to 2^6
    return static_cast<uint16_t>(sign | (e << 10) | mant);
}

// Weight rows: even rows quantized from Gaussians (per-row scale and offset), odd rows random
// payload bytes with random finite f16 scale fields (every code pattern, extreme scales).
std::vector<uint8_t> make_weights(GgmlType t, int n_out, int k, std::mt19937& rng) {
    const size_t rb = quant::row_size(t, k);
    std::vector<uint8_t> w(rb * n_out);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> row(k);
    for (int r = 0; r < n_out; ++r) {
        uint8_t* p = w.data() + rb * r;
        if (r % 2 == 0) {
            const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 12) - 8);
            const float off = (r % 3 == 0) ? 0.3f * sc : 0.f;
            for (auto& v : row) v = nd(rng) * sc + off;
            quant::quantize_row(t, row.data(), p, k);
            continue;
        }
        for (size_t i = 0; i < rb; ++i) p[i] = static_cast<uint8_t>(rng());
        const int64_t bs = quant::type_traits(t).block_size;
        auto set_h = [&](uint8_t* q) {
            const uint16_t h = rand_half(rng);
            std::memcpy(q, &h, 2);
        };
        const size_t blk = quant::row_size(t, bs);
        for (int64_t b = 0; b < k / bs; ++b) {
            uint8_t* q = p + b * blk;
            switch (t) {
                case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: set_h(q); break;
                case GgmlType::Q4_1: case GgmlType::Q5_1: set_h(q); set_h(q + 2); break;
                case GgmlType::Q2_K: set_h(q + 80); set_h(q + 82); break;
                case GgmlType::Q3_K: set_h(q + 108); break;
                case GgmlType::Q4_K: case GgmlType::Q5_K: set_h(q); set_h(q + 2); break;
                case GgmlType::Q6_K: set_h(q + 208); break;
                default: break;
            }
        }
    }
    return w;
}

// Activation rows: Gaussians with a per-row scale, outliers, an all-zero 256-element stretch in
// some rows, and values on rounding ties of the Q8 codes.
std::vector<float> make_acts(int n_act, int k, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n_act) * k);
    for (int j = 0; j < n_act; ++j) {
        float* r = x.data() + static_cast<size_t>(j) * k;
        const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
        for (int i = 0; i < k; ++i) r[i] = nd(rng) * sc;
        for (int i = static_cast<int>(rng() % 97); i < k; i += 97) r[i] *= 50.f;
        if (j % 4 == 1 && k >= 512) std::fill(r + 256, r + 512, 0.f);
        if (j % 4 == 2 && k >= 32) {
            for (int i = 0; i < 32; ++i) r[i] = 0.125f * static_cast<float>(static_cast<int>(rng() % 255) - 127);
            r[5] = 127 * 0.25f;
        }
    }
    return x;
}

// The CPU's packing of activation rows x (n_act, k) for weight type t.
std::vector<uint8_t> cpu_pack(GgmlType t, const std::vector<float>& x, int n_act, int k) {
    const GgmlType vt = quant::type_traits(t).vec_dot_type;
    const size_t prb = quant::row_size(vt, k);
    std::vector<uint8_t> packed(prb * n_act);
    for (int j = 0; j < n_act; ++j)
        quant::quantize_row(vt, x.data() + static_cast<size_t>(j) * k, packed.data() + j * prb, k);
    return packed;
}

// Device-packed activations (pack.cu) for weight type t.
struct DevActs {
    float* f = nullptr;
    int8_t* q = nullptr;
    float4* d = nullptr;
    ~DevActs() {
        cudaFree(f);
        cudaFree(q);
        cudaFree(d);
    }
};
void dev_pack(GgmlType t, const std::vector<float>& x, int n_act, int k, DevActs& a) {
    a.f = dev_copy(x);
    a.q = dev_poisoned<int8_t>(x.size());
    a.d = dev_poisoned<float4>(x.size() / 32);
    cu::RowOut o;
    o.q = a.q;
    o.d = a.d;
    o.mode = cu::pack_mode_for(static_cast<int>(t));
    cu::pack_rows(a.f, n_act, k, o, nullptr);
    CK(cudaDeviceSynchronize());
}

// dmmv_exact's own kernels for any n_act: 16 activation rows per call (the GEMM route needs > 16).
void dmmv_exact_rows(int type, const cu::MatJob* jobs, int n_jobs, int k, const DevActs& a,
                     int n_act, bool accumulate) {
    for (int j0 = 0; j0 < n_act; j0 += 16) {
        cu::MatJob js[3];
        for (int i = 0; i < n_jobs; ++i) {
            js[i] = jobs[i];
            js[i].y = jobs[i].y + static_cast<size_t>(j0) * jobs[i].ldy;
        }
        cu::dmmv_exact(type, js, n_jobs, k, a.q + static_cast<size_t>(j0) * k,
                       a.d + static_cast<size_t>(j0) * (k / 32), nullptr, std::min(16, n_act - j0),
                       accumulate, nullptr);
    }
}

// One correctness case: n_out rows in two jobs (rows [0, n0) and [n0, n_out) with a bias; the
// second job's weights start right after the first's, so they are only as aligned as n0 * rb).
void test_case(std::mt19937& rng, GgmlType t, int k, int n_out, int n0, int n_act, int variant = 0) {
    const int ti = static_cast<int>(t);
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, n_out, k, rng);
    const auto x = make_acts(n_act, k, rng);
    std::vector<float> bias(n_out - n0);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& b : bias) b = nd(rng);
    const int n1 = n_out - n0;
    std::vector<float> init(static_cast<size_t>(n_act) * n_out);
    for (auto& v : init) v = nd(rng);

    // (a) the CPU tier: gemm_tile on its own packing, + bias as cpu::matmul adds it.
    const GgmlType vt = quant::type_traits(t).vec_dot_type;
    const auto packed = cpu_pack(t, x, n_act, k);
    const size_t prb = quant::row_size(vt, k);
    std::vector<float> want(static_cast<size_t>(n_act) * n_out);
    quant::gemm_tile(t, k, w.data(), rb, n_out, packed.data(), prb, n_act, want.data(), n_out);
    for (int j = 0; j < n_act; ++j)
        for (int r = n0; r < n_out; ++r) want[static_cast<size_t>(j) * n_out + r] += bias[r - n0];
    std::vector<float> want_acc(want.size());
    for (size_t i = 0; i < want.size(); ++i) want_acc[i] = init[i] + want[i];

    DevActs a;
    dev_pack(t, x, n_act, k, a);
    uint8_t* dw = dev_copy(w);
    float* dbias = dev_copy(bias);
    // Outputs: job 0 (n_act, n0), job 1 (n_act, n1); GEMM and reference buffers.
    auto jobs_for = [&](float* y0, float* y1, cu::MatJob* jobs) {
        jobs[0].w = dw;
        jobs[0].row_bytes = rb;
        jobs[0].n_out = n0;
        jobs[0].y = y0;
        jobs[0].ldy = n0;
        jobs[1].w = dw + rb * n0;
        jobs[1].row_bytes = rb;
        jobs[1].n_out = n1;
        jobs[1].y = y1;
        jobs[1].ldy = n1;
        jobs[1].bias = dbias;
    };
    auto gather = [&](float* y0, float* y1) {
        const auto g0 = host_copy(y0, static_cast<size_t>(n_act) * n0);
        const auto g1 = host_copy(y1, static_cast<size_t>(n_act) * n1);
        std::vector<float> got(static_cast<size_t>(n_act) * n_out);
        for (int j = 0; j < n_act; ++j)
            for (int r = 0; r < n_out; ++r)
                got[static_cast<size_t>(j) * n_out + r] =
                    r < n0 ? g0[static_cast<size_t>(j) * n0 + r] : g1[static_cast<size_t>(j) * n1 + r - n0];
        return got;
    };
    auto scatter = [&](float* y0, float* y1, const std::vector<float>& v) {
        std::vector<float> h0(static_cast<size_t>(n_act) * n0), h1(static_cast<size_t>(n_act) * n1);
        for (int j = 0; j < n_act; ++j)
            for (int r = 0; r < n_out; ++r)
                (r < n0 ? h0[static_cast<size_t>(j) * n0 + r] : h1[static_cast<size_t>(j) * n1 + r - n0]) =
                    v[static_cast<size_t>(j) * n_out + r];
        CK(cudaMemcpy(y0, h0.data(), h0.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(y1, h1.data(), h1.size() * 4, cudaMemcpyHostToDevice));
    };
    float* g0 = dev_poisoned<float>(static_cast<size_t>(n_act) * n0);
    float* g1 = dev_poisoned<float>(static_cast<size_t>(n_act) * n1);
    float* r0 = dev_poisoned<float>(static_cast<size_t>(n_act) * n0);
    float* r1 = dev_poisoned<float>(static_cast<size_t>(n_act) * n1);
    cu::MatJob gj[2], rj[2];
    jobs_for(g0, g1, gj);
    jobs_for(r0, r1, rj);

    const std::string what = fmt("tiles %d %-5s k %5d, %d rows (%d + %d, bias), %3d act rows", variant,
                                 tname(t).c_str(), k, n_out, n0, n1, n_act);
    const bool ran = cu::dmmv_exact_gemm_variant(variant, ti, gj, 2, k, a.q, a.d, n_act, false, nullptr);
    report(ran, "exact gemm covers " + what);
    if (ran) {
        dmmv_exact_rows(ti, rj, 2, k, a, n_act, false);
        const auto got = gather(g0, g1);
        const auto ref = gather(r0, r1);
        const Cmp ca = compare(got.data(), want.data(), want.size());
        report(ca.equal, "exact gemm == CPU gemm_tile  " + what + ": " + verdict(ca));
        const Cmp cb = compare(got.data(), ref.data(), ref.size());
        report(cb.equal, "exact gemm == dmmv_exact     " + what + ": " + verdict(cb));
        // accumulate over random initial outputs
        scatter(g0, g1, init);
        CK(cudaGetLastError());
        cu::dmmv_exact_gemm_variant(variant, ti, gj, 2, k, a.q, a.d, n_act, true, nullptr);
        const auto got2 = gather(g0, g1);
        const Cmp cc = compare(got2.data(), want_acc.data(), want_acc.size());
        report(cc.equal, "exact gemm accumulate        " + what + ": " + verdict(cc));
    }
    for (void* p : {static_cast<void*>(dw), static_cast<void*>(dbias), static_cast<void*>(g0),
                    static_cast<void*>(g1), static_cast<void*>(r0), static_cast<void*>(r1)})
        cudaFree(p);
}

// Types the GEMM does not cover: refused, nothing written.
void test_refused(std::mt19937& rng, GgmlType t) {
    const int k = 512, n_out = 40, n_act = 20;
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, n_out, k, rng);
    const auto x = make_acts(n_act, k, rng);
    DevActs a;
    dev_pack(t, x, n_act, k, a);
    uint8_t* dw = dev_copy(w);
    float* y = dev_poisoned<float>(static_cast<size_t>(n_act) * n_out);
    cu::MatJob j;
    j.w = dw;
    j.row_bytes = rb;
    j.n_out = n_out;
    j.y = y;
    j.ldy = n_out;
    const bool ran = cu::dmmv_exact_gemm(static_cast<int>(t), &j, 1, k, a.q, a.d, n_act, false, nullptr);
    const auto got = host_copy(y, static_cast<size_t>(n_act) * n_out);
    bool untouched = true;
    for (float v : got) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        untouched &= b == 0xffffffffu;
    }
    report(!ran && untouched && !cu::dmmv_exact_gemm_supports(static_cast<int>(t)),
           fmt("exact gemm refuses %s (returns false, outputs untouched)", tname(t).c_str()));
    cudaFree(dw);
    cudaFree(y);
}

// GEMM vs dmmv_exact's kernels on one (rows, k) matrix at n_act activation rows.
void time_case(std::mt19937& rng, GgmlType t, int rows, int k, int n_act) {
    const int ti = static_cast<int>(t);
    const size_t rb = quant::row_size(t, k);
    std::vector<uint8_t> w(rb * rows);
    {  // quantized Gaussians (fast enough on the host for 14336 x 4096)
        std::normal_distribution<float> nd(0.f, 1.f);
        std::vector<float> row(k);
        for (int r = 0; r < rows; ++r) {
            if (r < 64) {
                for (auto& v : row) v = nd(rng);
                quant::quantize_row(t, row.data(), w.data() + rb * r, k);
            } else {  // copies of the first 64 rows: same work per row
                std::memcpy(w.data() + rb * r, w.data() + rb * (r % 64), rb);
            }
        }
    }
    const auto x = make_acts(n_act, k, rng);
    DevActs a;
    dev_pack(t, x, n_act, k, a);
    uint8_t* dw = dev_copy(w);
    float* yg = dev_poisoned<float>(static_cast<size_t>(n_act) * rows);
    float* yr = dev_poisoned<float>(static_cast<size_t>(n_act) * rows);
    cu::MatJob jg, jr;
    jg.w = jr.w = dw;
    jg.row_bytes = jr.row_bytes = rb;
    jg.n_out = jr.n_out = rows;
    jg.ldy = jr.ldy = rows;
    jg.y = yg;
    jr.y = yr;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto median_ms = [&](auto&& fn) {
        fn();  // warm-up
        CK(cudaDeviceSynchronize());
        std::vector<float> ms;
        for (int i = 0; i < 5; ++i) {
            CK(cudaEventRecord(e0));
            fn();
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float v = 0;
            CK(cudaEventElapsedTime(&v, e0, e1));
            ms.push_back(v);
        }
        std::sort(ms.begin(), ms.end());
        return ms[2];
    };
    const float tr = median_ms([&] { dmmv_exact_rows(ti, &jr, 1, k, a, n_act, false); });
    const auto ref = host_copy(yr, static_cast<size_t>(n_act) * rows);
    const double ops = 2.0 * rows * static_cast<double>(k) * n_act;
    float t0 = 0, best = 1e30f;
    int best_v = 0;
    for (int v = 0; v < cu::dmmv_exact_gemm_variants(); ++v) {
        CK(cudaMemset(yg, 0xff, static_cast<size_t>(n_act) * rows * 4));
        bool ran = true;
        const float tg = median_ms([&] {
            ran &= cu::dmmv_exact_gemm_variant(v, ti, &jg, 1, k, a.q, a.d, n_act, false, nullptr);
        });
        const auto got = host_copy(yg, static_cast<size_t>(n_act) * rows);
        const Cmp c = compare(got.data(), ref.data(), ref.size());
        report(ran && c.equal,
               fmt("timing tiles %d %-5s %5d x %5d, %d act rows: gemm %.3f ms = %.0f GOP/s, dmmv_exact "
                   "%.3f ms = %.0f GOP/s, speedup %.2fx; ", v, tname(t).c_str(), rows, k, n_act, tg,
                   ops / tg * 1e-6, tr, ops / tr * 1e-6, tr / tg) + verdict(c));
        if (v == 0) t0 = tg;
        if (tg < best) best = tg, best_v = v;
    }
    g_summary.push_back(fmt("%-5s %5d x %5d x %d: dmmv_exact %.0f GOP/s, gemm (tiles 0) %.0f GOP/s = %.2fx, "
                            "best tiles %d %.0f GOP/s = %.2fx", tname(t).c_str(), rows, k, n_act,
                            ops / tr * 1e-6, ops / t0 * 1e-6, tr / t0, best_v, ops / best * 1e-6, tr / best));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(dw);
    cudaFree(yg);
    cudaFree(yr);
}

}  // namespace

int main(int argc, char** argv) {
    bool timing = true;
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--no-timing") == 0) timing = false;
        else if (std::strcmp(argv[i], "--verbose") == 0) g_verbose = true;
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_exact_gemm: %s\n", p.reason.c_str());
        return 77;
    }
    const auto& d = p.devices.front();
    std::printf("device: %s, cc %d.%d, %zu MiB; CPU kernels: %s; ZINC_EXACT_GEMM routing: %s\n",
                d.name.c_str(), d.cc_major, d.cc_minor, d.mem_total >> 20, quant::simd_level(),
                cu::exact_gemm_enabled() ? "on" : "off");
    std::mt19937 rng(20261129);
    using T = GgmlType;
    for (T t : {T::Q4_K, T::Q6_K, T::Q4_0, T::Q8_0, T::Q4_1, T::Q5_K, T::Q5_0, T::Q5_1, T::Q2_K, T::Q3_K}) {
        const bool kq = quant::type_traits(t).block_size == 256;
        // (k, rows, rows of job 0, act rows): odd block / super-block counts, partial stages,
        // rows and act rows that are not multiples of the tiles, a long row.
        test_case(rng, t, kq ? 2304 : 2080, 389, 131, 17);
        test_case(rng, t, 256, 77, 13, 33);
        test_case(rng, t, kq ? 4352 : 4128, 211, 64, 100);
        test_case(rng, t, kq ? 1280 : 1056, 150, 37, 512);
        test_case(rng, t, 14336, 45, 16, 33);
    }
    for (int v = 1; v < cu::dmmv_exact_gemm_variants(); ++v)
        for (T t : {T::Q4_K, T::Q6_K, T::Q4_0, T::Q8_0, T::Q4_1, T::Q5_K, T::Q5_0, T::Q5_1, T::Q2_K, T::Q3_K}) {
            const bool kq = quant::type_traits(t).block_size == 256;
            test_case(rng, t, kq ? 2304 : 2080, 389, 131, 100, v);
            test_case(rng, t, 256, 77, 13, 33, v);
        }
    for (T t : {T::F32, T::F16}) test_refused(rng, t);
    if (timing) {
        for (T t : {T::Q4_K, T::Q4_0}) {
            time_case(rng, t, 4096, 4096, 512);
            time_case(rng, t, 14336, 4096, 512);
        }
        time_case(rng, T::Q6_K, 4096, 14336, 512);  // Q4_K_M's ffn_down shape
        time_case(rng, T::Q8_0, 4096, 4096, 512);
        time_case(rng, T::Q4_1, 4096, 4096, 512);
    }
    for (size_t i = 0; i < g_failed.size() && i < 12; ++i) std::printf("FAILED %s\n", g_failed[i].c_str());
    for (const auto& l : g_summary) std::printf("SUMMARY %s\n", l.c_str());
    std::printf("%s: %d passed, %d failed\n", g_fail ? "FAIL" : "PASS", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
