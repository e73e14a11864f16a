// tests/unit/model/ops_test.cpp — CPU ops against straightforward float64 references written
// here (no shared code with src/backend/cpu beyond the function under test).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/activations.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/softmax.h"
#include "backend/cpu/thread_pool.h"
#include "quant/quant.h"

namespace zc = zinc::cpu;
using zinc::quant::GgmlType;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

double f16_round(double x) {
    return zinc::quant::fp16_to_fp32(zinc::quant::fp32_to_fp16(static_cast<float>(x)));
}

}  // namespace

TEST(Ops, RmsNormMatchesFloat64) {
    for (int64_t n : {1, 7, 64, 576, 2048}) {
        const auto x = randn(n, 1 + n, 3.0f);
        const auto w = randn(n, 2 + n);
        std::vector<float> y(n);
        zc::rms_norm(x.data(), w.data(), y.data(), n, 1e-5f);
        double ss = 0;
        for (float v : x) ss += double(v) * v;
        const double s = 1.0 / std::sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; ++i)
            EXPECT_NEAR(y[i], x[i] * s * w[i], 1e-5 * (1 + std::abs(x[i] * s * w[i])));
    }
}

TEST(Ops, RmsNormEpsDominatesZeroInput) {
    std::vector<float> x(16, 0.0f), y(16, 1.0f);
    zc::rms_norm(x.data(), nullptr, y.data(), 16, 1e-6f);
    for (float v : y) EXPECT_EQ(v, 0.0f);
}

void rope_reference(const std::vector<float>& x, int n_heads, int hd, int n_rot, int64_t pos,
                    double base, double scale, bool neox, std::vector<double>& out) {
    out.assign(x.begin(), x.end());
    for (int h = 0; h < n_heads; ++h) {
        for (int i = 0; i < n_rot / 2; ++i) {
            const double theta = scale * pos * std::pow(base, -2.0 * i / n_rot);
            const int a = neox ? i : 2 * i;
            const int b = neox ? i + n_rot / 2 : 2 * i + 1;
            const double xa = x[h * hd + a], xb = x[h * hd + b];
            out[h * hd + a] = xa * std::cos(theta) - xb * std::sin(theta);
            out[h * hd + b] = xa * std::sin(theta) + xb * std::cos(theta);
        }
    }
}

TEST(Ops, RopeNormAndNeoxMatchFloat64) {
    const int n_heads = 3, hd = 64;
    for (bool neox : {false, true}) {
        for (int n_rot : {64, 32}) {
            for (int64_t pos : {0, 1, 17, 511, 4000}) {
                auto x = randn(n_heads * hd, 7 + pos);
                zc::RopeParams p;
                p.n_rot = n_rot;
                p.mode = neox ? zc::RopeMode::Neox : zc::RopeMode::Norm;
                p.freq_base = 100000.0f;
                p.freq_scale = 1.0f;
                std::vector<float> cs(n_rot);
                zc::rope_cache(p, pos, cs.data());
                std::vector<double> ref;
                rope_reference(x, n_heads, hd, n_rot, pos, p.freq_base, 1.0, neox, ref);
                zc::rope_apply(p, cs.data(), x.data(), n_heads, hd);
                // theta = pos * base^(-2i/n) in float loses ~pos * 1e-7 rad.
                const double tol = 2e-6 * (1 + pos);
                for (int i = 0; i < n_heads * hd; ++i) {
                    ASSERT_NEAR(x[i], ref[i], tol)
                        << "neox=" << neox << " pos=" << pos << " i=" << i;
                }
            }
        }
    }
}

TEST(Ops, RopeFreqScaleAndFactors) {
    const int hd = 8;
    auto x = randn(hd, 3);
    std::vector<float> ff = {1.0f, 2.0f, 4.0f, 8.0f};
    zc::RopeParams p{hd, zc::RopeMode::Neox, 10000.0f, 0.25f, ff.data()};
    std::vector<float> cs(hd);
    zc::rope_cache(p, 100, cs.data());
    for (int i = 0; i < hd / 2; ++i) {
        const double theta = 0.25 * 100 * std::pow(10000.0, -2.0 * i / hd) / ff[i];
        EXPECT_NEAR(cs[2 * i], std::cos(theta), 1e-5);
        EXPECT_NEAR(cs[2 * i + 1], std::sin(theta), 1e-5);
    }
}

TEST(Ops, SoftmaxMatchesFloat64) {
    for (int64_t n : {1, 5, 300}) {
        auto x = randn(n, 11 + n, 10.0f);
        std::vector<double> ref(x.begin(), x.end());
        double mx = -1e300, sum = 0;
        for (double v : ref) mx = std::max(mx, v);
        for (double& v : ref) sum += (v = std::exp(v - mx));
        zc::softmax(x.data(), n);
        for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(x[i], ref[i] / sum, 1e-6);
    }
    std::vector<float> m = {0.0f, -INFINITY, 1.0f};
    zc::softmax(m.data(), 3);
    EXPECT_EQ(m[1], 0.0f);
    EXPECT_NEAR(m[0] + m[2], 1.0f, 1e-6);
}

TEST(Ops, ActivationsMatchFloat64) {
    const int64_t n = 1003;  // not a multiple of 8: SIMD body and scalar tail
    auto g = randn(n, 5, 4.0f), u = randn(n, 6);
    // Extremes: large magnitudes saturate, tiny ones are near-linear.
    const float extremes[] = {-100.0f, -30.0f, -9.0f, -1e-6f, 0.0f, 1e-6f, 9.0f, 30.0f, 100.0f};
    for (int i = 0; i < 9; ++i) g[100 + i] = extremes[i];
    std::vector<float> y(n), z(n), a(n), b(n);
    zc::swiglu(g.data(), u.data(), y.data(), n);
    zc::geglu(g.data(), u.data(), z.data(), n);
    zc::silu_rows(g.data(), a.data(), n);
    zc::gelu_tanh_rows(g.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        const double x = g[i];
        const double silu = x / (1 + std::exp(-x));
        const double gelu =
            0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        EXPECT_NEAR(a[i], silu, 1e-6 * (1e-3 + std::abs(silu))) << x;
        EXPECT_NEAR(b[i], gelu, 1e-6 * (1e-3 + std::abs(gelu))) << x;
        EXPECT_NEAR(y[i], silu * u[i], 1e-6 * (1e-3 + std::abs(silu * u[i]))) << x;
        EXPECT_NEAR(z[i], gelu * u[i], 1e-6 * (1e-3 + std::abs(gelu * u[i]))) << x;
    }
}

TEST(Ops, AddScaleSoftcap) {
    auto a = randn(33, 1), b = randn(33, 2);
    std::vector<float> y(33);
    zc::add(a.data(), b.data(), y.data(), 33);
    for (int i = 0; i < 33; ++i) EXPECT_FLOAT_EQ(y[i], a[i] + b[i]);
    zc::scale(y.data(), 2.0f, 33);
    for (int i = 0; i < 33; ++i) EXPECT_FLOAT_EQ(y[i], 2.0f * (a[i] + b[i]));
    std::vector<float> c = {100.0f, -100.0f, 0.5f};
    zc::softcap(c.data(), 30.0f, 3);
    EXPECT_NEAR(c[0], 30.0 * std::tanh(100.0 / 30.0), 1e-4);
    EXPECT_NEAR(c[1], -30.0 * std::tanh(100.0 / 30.0), 1e-4);
    EXPECT_NEAR(c[2], 30.0 * std::tanh(0.5 / 30.0), 1e-6);
}

TEST(ThreadPool, EveryPartRunsExactlyOncePerJob) {
    for (int nt : {1, 2, 3, 4}) {
        zc::ThreadPool pool(nt);
        std::vector<std::atomic<int>> hits(nt);
        for (int rep = 0; rep < 2000; ++rep) {
            for (auto& h : hits) h.store(0);
            std::atomic<int64_t> sum{0};
            pool.run([&](int ith, int nth) {
                EXPECT_EQ(nth, nt);
                hits[ith].fetch_add(1);
                // Uneven work so that parts finish at different times.
                int64_t local = 0;
                for (int i = 0; i < (ith + 1) * 50; ++i) local += i;
                sum.fetch_add(local);
            });
            int64_t want = 0;
            for (int i = 0; i < nt; ++i) {
                ASSERT_EQ(hits[i].load(), 1) << "part " << i << " of " << nt << " rep " << rep;
                for (int j = 0; j < (i + 1) * 50; ++j) want += j;
            }
            ASSERT_EQ(sum.load(), want);
        }
    }
}

TEST(ThreadPool, JobsCompleteWhenWorkersAreBusyOrAsleep) {
    // More pools than cores: workers are often descheduled, so the caller must take their parts.
    std::vector<std::unique_ptr<zc::ThreadPool>> pools;
    for (int i = 0; i < 3; ++i) pools.push_back(std::make_unique<zc::ThreadPool>(4));
    std::vector<std::thread> callers;
    std::atomic<int> done{0};
    for (auto& p : pools) {
        callers.emplace_back([&, pp = p.get()] {
            for (int rep = 0; rep < 300; ++rep) {
                std::atomic<int> n{0};
                pp->run([&](int, int) { n.fetch_add(1); });
                if (n.load() != 4) return;
            }
            done.fetch_add(1);
        });
    }
    for (auto& t : callers) t.join();
    EXPECT_EQ(done.load(), 3);
}

TEST(ThreadPool, SplitRangeCoversExactly) {
    for (int64_t n : {0, 1, 5, 100}) {
        for (int nth : {1, 2, 3, 7}) {
            int64_t expect = 0;
            for (int i = 0; i < nth; ++i) {
                const zc::Range r = zc::split_range(n, i, nth);
                EXPECT_EQ(r.begin, expect);
                expect = r.end;
            }
            EXPECT_EQ(expect, n);
        }
    }
}

// Attention reference: f64 softmax(q.k * scale) v over f16-rounded K/V (the cache format).
TEST(Ops, AttentionCausalGqaWindowMatchesFloat64) {
    struct Case {
        int n_head, n_head_kv, hd, window, pos0, n_tokens;
    };
    for (const Case c : {Case{4, 4, 16, 0, 0, 5}, Case{9, 3, 64, 0, 3, 4}, Case{4, 1, 256, 3, 0, 8},
                         Case{4, 2, 32, 5, 10, 1}, Case{2, 1, 8, 1, 4, 3}, Case{2, 1, 520, 0, 2, 3},
                         Case{9, 1, 64, 0, 1, 3}, Case{6, 2, 12, 2, 0, 7}}) {
        const int n_pos = c.pos0 + c.n_tokens;
        const int kvd = c.n_head_kv * c.hd;
        const auto kf = randn(static_cast<size_t>(n_pos) * kvd, 21);
        const auto vf = randn(static_cast<size_t>(n_pos) * kvd, 22);
        std::vector<uint16_t> k(kf.size()), v(vf.size());
        for (size_t i = 0; i < kf.size(); ++i) k[i] = zinc::quant::fp32_to_fp16(kf[i]);
        for (size_t i = 0; i < vf.size(); ++i) v[i] = zinc::quant::fp32_to_fp16(vf[i]);
        const auto q = randn(static_cast<size_t>(c.n_tokens) * c.n_head * c.hd, 23);
        for (int nt : {1, 2}) {
            zc::ThreadPool pool(nt);
            std::vector<float> out(static_cast<size_t>(c.n_tokens) * c.n_head * c.hd);
            zc::AttentionParams p{c.n_head, c.n_head_kv, c.hd, c.hd, 1.0f / std::sqrt(float(c.hd)),
                                  c.window};
            std::vector<float> scores(zc::attention_scratch_floats(p, nt, n_pos));
            zc::attention(pool, p, q.data(), c.n_head * c.hd, c.n_tokens, c.pos0,
                          zc::KvView{k.data(), v.data(), kvd, kvd}, out.data(), c.n_head * c.hd,
                          scores.data());
            for (int t = 0; t < c.n_tokens; ++t) {
                for (int h = 0; h < c.n_head; ++h) {
                    const int kvh = h / (c.n_head / c.n_head_kv);
                    const int pos = c.pos0 + t;
                    std::vector<double> s;
                    std::vector<int> js;
                    for (int j = 0; j <= pos; ++j) {
                        if (c.window > 0 && pos - j >= c.window) continue;
                        double d = 0;
                        for (int i = 0; i < c.hd; ++i) {
                            d += double(q[(t * c.n_head + h) * c.hd + i]) *
                                 f16_round(kf[j * kvd + kvh * c.hd + i]);
                        }
                        s.push_back(d / std::sqrt(double(c.hd)));
                        js.push_back(j);
                    }
                    double mx = -1e300, sum = 0;
                    for (double x : s) mx = std::max(mx, x);
                    for (double& x : s) sum += (x = std::exp(x - mx));
                    for (int i = 0; i < c.hd; ++i) {
                        double o = 0;
                        for (size_t a = 0; a < js.size(); ++a) {
                            o += s[a] / sum * f16_round(vf[js[a] * kvd + kvh * c.hd + i]);
                        }
                        ASSERT_NEAR(out[(t * c.n_head + h) * c.hd + i], o, 1e-4)
                            << "case hd=" << c.hd << " window=" << c.window << " t=" << t
                            << " h=" << h;
                    }
                }
            }
        }
    }
}

// Matmul reference: f64 dot of the dequantized weight row with the f32 activations. The CPU path
// packs activations to Q8_0/Q8_1/Q8_K, whose rounding bounds the difference (relative to the
// magnitude of |w| . |x|).
class MatmulTypes : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulTypes, MatchesFloat64OfDequantizedWeights) {
    const GgmlType t = GetParam();
    const int64_t k = 512, m = 67;
    const auto wf = randn(static_cast<size_t>(k * m), 31, 0.5f);
    const size_t rb = zinc::quant::row_size(t, k);
    std::vector<uint8_t> wq(rb * m);
    for (int64_t r = 0; r < m; ++r)
        zinc::quant::quantize_row(t, wf.data() + r * k, wq.data() + r * rb, k);
    std::vector<float> wd(static_cast<size_t>(k * m));
    for (int64_t r = 0; r < m; ++r)
        zinc::quant::dequantize_row(t, wq.data() + r * rb, wd.data() + r * k, k);
    const zc::MatView w{t, k, m, wq.data(), rb};
    const auto bias = randn(m, 33);
    for (int n_tokens : {1, 3, 17}) {
        for (int nt : {1, 2}) {
            zc::ThreadPool pool(nt);
            zc::MatmulScratch scratch;
            const auto x = randn(static_cast<size_t>(k) * n_tokens, 32 + n_tokens);
            std::vector<float> y(static_cast<size_t>(n_tokens) * (m + 5), -7.0f);
            zc::matmul(pool, scratch, w, x.data(), n_tokens, k, y.data(), m + 5, bias.data());
            const bool exact_acts = zinc::quant::type_traits(t).vec_dot_type == GgmlType::F32;
            for (int tk = 0; tk < n_tokens; ++tk) {
                for (int64_t r = 0; r < m; ++r) {
                    double ref = bias[r], mag = 0;
                    for (int64_t i = 0; i < k; ++i) {
                        ref += double(wd[r * k + i]) * x[tk * k + i];
                        mag += std::abs(double(wd[r * k + i]) * x[tk * k + i]);
                    }
                    const double tol = (exact_acts ? 1e-5 : 1.5e-2) * mag + 1e-4;
                    ASSERT_NEAR(y[tk * (m + 5) + r], ref, tol)
                        << zinc::quant::type_name(t) << " token " << tk << " row " << r;
                }
                for (int64_t r = m; r < m + 5; ++r) ASSERT_EQ(y[tk * (m + 5) + r], -7.0f);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    AllWeightTypes, MatmulTypes,
    ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                      GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,
                      GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K),
    [](const auto& info) { return std::string(zinc::quant::type_name(info.param)); });

TEST(Ops, MatmulGroupSharesPackingAcrossTypes) {
    // Q/K/V style: three weights of different vec_dot types on the same activations.
    const int64_t k = 256;
    const auto x = randn(k * 4, 41);
    std::vector<std::vector<uint8_t>> store;
    std::vector<zc::MatView> views;
    std::vector<std::vector<float>> deq;
    const GgmlType types[3] = {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16};
    const int64_t rows[3] = {32, 16, 8};
    for (int j = 0; j < 3; ++j) {
        const auto wf = randn(k * rows[j], 50 + j, 0.3f);
        const size_t rb = zinc::quant::row_size(types[j], k);
        store.emplace_back(rb * rows[j]);
        deq.emplace_back(k * rows[j]);
        for (int64_t r = 0; r < rows[j]; ++r) {
            zinc::quant::quantize_row(types[j], wf.data() + r * k, store[j].data() + r * rb, k);
            zinc::quant::dequantize_row(types[j], store[j].data() + r * rb, deq[j].data() + r * k,
                                        k);
        }
        views.push_back({types[j], k, rows[j], store[j].data(), rb});
    }
    std::vector<std::vector<float>> ys(3);
    std::vector<zc::MatmulJob> jobs;
    for (int j = 0; j < 3; ++j) {
        ys[j].resize(4 * rows[j]);
        jobs.push_back({&views[j], ys[j].data(), rows[j], nullptr});
    }
    zc::ThreadPool pool(2);
    zc::MatmulScratch scratch;
    zc::matmul(pool, scratch, jobs, x.data(), 4, k);
    for (int j = 0; j < 3; ++j) {
        for (int t = 0; t < 4; ++t) {
            for (int64_t r = 0; r < rows[j]; ++r) {
                double ref = 0, mag = 0;
                for (int64_t i = 0; i < k; ++i) {
                    ref += double(deq[j][r * k + i]) * x[t * k + i];
                    mag += std::abs(double(deq[j][r * k + i]) * x[t * k + i]);
                }
                ASSERT_NEAR(ys[j][t * rows[j] + r], ref, 1.5e-2 * mag + 1e-4);
            }
        }
    }
}

TEST(Ops, GetRowsDequantizesAndScales) {
    const int64_t k = 64, m = 10;
    const auto wf = randn(k * m, 61);
    const size_t rb = zinc::quant::row_size(GgmlType::Q8_0, k);
    std::vector<uint8_t> wq(rb * m);
    for (int64_t r = 0; r < m; ++r)
        zinc::quant::quantize_row(GgmlType::Q8_0, wf.data() + r * k, wq.data() + r * rb, k);
    const zc::MatView w{GgmlType::Q8_0, k, m, wq.data(), rb};
    const int32_t ids[3] = {9, 0, 4};
    std::vector<float> out(3 * k);
    zc::get_rows(w, ids, 3, out.data(), 2.0f);
    for (int t = 0; t < 3; ++t) {
        for (int64_t i = 0; i < k; ++i) {
            // Q8_0 keeps each value within half a step (absmax/127/2) of the original.
            float amax = 0;
            for (int64_t j = (i / 32) * 32; j < (i / 32 + 1) * 32; ++j)
                amax = std::max(amax, std::abs(wf[ids[t] * k + j]));
            EXPECT_NEAR(out[t * k + i], 2.0f * wf[ids[t] * k + i],
                        2.0f * (amax / 127.0f * 0.5f + 1e-3f));
        }
    }
}

TEST(Ops, MatmulMultiAndPlainPathsAreBitIdentical) {
    const int64_t k = 512, m = 40;
    const int n_tokens = 13;
    for (GgmlType t :
         {GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16}) {
        const auto wf = randn(static_cast<size_t>(k * m), 71, 0.5f);
        const size_t rb = zinc::quant::row_size(t, k);
        std::vector<uint8_t> wq(rb * m);
        for (int64_t r = 0; r < m; ++r)
            zinc::quant::quantize_row(t, wf.data() + r * k, wq.data() + r * rb, k);
        const zc::MatView w{t, k, m, wq.data(), rb};
        const auto x = randn(static_cast<size_t>(k) * n_tokens, 72);
        zc::ThreadPool pool(2);
        std::vector<float> y_multi(n_tokens * m), y_plain(n_tokens * m);
        {
            zc::MatmulScratch s;
            ASSERT_TRUE(s.use_multi());
            zc::matmul(pool, s, w, x.data(), n_tokens, k, y_multi.data(), m);
        }
        for (int tk = 0; tk < n_tokens; ++tk) {
            // One token at a time always takes the plain vec_dot path.
            zc::MatmulScratch s;
            zc::matmul(pool, s, w, x.data() + tk * k, 1, k, y_plain.data() + tk * m, m);
        }
        ASSERT_EQ(y_multi, y_plain) << zinc::quant::type_name(t);
    }
}
