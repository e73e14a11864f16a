// zinc/tests/cuda/test_attn.cpp — the fast attention kernels (attention_fast.cu: tensor-core
// FlashAttention prefill; attention_fast_decode.cu: GQA-grouped split-K decode) against a float64
// reference and against the exact kernel (attention.cu), and (--bench) their speed side by side.
//
//   cuda_test_attn [--ctest] [--bench] [--bench-only] [--verbose]
//
// Correctness: random Q (N(0, 1.5)) and a paged f16 KV cache (N(0, 1.5) keys, N(0, 1) values in
// every slot, block tables shuffled over a pool with unused blocks, block size 16 as the runner's
// default and 32), rows laid out as the runner lays out a step: several sequences, prefill chunks
// starting after a cached prefix (position > 0), fresh prompts, single decode rows between them;
// GQA ratios 1, 4, 8 (and 10: two head chunks in the decode kernel), head_dim 64 / 128 / 256,
// windows 0 and 100, sinks null and per-head random logits. The rows are split into spans as
// runner.cpp does (single-row sequences -> decode kernel, the others -> prefill kernel); each
// case also runs every row through the prefill kernel ("all-prefill"). Outputs are poisoned
// with NaN first; NaN never passes. The error measure is max |out - ref| / max |ref| over the
// span's rows. Tolerances: prefill 3e-3 (Q and P rounded to f16 for the tensor cores, f32
// accumulation; measured on the host model 2e-4..5e-4), decode 1e-4 (f32 throughout; K/V are f16
// inputs either way). Where sinks are null the same rows are compared with attention.cu (exact,
// f32, the CPU tier's order) by the same measure and tolerance. The split counters must be left
// at zero (graph replay depends on it).
// One line per check: PASS/FAIL, the case, the span, the error and its tolerance, the worst
// (row, head, dim) with the values; a final "PASS: n passed, 0 failed" or "FAIL: ...".
// --bench: the Llama-3-8B shape (32 heads, 8 KV heads, head_dim 128): prefill of one sequence
// of 512 / 4096 / 16384 rows from position 0 (causal FLOPs 2 * 2 * hd * n_head * L (L + 1) / 2)
// and decode of 1 and 16 rows at depth 4096 / 16384 (bytes: each row's K and V rows once per KV
// head); old (attention.cu) and new kernels side by side, CUDA events, median after warm-up; the
// 1-row decode rotates over 16 sequences (1 GB of KV) so the L2 does not hold its cache.
// Exit 0 only when every check passes; 77 (ctest: skipped) without a usable device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "attn_ref.h"
#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "gpu_test.h"

using namespace zinc;
namespace cu = zinc::cuda;
namespace at = zinc::attn_test;
using namespace zinc::gpu_test;

namespace {

int g_pass = 0, g_fail = 0;
std::vector<std::string> g_failed;

void report(bool ok, const std::string& what) {
    std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    ok ? ++g_pass : ++g_fail;
    if (!ok) g_failed.push_back(what);
}

constexpr double kTolPrefill = 3e-3, kTolDecode = 1e-4;

// Device copies of a case's data and an AttnJob over them.
struct DevCase {
    cu::AttnJob j;
    float* out = nullptr;
    size_t out_n = 0;
    unsigned* cnt = nullptr;
    size_t cnt_n = 0;
};

DevCase upload(const at::Case& c, const at::Data& d, int max_pos) {
    DevCase dc;
    cu::AttnJob& j = dc.j;
    j.q = dev_copy(d.q);
    j.q_ld = c.n_head * c.hd;
    dc.out_n = static_cast<size_t>(d.rows) * c.n_head * c.hd;
    dc.out = dev_poisoned<float>(dc.out_n);
    j.out = dc.out;
    j.out_ld = c.n_head * c.hd;
    j.k_cache = dev_copy(d.k);
    j.v_cache = dev_copy(d.v);
    j.n_head = c.n_head;
    j.n_head_kv = c.n_kv;
    j.head_dim = j.head_dim_v = c.hd;
    j.scale = d.scale;
    j.window = c.window;
    j.block_size = c.block_size;
    j.row_pos = dev_copy(d.pos);
    j.row_bt = dev_copy(d.rowbt);
    j.bt = dev_copy(d.bt);
    j.max_pos = max_pos;
    const size_t units = static_cast<size_t>(cu::kAttnSplitRows) * c.n_head;
    j.part = dev_poisoned<float>(units * cu::attn_max_chunks(max_pos) * (c.hd + 2));
    dc.cnt_n = units;
    CK(cudaMalloc(&dc.cnt, units * sizeof(unsigned)));
    CK(cudaMemset(dc.cnt, 0, units * sizeof(unsigned)));
    j.counters = dc.cnt;
    j.sinks = c.sinks ? dev_copy(d.sinks) : nullptr;
    return dc;
}

std::string where(const at::Case& c, const std::vector<float>& got, const std::vector<double>& ref,
                  int r0, int r1) {
    const size_t w = static_cast<size_t>(c.n_head) * c.hd;
    size_t wi = r0 * w;
    double mx = -1.0;
    for (size_t i = r0 * w; i < r1 * w; ++i) {
        const double e = std::isfinite(got[i]) ? std::fabs(got[i] - ref[i]) : INFINITY;
        if (e > mx) {
            mx = e;
            wi = i;
        }
    }
    const int row = static_cast<int>(wi / w), h = static_cast<int>((wi % w) / c.hd),
              dim = static_cast<int>(wi % c.hd);
    return fmt("worst row %d head %d dim %d: %.6g vs %.6g", row, h, dim, got[wi], ref[wi]);
}

void check_case(const at::Case& c) {
    const at::Data d = at::make_data(c, 0x5eed + static_cast<uint32_t>(g_pass + g_fail));
    const std::vector<double> ref = at::reference(c, d);
    const int max_pos = d.max_pos + 2048;  // the runner's capacity exceeds the positions used
    DevCase dc = upload(c, d, max_pos);
    const std::vector<at::Span> spans = at::spans(c);
    for (int mode = 0; mode < 2; ++mode) {  // 0: the runner's split, 1: all rows by prefill
        CK(cudaMemset(dc.out, 0xff, dc.out_n * sizeof(float)));
        bool launched = true;
        for (const at::Span& sp : spans) {
            const bool dec = sp.decode && mode == 0;
            launched &= dec ? cu::attention_fast_decode(dc.j, sp.row0, sp.n, nullptr)
                            : cu::attention_fast_prefill(dc.j, sp.row0, sp.n, nullptr);
        }
        const std::vector<float> got = host_copy(dc.out, dc.out_n);
        const std::vector<unsigned> cnt = host_copy(dc.cnt, dc.cnt_n);
        const bool cnt_ok = std::all_of(cnt.begin(), cnt.end(), [](unsigned v) { return v == 0; });
        if (!launched) {
            report(false, c.name + ": the fast kernels refused the case (attention_fast_covers)");
            return;
        }
        for (const at::Span& sp : spans) {
            const bool dec = sp.decode && mode == 0;
            const double tol = dec ? kTolDecode : kTolPrefill;
            const double e = at::rel_err(c, got, ref, sp.row0, sp.row0 + sp.n);
            report(e <= tol && cnt_ok,
                   fmt("%s | %s rows [%d, %d)%s | vs f64: rel err %.3g (tol %.0e) | %s%s",
                       c.name.c_str(), dec ? "decode " : "prefill", sp.row0, sp.row0 + sp.n,
                       mode ? " all-prefill" : "", e, tol,
                       where(c, got, ref, sp.row0, sp.row0 + sp.n).c_str(),
                       cnt_ok ? "" : " | split counters not reset"));
        }
        if (c.sinks || mode == 1) continue;
        // the exact kernel on the same rows (it has no sinks; split-K for <= 16 rows)
        CK(cudaMemset(dc.out, 0xff, dc.out_n * sizeof(float)));
        cu::attention(dc.j, d.rows, nullptr);
        const std::vector<float> ex = host_copy(dc.out, dc.out_n);
        std::vector<double> exd(ex.begin(), ex.end());
        for (const at::Span& sp : spans) {
            const bool dec = sp.decode;
            const double tol = dec ? kTolDecode : kTolPrefill;
            const double e = at::rel_err(c, got, exd, sp.row0, sp.row0 + sp.n);
            const double e_ex = at::rel_err(c, ex, ref, sp.row0, sp.row0 + sp.n);
            report(e <= tol,
                   fmt("%s | %s rows [%d, %d) | vs attention.cu: rel err %.3g (tol "
                       "%.0e; attention.cu vs f64 %.3g) | %s",
                       c.name.c_str(), dec ? "decode " : "prefill", sp.row0, sp.row0 + sp.n, e, tol,
                       e_ex, where(c, got, exd, sp.row0, sp.row0 + sp.n).c_str()));
        }
    }
}

std::vector<at::Case> cases() {
    std::vector<at::Case> out;
    struct Shape {
        int n_head, n_kv, hd;
    };
    const Shape shapes[] = {{4, 4, 64}, {8, 2, 128}, {8, 1, 256}, {16, 2, 128}, {10, 1, 64}};
    for (const Shape& s : shapes) {
        for (int window : {0, 100}) {
            for (bool sinks : {false, true}) {
                at::Case c;
                c.n_head = s.n_head;
                c.n_kv = s.n_kv;
                c.hd = s.hd;
                c.window = window;
                c.sinks = sinks;
                c.block_size = s.hd == 256 ? 32 : 16;
                // a chunk after a cached prefix, a fresh prompt, two decodes, another chunk
                c.seqs = {{300, 200}, {0, 130}, {1000, 1}, {77, 1}, {517, 64}};
                c.name = fmt("heads %d/%d hd %d win %d sinks %d bs %d", s.n_head, s.n_kv, s.hd,
                             window, sinks ? 1 : 0, c.block_size);
                out.push_back(c);
            }
        }
    }
    // decode at depth: 20 rows (two passes of kAttnSplitRows), GQA 4, depths up to 3000
    at::Case dd;
    dd.n_head = 32;
    dd.n_kv = 8;
    dd.hd = 128;
    for (int i = 0; i < 20; ++i) dd.seqs.push_back({(i * 997) % 3000 + (i == 0 ? 0 : 1), 1});
    dd.name = "decode depth: heads 32/8 hd 128, 20 rows up to 3000";
    out.push_back(dd);
    dd.window = 100;
    dd.sinks = true;
    dd.name = "decode depth: heads 32/8 hd 128, 20 rows up to 3000, win 100, sinks";
    out.push_back(dd);
    // one long prefill chunk after a long prefix, 8B-like heads (rows cross many tiles)
    at::Case lp;
    lp.n_head = 32;
    lp.n_kv = 8;
    lp.hd = 128;
    lp.seqs = {{1500, 300}};
    lp.name = "prefill 300 rows at 1500: heads 32/8 hd 128";
    out.push_back(lp);
    return out;
}

// ---- --bench

float time_ms(const std::function<void(int)>& f, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    f(0);
    CK(cudaDeviceSynchronize());
    std::vector<float> ts;
    for (int i = 0; i < reps; ++i) {
        CK(cudaEventRecord(a));
        f(i);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0.f;
        CK(cudaEventElapsedTime(&ms, a, b));
        ts.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

void bench() {
    std::printf(
        "\nbench: Llama-3-8B attention shape (32 heads, 8 KV heads, head_dim 128, block "
        "16), one layer; CUDA events, median\n");
    std::printf("%-28s %12s %12s %9s %14s %14s\n", "case", "old ms", "new ms", "speedup", "old",
                "new");
    for (int L : {512, 4096, 16384}) {
        at::Case c;
        c.n_head = 32;
        c.n_kv = 8;
        c.hd = 128;
        c.seqs = {{0, L}};
        const at::Data d = at::make_data(c, 7, true);
        DevCase dc = upload(c, d, L);
        const int reps_old = L >= 16384 ? 3 : 10, reps_new = 20;
        const float t_old = time_ms([&](int) { cu::attention(dc.j, L, nullptr); }, reps_old);
        const float t_new =
            time_ms([&](int) { cu::attention_fast_prefill(dc.j, 0, L, nullptr); }, reps_new);
        const double flop = 2.0 * 2.0 * c.hd * c.n_head * (static_cast<double>(L) * (L + 1) / 2);
        std::printf("%-28s %12.3f %12.3f %8.1fx %8.1f TFLOP/s %8.1f TFLOP/s\n",
                    fmt("prefill %d", L).c_str(), t_old, t_new, t_old / t_new, flop / t_old / 1e9,
                    flop / t_new / 1e9);
    }
    for (int depth : {4096, 16384}) {
        at::Case c;
        c.n_head = 32;
        c.n_kv = 8;
        c.hd = 128;
        for (int i = 0; i < 16; ++i) c.seqs.push_back({depth - 1, 1});
        const at::Data d = at::make_data(c, 9, true);
        DevCase dc = upload(c, d, 32768);  // the runner's max_pos: -c 32768
        for (int rows : {1, 16}) {
            auto shifted = [&](int i) {  // rows [r, r + rows): a different sequence each rep
                const int r = rows == 1 ? i % 16 : 0;
                cu::AttnJob j = dc.j;
                j.q += static_cast<size_t>(r) * j.q_ld;
                j.out += static_cast<size_t>(r) * j.out_ld;
                j.row_pos += r;
                j.row_bt += r;
                return j;
            };
            const float t_old =
                time_ms([&](int i) { cu::attention(shifted(i), rows, nullptr); }, 30);
            const float t_new = time_ms(
                [&](int i) { cu::attention_fast_decode(shifted(i), 0, rows, nullptr); }, 30);
            const double bytes = static_cast<double>(rows) * depth * c.n_kv * 2.0 * c.hd * 2.0;
            std::printf("%-28s %12.4f %12.4f %8.1fx %10.0f GB/s %10.0f GB/s  (%d splits)\n",
                        fmt("decode %d rows @ %d", rows, depth).c_str(), t_old, t_new,
                        t_old / t_new, bytes / t_old / 1e6, bytes / t_new / 1e6,
                        cu::attention_fast_splits(dc.j, rows));
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    bool do_bench = false, only_bench = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--bench") == 0)
            do_bench = true;
        else if (std::strcmp(argv[i], "--bench-only") == 0)
            do_bench = only_bench = true;
        else if (std::strcmp(argv[i], "--ctest") != 0 && std::strcmp(argv[i], "--verbose") != 0) {
            std::printf("usage: cuda_test_attn [--ctest] [--bench] [--bench-only] [--verbose]\n");
            return 2;
        }
    }
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP: no usable CUDA device (%s)\n", p.reason.c_str());
        return 77;
    }
    CK(cudaSetDevice(p.devices.front().index));
    if (!only_bench)
        for (const at::Case& c : cases()) check_case(c);
    if (do_bench) bench();
    if (only_bench) return 0;
    if (g_fail == 0) {
        std::printf("PASS: %d passed, 0 failed\n", g_pass);
        return 0;
    }
    std::printf("FAIL: %d passed, %d failed:\n", g_pass, g_fail);
    for (const auto& f : g_failed) std::printf("  %s\n", f.c_str());
    return 1;
}
