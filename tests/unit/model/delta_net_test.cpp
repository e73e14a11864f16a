// tests/unit/model/delta_net_test.cpp — the Gated DeltaNet CPU kernels (backend/cpu/delta_net.h)
// against float64 references of the same formulas written here (model/ir.h SsmConvP /
// DeltaNetP): the causal conv1d with its rolling state, the gated delta rule with the head
// repeat, L2 norms and gates, the gated RMSNorm, the Q/gate split and the sigmoid gate; and the
// state carried across calls (one call of n tokens == the same tokens split over calls).
#include "backend/cpu/delta_net.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/ir.h"
#include "quant/types.h"

namespace zc = zinc::cpu;
namespace zm = zinc::model;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f, float mean = 0.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

double silu(double x) {
    return x / (1.0 + std::exp(-x));
}

zm::Weight f32_weight(const std::vector<float>& v) {
    zm::Weight w;
    w.type = zinc::quant::GgmlType::F32;
    w.n_dims = 1;
    w.ne[0] = static_cast<int64_t>(v.size());
    w.n_rows = 1;
    w.data = reinterpret_cast<const uint8_t*>(v.data());
    w.row_bytes = v.size() * sizeof(float);
    return w;
}

}  // namespace

TEST(DeltaNet, SsmConvMatchesFloat64WithState) {
    const int d_conv = 4, n_t = 9;
    const int64_t ch = 13;
    const auto x = randn(n_t * ch, 1);
    const auto w = randn(ch * d_conv, 2, 0.5f);
    const auto st0 = randn(ch * (d_conv - 1), 3);
    // reference: the d_conv - 1 state inputs, then the rows, convolved causally
    std::vector<double> ref(n_t * ch);
    for (int64_t c = 0; c < ch; ++c) {
        std::vector<double> seq;
        for (int i = 0; i < d_conv - 1; ++i) seq.push_back(st0[c * (d_conv - 1) + i]);
        for (int t = 0; t < n_t; ++t) seq.push_back(x[t * ch + c]);
        for (int t = 0; t < n_t; ++t) {
            double s = 0;
            for (int k = 0; k < d_conv; ++k) s += seq[t + k] * w[c * d_conv + k];
            ref[t * ch + c] = silu(s);
        }
    }
    // whole, and split 4 + 5 over two calls (the state carries the window)
    for (int split : {n_t, 4}) {
        std::vector<float> st = st0, y(n_t * ch);
        zc::ssm_conv(x.data(), split, ch, w.data(), d_conv, st.data(), y.data(), 0, ch);
        if (split < n_t)
            zc::ssm_conv(x.data() + split * ch, n_t - split, ch, w.data(), d_conv, st.data(),
                         y.data() + split * ch, 0, ch);
        for (int64_t i = 0; i < n_t * ch; ++i)
            EXPECT_NEAR(y[i], ref[i], 1e-5 * (1 + std::abs(ref[i])));
        for (int64_t c = 0; c < ch; ++c)  // the state is the last d_conv - 1 inputs
            for (int i = 0; i < d_conv - 1; ++i)
                EXPECT_EQ(st[c * (d_conv - 1) + i], x[(n_t - (d_conv - 1) + i) * ch + c]);
    }
}

TEST(DeltaNet, GatedDeltaRuleMatchesFloat64) {
    zm::DeltaNetP p;
    p.n_k_heads = 2;
    p.n_v_heads = 4;  // v head h reads q/k head h % 2
    p.head_k_dim = p.head_v_dim = 16;
    p.eps = 1e-6f;
    const int dk = p.head_k_dim, dv = p.head_v_dim, n_t = 70;  // > one 64-token chunk
    const int64_t kd = p.n_k_heads * dk, width = 2 * kd + p.n_v_heads * dv;
    const auto qkv = randn(n_t * width, 11);
    const auto beta = randn(n_t * p.n_v_heads, 12);
    const auto alpha = randn(n_t * p.n_v_heads, 13);
    const auto dtb = randn(p.n_v_heads, 14, 0.5f);
    const auto a = randn(p.n_v_heads, 15, 0.2f, -1.0f);
    const zm::Weight wdt = f32_weight(dtb), wa = f32_weight(a);
    p.dt_bias = &wdt;
    p.a = &wa;
    const int64_t out_w = p.n_v_heads * dv;
    for (int h = 0; h < p.n_v_heads; ++h) {
        // float64 reference, S as (dk x dv)
        std::vector<double> S(dk * dv, 0.0), ref(n_t * dv);
        const int kh = h % p.n_k_heads;
        for (int t = 0; t < n_t; ++t) {
            const float* row = qkv.data() + t * width;
            std::vector<double> q(dk), k(dk);
            double qs = 0, ks = 0;
            for (int i = 0; i < dk; ++i) {
                qs += double(row[kh * dk + i]) * row[kh * dk + i];
                ks += double(row[kd + kh * dk + i]) * row[kd + kh * dk + i];
            }
            for (int i = 0; i < dk; ++i) {
                q[i] = row[kh * dk + i] / std::sqrt(qs + p.eps);
                k[i] = row[kd + kh * dk + i] / std::sqrt(ks + p.eps);
            }
            const float* v = row + 2 * kd + h * dv;
            const double b = 1.0 / (1.0 + std::exp(-double(beta[t * p.n_v_heads + h])));
            const double g =
                std::log1p(std::exp(double(alpha[t * p.n_v_heads + h]) + dtb[h])) * a[h];
            for (double& s : S) s *= std::exp(g);
            for (int j = 0; j < dv; ++j) {
                double sk = 0;
                for (int i = 0; i < dk; ++i) sk += S[i * dv + j] * k[i];
                const double u = b * (v[j] - sk);
                for (int i = 0; i < dk; ++i) S[i * dv + j] += k[i] * u;
            }
            for (int j = 0; j < dv; ++j) {
                double o = 0;
                for (int i = 0; i < dk; ++i) o += S[i * dv + j] * q[i];
                ref[t * dv + j] = o / std::sqrt(double(dk));
            }
        }
        // whole sequence, then split 1 + 63 + 6 (decode step, then chunks) over calls
        for (bool split : {false, true}) {
            std::vector<float> St(dk * dv, 0.0f), out(n_t * out_w, 0.0f), scratch(2 * dk + dv);
            const std::vector<int> parts =
                split ? std::vector<int>{1, 63, 6} : std::vector<int>{n_t};
            int t0 = 0;
            for (int n : parts) {
                zc::delta_net_head(p, qkv.data() + t0 * width, beta.data() + t0 * p.n_v_heads,
                                   alpha.data() + t0 * p.n_v_heads, n, h, St.data(),
                                   out.data() + t0 * out_w, scratch.data());
                t0 += n;
            }
            double worst = 0;
            for (int t = 0; t < n_t; ++t)
                for (int j = 0; j < dv; ++j)
                    worst =
                        std::max(worst, std::abs(out[t * out_w + h * dv + j] - ref[t * dv + j]) /
                                            (1e-4 + 1e-3 * std::abs(ref[t * dv + j])));
            EXPECT_LE(worst, 1.0) << "head " << h << (split ? " split" : " whole");
            for (int i = 0; i < dk; ++i)  // state: row j of St is column j of S
                for (int j = 0; j < dv; ++j)
                    EXPECT_NEAR(St[j * dk + i], S[i * dv + j],
                                1e-4 + 1e-3 * std::abs(S[i * dv + j]));
        }
    }
}

TEST(DeltaNet, GatedRmsNormSplitGateSigmoidMul) {
    const int hd = 8, nh = 3;
    auto x = randn(nh * hd, 21, 2.0f);
    const auto z = randn(nh * hd, 22);
    const auto w = randn(hd, 23);
    std::vector<double> ref(nh * hd);
    for (int h = 0; h < nh; ++h) {
        double ss = 0;
        for (int i = 0; i < hd; ++i) ss += double(x[h * hd + i]) * x[h * hd + i];
        for (int i = 0; i < hd; ++i)
            ref[h * hd + i] =
                x[h * hd + i] / std::sqrt(ss / hd + 1e-6) * w[i] * silu(z[h * hd + i]);
    }
    zc::gated_rms_norm_row(x.data(), z.data(), w.data(), nh * hd, hd, 1e-6f);
    for (int i = 0; i < nh * hd; ++i) EXPECT_NEAR(x[i], ref[i], 1e-5 * (1 + std::abs(ref[i])));

    const auto in = randn(nh * 2 * hd, 24);
    std::vector<float> q(nh * hd), g(nh * hd);
    zc::split_gate_row(in.data(), q.data(), g.data(), nh, hd);
    for (int h = 0; h < nh; ++h)
        for (int i = 0; i < hd; ++i) {
            EXPECT_EQ(q[h * hd + i], in[h * 2 * hd + i]);
            EXPECT_EQ(g[h * hd + i], in[h * 2 * hd + hd + i]);
        }
    auto y = randn(nh * hd, 25);
    const auto y0 = y;
    zc::sigmoid_mul(y.data(), g.data(), nh * hd);
    for (int i = 0; i < nh * hd; ++i)
        EXPECT_NEAR(y[i], y0[i] / (1.0 + std::exp(-double(g[i]))), 1e-6 * (1 + std::abs(y0[i])));
}
