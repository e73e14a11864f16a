// tests/unit/model/encoder_ops_test.cpp — the BERT ops of the CPU tier (LayerNorm, erf GELU,
// bidirectional attention) and embedding pooling against float64 references written here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/activations.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/thread_pool.h"
#include "model/pooling.h"
#include "quant/quant.h"

namespace zc = zinc::cpu;
using zinc::model::Pooling;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f, float mean = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

double f16_round(double x) {
    return zinc::quant::fp16_to_fp32(zinc::quant::fp32_to_fp16(static_cast<float>(x)));
}

}  // namespace

TEST(EncoderOps, LayerNormMatchesFloat64) {
    for (int64_t n : {1, 7, 384, 1536}) {
        // An offset mean and a large spread: the mean must really be subtracted.
        const auto x = randn(n, 3 + n, 4.0f, 20.0f);
        const auto w = randn(n, 4 + n);
        const auto b = randn(n, 5 + n);
        std::vector<float> y(n);
        zc::layer_norm(x.data(), w.data(), b.data(), y.data(), n, 1e-12f);
        double mean = 0, var = 0;
        for (float v : x) mean += v;
        mean /= n;
        for (float v : x) var += (v - mean) * (v - mean);
        var /= n;
        for (int64_t i = 0; i < n; ++i) {
            const double ref = n == 1 ? b[i] : (x[i] - mean) / std::sqrt(var + 1e-12) * w[i] + b[i];
            EXPECT_NEAR(y[i], ref, 1e-5 * (1 + std::abs(ref))) << "n=" << n << " i=" << i;
        }
    }
    // In place, no weight or bias: zero mean, unit variance.
    auto x = randn(64, 9, 2.0f, -3.0f);
    zc::layer_norm(x.data(), nullptr, nullptr, x.data(), 64, 1e-5f);
    double m = 0, v = 0;
    for (float a : x) m += a;
    for (float a : x) v += (a - m / 64) * (a - m / 64);
    EXPECT_NEAR(m / 64, 0.0, 1e-6);
    EXPECT_NEAR(v / 64, 1.0, 1e-4);
}

TEST(EncoderOps, GeluErfMatchesFloat64) {
    std::vector<float> x;
    for (int i = -800; i <= 800; ++i) x.push_back(i / 100.0f);
    std::vector<float> y(x.size());
    zc::gelu_erf_rows(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        const double ref = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
        EXPECT_NEAR(y[i], ref, 2e-6 * (1 + std::abs(ref))) << x[i];
    }
    // Not the tanh approximation: they differ by ~1e-4 around |x| = 2.
    EXPECT_GT(std::abs(y[1000] - zc::gelu_tanh(x[1000])), 1e-5);
}

TEST(EncoderOps, BidirectionalAttentionSeesEveryPositionOfItsSequence) {
    // Two sequences in one paged call (blocks of 4), GQA 4 -> 2; every row attends to all of its
    // own sequence's positions (also the later ones), never to the other sequence's.
    const int n_head = 4, n_head_kv = 2, hd = 8, kvd = n_head_kv * hd, bs = 4;
    const int len[2] = {6, 3};
    const int n_rows = len[0] + len[1];
    const int32_t table0[2] = {1, 3}, table1[1] = {0};  // physical blocks of each sequence
    const int n_phys = 4 * bs;
    const auto kf = randn(static_cast<size_t>(n_phys) * kvd, 31);
    const auto vf = randn(static_cast<size_t>(n_phys) * kvd, 32);
    std::vector<uint16_t> k(kf.size()), v(vf.size());
    for (size_t i = 0; i < kf.size(); ++i) k[i] = zinc::quant::fp32_to_fp16(kf[i]);
    for (size_t i = 0; i < vf.size(); ++i) v[i] = zinc::quant::fp32_to_fp16(vf[i]);
    const auto q = randn(static_cast<size_t>(n_rows) * n_head * hd, 33);
    const zc::AttentionSeq seqs[2] = {{0, len[0], 0, table0}, {len[0], len[1], 0, table1}};
    for (int nt : {1, 2}) {
        zc::ThreadPool pool(nt);
        zc::AttentionParams p{n_head,          n_head_kv, hd, hd, 1.0f / std::sqrt(float(hd)), 0,
                              nullptr,
                              /*causal=*/false};
        std::vector<float> scores(zc::attention_scratch_floats(p, nt, 8));
        std::vector<float> out(static_cast<size_t>(n_rows) * n_head * hd);
        zc::paged_attention(pool, p, q.data(), n_head * hd, seqs,
                            zc::PagedKvView{k.data(), v.data(), kvd, kvd, bs}, out.data(),
                            n_head * hd, scores.data());
        for (int s = 0; s < 2; ++s) {
            const int32_t* table = s == 0 ? table0 : table1;
            for (int t = 0; t < len[s]; ++t) {
                const int r = seqs[s].row0 + t;
                for (int h = 0; h < n_head; ++h) {
                    const int kvh = h / (n_head / n_head_kv);
                    std::vector<double> w(len[s]);
                    double mx = -1e300, sum = 0;
                    for (int j = 0; j < len[s]; ++j) {
                        const int phys = table[j / bs] * bs + j % bs;
                        double d = 0;
                        for (int i = 0; i < hd; ++i)
                            d += double(q[(r * n_head + h) * hd + i]) *
                                 f16_round(kf[phys * kvd + kvh * hd + i]);
                        w[j] = d / std::sqrt(double(hd));
                        mx = std::max(mx, w[j]);
                    }
                    for (double& x : w) sum += (x = std::exp(x - mx));
                    for (int i = 0; i < hd; ++i) {
                        double o = 0;
                        for (int j = 0; j < len[s]; ++j) {
                            const int phys = table[j / bs] * bs + j % bs;
                            o += w[j] / sum * f16_round(vf[phys * kvd + kvh * hd + i]);
                        }
                        ASSERT_NEAR(out[(r * n_head + h) * hd + i], o, 1e-4)
                            << "seq " << s << " t=" << t << " h=" << h << " threads " << nt;
                    }
                }
            }
        }
    }
}

TEST(Pooling, MeanClsLastNormalised) {
    // rows (3, 2): mean (3, 4) -> (0.6, 0.8); cls (1, 0); last (0, -2) -> (0, -1).
    const std::vector<float> rows = {1, 0, 8, 14, 0, -2};
    const auto mean = zinc::model::pool_normalized(rows.data(), 3, 2, Pooling::Mean);
    EXPECT_FLOAT_EQ(mean[0], 0.6f);
    EXPECT_FLOAT_EQ(mean[1], 0.8f);
    const auto cls = zinc::model::pool_normalized(rows.data(), 3, 2, Pooling::Cls);
    EXPECT_FLOAT_EQ(cls[0], 1.0f);
    EXPECT_FLOAT_EQ(cls[1], 0.0f);
    const auto last = zinc::model::pool_normalized(rows.data(), 3, 2, Pooling::Last);
    EXPECT_FLOAT_EQ(last[0], 0.0f);
    EXPECT_FLOAT_EQ(last[1], -1.0f);
    const std::vector<float> zero(4, 0.0f);  // a zero vector stays zero (no NaN)
    for (float x : zinc::model::pool_normalized(zero.data(), 2, 2, Pooling::Mean))
        EXPECT_EQ(x, 0.0f);
}

TEST(Pooling, NamesAndGgufValues) {
    EXPECT_EQ(zinc::model::parse_pooling("mean"), Pooling::Mean);
    EXPECT_EQ(zinc::model::parse_pooling("cls"), Pooling::Cls);
    EXPECT_EQ(zinc::model::parse_pooling("last"), Pooling::Last);
    EXPECT_FALSE(zinc::model::parse_pooling("max").has_value());
    EXPECT_EQ(zinc::model::pooling_from_gguf(1), Pooling::Mean);
    EXPECT_EQ(zinc::model::pooling_from_gguf(3), Pooling::Last);
    EXPECT_FALSE(zinc::model::pooling_from_gguf(0).has_value());
    EXPECT_FALSE(zinc::model::pooling_from_gguf(-1).has_value());
    EXPECT_STREQ(zinc::model::pooling_name(Pooling::Cls), "cls");
}
