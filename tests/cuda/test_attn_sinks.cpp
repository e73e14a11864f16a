// zinc/tests/cuda/test_attn_sinks.cpp — attention with sinks (gpt-oss's attn_sinks) on the
// device: cu::attention with AttnJob::sinks against cpu::paged_attention with the same sinks,
// bit for bit (memcmp), in both schedules (walk: part = null; split-K: partials and counters),
// over rows of one, two and three key chunks, GQA, with and without gpt-oss's 128-position window;
// and against a float64 softmax over [scores..., sink] (relative error). Outputs are poisoned
// first. Exit 0 when every case passes, 1 otherwise, 77 without a device.
//
//   cuda_test_attn_sinks
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "gpu_test.h"
#include "quant/quant.h"

using namespace zinc;
namespace cu = zinc::cuda;
using namespace zinc::gpu_test;

namespace {

int g_pass = 0, g_fail = 0;

void report(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    (ok ? g_pass : g_fail)++;
}

void run_case(std::mt19937& rng, int hd, int window, float sink_mean) {
    const int n_head = 8, n_kv = 2, bs = 16, n_blocks = 80;
    const int lens[3] = {37, 1, 700};  // seq 2's last rows span three 256-position chunks
    const int kvd = n_kv * hd;
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<uint16_t> kh(static_cast<size_t>(n_blocks) * bs * kvd), vh(kh.size());
    std::vector<double> kc(kh.size()), vc(kh.size());
    for (size_t i = 0; i < kh.size(); ++i) {
        kh[i] = quant::fp32_to_fp16(nd(rng));
        vh[i] = quant::fp32_to_fp16(nd(rng));
        kc[i] = quant::fp16_to_fp32(kh[i]);
        vc[i] = quant::fp16_to_fp32(vh[i]);
    }
    std::vector<int> perm(n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int32_t> bt, row_pos, row_bt, seq_off;
    int used = 0;
    for (int s = 0; s < 3; ++s) {
        seq_off.push_back(static_cast<int32_t>(bt.size()));
        for (int b = 0; b < (lens[s] + bs - 1) / bs; ++b) bt.push_back(perm[used++]);
    }
    const int take[3] = {4, 1, 3};
    for (int s = 0; s < 3; ++s)
        for (int i = lens[s] - take[s]; i < lens[s]; ++i) {
            row_pos.push_back(i);
            row_bt.push_back(seq_off[s]);
        }
    const int n_rows = static_cast<int>(row_pos.size());
    std::vector<float> q(static_cast<size_t>(n_rows) * n_head * hd), sinks(n_head);
    for (auto& v : q) v = 0.5f * nd(rng);
    for (auto& v : sinks) v = sink_mean + nd(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

    // float64 reference: softmax over [scores..., sink], the sink carrying no value
    std::vector<double> ref(q.size());
    for (int r = 0; r < n_rows; ++r)
        for (int h = 0; h < n_head; ++h) {
            const int hk = h / (n_head / n_kv), p = row_pos[r];
            const int lo = window > 0 ? std::max(0, p - window + 1) : 0;
            std::vector<double> sc;
            std::vector<size_t> slots;
            for (int j = lo; j <= p; ++j) {
                const size_t slot = static_cast<size_t>(bt[row_bt[r] + j / bs]) * bs + j % bs;
                double d = 0;
                for (int i = 0; i < hd; ++i)
                    d += static_cast<double>(q[(static_cast<size_t>(r) * n_head + h) * hd + i]) *
                         kc[slot * kvd + hk * hd + i];
                sc.push_back(d * scale);
                slots.push_back(slot);
            }
            double mx = sinks[h];
            for (double v : sc) mx = std::max(mx, v);
            double sum = std::exp(sinks[h] - mx);
            for (auto& v : sc) sum += (v = std::exp(v - mx));
            for (int i = 0; i < hd; ++i) {
                double o = 0;
                for (size_t a = 0; a < sc.size(); ++a)
                    o += sc[a] * vc[slots[a] * kvd + hk * hd + i];
                ref[(static_cast<size_t>(r) * n_head + h) * hd + i] = o / sum;
            }
        }

    // the CPU tier
    std::vector<cpu::AttentionSeq> seqs;
    for (int s = 0, row0 = 0; s < 3; row0 += take[s], ++s)
        seqs.push_back({row0, take[s], lens[s] - take[s], bt.data() + seq_off[s]});
    cpu::AttentionParams ap{n_head, n_kv, hd, hd, scale, window, sinks.data()};
    cpu::ThreadPool pool(2);
    std::vector<float> want(q.size(), NAN);
    std::vector<float> scratch(cpu::attention_scratch_floats(ap, pool.n_threads(), 1024));
    cpu::paged_attention(pool, ap, q.data(), n_head * hd, seqs,
                         cpu::PagedKvView{kh.data(), vh.data(), kvd, kvd, bs}, want.data(),
                         n_head * hd, scratch.data());

    cu::AttnJob j;
    j.q = dev_copy(q);
    j.q_ld = n_head * hd;
    j.out_ld = n_head * hd;
    j.k_cache = dev_copy(kh);
    j.v_cache = dev_copy(vh);
    j.n_head = n_head;
    j.n_head_kv = n_kv;
    j.head_dim = j.head_dim_v = hd;
    j.scale = scale;
    j.window = window;
    j.sinks = dev_copy(sinks);
    j.block_size = bs;
    j.row_pos = dev_copy(row_pos);
    j.row_bt = dev_copy(row_bt);
    j.bt = dev_copy(bt);
    j.max_pos = 1024;
    CK(cu::attention_prepare(j.max_pos, hd));
    const int mc = cu::attn_max_chunks(j.max_pos);
    for (bool split : {false, true}) {
        float* out = dev_poisoned<float>(q.size());
        j.out = out;
        j.part = split ? dev_poisoned<float>(static_cast<size_t>(n_rows) * n_head * mc * (hd + 2))
                       : nullptr;
        j.counters = nullptr;
        if (split) {
            CK(cudaMalloc(&j.counters, sizeof(unsigned) * n_rows * n_head));
            CK(cudaMemset(j.counters, 0, sizeof(unsigned) * n_rows * n_head));
        }
        cu::attention(j, n_rows, nullptr);
        const auto got = host_copy(out, q.size());
        double num = 0, den = 0;
        bool finite = true;
        for (size_t i = 0; i < got.size(); ++i) {
            finite &= std::isfinite(got[i]);
            num += (got[i] - ref[i]) * (got[i] - ref[i]);
            den += ref[i] * ref[i];
        }
        const double e = std::sqrt(num / std::max(den, 1e-300));
        const bool bits = std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
        report(
            finite && e < 1e-5 && bits,
            fmt("attention sinks (mean %+.0f) hd %d window %d, %s, %d rows of 3 seqs: rel err "
                "%.2e vs float64 (tol 1e-5), bitwise equal to cpu::paged_attention: %s",
                sink_mean, hd, window, split ? "split-K" : "walk", n_rows, e, bits ? "yes" : "no"));
        cudaFree(out);
        if (split) {
            cudaFree(j.part);
            cudaFree(j.counters);
        }
    }
}

}  // namespace

int main(int, char**) {
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_attn_sinks: %s\n", p.reason.c_str());
        return 77;
    }
    std::printf("device: %s; CPU kernels: %s\n", p.devices.front().name.c_str(),
                quant::simd_level());
    std::mt19937 rng(20261202);
    for (int hd : {64, 128})
        for (int window : {0, 128})
            for (float mean : {0.0f, 3.0f, -3.0f}) run_case(rng, hd, window, mean);
    std::printf("%s: %d passed, %d failed\n", g_fail ? "FAIL" : "PASS", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
