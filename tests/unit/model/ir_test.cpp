// The op list (model/ir.h): what the architecture files emit for the real models, and the
// fusion schedule a device tier derives from it.
#include "model/ir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/arch_model.h"
#include "model/model.h"

namespace zm = zinc::model;

namespace {

struct Loaded {
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

const zm::ArchModel* load(const std::string& name) {
    static std::vector<std::pair<std::string, std::unique_ptr<Loaded>>> cache;
    for (auto& [n, l] : cache)
        if (n == name) return dynamic_cast<const zm::ArchModel*>(l->model.get());
    auto l = std::make_unique<Loaded>();
    auto f = zinc::gguf::File::open(std::string(ZINC_SOURCE_DIR) + "/models/" + name);
    if (f.ok()) {
        l->file = std::move(f.value());
        auto m = zm::Model::load(*l->file, {});
        if (m.ok()) l->model = std::move(m.value());
    }
    cache.emplace_back(name, std::move(l));
    return dynamic_cast<const zm::ArchModel*>(cache.back().second->model.get());
}

const char* kSmol = "SmolLM2-135M-Instruct.Q4_1.gguf";
const char* kGemma = "gemma-3-270m-q4_k_m.gguf";
const char* kQwen = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

#define NEED(var, name)                                        \
    const zm::ArchModel* var = load(name);                     \
    if (!var) GTEST_SKIP() << "models/" << name << " missing"; \
    const zm::Program& P = var->program()

// The kinds of the ops of layer il, in order.
std::vector<zm::OpKind> layer_kinds(const zm::Program& P, int il) {
    std::vector<zm::OpKind> k;
    for (const zm::Op& op : P.ops)
        if (op.il == il) k.push_back(op.kind());
    return k;
}

// The names the ops of layer il produce, in order.
std::string layer_names(const zm::Program& P, int il) {
    std::string s;
    for (const zm::Op& op : P.ops) {
        if (op.il != il) continue;
        for (int i = 0; i < op.n_outs; ++i)
            if (op.outs[i].name) s += std::string(s.empty() ? "" : " ") + op.outs[i].name;
    }
    return s;
}

using K = zm::OpKind;

}  // namespace

TEST(OpList, PrenormDecoderLayerIsTheCpuTiersSequence) {
    NEED(m, kSmol);
    const int n = P.n_layer;
    ASSERT_EQ(n, m->config().n_layer);
    const std::vector<K> layer = {K::RmsNorm, K::Matmul, K::RopeKv, K::Attention, K::Matmul, K::Add,
                                  K::RmsNorm, K::Matmul, K::Glu,    K::Matmul,    K::Add};
    EXPECT_EQ(layer_kinds(P, 0), layer);
    std::vector<K> last = layer;
    last.insert(last.begin() + 5, K::KeepRows);  // after attention's K/V write
    EXPECT_EQ(layer_kinds(P, n - 1), last);
    EXPECT_EQ(layer_names(P, 3),
              "Qcur Kcur Vcur kqv_out attn_out ffn_inp ffn_gate ffn_up ffn_glu ffn_out l_out");
    EXPECT_EQ(P.ops.front().kind(), K::Embed);
    EXPECT_STREQ(P.ops.front().outs[0].name, "inp_embd");
    // Head: output norm (dump-only result_norm), LM head into the logits; SmolLM2 is tied.
    const zm::Op& lm = P.ops.back();
    ASSERT_EQ(lm.kind(), K::Matmul);
    EXPECT_TRUE(lm.head);
    EXPECT_EQ(lm.outs[0].t, P.logits);
    EXPECT_EQ(lm.as<zm::MatmulP>().w[0]->name, "token_embd.weight");
    EXPECT_EQ(P.width(P.logits), m->config().n_vocab);
    const zm::Op& norm = P.ops[P.ops.size() - 2];
    EXPECT_EQ(norm.kind(), K::RmsNorm);
    EXPECT_STREQ(norm.outs[0].name, "result_norm");
    EXPECT_FALSE(norm.outs[0].validate);
}

TEST(OpList, Qwen2HasBiasesAndGemma3PostNormsWindowsAndScaledEmbedding) {
    {
        NEED(m, kQwen);
        const zm::Op* qkv = nullptr;
        for (const zm::Op& op : P.ops)
            if (op.il == 0 && op.kind() == K::Matmul) {
                qkv = &op;
                break;
            }
        ASSERT_NE(qkv, nullptr);
        const auto& mp = qkv->as<zm::MatmulP>();
        ASSERT_EQ(mp.n_w, 3);
        EXPECT_EQ(mp.bias[0]->name, "blk.0.attn_q.bias");
        EXPECT_EQ(mp.bias[2]->name, "blk.0.attn_v.bias");
        EXPECT_EQ(P.ops.front().as<zm::EmbedP>().scale, 1.0f);
    }
    {
        NEED(m, kGemma);
        const zm::ModelConfig& c = m->config();
        EXPECT_EQ(
            layer_kinds(P, 0),
            (std::vector<K>{K::RmsNorm, K::Matmul, K::RopeKv, K::Attention, K::Matmul, K::RmsNorm,
                            K::Add, K::RmsNorm, K::Matmul, K::Glu, K::Matmul, K::RmsNorm, K::Add}));
        EXPECT_EQ(P.ops.front().as<zm::EmbedP>().scale, std::sqrt(static_cast<float>(c.n_embd)));
        // Per-layer variation lives in the list: the window and the RoPE base of each layer.
        int n_local = 0;
        for (const zm::Op& op : P.ops) {
            if (op.kind() == K::Attention) {
                EXPECT_EQ(op.as<zm::AttentionP>().window, c.window(op.il)) << op.il;
                n_local += op.as<zm::AttentionP>().window > 0;
            }
            if (op.kind() == K::RopeKv) {
                EXPECT_EQ(op.as<zm::RopeKvP>().rope.freq_base, c.rope(op.il).freq_base) << op.il;
            }
            if (op.kind() == K::Glu) {
                EXPECT_EQ(op.as<zm::GluP>().act, zm::GluAct::GeluTanh);
            }
        }
        EXPECT_GT(n_local, 0);
        EXPECT_LT(n_local, c.n_layer);
    }
}

TEST(OpList, ScheduleFusesResidualAddsAndHidesOnlyTheirIntermediates) {
    NEED(m, kSmol);
    const int n = P.n_layer;
    // No fusions: one plain op a step.
    const auto plain = zm::schedule(P, {});
    ASSERT_EQ(plain.size(), P.ops.size());
    for (const zm::Step& s : plain) EXPECT_TRUE(s.fused.empty());

    zm::FusionOptions fo;
    fo.matmul_add = fo.add_rms_norm = true;
    const auto steps = zm::schedule(P, fo);
    int n_fused = 0;
    for (const zm::Step& s : steps) {
        if (s.fused.empty()) {
            EXPECT_EQ(s.end - s.begin, 1);
            continue;
        }
        ++n_fused;
        const zm::Op& f = s.fused.back();
        ASSERT_EQ(f.kind(), K::Matmul);
        EXPECT_TRUE(f.as<zm::MatmulP>().accumulate);
        EXPECT_EQ(f.outs[0].t, P.find("x"));
        ASSERT_EQ(s.hidden.size(), 1u);
        const std::string inner = s.hidden[0].name, outer = f.outs[0].name;
        EXPECT_TRUE((inner == "attn_out" && outer == "ffn_inp") ||
                    (inner == "ffn_out" && outer == "l_out"))
            << inner << " " << outer;
        if (s.il == n - 1 && inner == "attn_out") {
            // The last layer's KeepRows moves before the fused projection and keeps its input.
            ASSERT_EQ(s.fused.size(), 2u);
            const auto& k = s.fused[0].as<zm::KeepRowsP>();
            EXPECT_EQ(k.t[1], P.find("attn"));
            EXPECT_EQ(s.end - s.begin, 3);
        }
    }
    EXPECT_EQ(n_fused, 2 * n);

    const zm::ArchModel* g = load(kGemma);
    if (!g) GTEST_SKIP() << "models/" << kGemma << " missing";
    const auto gs = zm::schedule(g->program(), fo);
    int n_post = 0;
    for (const zm::Step& s : gs) {
        if (s.fused.empty()) continue;
        ASSERT_EQ(s.fused.size(), 1u);
        EXPECT_EQ(s.fused[0].kind(), K::AddRmsNorm);  // the projections go to h, not into x
        EXPECT_TRUE(s.hidden.empty());
        ++n_post;
    }
    EXPECT_EQ(n_post, 2 * g->program().n_layer);
}

namespace {

// A small MoE for the schedule tests: 4 experts of n_ff 16 over width 8, 2 used, and a 4-row
// F32-shaped router (shapes only: the schedule reads no data).
zm::Weight shape_only(const char* name, int64_t k, int64_t rows, int64_t experts) {
    zm::Weight w;
    w.name = name;
    w.n_dims = experts > 1 ? 3 : 2;
    w.ne[0] = k;
    w.ne[1] = rows;
    w.ne[2] = experts;
    w.n_rows = rows * experts;
    return w;
}
struct TinyMoe {
    zm::Weight gate = shape_only("g", 8, 16, 4), up = shape_only("u", 8, 16, 4),
               down = shape_only("d", 16, 8, 4), router = shape_only("r", 8, 4, 1);
    zm::MoeP params(zm::Tid in, zm::Tid logits) const {
        zm::MoeP p;
        p.in = in;
        p.logits = logits;
        p.gate_exps = &gate;
        p.up_exps = &up;
        p.down_exps = &down;
        p.n_expert = 4;
        p.n_used = 2;
        p.n_ff = 16;
        return p;
    }
};

}  // namespace

// Moe -> t; Add x += t becomes one Moe accumulating into x (FusionOptions::moe_add), hiding t;
// not when t is read again, nor when x is the Moe's input.
TEST(OpList, ScheduleFusesTheMoeResidualAdd) {
    const TinyMoe E;
    auto build = [&](bool reread, bool into_input) {
        zm::ProgramBuilder b;
        const zm::Tid x = b.tensor("x", 8), xn = b.tensor("xn", 8), lg = b.tensor("lg", 4),
                      t = b.tensor("t", 8), y = b.tensor("y", 8);
        b.input(x, "inp");
        b.input(xn, "xn");
        b.input(lg, "lg");
        b.set_layer(0);
        b.moe(E.params(into_input ? x : xn, lg), t, "ffn_moe_out");
        b.add(x, t, "l_out");
        if (reread) b.add(y, t, "again");
        return b.finish(1, x);  // (no head: the schedule does not look at it)
    };
    zm::FusionOptions fo;
    fo.moe_add = true;
    const zm::Program P = build(false, false);
    const auto steps = zm::schedule(P, fo);
    int n_fused = 0;
    for (const zm::Step& s : steps) {
        if (s.fused.empty()) continue;
        ++n_fused;
        ASSERT_EQ(s.fused.size(), 1u);
        const zm::Op& f = s.fused[0];
        ASSERT_EQ(f.kind(), K::Moe);
        EXPECT_TRUE(f.as<zm::MoeP>().accumulate);
        EXPECT_EQ(f.outs[0].t, P.find("x"));
        EXPECT_STREQ(f.outs[0].name, "l_out");
        ASSERT_EQ(s.hidden.size(), 1u);
        EXPECT_STREQ(s.hidden[0].name, "ffn_moe_out");
        EXPECT_EQ(s.end - s.begin, 2);
    }
    EXPECT_EQ(n_fused, 1);
    for (const zm::Step& s : zm::schedule(build(true, false), fo)) EXPECT_TRUE(s.fused.empty());
    for (const zm::Step& s : zm::schedule(build(false, true), fo)) EXPECT_TRUE(s.fused.empty());
    fo.moe_add = false;
    for (const zm::Step& s : zm::schedule(P, fo)) EXPECT_TRUE(s.fused.empty());
}

// Matmul xn -> logits; Moe(xn, logits) [; Add x += moe] becomes one Moe that computes its router
// (FusionOptions::router_moe), with the add folded in too under moe_add; not when the logits are
// read again or the router reads another input.
TEST(OpList, ScheduleFoldsTheRouterIntoTheMoe) {
    const TinyMoe E;
    auto build = [&](bool reread, bool other_in) {
        zm::ProgramBuilder b;
        const zm::Tid x = b.tensor("x", 8), xn = b.tensor("xn", 8), x2 = b.tensor("x2", 8),
                      lg = b.tensor("lg", 4), t = b.tensor("t", 8), y = b.tensor("y", 4);
        b.input(x, "inp");
        b.input(xn, "xn");
        b.input(x2, "x2");
        b.set_layer(0);
        b.matmul(other_in ? x2 : xn, {{&E.router, nullptr, lg, "ffn_moe_logits"}});
        b.moe(E.params(xn, lg), t, "ffn_moe_out");
        b.add(x, t, "l_out");
        if (reread) b.add(y, lg, "again");
        return b.finish(1, x);
    };
    zm::FusionOptions fo;
    fo.router_moe = fo.moe_add = true;
    const zm::Program P = build(false, false);
    int n_fused = 0;
    for (const zm::Step& s : zm::schedule(P, fo)) {
        if (s.fused.empty()) continue;
        ++n_fused;
        ASSERT_EQ(s.fused.size(), 1u);
        const zm::Op& f = s.fused[0];
        ASSERT_EQ(f.kind(), K::Moe);
        EXPECT_EQ(f.as<zm::MoeP>().router, &E.router);
        EXPECT_TRUE(f.as<zm::MoeP>().accumulate);
        EXPECT_EQ(f.outs[0].t, P.find("x"));
        EXPECT_EQ(s.end - s.begin, 3);
        ASSERT_EQ(s.hidden.size(), 2u);
        EXPECT_STREQ(s.hidden[0].name, "ffn_moe_logits");
        EXPECT_STREQ(s.hidden[1].name, "ffn_moe_out");
    }
    EXPECT_EQ(n_fused, 1);
    fo.moe_add = false;  // the router alone: the add stays its own step
    n_fused = 0;
    for (const zm::Step& s : zm::schedule(P, fo)) {
        if (s.fused.empty()) continue;
        ++n_fused;
        EXPECT_EQ(s.fused[0].as<zm::MoeP>().router, &E.router);
        EXPECT_EQ(s.end - s.begin, 2);
        EXPECT_FALSE(s.fused[0].as<zm::MoeP>().accumulate);
        EXPECT_EQ(s.fused[0].outs[0].t, P.find("t"));
    }
    EXPECT_EQ(n_fused, 1);
    fo.moe_add = true;
    for (bool reread : {true, false}) {
        for (const zm::Step& s : zm::schedule(build(reread, !reread), fo)) {
            if (!s.fused.empty()) {
                EXPECT_EQ(s.fused[0].as<zm::MoeP>().router, nullptr);
            }
        }
    }
}

TEST(OpList, WeightsAreEachBoundTensorOnce) {
    NEED(m, kSmol);
    const auto ws = P.weights();
    for (size_t i = 0; i < ws.size(); ++i)
        for (size_t j = i + 1; j < ws.size(); ++j) EXPECT_NE(ws[i], ws[j]);
    // 9 tensors a layer (2 norms, 7 matrices) + token_embd (tied: also the LM head) + output_norm
    EXPECT_EQ(ws.size(), 9u * P.n_layer + 2);
    EXPECT_NE(P.describe().find("matmul xn -> q:Qcur k:Kcur v:Vcur"), std::string::npos);
}

TEST(OpList, BuilderChecksShapes) {
    zm::Weight w;
    w.name = "w";
    w.n_dims = 2;
    w.ne[0] = 8;
    w.ne[1] = 4;
    w.n_rows = 4;
    zm::ProgramBuilder b;
    const zm::Tid a = b.tensor("a", 8), y = b.tensor("y", 4), z = b.tensor("z", 5);
    b.matmul(a, {{&w, nullptr, y, "y"}});
    EXPECT_DEATH(b.matmul(a, {{&w, nullptr, z, "z"}}), "");  // 4 rows into a width-5 tensor
    EXPECT_DEATH(b.tensor("a", 3), "");                      // roles are unique
    EXPECT_DEATH(b.add(y, z, "bad"), "");                    // widths differ
}

// gemma4 (models/gemma4.cpp) on the synthetic file ZINC_TEST_GEMMA4 names (tests/py/
// test_gemma4.py sets it: gemma4-tiny or gemma4-moe-tiny): each layer's attention shape, window
// and RoPE from its kind, the V norm and scale 1 everywhere, and the MoE layer's sequence.
TEST(OpList, Gemma4LayersFollowTheirKind) {
    const char* path = std::getenv("ZINC_TEST_GEMMA4");
    if (!path || !*path) GTEST_SKIP() << "ZINC_TEST_GEMMA4 not set (tests/py/test_gemma4.py sets it)";
    auto f = zinc::gguf::File::open(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto m = zm::Model::load(*f.value(), {});
    ASSERT_TRUE(m.ok()) << m.error().message;
    const auto* am = dynamic_cast<const zm::ArchModel*>(m.value().get());
    ASSERT_NE(am, nullptr);
    const zm::Program& P = am->program();
    const zm::ModelConfig& c = am->config();
    ASSERT_EQ(c.arch_name, "gemma4");
    bool moe = false;
    for (const zm::Op& op : P.ops) {
        if (op.kind() == K::Attention) {
            const auto& a = op.as<zm::AttentionP>();
            const bool swa = c.is_swa(op.il);
            EXPECT_EQ(a.window, swa ? c.sliding_window : 0) << op.il;
            EXPECT_EQ(a.head_dim_k, swa ? 64 : 128) << op.il;
            EXPECT_EQ(a.n_head_kv, swa ? 2 : 1) << op.il;
            EXPECT_EQ(a.scale, 1.0f);
            EXPECT_EQ(c.kv_dim_k(op.il), a.n_head_kv * a.head_dim_k);
        }
        if (op.kind() == K::RopeKv) {
            const auto& r = op.as<zm::RopeKvP>();
            const bool swa = c.is_swa(op.il);
            EXPECT_TRUE(r.v_norm);
            EXPECT_EQ(r.rope.n_rot, swa ? 64 : 128) << op.il;
            EXPECT_EQ(r.rope.freq_base, swa ? 10000.0f : 1000000.0f) << op.il;
            EXPECT_EQ(r.rope.freq_factors != nullptr, !swa) << op.il;
        }
        if (op.kind() == K::Moe) {
            moe = true;
            const auto& mp = op.as<zm::MoeP>();
            EXPECT_TRUE(mp.gate_up_fused);
            EXPECT_NE(mp.down_scale, nullptr);
            EXPECT_EQ(mp.act, zm::GluAct::GeluTanh);
            EXPECT_TRUE(mp.norm_w);
        }
    }
    const std::string names = layer_names(P, 2);  // a global layer
    if (moe) {
        EXPECT_EQ(names,
                  "Qcur Kcur Vcur kqv_out attn_out ffn_inp ffn_gate ffn_up ffn_glu ffn_out ffn_mlp "
                  "ffn_norm_2 ffn_moe_logits ffn_moe_out ffn_moe ffn_moe_combined ffn_post_norm "
                  "l_out");
    } else {
        EXPECT_EQ(names,
                  "Qcur Kcur Vcur kqv_out attn_out ffn_inp ffn_gate ffn_up ffn_glu ffn_out "
                  "ffn_post_norm l_out");
    }
    // global layers have no attn_v: V is the K projection
    const zm::Op* qkv = nullptr;
    for (const zm::Op& op : P.ops)
        if (op.il == 2 && op.kind() == K::Matmul) {
            qkv = &op;
            break;
        }
    ASSERT_NE(qkv, nullptr);
    EXPECT_EQ(qkv->as<zm::MatmulP>().w[2]->name, "blk.2.attn_k.weight");
    EXPECT_EQ(P.ops.back().kind(), K::Softcap);
}
