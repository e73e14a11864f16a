// zinc/tests/cuda/test_mmq.cpp — the fast path's int8 tensor-core GEMM (mmq.cu) against a float64
// reference, and (--bench) its speed next to the path it replaces (dequant_f16 + cuBLAS).
//
//   cuda_test_mmq [--ctest] [--bench] [--bench-only] [--bench-decode] [--verbose]
//
// Correctness, for every type mmq covers (Q4_K, Q6_K, Q4_0, Q8_0, Q5_K, Q5_0, Q5_1, Q4_1, Q2_K,
// Q3_K, MXFP4) and every tile variant: random weights (quantized Gaussians with per-row scale and
// offset, and random payload bytes with random finite f16 scales), random activations (per-row
// scale, outliers, zero stretches) packed on the device by pack.cu in the type's mode; one to three
// fused jobs with odd row counts (1024 + 32, 389, 45, ...), the later ones with a bias and a row
// stride larger than their row count; n_act not a multiple of the tile (17, 33, 65, 100) and
// prefill sizes (512); k not a multiple of a stage (2080 = 65 blocks) up to 14336. Each output
// buffer is poisoned with NaN first. The reference is float64 over the dequantized weights
// (quant::dequantize_row) times the dequantized packed activations read back from the device (d *
// code), plus the bias; the check is ||y - ref|| / ||ref|| <= tolerance over all outputs, and every
// output finite (NaN never passes). accumulate = true is checked over random initial y. Tolerance
// 2e-5 (f32 accumulation of per-chunk products). Q4_1 / Q5_1's offsets multiply Q8_1's stored sum s
// (the f16 of d * the codes' sum), as in the CPU tier's vec_dot, so their reference is sum (w - m)
// a + sum_blocks m s (with the exact sum instead, 1-row cases differ by up to 3e-3: H200 run 1).
// Types it does not cover and misaligned activations must be refused (false, outputs untouched).
// Every variant, and the first rows of a batch run alone, must give the same bits (batch
// invariance). --bench: the Llama-3-8B projection shapes (k 4096 -> 4096, 1024, 14336; 14336 ->
// 4096; the LM head 4096 -> 128256) at 32, 64, 512 and 4096 activation rows, for Q4_K, Q6_K, Q4_0
// and Q8_0: mmq (its own choice of tiles, and the best of the variants), and dequant_f16 + cuBLAS
// gemm_f16 (the path before mmq) and the cuBLAS GEMM alone; CUDA events around each launch, median
// of 15 after 2 warm-ups, the weights rotated over enough copies to exceed the L2; TOP/s counted as
// 2 * rows * k * n_act (int8 effective). Split-K (the runner's decode batches, through a scratch):
// mmq's choice and forced slice counts against the same reference, ten racing runs bitwise equal,
// the counters back at zero. --bench (first) and --bench-decode (alone): the decode-batch table,
// 8-64 activation rows on the 8B shapes, unsplit / split / best (variant, slices) with the
// weight-read rate. Exit 0 only when every check passes; 77 (ctest: skipped) without a usable
// device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cublas_lib.h"
#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/repack.h"
#include "gpu_test.h"
#include "quant/quant.h"
#include "quant/types.h"

using namespace zinc;
namespace cu = zinc::cuda;
using quant::GgmlType;

namespace {

using namespace zinc::gpu_test;

int g_fail = 0, g_pass = 0;
std::vector<std::string> g_failed;
bool g_verbose = false;
void report(bool ok, const std::string& what) {
    if (!ok || g_verbose) std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    ok ? ++g_pass : ++g_fail;
    if (!ok) g_failed.push_back(what);
}

std::string tname(GgmlType t) {
    return std::string(quant::type_name(t));
}

uint16_t rand_half(std::mt19937& rng) {
    const uint32_t r = rng();
    const uint16_t sign = (r & 1) ? 0x8000 : 0;
    const uint16_t mant = static_cast<uint16_t>((r >> 1) & 0x3FF);
    if ((r >> 11) % 16 == 0) return sign | mant;         // subnormal or zero
    const int e = 1 + static_cast<int>((r >> 15) % 22);  // up to 2^6
    return static_cast<uint16_t>(sign | (e << 10) | mant);
}

// Even rows: quantized Gaussians (per-row scale and offset); odd rows: random payload bytes with
// random finite f16 scale fields (every code pattern).
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
                case GgmlType::Q4_0:
                case GgmlType::Q5_0:
                case GgmlType::Q8_0:
                    set_h(q);
                    break;
                case GgmlType::Q4_1:
                case GgmlType::Q5_1:
                    set_h(q);
                    set_h(q + 2);
                    break;
                case GgmlType::Q2_K:
                    set_h(q + 80);
                    set_h(q + 82);
                    break;
                case GgmlType::Q3_K:
                    set_h(q + 108);
                    break;
                case GgmlType::Q4_K:
                case GgmlType::Q5_K:
                    set_h(q);
                    set_h(q + 2);
                    break;
                case GgmlType::Q6_K:
                    set_h(q + 208);
                    break;
                case GgmlType::MXFP4:  // E8M0 scale 2^(e - 128): 2^-20 .. 2^3
                    q[0] = static_cast<uint8_t>(108 + rng() % 24);
                    break;
                default:
                    break;
            }
        }
    }
    return w;
}

std::vector<float> make_acts(int n_act, int k, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n_act) * k);
    for (int j = 0; j < n_act; ++j) {
        float* r = x.data() + static_cast<size_t>(j) * k;
        const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
        for (int i = 0; i < k; ++i) r[i] = nd(rng) * sc;
        for (int i = static_cast<int>(rng() % 97); i < k; i += 97) r[i] *= 50.f;
        if (j % 4 == 1 && k >= 512) std::fill(r + 256, r + 512, 0.f);
    }
    return x;
}

// Activations packed on the device for type t (pack.cu), and optionally as f16 for cuBLAS.
struct DevActs {
    float* f = nullptr;
    int8_t* q = nullptr;
    float4* d = nullptr;
    uint16_t* h = nullptr;
    ~DevActs() {
        cudaFree(f);
        cudaFree(q);
        cudaFree(d);
        cudaFree(h);
    }
};
void dev_pack(GgmlType t, const std::vector<float>& x, int n_act, int k, DevActs& a, bool f16) {
    a.f = dev_copy(x);
    a.q = dev_poisoned<int8_t>(x.size());
    a.d = dev_poisoned<float4>(x.size() / 32);
    if (f16) a.h = dev_poisoned<uint16_t>(x.size());
    cu::RowOut o;
    o.q = a.q;
    o.d = a.d;
    o.h = a.h;
    o.mode = cu::pack_mode_for(static_cast<int>(t));
    cu::pack_rows(a.f, n_act, k, o, nullptr);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
}

// The packed activations dequantized (d * code), from the device's own bytes; s: per 32
// elements the stored sum Q8_1 carries (the f16 of d * sum of the codes), which the offsets of
// Q4_1 / Q5_1 multiply (as the CPU tier's vec_dot does).
std::vector<double> dequant_acts(const DevActs& a, int n_act, int k, std::vector<double>& s) {
    const auto q = host_copy(a.q, static_cast<size_t>(n_act) * k);
    const auto d = host_copy(a.d, static_cast<size_t>(n_act) * k / 32);
    std::vector<double> x(q.size());
    for (size_t i = 0; i < q.size(); ++i) x[i] = static_cast<double>(d[i / 32].x) * q[i];
    s.resize(d.size());
    for (size_t i = 0; i < d.size(); ++i) s[i] = d[i].y;
    return x;
}

// Q4_1 / Q5_1: a block's offset m (f16 at bytes 2..3), which multiplies Q8_1's stored s.
bool has_q81_offsets(GgmlType t) {
    return t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
}
double block_offset(GgmlType t, const uint8_t* row, int blk) {
    const size_t bytes = t == GgmlType::Q4_1 ? 20 : 24;
    uint16_t h;
    std::memcpy(&h, row + bytes * blk + 2, 2);
    return quant::fp16_to_fp32(h);
}

// sum_i w_i a_i over one weight row (dequantized, wr) and one activation row, in float64: for
// Q4_1 / Q5_1 as sum (w_i - m) a_i + sum_blocks m s (their packing's definition of the product).
double ref_dot(GgmlType t, const double* wr, const uint8_t* wraw, const double* xr,
               const double* sr, int k) {
    double acc = 0;
    if (!has_q81_offsets(t)) {
        for (int e = 0; e < k; ++e) acc += wr[e] * xr[e];
        return acc;
    }
    for (int b = 0; b < k / 32; ++b) {
        const double m = block_offset(t, wraw, b);
        for (int e = 32 * b; e < 32 * b + 32; ++e) acc += (wr[e] - m) * xr[e];
        acc += m * sr[b];
    }
    return acc;
}

constexpr double kTolerance = 2e-5;  // f32 accumulation of per-chunk products

// One case: jobs of `rows[i]` weight rows each (contiguous weights, job i + 1 right after job i,
// so only as aligned as the rows before it), job i >= 1 with a bias and row stride rows[i] + 3.
// repack: the weights uploaded in repack.h's aligned layout (device types 102 / 108 / 114).
// The split-K scratch (kernels.h MmqScratch) the runner allocates, once.
const cu::MmqScratch* dev_scratch() {
    static const cu::MmqScratch sc = [] {
        cu::MmqScratch s;
        s.partial = dev_poisoned<float>(cu::kMmqSplitFloats);
        s.partial_floats = cu::kMmqSplitFloats;
        s.n_counters = 8192;
        CK(cudaMalloc(&s.counters, s.n_counters * sizeof(unsigned)));
        CK(cudaMemset(s.counters, 0, s.n_counters * sizeof(unsigned)));
        return s;
    }();
    return &sc;
}
bool counters_zero() {
    const cu::MmqScratch* sc = dev_scratch();
    std::vector<unsigned> c(sc->n_counters);
    CK(cudaMemcpy(c.data(), sc->counters, c.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (unsigned v : c)
        if (v != 0) return false;
    return true;
}
bool pipelined(int variant) {
    return (variant >= 5 && variant <= 7) || variant == 10;
}

// ksplit != 1: through the split-K scratch, with that many k slices (0: mmq's choice).
void test_case(std::mt19937& rng, GgmlType t, int k, const std::vector<int>& rows, int n_act,
               int variant, bool repack = false, int ksplit = 1) {
    int ti = static_cast<int>(t);
    const size_t rb = quant::row_size(t, k);
    const int nj = static_cast<int>(rows.size());
    int total = 0;
    for (int r : rows) total += r;
    const auto w = make_weights(t, total, k, rng);
    const auto x = make_acts(n_act, k, rng);
    std::normal_distribution<float> nd(0.f, 1.f);

    DevActs a;
    dev_pack(t, x, n_act, k, a, false);
    std::vector<double> xs;
    const auto xa = dequant_acts(a, n_act, k, xs);
    std::vector<double> wd(static_cast<size_t>(total) * k);
    {
        std::vector<float> row(k);
        for (int r = 0; r < total; ++r) {
            quant::dequantize_row(t, w.data() + rb * r, row.data(), k);
            for (int i = 0; i < k; ++i) wd[static_cast<size_t>(r) * k + i] = row[i];
        }
    }
    std::vector<uint8_t> wdev = w;
    if (repack) {
        ti = cu::repacked_type(ti, k);
        cu::repack_rows(static_cast<int>(t), w.data(), wdev.data(), total, k);
    }
    uint8_t* dw = dev_copy(wdev);
    std::vector<std::vector<float>> bias(nj), init(nj);
    std::vector<float*> dbias(nj, nullptr), dy(nj, nullptr);
    std::vector<int> ld(nj), off(nj);
    cu::MatJob jobs[3];
    for (int i = 0, o = 0; i < nj; o += rows[i], ++i) {
        off[i] = o;
        ld[i] = i == 0 ? rows[i] : rows[i] + 3;
        if (i > 0) {
            bias[i].resize(rows[i]);
            for (auto& b : bias[i]) b = nd(rng);
            dbias[i] = dev_copy(bias[i]);
        }
        init[i].resize(static_cast<size_t>(n_act) * ld[i]);
        for (auto& v : init[i]) v = nd(rng);
        dy[i] = dev_poisoned<float>(init[i].size());
        jobs[i].w = dw + rb * o;
        jobs[i].row_bytes = rb;
        jobs[i].n_out = rows[i];
        jobs[i].y = dy[i];
        jobs[i].ldy = ld[i];
        jobs[i].bias = dbias[i];
    }
    // ref[i][j * rows + r]
    std::vector<std::vector<double>> ref(nj);
    for (int i = 0; i < nj; ++i) {
        ref[i].resize(static_cast<size_t>(n_act) * rows[i]);
        for (int j = 0; j < n_act; ++j)
            for (int r = 0; r < rows[i]; ++r) {
                const double* wr = wd.data() + static_cast<size_t>(off[i] + r) * k;
                const double* xr = xa.data() + static_cast<size_t>(j) * k;
                double s = ref_dot(t, wr, w.data() + rb * (off[i] + r), xr,
                                   xs.data() + static_cast<size_t>(j) * (k / 32), k);
                if (i > 0) s += bias[i][r];
                ref[i][static_cast<size_t>(j) * rows[i] + r] = s;
            }
    }
    std::string shape;
    for (int i = 0; i < nj; ++i) shape += (i ? "+" : "") + std::to_string(rows[i]);
    const std::string what =
        fmt("mmq tiles %d %-5s%s k %5d, rows %s, %4d act rows", variant, tname(t).c_str(),
            repack ? " (repacked)" : "", k, shape.c_str(), n_act) +
        (ksplit == 1 ? "" : fmt(", split-K %d", ksplit));
    for (int pass = 0; pass < 2; ++pass) {
        const bool acc = pass == 1;
        if (acc)
            for (int i = 0; i < nj; ++i)
                CK(cudaMemcpy(dy[i], init[i].data(), init[i].size() * 4, cudaMemcpyHostToDevice));
        const bool ran = cu::mmq_variant(variant, ti, jobs, nj, k, a.q, a.d, n_act, acc, nullptr,
                                         ksplit == 1 ? nullptr : dev_scratch(), ksplit);
        if (repack && pipelined(variant)) {  // they stage contiguous blocks: refused
            report(!ran, what + ": refused (pipelined tiles, repacked layout)");
            break;
        }
        if (!ran) {
            report(false, what + ": not run (mmq_variant returned false)");
            break;
        }
        double num = 0, den = 0;
        bool finite = true;
        for (int i = 0; i < nj; ++i) {
            const auto got = host_copy(dy[i], init[i].size());
            for (int j = 0; j < n_act; ++j)
                for (int r = 0; r < rows[i]; ++r) {
                    const double want = ref[i][static_cast<size_t>(j) * rows[i] + r] +
                                        (acc ? init[i][static_cast<size_t>(j) * ld[i] + r] : 0.0);
                    const float g = got[static_cast<size_t>(j) * ld[i] + r];
                    finite &= std::isfinite(g);
                    num += (g - want) * (g - want);
                    den += want * want;
                }
        }
        const double rel = std::sqrt(num / std::max(den, 1e-300));
        const bool ok = finite && rel <= kTolerance && (ksplit == 1 || counters_zero());
        report(ok, what + (acc ? " accumulate" : "") +
                       fmt(": rel err %.3g (tol %.0e)%s", rel, kTolerance,
                           finite ? "" : ", NON-FINITE output"));
    }
    cudaFree(dw);
    for (int i = 0; i < nj; ++i) {
        cudaFree(dy[i]);
        cudaFree(dbias[i]);
    }
}

// Batch invariance: every output is the same chunk sequence whatever the tile, so every variant
// gives the same bits, and the first rows of a batch equal the same rows run alone (memcmp).
void test_invariance(std::mt19937& rng, GgmlType t) {
    const int ti = static_cast<int>(t);
    const bool kq = quant::type_traits(t).block_size == 256;
    const int k = kq ? 2304 : 2080, rows = 200, n_act = 70, n_few = 20;
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, rows, k, rng);
    const auto x = make_acts(n_act, k, rng);
    DevActs a;
    dev_pack(t, x, n_act, k, a, false);
    uint8_t* dw = dev_copy(w);
    float* y = dev_poisoned<float>(static_cast<size_t>(n_act) * rows);
    cu::MatJob j;
    j.w = dw;
    j.row_bytes = rb;
    j.n_out = rows;
    j.y = y;
    j.ldy = rows;
    std::vector<float> first;
    bool same = true, ran = true;
    for (int v = 1; v < cu::mmq_variants(); ++v) {
        for (int na : {n_act, n_few}) {
            CK(cudaMemset(y, 0xff, static_cast<size_t>(n_act) * rows * 4));
            ran &= cu::mmq_variant(v, ti, &j, 1, k, a.q, a.d, na, false, nullptr);
            const auto got = host_copy(y, static_cast<size_t>(na) * rows);
            if (first.empty())
                first = got;
            else
                same &= std::memcmp(got.data(), first.data(), got.size() * 4) == 0;
        }
    }
    report(ran && same, fmt("mmq %s: all variants, %d and %d act rows, bitwise equal outputs",
                            tname(t).c_str(), n_act, n_few));
    cudaFree(dw);
    cudaFree(y);
}

// Split-K's sum is fixed by the shape, whichever slice's block finishes last: ten runs of a
// decode-batch shape (32 tiles x 8 slices racing) give the same bits.
void test_split_deterministic(std::mt19937& rng, GgmlType t) {
    const int ti = static_cast<int>(t), k = 4096, rows = 4096, n_act = 32;
    const size_t rb = quant::row_size(t, k);
    const auto w = make_weights(t, rows, k, rng);
    const auto x = make_acts(n_act, k, rng);
    DevActs a;
    dev_pack(t, x, n_act, k, a, false);
    uint8_t* dw = dev_copy(w);
    float* y = dev_poisoned<float>(static_cast<size_t>(n_act) * rows);
    cu::MatJob j;
    j.w = dw;
    j.row_bytes = rb;
    j.n_out = rows;
    j.y = y;
    j.ldy = rows;
    std::vector<float> first;
    bool same = true, ran = true;
    for (int r = 0; r < 10; ++r) {
        CK(cudaMemset(y, 0xff, static_cast<size_t>(n_act) * rows * 4));
        ran &= cu::mmq_variant(8, ti, &j, 1, k, a.q, a.d, n_act, false, nullptr, dev_scratch(), 8);
        const auto got = host_copy(y, static_cast<size_t>(n_act) * rows);
        if (first.empty())
            first = got;
        else
            same &= std::memcmp(got.data(), first.data(), got.size() * 4) == 0;
    }
    report(ran && same && counters_zero(),
           fmt("mmq %s split-K 8 x 32 tiles: 10 runs bitwise equal, counters back at zero",
               tname(t).c_str()));
    cudaFree(dw);
    cudaFree(y);
}

// What mmq must refuse: the float types, misaligned activations. Outputs untouched.
void test_refused(std::mt19937& rng) {
    const int k = 512, n_out = 40, n_act = 20;
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_K}) {
        const size_t rb = quant::row_size(t, k);
        std::vector<uint8_t> w(rb * n_out);
        for (auto& b : w) b = static_cast<uint8_t>(rng() & 0x3f);
        const auto x = make_acts(n_act, k, rng);
        DevActs a;
        dev_pack(GgmlType::Q4_K, x, n_act, k, a, false);
        uint8_t* dw = dev_copy(w);
        float* y = dev_poisoned<float>(static_cast<size_t>(n_act) * n_out);
        cu::MatJob j;
        j.w = dw;
        j.row_bytes = rb;
        j.n_out = n_out;
        j.y = y;
        j.ldy = n_out;
        const bool misaligned = t == GgmlType::Q4_K;  // a supported type, aq off by 4 bytes
        const bool ran = cu::mmq(static_cast<int>(t), &j, 1, k, misaligned ? a.q + 4 : a.q, a.d,
                                 n_act, false, nullptr);
        const auto got = host_copy(y, static_cast<size_t>(n_act) * n_out);
        bool untouched = true;
        for (float v : got) {
            uint32_t b;
            std::memcpy(&b, &v, 4);
            untouched &= b == 0xffffffffu;
        }
        report(!ran && untouched && (misaligned || !cu::mmq_supports(static_cast<int>(t))),
               fmt("mmq refuses %s (returns false, outputs untouched)",
                   misaligned ? "activations not 16-byte aligned" : tname(t).c_str()));
        cudaFree(dw);
        cudaFree(y);
    }
}

// ---- --bench ------------------------------------------------------------------------------------

struct Timer {
    cudaEvent_t e0, e1;
    Timer() {
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
    }
    ~Timer() {
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    // Median of 15 timed calls of fn(i) after 2 warm-ups (i counts calls: rotate inputs by it).
    template <class F>
    double median_ms(F&& fn) {
        int i = 0;
        for (; i < 2; ++i) fn(i);
        CK(cudaDeviceSynchronize());
        std::vector<float> ms;
        for (int r = 0; r < 15; ++r, ++i) {
            CK(cudaEventRecord(e0));
            fn(i);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float v = 0;
            CK(cudaEventElapsedTime(&v, e0, e1));
            ms.push_back(v);
        }
        CK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        return ms[ms.size() / 2];
    }
};

// A timing shape's weights: 64 quantized Gaussian rows repeated (the values do not change the
// time, the quantization of every row would dominate the bench's setup).
std::vector<uint8_t> bench_weights(std::mt19937& rng, GgmlType t, int rows, int k) {
    const size_t rb = quant::row_size(t, k);
    std::vector<uint8_t> w(rb * rows);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> row(k);
    for (int r = 0; r < rows; ++r) {
        if (r < 64) {
            for (auto& v : row) v = nd(rng);
            quant::quantize_row(t, row.data(), w.data() + rb * r, k);
        } else {
            std::memcpy(w.data() + rb * r, w.data() + rb * (r % 64), rb);
        }
    }
    return w;
}

void bench_case(cu::CublasLib& blas, Timer& tm, std::mt19937& rng, GgmlType t, int rows, int k,
                int n_act) {
    const int ti = static_cast<int>(t);
    const size_t rb = quant::row_size(t, k);
    const size_t wbytes = rb * rows;
    const std::vector<uint8_t> w = bench_weights(rng, t, rows, k);
    // Enough weight copies that each timed call reads weights not in the 60 MB L2.
    const int copies = static_cast<int>(
        std::min<size_t>(16, std::max<size_t>(1, (size_t(200) << 20) / wbytes + 1)));
    std::vector<uint8_t*> dw(copies);
    for (auto& p : dw) p = dev_copy(w);
    const auto x = make_acts(n_act, k, rng);
    DevActs a;
    dev_pack(t, x, n_act, k, a, true);
    float* y = dev_poisoned<float>(static_cast<size_t>(n_act) * rows);
    cu::MatJob j;
    j.row_bytes = rb;
    j.n_out = rows;
    j.y = y;
    j.ldy = rows;
    const double ops = 2.0 * rows * static_cast<double>(k) * n_act;
    auto tops = [&](double ms) { return ops / (ms * 1e-3) * 1e-12; };
    bool ran = true;
    const double t0 = tm.median_ms([&](int i) {
        j.w = dw[i % copies];
        ran &= cu::mmq(ti, &j, 1, k, a.q, a.d, n_act, false, nullptr);
    });
    double best = t0;
    int best_v = 0;
    for (int v = 1; v < cu::mmq_variants(); ++v) {
        const double tv = tm.median_ms([&](int i) {
            j.w = dw[i % copies];
            ran &= cu::mmq_variant(v, ti, &j, 1, k, a.q, a.d, n_act, false, nullptr);
        });
        if (tv < best) best = tv, best_v = v;
    }
    double tb = NAN, tg = NAN;
    if (blas.ok()) {
        uint16_t* wdq = dev_poisoned<uint16_t>(static_cast<size_t>(rows) * k);
        tb = tm.median_ms([&](int i) {
            cu::dequant_f16(ti, dw[i % copies], rb, rows, k, wdq, nullptr);
            blas.gemm_f16(nullptr, rows, n_act, k, wdq, a.h, y, rows, 0.f);
        });
        tg = tm.median_ms(
            [&](int) { blas.gemm_f16(nullptr, rows, n_act, k, wdq, a.h, y, rows, 0.f); });
        cudaFree(wdq);
    }
    std::printf(
        "BENCH %-5s %6d x %5d  %4d | %8.3f %6.1f | %d %8.3f %6.1f | %8.3f %6.1f | %8.3f %6.1f | "
        "%5.2fx %5.2fx\n",
        tname(t).c_str(), rows, k, n_act, t0, tops(t0), best_v, best, tops(best), tb, tops(tb), tg,
        tops(tg), tb / t0, tb / best);
    std::fflush(stdout);
    report(ran, fmt("bench %s %d x %d x %d ran", tname(t).c_str(), rows, k, n_act));
    for (auto* p : dw) cudaFree(p);
    cudaFree(y);
}

// Decode batches (--bench): per Llama-3-8B projection shape and batch size, mmq unsplit (its
// own tiles, no scratch), mmq's choice with the split-K scratch (what the runner runs), and the
// best (variant, slices) pair, with the weight-read rate each reaches (TB/s of the weight bytes).
void bench_decode_case(Timer& tm, std::mt19937& rng, GgmlType t, int rows, int k, int n_act) {
    const int ti = static_cast<int>(t);
    const size_t rb = quant::row_size(t, k), wbytes = rb * rows;
    const std::vector<uint8_t> w = bench_weights(rng, t, rows, k);
    const int copies = static_cast<int>(
        std::min<size_t>(16, std::max<size_t>(2, (size_t(200) << 20) / wbytes + 1)));
    std::vector<uint8_t*> dw(copies);
    for (auto& p : dw) p = dev_copy(w);
    const auto x = make_acts(n_act, k, rng);
    DevActs a;
    dev_pack(t, x, n_act, k, a, false);
    float* y = dev_poisoned<float>(static_cast<size_t>(n_act) * rows);
    cu::MatJob j;
    j.row_bytes = rb;
    j.n_out = rows;
    j.y = y;
    j.ldy = rows;
    auto tbs = [&](double ms) { return static_cast<double>(wbytes) / (ms * 1e-3) * 1e-12; };
    bool ran = true;
    auto time = [&](int v, const cu::MmqScratch* sc, int ks) {
        return tm.median_ms([&](int i) {
            j.w = dw[i % copies];
            ran &= cu::mmq_variant(v, ti, &j, 1, k, a.q, a.d, n_act, false, nullptr, sc, ks);
        });
    };
    const double t_plain = time(0, nullptr, 1), t_split = time(0, dev_scratch(), 0);
    double best = t_split;
    int best_v = 0, best_ks = 0;
    for (int v : {1, 2, 4, 7, 8, 9, 10})
        for (int ks : {1, 2, 3, 4, 6, 8, 12, 16}) {
            const double tv = time(v, ks == 1 ? nullptr : dev_scratch(), ks);
            if (tv < best) best = tv, best_v = v, best_ks = ks;
        }
    std::printf(
        "DECODE %-5s %6d x %5d  %3d | %7.4f %5.2f | %7.4f %5.2f | %2d %2d %7.4f %5.2f | %5.2fx\n",
        tname(t).c_str(), rows, k, n_act, t_plain, tbs(t_plain), t_split, tbs(t_split), best_v,
        best_ks, best, tbs(best), t_plain / t_split);
    std::fflush(stdout);
    report(ran && counters_zero(),
           fmt("decode bench %s %d x %d x %d ran", tname(t).c_str(), rows, k, n_act));
    for (auto* p : dw) cudaFree(p);
    cudaFree(y);
}

void bench_decode(std::mt19937& rng) {
    Timer tm;
    std::printf(
        "DECODE type    rows x     k nact | unsplit ms TB/s | split (auto) ms TB/s | best v ks ms "
        "TB/s | split speedup\n");
    struct Shape {
        GgmlType t;
        int rows, k;
    };
    // Llama-3-8B Q4_K_M: q/o 4096, k/v 1024, fused q+k+v 6144, fused gate+up 28672, down (Q4_K
    // and Q6_K layers), the Q6_K LM head
    const Shape shapes[] = {{GgmlType::Q4_K, 4096, 4096},  {GgmlType::Q4_K, 1024, 4096},
                            {GgmlType::Q4_K, 6144, 4096},  {GgmlType::Q4_K, 28672, 4096},
                            {GgmlType::Q4_K, 4096, 14336}, {GgmlType::Q6_K, 4096, 14336},
                            {GgmlType::Q6_K, 1024, 4096},  {GgmlType::Q6_K, 128256, 4096}};
    for (const Shape& s : shapes)
        for (int n_act : {8, 16, 32, 64}) bench_decode_case(tm, rng, s.t, s.rows, s.k, n_act);
}

void bench(std::mt19937& rng) {
    bench_decode(rng);
    cu::CublasLib blas;
    if (!blas.ok())
        std::printf("cuBLAS unavailable (%s): no comparison columns\n", blas.reason().c_str());
    Timer tm;
    std::printf(
        "BENCH type    rows x     k  nact | mmq ms  TOP/s | best-variant ms TOP/s | dequant+cublas "
        "ms TOP/s "
        "| cublas-only ms TOP/s | speedup (auto, best)\n");
    struct Shape {
        int rows, k;
    };
    const Shape shapes[] = {{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}};
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::Q8_0})
        for (const Shape& s : shapes)
            for (int n_act : {32, 64, 512, 4096}) bench_case(blas, tm, rng, t, s.rows, s.k, n_act);
    for (int n_act : {32, 64, 512}) bench_case(blas, tm, rng, GgmlType::Q6_K, 128256, 4096, n_act);
    for (GgmlType t :
         {GgmlType::Q5_K, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q3_K, GgmlType::Q2_K})
        bench_case(blas, tm, rng, t, 4096, 4096, 512);
}

}  // namespace

int main(int argc, char** argv) {
    bool do_bench = false, do_tests = true, decode_only = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--bench") == 0)
            do_bench = true;
        else if (std::strcmp(argv[i], "--bench-only") == 0)
            do_bench = true, do_tests = false;
        else if (std::strcmp(argv[i], "--bench-decode") == 0)
            do_bench = true, do_tests = false, decode_only = true;
        else if (std::strcmp(argv[i], "--verbose") == 0)
            g_verbose = true;
        else if (std::strcmp(argv[i], "--ctest") != 0) {
            std::printf(
                "usage: cuda_test_mmq [--ctest] [--bench] [--bench-only] [--bench-decode] "
                "[--verbose]\n");
            return 2;
        }
    }
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_mmq: %s\n", p.reason.c_str());
        return 77;
    }
    const auto& d = p.devices.front();
    std::printf("device: %s, cc %d.%d, %zu MiB\n", d.name.c_str(), d.cc_major, d.cc_minor,
                d.mem_total >> 20);
    std::mt19937 rng(20261201);
    using T = GgmlType;
    if (do_tests) {
        for (T t : {T::Q4_K, T::Q6_K, T::Q4_0, T::Q8_0, T::Q5_K, T::Q5_0, T::Q5_1, T::Q4_1, T::Q2_K,
                    T::Q3_K, T::MXFP4}) {
            const bool kq = quant::type_traits(t).block_size == 256;
            // (k, job rows, act rows): partial stages (65 blocks), 3 fused jobs with odd sizes,
            // act rows not multiples of the tiles, prefill sizes, a long row.
            test_case(rng, t, kq ? 2304 : 2080, {389}, 17, 0);
            test_case(rng, t, 4096, {1024 + 32, 96, 40}, 33, 0);
            test_case(rng, t, kq ? 4352 : 4128, {211, 64}, 100, 0);
            test_case(rng, t, kq ? 1280 : 1056, {150, 37}, 512, 0);
            test_case(rng, t, 14336, {45}, 65, 0);
            test_case(rng, t, 256, {1}, 1, 0);
            for (int v = 1; v < cu::mmq_variants(); ++v) {
                test_case(rng, t, kq ? 2304 : 2080, {131, 258}, 100, v);
                test_case(rng, t, 512, {77}, 33, v);
            }
        }
        // The repacked layouts (fast mode's default upload of Q4_0 / Q8_0 / Q6_K).
        for (int v = 0; v < cu::mmq_variants(); ++v) {
            test_case(rng, T::Q4_0, 4096, {1024 + 32, 96, 40}, 33, v, true);
            test_case(rng, T::Q8_0, 2048, {389}, 100, v, true);
            test_case(rng, T::Q6_K, 4096, {211, 64}, v == 0 ? 512 : 65, v, true);
        }
        for (T t : {T::Q4_K, T::Q6_K, T::Q4_0, T::Q8_0, T::Q4_1, T::Q2_K}) test_invariance(rng, t);
        // Split-K (the runner's decode batches): mmq's choice and forced slice counts, every
        // tile kind, fused jobs with a bias, partial stages; repacked layouts; determinism.
        for (T t : {T::Q4_K, T::Q6_K, T::Q4_0, T::Q8_0, T::Q5_K, T::Q2_K, T::MXFP4}) {
            const bool kq = quant::type_traits(t).block_size == 256;
            test_case(rng, t, 4096, {1024 + 32, 96, 40}, 32, 0, false, 0);
            test_case(rng, t, 4096, {4096}, 16, 0, false, 0);
            test_case(rng, t, kq ? 14336 : 14368, {389}, 9, 0, false, 0);
            for (int v : {1, 2, 8, 9, 10})
                for (int ks : {2, 3, 8})
                    test_case(rng, t, kq ? 4352 : 4128, {211, 64}, 33, v, false, ks);
        }
        for (int v : {0, 8, 9}) {
            test_case(rng, T::Q4_0, 4096, {1024 + 32, 96, 40}, 32, v, true, 4);
            test_case(rng, T::Q6_K, 4096, {211, 64}, 20, v, true, 0);
        }
        for (T t : {T::Q4_K, T::Q6_K, T::Q4_0}) test_split_deterministic(rng, t);
        test_refused(rng);
    }
    if (decode_only)
        bench_decode(rng);
    else if (do_bench)
        bench(rng);
    for (size_t i = 0; i < g_failed.size() && i < 12; ++i)
        std::printf("FAILED %s\n", g_failed[i].c_str());
    std::printf("%s: %d passed, %d failed\n", g_fail ? "FAIL" : "PASS", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
