// tests/unit/model/rope_yarn_test.cpp — YaRN RoPE (gpt-oss: factor 32, original context 4096,
// beta_fast 32, beta_slow 1): cpu::rope_cache against a float64 evaluation of the formulas of
// llama.cpp's ggml_rope_yarn_corr_dims and rope_yarn (ggml-cpu/ops.cpp), and the plain table is
// unchanged by the new fields when YaRN is off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "backend/cpu/rope.h"

namespace zc = zinc::cpu;

namespace {

struct Ref {
    double lo, hi, mscale;
};

// ggml_rope_yarn_corr_dims and rope_yarn's mscale, in float64.
Ref yarn_ref(const zc::RopeParams& p) {
    auto corr = [&](double b) {
        return p.n_rot * std::log(p.n_ctx_orig / (b * 2 * std::numbers::pi)) /
               (2 * std::log(static_cast<double>(p.freq_base)));
    };
    Ref r;
    r.lo = std::max(0.0, std::floor(corr(p.beta_fast)));
    r.hi = std::min(static_cast<double>(p.n_rot - 1), std::ceil(corr(p.beta_slow)));
    r.mscale = p.ext_factor != 0.0f
                   ? p.attn_factor * (1 + 0.1 * std::log(1.0 / static_cast<double>(p.freq_scale)))
                   : p.attn_factor;
    return r;
}

// cos/sin of pair i at position pos, float64.
void ref_pair(const zc::RopeParams& p, const Ref& r, int64_t pos, int i, double& c, double& s) {
    const double extrap =
        static_cast<double>(pos) * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
    double t = p.freq_scale * extrap;
    if (p.ext_factor != 0.0f) {
        const double y = (i - r.lo) / std::max(0.001, r.hi - r.lo);
        const double mix = (1 - std::min(1.0, std::max(0.0, y))) * p.ext_factor;
        t = t * (1 - mix) + extrap * mix;
    }
    c = std::cos(t) * r.mscale;
    s = std::sin(t) * r.mscale;
}

zc::RopeParams gpt_oss() {
    zc::RopeParams p;
    p.n_rot = 64;
    p.mode = zc::RopeMode::Neox;
    p.freq_base = 150000.0f;
    p.freq_scale = 1.0f / 32.0f;
    p.ext_factor = 1.0f;
    // llama.cpp's cparams.yarn_attn_factor for factor 32 (config.cpp read_yarn): (0.1 ln 32 + 1)
    // times 1 / (1 + 0.1 ln 32), i.e. 1 up to rounding; rope_yarn then applies 1 + 0.1 ln 32.
    const float f = 32.0f;
    p.attn_factor = (0.1f * std::log(f) + 1.0f) * (1.0f / (1.0f + 0.1f * std::log(f)));
    p.beta_fast = 32.0f;
    p.beta_slow = 1.0f;
    p.n_ctx_orig = 4096;
    return p;
}

}  // namespace

TEST(RopeYarn, CorrectionDimsOfGptOss) {
    const zc::RopeParams p = gpt_oss();
    float d[2];
    zc::rope_yarn_corr_dims(p, d);
    // 64 ln(4096 / (2 pi 32)) / (2 ln 150000) = 8.09..., 64 ln(4096 / (2 pi)) / (2 ln 150000) =
    // 17.39...
    EXPECT_EQ(d[0], 8.0f);
    EXPECT_EQ(d[1], 18.0f);
    const Ref r = yarn_ref(p);
    EXPECT_EQ(r.lo, 8.0);
    EXPECT_EQ(r.hi, 18.0);
}

TEST(RopeYarn, TableMatchesFloat64Formulas) {
    for (const zc::RopeParams& base :
         {gpt_oss(), [] {
              zc::RopeParams p = gpt_oss();  // another shape: ramp over more pairs, no cap at n-1
              p.n_rot = 128;
              p.freq_base = 10000.0f;
              p.freq_scale = 0.25f;
              p.n_ctx_orig = 2048;
              p.attn_factor = 0.9f;
              return p;
          }()}) {
        const Ref r = yarn_ref(base);
        std::vector<float> cs(base.n_rot);
        double worst = 0;
        for (int64_t pos : {0, 1, 7, 100, 1000, 4095, 4096, 20000, 131071}) {
            zc::rope_cache(base, pos, cs.data());
            for (int i = 0; i < base.n_rot / 2; ++i) {
                double c, s;
                ref_pair(base, r, pos, i, c, s);
                // float theta: pos * base^(-2i/n) by repeated multiplication, |rel err| <= ~i ulp
                const double tol = 1e-6 + 2e-7 * (i + 1) * static_cast<double>(pos) * r.mscale;
                ASSERT_NEAR(cs[2 * i], c, tol) << "pos " << pos << " pair " << i;
                ASSERT_NEAR(cs[2 * i + 1], s, tol) << "pos " << pos << " pair " << i;
                worst = std::max({worst, std::fabs(cs[2 * i] - c), std::fabs(cs[2 * i + 1] - s)});
            }
        }
        EXPECT_LT(worst, 0.05);
        // mscale really is applied: |(cos, sin)| = mscale > 1 for factor > 1
        zc::rope_cache(base, 3, cs.data());
        EXPECT_NEAR(std::hypot(cs[0], cs[1]), r.mscale, 1e-6);
        EXPECT_GT(r.mscale, base.attn_factor * 1.1);  // 1 + 0.1 ln(factor) >= 1.13 here
    }
}

// The ramp: pairs below lo keep the original angle (extrapolation), pairs above hi take the
// interpolated one (freq_scale * theta).
TEST(RopeYarn, RampEnds) {
    const zc::RopeParams p = gpt_oss();
    const Ref r = yarn_ref(p);
    std::vector<float> cs(p.n_rot);
    const int64_t pos = 5;
    zc::rope_cache(p, pos, cs.data());
    const double theta0 = pos;  // pair 0: ramp 1, the original angle
    EXPECT_NEAR(cs[0], std::cos(theta0) * r.mscale, 1e-6);
    const int i = 25;  // above hi = 18 (of 32 pairs): fully interpolated
    const double t = p.freq_scale * pos * std::pow(150000.0, -2.0 * i / 64);
    EXPECT_NEAR(cs[2 * i + 1], std::sin(t) * r.mscale, 1e-6);
}

TEST(RopeYarn, OffLeavesThePlainTable) {
    zc::RopeParams p;
    p.n_rot = 64;
    p.freq_base = 500000.0f;
    p.freq_scale = 0.5f;
    std::vector<float> cs(64);
    zc::rope_cache(p, 1234, cs.data());
    float theta = 1234.0f;
    const float ts = std::pow(p.freq_base, -2.0f / 64.0f);
    for (int i = 0; i < 32; ++i) {
        EXPECT_EQ(cs[2 * i], std::cos(p.freq_scale * theta)) << i;
        EXPECT_EQ(cs[2 * i + 1], std::sin(p.freq_scale * theta)) << i;
        theta *= ts;
    }
}
