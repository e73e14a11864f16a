// tests/unit/model/matmul_tiled_test.cpp — the CPU matmul's prefill path through
// quant::gemm_tile (register tiles) gives bit for bit the results of one vec_dot per (row,
// token), with biases, padded output rows, token counts and row counts that are not multiples
// of the tile, several jobs of mixed types in one call, and 1 or 2 threads; and
// ZINC_MATMUL_TILED=0 switches the tiles off.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cpu/matmul.h"
#include "quant/quant.h"

namespace zc = zinc::cpu;
using zinc::quant::GgmlType;

namespace {

std::vector<float> randn(size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

struct Weight {
    std::vector<uint8_t> q;
    zc::MatView view;
};

Weight make_weight(GgmlType t, int64_t k, int64_t m, unsigned seed) {
    Weight w;
    const auto wf = randn(static_cast<size_t>(k * m), seed, 0.5f);
    const size_t rb = zinc::quant::row_size(t, k);
    w.q.resize(rb * static_cast<size_t>(m));
    for (int64_t r = 0; r < m; ++r) {
        zinc::quant::quantize_row(t, wf.data() + r * k, w.q.data() + r * rb, k);
    }
    w.view = zc::MatView{t, k, m, w.q.data(), rb};
    return w;
}

TEST(MatmulTiled, BitIdenticalToOneVecDotPerRowAndToken) {
    const int64_t k = 288;  // 9 blocks of 32: odd, so both parity passes and the tail run
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_1,
                       GgmlType::Q5_1, GgmlType::F32}) {
        for (int64_t m : {1, 7, 67}) {
            for (int n_tokens : {2, 5, 33, 70}) {
                for (int threads : {1, 2}) {
                    const Weight w = make_weight(t, k, m, 91);
                    const auto x = randn(static_cast<size_t>(k) * n_tokens, 92);
                    const auto bias = randn(static_cast<size_t>(m), 93);
                    const int64_t ldy = m + 3;
                    zc::ThreadPool pool(threads);
                    std::vector<float> y_tiled(static_cast<size_t>(n_tokens * ldy), 5.0f);
                    std::vector<float> y_plain(y_tiled);
                    zc::MatmulScratch s;
                    ASSERT_TRUE(s.use_tiled());
                    zc::matmul(pool, s, w.view, x.data(), n_tokens, k, y_tiled.data(), ldy,
                               bias.data());
                    for (int tk = 0; tk < n_tokens; ++tk) {  // one token: plain vec_dot path
                        zc::MatmulScratch s1;
                        zc::matmul(pool, s1, w.view, x.data() + tk * k, 1, k,
                                   y_plain.data() + tk * ldy, ldy, bias.data());
                    }
                    ASSERT_EQ(y_tiled, y_plain) << zinc::quant::type_name(t) << " m=" << m
                                                << " tokens=" << n_tokens << " threads=" << threads;
                }
            }
        }
    }
}

TEST(MatmulTiled, GroupOfMixedTypes) {
    const int64_t k = 256;
    const Weight a = make_weight(GgmlType::Q5_0, k, 37, 1);
    const Weight b = make_weight(GgmlType::Q4_K, k, 21, 2);
    const Weight c = make_weight(GgmlType::Q8_0, k, 64, 3);
    const int n_tokens = 19;
    const auto x = randn(static_cast<size_t>(k) * n_tokens, 4);
    std::vector<float> ya(37 * n_tokens), yb(21 * n_tokens), yc(64 * n_tokens);
    const zc::MatmulJob jobs[] = {{&a.view, ya.data(), 37, nullptr},
                                  {&b.view, yb.data(), 21, nullptr},
                                  {&c.view, yc.data(), 64, nullptr}};
    zc::ThreadPool pool(2);
    zc::MatmulScratch s;
    zc::matmul(pool, s, jobs, x.data(), n_tokens, k);
    for (const auto& [wt, y] : {std::pair{&a, &ya}, std::pair{&b, &yb}, std::pair{&c, &yc}}) {
        const int64_t m = wt->view.n_rows;
        std::vector<float> want(static_cast<size_t>(m * n_tokens));
        for (int tk = 0; tk < n_tokens; ++tk) {
            zc::MatmulScratch s1;
            zc::matmul(pool, s1, wt->view, x.data() + tk * k, 1, k, want.data() + tk * m, m);
        }
        ASSERT_EQ(*y, want) << zinc::quant::type_name(wt->view.type);
    }
}

TEST(MatmulTiled, EnvOptOut) {
    ::setenv("ZINC_MATMUL_TILED", "0", 1);
    const zc::MatmulScratch off;
    ::unsetenv("ZINC_MATMUL_TILED");
    const zc::MatmulScratch on;
    EXPECT_FALSE(off.use_tiled());
    EXPECT_TRUE(off.use_multi());
    EXPECT_TRUE(on.use_tiled());
}

}  // namespace
