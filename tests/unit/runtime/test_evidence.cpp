// Evidence accounting and rendering (runtime/evidence.h), and the validator's comparison
// (runtime/validator.h) on hand-made captures.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "runtime/evidence.h"
#include "runtime/validator.h"

namespace rt = zinc::runtime;

TEST(Evidence, StepsMergeOpsPerDevice) {
    rt::Evidence ev;
    ev.set_tier("cuda", "auto: test");
    rt::OpTally t;
    t.add(rt::Device::Cuda, rt::Op::Matmul, 1000, 10);
    t.add(rt::Device::Cuda, rt::Op::Matmul, 1000, 10);
    t.add(rt::Device::Cuda, rt::Op::Attention, 0, 5);
    ev.record_step(t, {}, {});
    ev.record_step(t, {}, {});
    const auto s = ev.snapshot();
    EXPECT_EQ(s.steps, 2u);
    EXPECT_EQ(s.ops.total_ops(rt::Device::Cuda), 6u);
    EXPECT_EQ(s.ops.total_ops(rt::Device::Cpu), 0u);
    EXPECT_EQ(s.ops.ops[1][static_cast<int>(rt::Op::Matmul)], 4u);
    EXPECT_EQ(s.ops.weight_bytes[1], 4000u);
    EXPECT_EQ(s.ops.act_bytes[1], 50u);
    EXPECT_EQ(s.execution_tier, "cuda");
    EXPECT_TRUE(s.shortcut_free);
    EXPECT_EQ(s.cpu_fallback, 0u);
    const std::string line = rt::evidence_line(s);
    EXPECT_NE(line.find("tier=cuda"), std::string::npos) << line;
    EXPECT_NE(line.find("ops=cuda:6,cpu:0"), std::string::npos) << line;
    EXPECT_NE(line.find("shortcut_free=true"), std::string::npos) << line;
    EXPECT_NE(line.find("validated=off"), std::string::npos) << line;
}

TEST(Evidence, FallbacksAndShortcutsAreNamed) {
    rt::Evidence ev;
    ev.set_tier("cuda", "r");
    rt::OpTally t;
    t.add(rt::Device::Cpu, rt::Op::Glu, 0, 8);
    ev.record_step(t, {{"layer 3 skipped (ZINC_SKIP_LAYERS)"}}, {{"glu", 0}, {"glu", 1}});
    const auto s = ev.snapshot();
    EXPECT_EQ(s.cpu_fallback, 2u);
    EXPECT_EQ(s.fallback_ops.at("glu"), 2u);
    EXPECT_FALSE(s.shortcut_free);
    EXPECT_EQ(s.execution_tier, "cuda+cpu");
    const std::string line = rt::evidence_line(s);
    EXPECT_NE(line.find("cpu_fallback=2"), std::string::npos) << line;
    EXPECT_NE(line.find("fallback_ops=glu:2"), std::string::npos) << line;
    EXPECT_NE(line.find("shortcut_free=false"), std::string::npos) << line;
    EXPECT_NE(line.find("layer 3 skipped"), std::string::npos) << line;
    const std::string js = rt::evidence_json(s);
    EXPECT_NE(js.find("\"shortcut_free\":false"), std::string::npos) << js;
    EXPECT_NE(js.find("\"fallback_ops\":{\"glu\":2}"), std::string::npos) << js;
    EXPECT_NE(js.find("\"execution_tier\":\"cuda+cpu\""), std::string::npos) << js;
    const std::string prom = rt::evidence_prometheus(s);
    EXPECT_NE(prom.find("zinc_evidence_cpu_fallback_total{op=\"glu\"} 2"), std::string::npos)
        << prom;
    EXPECT_NE(prom.find("zinc_evidence_shortcut_free 0"), std::string::npos) << prom;
    EXPECT_NE(prom.find("zinc_evidence_ops_total{device=\"cpu\",op=\"glu\"} 1"), std::string::npos)
        << prom;
}

TEST(Evidence, ValidationAndPromotion) {
    rt::Evidence ev;
    ev.set_validate_limit(3);
    ev.record_validation(true, "");
    ev.record_validation(false, "step 1 layer 2 op x: y");
    ev.record_validation(false, "step 2 layer 0 op z: w");
    auto s = ev.snapshot();
    EXPECT_EQ(s.validated_steps, 3u);
    EXPECT_EQ(s.validation_failures, 2u);
    EXPECT_EQ(s.first_failure, "step 1 layer 2 op x: y");
    EXPECT_FALSE(s.trust_promoted);
    const std::string line = rt::evidence_line(s);
    EXPECT_NE(line.find("validated=3/3 failures=2 trust=unpromoted"), std::string::npos) << line;
    ev.set_trust_promoted(true);
    EXPECT_TRUE(ev.snapshot().trust_promoted);
}

TEST(Evidence, JsonEscapesAndDelta) {
    rt::Evidence ev;
    ev.set_tier("cpu", "quote \" backslash \\ newline \n");
    const std::string js = rt::evidence_json(ev.snapshot());
    EXPECT_NE(js.find("quote \\\" backslash \\\\ newline \\n"), std::string::npos) << js;
    rt::OpTally t;
    t.add(rt::Device::Cpu, rt::Op::Add, 0, 4);
    ev.record_step(t, {}, {});
    const auto a = ev.snapshot();
    ev.record_step(t, {}, {});
    ev.record_step(t, {}, {});
    const auto d = rt::evidence_delta(ev.snapshot(), a);
    EXPECT_EQ(d.steps, 2u);
    EXPECT_EQ(d.ops.total_ops(rt::Device::Cpu), 2u);
    EXPECT_EQ(d.ops.act_bytes[0], 8u);
}

TEST(Evidence, DeltaOfNamedCounts) {
    rt::Evidence ev;
    ev.set_tier("cuda", "r");
    ev.record_step({}, {{"layer 1 skipped (ZINC_SKIP_LAYERS)"}}, {{"glu", 0}, {"glu", 1}});
    const auto a = ev.snapshot();
    ev.record_step({}, {}, {{"glu", 0}});
    const auto d = rt::evidence_delta(ev.snapshot(), a);
    EXPECT_EQ(d.cpu_fallback, 1u);
    EXPECT_EQ(d.fallback_ops.at("glu"), 1u);
    EXPECT_TRUE(d.shortcuts.empty());
    EXPECT_TRUE(d.shortcut_free);  // no shortcut in this interval
    EXPECT_FALSE(ev.snapshot().shortcut_free);
}

namespace {

rt::Captured cap(const std::string& base, int il, std::vector<float> v, int rows = 1) {
    rt::Captured c;
    c.name = il >= 0 ? "blk." + std::to_string(il) + "." + base : base;
    c.il = il;
    c.n_rows = rows;
    c.dim = static_cast<int64_t>(v.size()) / rows;
    c.data = std::move(v);
    return c;
}

std::vector<rt::Captured> model_caps(int n_layer, float bump_layer_out = -1) {
    std::vector<rt::Captured> v;
    for (int il = 0; il < n_layer; ++il) {
        v.push_back(cap("ffn_inp", il, {1.0f, 2.0f, 3.0f, 4.0f}));
        v.push_back(cap("l_out", il, {il == bump_layer_out ? -1.0f : 1.0f, 2.0f, 3.0f, 4.0f}));
    }
    v.push_back(cap("result_output", -1, {0.5f, 0.25f}));
    return v;
}

}  // namespace

TEST(Validator, IdenticalPasses) {
    const auto o = model_caps(4);
    const auto r = rt::compare_step(0, o, o, {}, 4);
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.n_compared, 9);
    EXPECT_EQ(r.worst_rel, 0.0);
}

TEST(Validator, NamesTheFirstDivergingLayerAndOp) {
    const auto o = model_caps(4);
    auto s = model_caps(4, 2);  // layer 2's ffn output is off (and everything after in reality)
    const auto r = rt::compare_step(7, s, o, {}, 4);
    ASSERT_FALSE(r.ok);
    // ffn_out was not captured: the op is the span since ffn_inp, the whole FFN block.
    EXPECT_NE(r.failure.find("step 7 layer 2 op ffn block"), std::string::npos) << r.failure;
    EXPECT_NE(r.failure.find("blk.2.l_out"), std::string::npos) << r.failure;
}

TEST(Validator, SmallDifferencesWithinTolerancePass) {
    const auto o = model_caps(2);
    auto s = o;
    s[0].data[0] += 1e-3f;
    EXPECT_TRUE(rt::compare_step(0, s, o, {}, 2).ok);
    rt::Thresholds tight;
    tight.residual = 1e-6;
    const auto r = rt::compare_step(0, s, o, tight, 2);
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.failure.find("layer 0 op attention block"), std::string::npos) << r.failure;
}

TEST(Validator, NonFiniteFails) {
    const auto o = model_caps(2);
    auto s = o;
    s.back().data[1] = NAN;
    const auto r = rt::compare_step(0, s, o, {}, 2);
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.failure.find("result_output has non-finite"), std::string::npos) << r.failure;
}

TEST(Validator, ATierThatCapturesNothingCannotPass) {
    const auto o = model_caps(3);
    const auto r = rt::compare_step(0, {}, o, {}, 3);
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.failure.find("layer 0 op l_out"), std::string::npos) << r.failure;
    EXPECT_NE(r.failure.find("missing"), std::string::npos) << r.failure;
    // Only the logits: still missing layers.
    const auto r2 = rt::compare_step(0, {o.back()}, o, {}, 3);
    EXPECT_FALSE(r2.ok);
}

TEST(Validator, RowCountMismatchIsSkippedButLastLayerMayDiffer) {
    auto o = model_caps(2);
    auto s = o;
    // Last layer on the serving tier covers 2 rows (before the output rows are gathered).
    s[3] = cap("l_out", 1, {1, 2, 3, 4, 5, 6, 7, 8}, 2);
    const auto r = rt::compare_step(0, s, o, {}, 2);
    EXPECT_TRUE(r.ok) << r.failure;
    EXPECT_EQ(r.n_compared, 4);
}

TEST(Evidence, ValidationModeInLineJsonAndPrometheus) {
    rt::Evidence ev;
    ev.set_tier("cuda", "r");
    ev.set_validate_limit(2);
    EXPECT_EQ(rt::evidence_json(ev.snapshot()).find("\"validation\":\"bitwise\""),
              std::string::npos);
    ev.set_validation_mode("bitwise");
    ev.record_validation(true, "");
    auto s = ev.snapshot();
    EXPECT_EQ(s.validation_mode, "bitwise");
    const std::string line = rt::evidence_line(s);
    EXPECT_NE(line.find("validated=1/2 failures=0 trust=unpromoted validation=bitwise "),
              std::string::npos)
        << line;
    EXPECT_NE(rt::evidence_json(s).find("\"validation\":\"bitwise\""), std::string::npos);
    EXPECT_NE(rt::evidence_prometheus(s).find("validation=\"bitwise\"}"), std::string::npos);
    EXPECT_EQ(rt::evidence_delta(s, s).validation_mode, "bitwise");
    ev.set_validation_mode("tolerance");
    EXPECT_NE(rt::evidence_line(ev.snapshot()).find(" validation=tolerance "), std::string::npos);
    // Off: no mode on the line.
    rt::Evidence off;
    EXPECT_EQ(rt::evidence_line(off.snapshot()).find("validation="), std::string::npos);
}

namespace {

// Every intermediate the CPU tier (and the CUDA tier with hooks) captures, in execution order,
// for n_layer layers of 2 rows; values differ per name, layer and element.
const char* const kLayerNames[] = {"Qcur",     "Kcur",    "Vcur",     "kqv_out",
                                   "attn_out", "ffn_inp", "ffn_gate", "ffn_up",
                                   "ffn_glu",  "ffn_out", "l_out"};

std::vector<rt::Captured> full_caps(int n_layer) {
    std::vector<rt::Captured> v;
    v.push_back(cap("inp_embd", -1, {0.1f, -0.2f, 0.3f, 0.4f}, 2));
    for (int il = 0; il < n_layer; ++il) {
        int k = 0;
        for (const char* n : kLayerNames) {
            const float b = static_cast<float>(il * 16 + k++);
            v.push_back(cap(n, il, {b + 0.5f, -b - 0.25f, b * 0.125f + 1.0f, 3.0f}, 2));
        }
    }
    v.push_back(cap("result_output", -1, {0.5f, 0.25f, -1.0f, 2.0f}, 2));
    return v;
}

rt::Captured& find(std::vector<rt::Captured>& v, const std::string& name) {
    for (auto& c : v)
        if (c.name == name) return c;
    ADD_FAILURE() << name << " not captured";
    return v.front();
}

}  // namespace

TEST(Validator, FullCapturesNameTheSingleOp) {
    const auto o = full_caps(3);
    EXPECT_TRUE(rt::compare_step(0, o, o, {}, 3).ok);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"inp_embd", "step 4 layer - op embed: inp_embd"},
        {"blk.1.Qcur", "step 4 layer 1 op attn_q matmul: blk.1.Qcur"},
        {"blk.1.Kcur", "step 4 layer 1 op attn_k matmul: blk.1.Kcur"},
        {"blk.2.Vcur", "step 4 layer 2 op attn_v matmul: blk.2.Vcur"},
        {"blk.1.kqv_out", "step 4 layer 1 op attention (rope_kv, attention): blk.1.kqv_out"},
        {"blk.0.attn_out", "step 4 layer 0 op attn_output matmul: blk.0.attn_out"},
        {"blk.1.ffn_inp", "step 4 layer 1 op attention residual add: blk.1.ffn_inp"},
        {"blk.1.ffn_gate", "step 4 layer 1 op ffn_gate matmul: blk.1.ffn_gate"},
        {"blk.1.ffn_up", "step 4 layer 1 op ffn_up matmul: blk.1.ffn_up"},
        {"blk.2.ffn_glu", "step 4 layer 2 op glu: blk.2.ffn_glu"},
        {"blk.1.ffn_out", "step 4 layer 1 op ffn_down matmul: blk.1.ffn_out"},
        {"blk.1.l_out", "step 4 layer 1 op ffn residual add: blk.1.l_out"},
        {"result_output", "step 4 layer - op output head (norm, lm_head matmul): result_output"},
    };
    for (const auto& [name, want] : cases) {
        for (const bool bitwise : {false, true}) {
            auto s = o;
            // Row 1 off, and (as in a real fault) everything after it in execution order.
            bool after = false;
            for (auto& c : s) {
                after = after || c.name == name;
                if (after) c.data[2] = 1.0f - c.data[2] * 4.0f;
            }
            rt::Thresholds t;
            t.bitwise = bitwise;
            const auto r = rt::compare_step(4, s, o, t, 3);
            ASSERT_FALSE(r.ok) << name;
            EXPECT_EQ(r.failure.rfind(want, 0), 0u) << name << ": " << r.failure;
            if (bitwise)
                EXPECT_NE(r.failure.find(": 1 of 4 values differ in bits"), std::string::npos)
                    << r.failure;
            else
                EXPECT_NE(r.failure.find(" > tol 0.05"), std::string::npos) << r.failure;
        }
    }
}

TEST(Validator, WithoutTheInputCapturedTheOpIsTheSpan) {
    const auto o = full_caps(2);
    auto s = o;
    std::erase_if(s, [](const rt::Captured& c) {
        return c.name == "blk.0.attn_out" || c.name == "blk.0.ffn_glu";
    });
    for (const auto& [name, want] : std::vector<std::pair<std::string, std::string>>{
             {"blk.0.ffn_inp",
              "layer 0 op attention block (norm, q/k/v, rope, attention, "
              "output, residual add): blk.0.ffn_inp"},
             {"blk.0.ffn_out", "layer 0 op ffn (gate/up matmul, glu, down matmul): blk.0.ffn_out"},
             {"blk.0.l_out", "layer 0 op ffn residual add: blk.0.l_out"}}) {
        auto t = s;
        find(t, name).data[0] += 1.0f;
        const auto r = rt::compare_step(0, t, o, {}, 2);
        ASSERT_FALSE(r.ok);
        EXPECT_NE(r.failure.find(want), std::string::npos) << r.failure;
    }
}

TEST(Validator, BitwiseFailsOnOneUlpAndSignedZero) {
    const auto o = full_caps(2);
    rt::Thresholds bits;
    bits.bitwise = true;
    rt::Thresholds tight;  // tolerance mode with threshold 0
    tight.residual = tight.logits = 0.0;
    const auto same = rt::compare_step(0, o, o, bits, 2);
    EXPECT_TRUE(same.ok) << same.failure;
    EXPECT_EQ(same.n_compared, static_cast<int>(o.size()));
    {
        auto s = o;
        float& x = find(s, "blk.1.Vcur").data[3];
        x = std::nextafter(x, 1e9f);                       // one ulp
        EXPECT_TRUE(rt::compare_step(0, s, o, {}, 2).ok);  // within the default tolerance
        const auto r = rt::compare_step(0, s, o, bits, 2);
        ASSERT_FALSE(r.ok);
        EXPECT_EQ(r.failure.rfind("step 0 layer 1 op attn_v matmul: blk.1.Vcur: 1 of 4 values "
                                  "differ in bits",
                                  0),
                  0u)
            << r.failure;
        EXPECT_FALSE(rt::compare_step(0, s, o, tight, 2).ok);
    }
    {
        // -0 vs +0: equal as numbers (rel err 0 passes any tolerance), different bits.
        auto s = o, oz = o;
        find(oz, "blk.0.ffn_glu").data[1] = 0.0f;
        find(s, "blk.0.ffn_glu").data[1] = -0.0f;
        EXPECT_TRUE(rt::compare_step(0, s, oz, tight, 2).ok);
        const auto r = rt::compare_step(0, s, oz, bits, 2);
        ASSERT_FALSE(r.ok);
        EXPECT_NE(r.failure.find("layer 0 op glu: blk.0.ffn_glu: 1 of 4 values differ in bits"),
                  std::string::npos)
            << r.failure;
    }
    {
        // Non-finite on the serving side fails in both modes, even where the oracle agrees.
        auto s = o, on = o;
        find(s, "blk.1.ffn_up").data[0] = NAN;
        find(on, "blk.1.ffn_up").data[0] = NAN;
        const auto r = rt::compare_step(0, s, on, bits, 2);
        ASSERT_FALSE(r.ok);
        EXPECT_NE(r.failure.find("blk.1.ffn_up has non-finite"), std::string::npos) << r.failure;
    }
    // Bitwise mode still needs every l_out but the last layer's.
    auto s = o;
    std::erase_if(s, [](const rt::Captured& c) { return c.name == "blk.0.l_out"; });
    const auto r = rt::compare_step(0, s, o, bits, 2);
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.failure.find("missing"), std::string::npos) << r.failure;
}

TEST(Validator, ProducingOpNames) {
    EXPECT_EQ(rt::producing_op("blk.7.Vcur"), "attn_v matmul");
    EXPECT_EQ(rt::producing_op("blk.7.kqv_out"), "attention (rope_kv, attention)");
    EXPECT_EQ(rt::producing_op("blk.7.kqv_out", false),
              "attention (norm, q/k/v matmul, rope_kv, attention)");
    EXPECT_EQ(rt::producing_op("blk.0.l_out", false),
              "ffn block (norm, gate/up, glu, down, residual add)");
    EXPECT_EQ(rt::producing_op("blk.0.something_else"), "something_else");
}

TEST(Validator, SiblingProjectionsFailingTogetherPointAtTheirNorm) {
    const auto o = full_caps(2);
    rt::Thresholds bits;
    bits.bitwise = true;
    // Only Qcur off (a fault in the Q projection): no hint.
    auto s = o;
    find(s, "blk.1.Qcur").data[0] += 1.0f;
    auto r = rt::compare_step(0, s, o, bits, 2);
    ASSERT_FALSE(r.ok);
    EXPECT_EQ(r.failure.find("attention norm"), std::string::npos) << r.failure;
    // Q, K and V all off: their common input is named as well.
    for (const char* n : {"blk.1.Kcur", "blk.1.Vcur"}) find(s, n).data[1] += 1.0f;
    r = rt::compare_step(0, s, o, bits, 2);
    ASSERT_FALSE(r.ok);
    EXPECT_EQ(r.failure.rfind("step 0 layer 1 op attn_q matmul: blk.1.Qcur", 0), 0u) << r.failure;
    EXPECT_NE(r.failure.find("; Kcur and Vcur differ too: their common input, the attention norm"),
              std::string::npos)
        << r.failure;
    // Gate and up off: the ffn norm.
    auto t = o;
    for (const char* n : {"blk.0.ffn_gate", "blk.0.ffn_up"}) find(t, n).data[2] -= 2.0f;
    r = rt::compare_step(0, t, o, {}, 2);
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.failure.find("op ffn_gate matmul: blk.0.ffn_gate rel err"), std::string::npos)
        << r.failure;
    EXPECT_NE(r.failure.find("; ffn_up differs too: their common input, the ffn norm"),
              std::string::npos)
        << r.failure;
}
