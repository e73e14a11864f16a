// zinc/tests/unit/cuda_emul/sampling_emul_test.cpp — the device sampler's CUDA source
// (src/backend/cuda/sampling.cu) compiled for the host over the SIMT shim in shim/, run through
// its real entry point sample_rows() on host memory: its tokens must equal engine::Sampler's for
// the same logits and the same uniform (greedy, temperature, top-k, top-p, min-p, penalties,
// ties, NaN/-inf rows), its `used` flag must say whether the uniform was drawn, and the logprob
// must match engine::token_logprobs. This checks the kernel's cuts, tie handling, warp walks and
// block reductions in CI without a GPU; tests/cuda/test_sampling.cpp checks the same on the
// device (where nvcc's code generation and the device's exp/log are the remaining difference).
//
// The warp intrinsics sampling.cu needs beyond the shim's (ballot, popc, ffs,
// shared-memory atomics, the _rn arithmetic) are defined here with their CUDA semantics.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>  // the shim (tests/unit/cuda_emul/shim)

inline unsigned __ballot_sync(unsigned, int pred) {
    zinc_simt::Block* b = zinc_simt::cur;
    const int t = static_cast<int>(threadIdx.x);
    uint32_t* slot = b->slot[zinc_simt::n_exchange++ & 1];
    slot[t] = pred ? 1u : 0u;
    b->bar->arrive_and_wait();
    unsigned m = 0;
    for (int l = 0; l < 32; ++l) m |= (slot[(t & ~31) + l] & 1u) << l;
    return m;
}
inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
inline int __ffs(int x) {
    return __builtin_ffs(x);
}
inline double atomicAdd(double* p, double v) {
    return std::atomic_ref<double>(*p).fetch_add(v);
}
inline int atomicMin(int* p, int v) {
    std::atomic_ref<int> a(*p);
    int cur = a.load();
    while (v < cur && !a.compare_exchange_weak(cur, v)) {
    }
    return cur;
}
inline float __fsub_rn(float a, float b) {
    return a - b;
}
inline float __fdiv_rn(float a, float b) {
    return a / b;
}
inline double __dadd_rn(double a, double b) {
    return a + b;
}
inline double __dsub_rn(double a, double b) {
    return a - b;
}
inline double __dmul_rn(double a, double b) {
    return a * b;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/sampling.cu"
#pragma GCC diagnostic pop

#include "engine/engine.h"
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "model/batch.h"

namespace {

namespace cu = zinc::cuda;
namespace ze = zinc::engine;
namespace zm = zinc::model;

// The host-side constants, as runner_sample.cpp's sample_row_params computes them.
cu::SampleRowParams params_of(const zm::RowSampling& r, int32_t pen_off) {
    cu::SampleRowParams p;
    p.uniform = r.uniform;
    p.temperature = r.temperature;
    p.inv_t = r.temperature > 0.0f ? 1.0f / r.temperature : 0.0f;
    p.top_p = r.top_p;
    p.min_p_on = r.min_p > 0.0f ? 1 : 0;
    p.log_min_p = r.min_p > 0.0f ? std::log(std::min(r.min_p, 1.0f)) : 0.0f;
    p.top_k = r.top_k;
    p.repeat = r.repeat_penalty;
    p.presence = r.presence_penalty;
    p.frequency = r.frequency_penalty;
    p.pen_off = pen_off;
    p.pen_n = static_cast<int32_t>(r.penalty_ids.size());
    return p;
}

ze::SamplerOptions opts(float t, int k, float p, float m, float rep = 1.f, float pres = 0.f,
                        float freq = 0.f) {
    ze::SamplerOptions o;
    o.temperature = t;
    o.top_k = k;
    o.top_p = p;
    o.min_p = m;
    o.repeat_penalty = rep;
    o.presence_penalty = pres;
    o.frequency_penalty = freq;
    return o;
}

std::vector<float> make_row(std::mt19937& rng, int n, int kind) {
    std::normal_distribution<float> g(0.f, kind == 4 ? 0.05f : 0.5f + static_cast<float>(kind));
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = g(rng);
    if (kind == 1)
        for (auto& x : v) x = std::round(x * 2.f) / 2.f;  // many exact ties
    if (kind == 2) {
        std::uniform_int_distribution<int> u(0, n - 1);
        for (int i = 0; i < n / 40 + 1; ++i) v[static_cast<size_t>(u(rng))] = NAN;
        for (int i = 0; i < n / 20 + 1; ++i) v[static_cast<size_t>(u(rng))] = -INFINITY;
    }
    if (kind == 3) v[static_cast<size_t>(std::uniform_int_distribution<int>(0, n - 1)(rng))] += 25.f;
    return v;
}

struct Setting {
    const char* name;
    ze::SamplerOptions o;
};

TEST(SamplingEmul, KernelEqualsTheCpuSampler) {
    const std::vector<Setting> settings = {
        {"greedy", opts(0.f, 40, 0.95f, 0.05f)},
        {"greedy+penalties", opts(0.f, 0, 1.f, 0.f, 1.3f, 0.4f, 0.3f)},
        {"temp 1", opts(1.f, 0, 1.f, 0.f)},
        {"temp 0.7 top-k 40", opts(0.7f, 40, 1.f, 0.f)},
        {"top-k 1", opts(1.f, 1, 1.f, 0.f)},
        {"top-k 700", opts(1.f, 700, 1.f, 0.f)},
        {"top-p 0.9", opts(1.f, 0, 0.9f, 0.f)},
        {"top-p 0", opts(1.f, 0, 0.f, 0.f)},
        {"top-k 100 top-p 0.8", opts(1.f, 100, 0.8f, 0.f)},
        {"min-p 0.1", opts(1.f, 0, 1.f, 0.1f)},
        {"defaults", opts(0.8f, 40, 0.95f, 0.05f)},
        {"penalties + defaults", opts(0.8f, 40, 0.95f, 0.05f, 1.3f, 0.5f, 0.2f)},
    };
    std::mt19937 rng(77);
    // 1500: the warps' segments end inside the row. Each emulated block is 512 host threads
    // meeting at every barrier and shuffle (~0.1 s a row on a 2-core machine).
    const int V = 1500, R = 5;
    int rows = 0, bad = 0;
    for (const Setting& st : settings) {
        for (int rep = 0; rep < 2; ++rep) {
            std::vector<float> l(static_cast<size_t>(R) * V);
            std::vector<cu::SampleRowParams> prm(R);
            std::vector<int32_t> pid, pc;
            std::vector<ze::Sampler> cpu, dev;
            std::vector<std::vector<int32_t>> hist(R);
            for (int r = 0; r < R; ++r) {
                auto row = make_row(rng, V, (r + rep) % 5);
                std::copy(row.begin(), row.end(), l.begin() + static_cast<ptrdiff_t>(r) * V);
                for (int i = 0; i < 30; ++i) hist[r].push_back(static_cast<int32_t>(rng() % 60));
                ze::SamplerOptions o = st.o;
                o.seed = rng();
                cpu.emplace_back(o);
                dev.emplace_back(o);
            }
            for (int r = 0; r < R; ++r) {
                const zm::RowSampling rs = dev[r].device_row(hist[r], V);
                prm[r] = params_of(rs, static_cast<int32_t>(pid.size()));
                pid.insert(pid.end(), rs.penalty_ids.begin(), rs.penalty_ids.end());
                pc.insert(pc.end(), rs.penalty_counts.begin(), rs.penalty_counts.end());
            }
            std::vector<float> dl = l;  // the kernel applies penalties in place
            std::vector<float> orig(pid.size() + 1);
            std::vector<cu::SampleOut> out(R, cu::SampleOut{-1, -1, NAN});
            cu::sample_rows(dl.data(), R, V, prm.data(), pid.data(), pc.data(), orig.data(),
                            out.data(), true, nullptr);
            for (int r = 0; r < R; ++r) {
                std::span<const float> row(l.data() + static_cast<size_t>(r) * V, V);
                const int32_t want = cpu[r].sample(row, hist[r]);
                ++rows;
                if (out[r].token != want) ++bad;
                EXPECT_EQ(out[r].token, want) << st.name << " rep " << rep << " row " << r;
                EXPECT_EQ(out[r].used, st.o.temperature > 0.f ? 1 : 0) << st.name;
                ze::GeneratedToken g;
                ze::token_logprobs(row, want, 0, g);
                EXPECT_NEAR(out[r].logprob, g.logprob, 1e-5) << st.name;
            }
        }
    }
    EXPECT_EQ(bad, 0) << rows << " rows";
}

TEST(SamplingEmul, NoFiniteLogitGivesTokenZeroWithoutADraw) {
    const int V = 300;
    std::vector<float> l(V, -INFINITY);
    for (int i = 0; i < V; i += 7) l[static_cast<size_t>(i)] = NAN;
    cu::SampleRowParams p;
    p.temperature = 0.9f;
    p.inv_t = 1.0f / 0.9f;
    p.uniform = 0.5;
    p.top_k = 40;
    cu::SampleOut out{-1, -1, 0.f};
    float orig[1];
    int32_t none[1] = {0};
    cu::sample_rows(l.data(), 1, V, &p, none, none, orig, &out, false, nullptr);
    EXPECT_EQ(out.token, 0);
    EXPECT_EQ(out.used, 0);
}

}  // namespace
