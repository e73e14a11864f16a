// The CPU tier's routed experts (backend/cpu/moe.h) in gemma4's form: GeGLU experts, the fused
// gate_up tensor and the per-expert down scale, against a float64 reference written from the
// formula, and the fused layout against the separate one (the same bits).
#include "backend/cpu/moe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/moe_route.h"

namespace zc = zinc::cpu;

namespace {

constexpr int kE = 16, kF = 8, kX = 4, kK = 2, kRows = 3;

float val(int i, float s) { return s * std::sin(0.7f * static_cast<float>(i) + 0.3f); }

zc::MatView view(const std::vector<float>& w, int64_t cols, int64_t rows) {
    return {zinc::quant::GgmlType::F32, cols, rows, reinterpret_cast<const uint8_t*>(w.data()),
            sizeof(float) * static_cast<size_t>(cols)};
}

double gelu_tanh(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

}  // namespace

TEST(MoeFfn, GegluFusedGateUpAndDownScaleMatchTheFormula) {
    // gate/up of expert e: rows [e F, (e + 1) F) of (X F, E); down: rows [e E, ...) of (X E, F)
    std::vector<float> gate(kX * kF * kE), up(kX * kF * kE), down(kX * kE * kF), x(kRows * kE),
        logits(kRows * kX), scale(kX);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = val(static_cast<int>(i), 0.4f);
    for (size_t i = 0; i < up.size(); ++i) up[i] = val(static_cast<int>(i) + 1000, 0.3f);
    for (size_t i = 0; i < down.size(); ++i) down[i] = val(static_cast<int>(i) + 2000, 0.5f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = val(static_cast<int>(i) + 3000, 1.0f);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = val(static_cast<int>(i) * 7, 2.0f);
    for (int e = 0; e < kX; ++e) scale[e] = 0.5f + 0.25f * static_cast<float>(e);
    // the fused tensor: per expert its gate rows, then its up rows
    std::vector<float> gu(2 * kX * kF * kE);
    for (int e = 0; e < kX; ++e) {
        std::memcpy(&gu[(2 * e) * kF * kE], &gate[e * kF * kE], sizeof(float) * kF * kE);
        std::memcpy(&gu[(2 * e + 1) * kF * kE], &up[e * kF * kE], sizeof(float) * kF * kE);
    }
    const zc::MatView g = view(gate, kE, kX * kF), u = view(up, kE, kX * kF),
                      d = view(down, kF, kX * kE), f = view(gu, kE, 2 * kX * kF);
    zc::ThreadPool pool(2);
    zc::MatmulScratch mm;
    zc::MoeScratch s;
    std::vector<float> out_sep(kRows * kE), out_fused(kRows * kE);
    zc::MoeArgs a;
    a.x = x.data();
    a.logits = logits.data();
    a.n_rows = kRows;
    a.n_embd = kE;
    a.n_ff = kF;
    a.n_expert = kX;
    a.k = kK;
    a.norm_w = true;
    a.act = zinc::model::GluAct::GeluTanh;
    a.down_scale = scale.data();
    a.gate = &g;
    a.up = &u;
    a.down = &d;
    a.out = out_sep.data();
    zc::moe_ffn(pool, mm, a, s);
    a.gate = a.up = &f;
    a.gate_up_fused = true;
    a.out = out_fused.data();
    zc::moe_ffn(pool, mm, a, s);
    EXPECT_EQ(std::memcmp(out_sep.data(), out_fused.data(), sizeof(float) * out_sep.size()), 0);

    for (int t = 0; t < kRows; ++t) {
        int32_t ids[kK];
        float w[kK];
        zinc::moe::route_row(&logits[t * kX], kX, kK, true, true, 0.0f, ids, w);
        for (int i = 0; i < kE; ++i) {
            double ref = 0.0;
            for (int sl = 0; sl < kK; ++sl) {
                const int e = ids[sl];
                double y = 0.0;
                for (int j = 0; j < kF; ++j) {
                    double gj = 0.0, uj = 0.0;
                    for (int c = 0; c < kE; ++c) {
                        gj += double{gate[(e * kF + j) * kE + c]} * x[t * kE + c];
                        uj += double{up[(e * kF + j) * kE + c]} * x[t * kE + c];
                    }
                    y += double{down[(e * kE + i) * kF + j]} * gelu_tanh(gj) * uj;
                }
                ref += double{w[sl]} * scale[e] * y;
            }
            EXPECT_NEAR(out_sep[t * kE + i], ref, 1e-4 + 1e-4 * std::fabs(ref)) << t << " " << i;
        }
    }
}
