// tests/unit/model/attention_sinks_test.cpp — attention sinks (gpt-oss's attn_sinks): the CPU
// attention with a per-head sink logit against a float64 softmax over [scores..., sink] in which
// the sink carries no value; over one and several key chunks (canon::kAttnChunk), GQA, a sliding
// window, sinks far above and below the scores; the SIMD and scalar paths alike (the SIMD choice
// is per process; both run in CI via ZINC_SIMD=0 jobs) and independent of the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/canon.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/thread_pool.h"
#include "quant/quant.h"

namespace zc = zinc::cpu;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

struct Case {
    int n_head, n_head_kv, hd, window, pos0, n_tokens;
    float sink_mean;  // sinks ~ sink_mean + N(0, 1)
};

// Runs the CPU attention with sinks and checks every output against float64.
void check(const Case& c, int n_threads, std::vector<float>* out_keep = nullptr) {
    const int n_pos = c.pos0 + c.n_tokens;
    const int kvd = c.n_head_kv * c.hd;
    const auto kf = randn(static_cast<size_t>(n_pos) * kvd, 31);
    const auto vf = randn(static_cast<size_t>(n_pos) * kvd, 32);
    std::vector<uint16_t> k(kf.size()), v(vf.size());
    std::vector<double> kd(kf.size()), vd(vf.size());  // the f16 values the cache holds
    for (size_t i = 0; i < kf.size(); ++i) {
        k[i] = zinc::quant::fp32_to_fp16(kf[i]);
        v[i] = zinc::quant::fp32_to_fp16(vf[i]);
        kd[i] = zinc::quant::fp16_to_fp32(k[i]);
        vd[i] = zinc::quant::fp16_to_fp32(v[i]);
    }
    const auto q = randn(static_cast<size_t>(c.n_tokens) * c.n_head * c.hd, 33, 0.5f);
    auto sinks = randn(static_cast<size_t>(c.n_head), 34);
    for (auto& s : sinks) s += c.sink_mean;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    zc::ThreadPool pool(n_threads);
    std::vector<float> out(static_cast<size_t>(c.n_tokens) * c.n_head * c.hd, NAN);
    zc::AttentionParams p{c.n_head, c.n_head_kv, c.hd, c.hd, scale, c.window, sinks.data()};
    std::vector<float> scratch(zc::attention_scratch_floats(p, n_threads, n_pos));
    zc::attention(pool, p, q.data(), c.n_head * c.hd, c.n_tokens, c.pos0,
                  zc::KvView{k.data(), v.data(), kvd, kvd}, out.data(), c.n_head * c.hd,
                  scratch.data());
    for (int t = 0; t < c.n_tokens; ++t) {
        const int pos = c.pos0 + t;
        for (int h = 0; h < c.n_head; ++h) {
            const int kvh = h / (c.n_head / c.n_head_kv);
            std::vector<double> s;
            std::vector<int> js;
            for (int j = 0; j <= pos; ++j) {
                if (c.window > 0 && pos - j >= c.window) continue;
                double d = 0;
                for (int i = 0; i < c.hd; ++i)
                    d +=
                        static_cast<double>(q[(static_cast<size_t>(t) * c.n_head + h) * c.hd + i]) *
                        kd[static_cast<size_t>(j) * kvd + kvh * c.hd + i];
                s.push_back(d * scale);
                js.push_back(j);
            }
            const double sink = sinks[h];
            double mx = sink;
            for (double x : s) mx = std::max(mx, x);
            double sum = std::exp(sink - mx);  // the sink's share of the denominator
            for (double& x : s) sum += (x = std::exp(x - mx));
            double worst = 0;
            for (int i = 0; i < c.hd; ++i) {
                double o = 0;
                for (size_t a = 0; a < js.size(); ++a)
                    o += s[a] / sum * vd[static_cast<size_t>(js[a]) * kvd + kvh * c.hd + i];
                const float got = out[(static_cast<size_t>(t) * c.n_head + h) * c.hd + i];
                ASSERT_TRUE(std::isfinite(got));
                worst = std::max(worst, std::fabs(got - o));
            }
            ASSERT_LT(worst, 2e-5) << "hd " << c.hd << " window " << c.window << " pos " << pos
                                   << " head " << h << " sink " << sink;
        }
    }
    if (out_keep) *out_keep = out;
}

}  // namespace

TEST(AttentionSinks, MatchesFloat64) {
    for (const Case c : {Case{4, 4, 16, 0, 0, 5, 0.0f},       // tiny, sinks comparable to scores
                         Case{8, 2, 64, 0, 3, 4, 2.0f},       // GQA, sinks dominate short rows
                         Case{4, 1, 64, 128, 290, 6, 0.5f},   // gpt-oss's window 128, 2 chunks
                         Case{2, 1, 32, 0, 600, 3, -1.0f},    // three chunks
                         Case{4, 2, 32, 0, 0, 3, 30.0f},      // the sink takes almost all weight
                         Case{4, 2, 32, 0, 0, 3, -30.0f}}) {  // the sink takes almost none
        check(c, 1);
    }
}

TEST(AttentionSinks, ThreadCountDoesNotChangeBits) {
    const Case c{8, 2, 64, 0, 300, 5, 0.5f};
    std::vector<float> a, b;
    check(c, 1, &a);
    check(c, 3, &b);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// The sink is merged after the last chunk as canon::merge_sink defines: with a sink equal to
// the only score, a one-key row's output is v * (1 / 2) up to the canonical exp of 0 (exactly 1).
TEST(AttentionSinks, SinkEqualToTheOnlyScoreHalvesTheValue) {
    const int hd = 8;
    std::vector<uint16_t> k(hd), v(hd);
    std::vector<float> q(hd, 0.0f), out(hd, NAN);
    for (int i = 0; i < hd; ++i) {
        k[i] = zinc::quant::fp32_to_fp16(0.25f * static_cast<float>(i));
        v[i] = zinc::quant::fp32_to_fp16(static_cast<float>(i) - 3.0f);
    }
    const float sink = 0.0f;  // q = 0: the score is 0 too
    zc::ThreadPool pool(1);
    zc::AttentionParams p{1, 1, hd, hd, 1.0f, 0, &sink};
    std::vector<float> scratch(zc::attention_scratch_floats(p, 1, 1));
    zc::attention(pool, p, q.data(), hd, 1, 0, zc::KvView{k.data(), v.data(), hd, hd}, out.data(),
                  hd, scratch.data());
    ASSERT_EQ(zinc::canon::exp(0.0f), 1.0f);
    for (int i = 0; i < hd; ++i) EXPECT_EQ(out[i], (static_cast<float>(i) - 3.0f) / 2.0f) << i;
}
