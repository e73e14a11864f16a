// tests/unit/model/canon_test.cpp — the canonical arithmetic (backend/canon.h): accuracy against
// libm / float64, and the CPU tier's SIMD paths equal to it bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/canon.h"
#include "backend/cpu/activations.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/norm.h"

namespace zc = zinc::canon;

TEST(Canon, ExpIsAccurate) {
    double worst = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.01371f) {
        const double ref = std::exp(static_cast<double>(x));
        worst = std::max(worst, std::fabs(zc::exp(x) - ref) / ref);
    }
    EXPECT_LT(worst, 5e-7);
    EXPECT_EQ(zc::exp(0.0f), 1.0f);
}

TEST(Canon, TanhAndSoftcapAreAccurate) {
    double worst = 0;
    for (float y = -12.0f; y <= 12.0f; y += 0.000731f) {
        const double ref = std::tanh(static_cast<double>(y));
        const double err = std::fabs(zc::tanh(y) - ref) / std::max(std::fabs(ref), 1e-30);
        worst = std::max(worst, err);
    }
    EXPECT_LT(worst, 2e-6);
    EXPECT_EQ(zc::tanh(0.0f), 0.0f);
    EXPECT_EQ(zc::tanh(40.0f), 1.0f);
    EXPECT_EQ(zc::tanh(-40.0f), -1.0f);
    EXPECT_NEAR(zc::softcap(100.0f, 30.0f), 30.0 * std::tanh(100.0 / 30.0), 1e-4);
}

TEST(Canon, CpuSoftcapIsTheCanonicalOne) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 20.0f);
    std::vector<float> x(4099), y;
    for (float& v : x) v = nd(rng);
    y = x;
    zinc::cpu::softcap(y.data(), 30.0f, static_cast<int64_t>(y.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        const float c = zc::softcap(x[i], 30.0f);
        ASSERT_EQ(std::memcmp(&c, &y[i], sizeof c), 0) << i;
    }
}

// The AVX2 GLU paths (8 lanes at a time, scalar tails) equal canon:: element by element.
TEST(Canon, GluSimdEqualsScalarBitwise) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const int n = 1003;  // a tail of 3 after the 8-wide body
    std::vector<float> g(n), u(n), ys(n), yg(n);
    for (int i = 0; i < n; ++i) {
        g[i] = nd(rng);
        u[i] = nd(rng);
    }
    g[0] = 90.0f;
    g[1] = -90.0f;
    g[2] = 0.0f;
    zinc::cpu::swiglu(g.data(), u.data(), ys.data(), n);
    zinc::cpu::geglu(g.data(), u.data(), yg.data(), n);
    for (int i = 0; i < n; ++i) {
        const float s = zc::mul(zc::silu(g[i]), u[i]);
        const float e = zc::mul(zc::gelu_tanh(g[i]), u[i]);
        ASSERT_EQ(std::memcmp(&s, &ys[i], sizeof s), 0) << "swiglu " << i;
        ASSERT_EQ(std::memcmp(&e, &yg[i], sizeof e), 0) << "geglu " << i;
    }
}

TEST(Canon, RmsScaleMatchesFloat64) {
    std::mt19937 rng(9);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    for (int n : {64, 576, 4096, 4099}) {
        std::vector<float> x(n);
        double ss = 0;
        for (float& v : x) {
            v = nd(rng);
            ss += static_cast<double>(v) * v;
        }
        const double ref = 1.0 / std::sqrt(ss / n + 1e-6);
        EXPECT_NEAR(zc::rms_scale(x.data(), n, 1e-6f), ref, 2e-6 * ref) << n;
    }
}
