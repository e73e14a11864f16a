// tests/unit/engine/nextn_test.cpp — the NextN/MTP drafter (engine/nextn_drafter.h) on a tiny
// in-memory qwen35 with one NextN block: the trunk's hidden state is the value before the output
// norm; the block's op list against a reference composed by hand from the same weights (the
// concatenation order, which norm goes with which half, the block, the head); greedy output with
// the drafter equals plain decoding, alone, batched and preempted; the errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "collector.h"
#include "engine/engine.h"
#include "engine/nextn_drafter.h"
#include "gguf/gguf.h"
#include "model/arch_model.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/model.h"
#include "quant/quant.h"
#include "tiny_qwen35.h"

namespace ze = zinc::engine;
namespace zm = zinc::model;
using namespace zinc_test::tiny_qwen35;
using Vec = std::vector<double>;

namespace {

struct Loaded {
    std::vector<uint8_t> bytes;
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

std::unique_ptr<Loaded> load(const Bad& b) {
    auto l = std::make_unique<Loaded>();
    l->bytes = build_qwen35(b);
    auto f = zinc::gguf::File::from_buffer(l->bytes.data(), l->bytes.size(), "nextn.gguf");
    EXPECT_TRUE(f.ok());
    l->file = std::move(f.value());
    auto m = zm::Model::load(*l->file, {});
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
    if (m.ok()) l->model = std::move(m.value());
    return l;
}

Bad nextn_bad(bool own_head) {
    Bad b;
    b.n_nextn = 1;
    b.nextn_head = own_head;
    return b;
}

const Loaded& with_nextn(bool head = false) {
    static const Loaded* plain = load(nextn_bad(false)).release();
    static const Loaded* own_head = load(nextn_bad(true)).release();
    return head ? *own_head : *plain;
}

// ---- the hand-composed reference (double), from the bound weights

struct Ref {
    const zm::ArchModel& m;
    const zm::ModelConfig& c;
    bool swap_halves = false;  // the control: [hnorm(h) ; enorm(e)]
    explicit Ref(const zm::Model& model)
        : m(dynamic_cast<const zm::ArchModel&>(model)), c(model.config()) {}

    const zm::Weight& w(const std::string& name) const {
        const zm::Weight* p = m.find_weight(name);
        EXPECT_NE(p, nullptr) << name;
        return *p;
    }
    Vec row(const std::string& name, int64_t r) const {
        const zm::Weight& x = w(name);
        std::vector<float> f(static_cast<size_t>(x.ne[0]));
        zinc::quant::dequantize_row(x.type, x.data + r * x.row_bytes, f.data(), x.ne[0]);
        return Vec(f.begin(), f.end());
    }
    Vec vec(const std::string& name) const { return row(name, 0); }
    // W x: W is (ne0 = x.size() inputs, n_rows outputs)
    Vec mv(const std::string& name, const Vec& x) const {
        const zm::Weight& W = w(name);
        EXPECT_EQ(W.ne[0], static_cast<int64_t>(x.size())) << name;
        Vec y(static_cast<size_t>(W.n_rows));
        for (int64_t r = 0; r < W.n_rows; ++r) {
            const Vec wr = row(name, r);
            double s = 0;
            for (size_t i = 0; i < x.size(); ++i) s += wr[i] * x[i];
            y[static_cast<size_t>(r)] = s;
        }
        return y;
    }
    static Vec rms(const Vec& x, const Vec& g, double eps) {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double k = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
        Vec y(x.size());
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * k * (g.empty() ? 1.0 : g[i]);
        return y;
    }
    // NEOX RoPE over the first n_rot dims of each head (qwen35's IMROPE with text sections).
    void rope(Vec& x, int n_heads, int pos) const {
        const int hd = c.head_dim_k, nr = c.n_rot;
        for (int h = 0; h < n_heads; ++h)
            for (int i = 0; i < nr / 2; ++i) {
                const double th = pos * std::pow(static_cast<double>(c.rope_freq_base),
                                                 -2.0 * i / static_cast<double>(nr));
                double& a = x[static_cast<size_t>(h * hd + i)];
                double& b = x[static_cast<size_t>(h * hd + i + nr / 2)];
                const double a0 = a, b0 = b;
                a = a0 * std::cos(th) - b0 * std::sin(th);
                b = a0 * std::sin(th) + b0 * std::cos(th);
            }
    }

    // The NextN block over rows at positions 0..n-1 (token t_r, hidden h_r): per row the
    // block's output (the next h) and its logits.
    void nextn(const std::vector<int32_t>& toks, const std::vector<Vec>& hs, bool own_head,
               std::vector<Vec>& out_h, std::vector<Vec>& out_logits) const {
        const std::string b = "blk." + std::to_string(c.n_layer) + ".";
        const double eps = c.rms_eps;
        const int hd = c.head_dim_k, nh = c.n_head;
        std::vector<Vec> ks, vs;
        for (size_t r = 0; r < toks.size(); ++r) {
            const Vec e =
                rms(row("token_embd.weight", toks[r]), vec(b + "nextn.enorm.weight"), eps);
            const Vec hh = rms(hs[r], vec(b + "nextn.hnorm.weight"), eps);
            // the embedding half first (vLLM: torch.cat([inputs_embeds, hidden_states]))
            Vec cat = swap_halves ? hh : e;
            cat.insert(cat.end(), (swap_halves ? e : hh).begin(), (swap_halves ? e : hh).end());
            Vec x = mv(b + "nextn.eh_proj.weight", cat);
            const Vec xn = rms(x, vec(b + "attn_norm.weight"), eps);
            const Vec qg = mv(b + "attn_q.weight", xn);
            Vec q(static_cast<size_t>(nh * hd)), g(q.size());
            for (int h = 0; h < nh; ++h)
                for (int i = 0; i < hd; ++i) {
                    q[static_cast<size_t>(h * hd + i)] = qg[static_cast<size_t>(h * 2 * hd + i)];
                    g[static_cast<size_t>(h * hd + i)] =
                        qg[static_cast<size_t>(h * 2 * hd + hd + i)];
                }
            Vec k = mv(b + "attn_k.weight", xn), v = mv(b + "attn_v.weight", xn);
            const Vec qn = vec(b + "attn_q_norm.weight"), kn = vec(b + "attn_k_norm.weight");
            auto head_norm = [&](Vec& t, int n, const Vec& gw) {
                for (int h = 0; h < n; ++h) {
                    Vec part(t.begin() + h * hd, t.begin() + (h + 1) * hd);
                    part = rms(part, gw, eps);
                    std::copy(part.begin(), part.end(), t.begin() + h * hd);
                }
            };
            head_norm(q, nh, qn);
            head_norm(k, c.n_head_kv, kn);
            rope(q, nh, static_cast<int>(r));
            rope(k, c.n_head_kv, static_cast<int>(r));
            ks.push_back(k);
            vs.push_back(v);
            Vec att(q.size(), 0.0);
            for (int h = 0; h < nh; ++h) {
                const int kvh = h / (nh / c.n_head_kv);
                std::vector<double> sc(ks.size());
                double mx = -1e300;
                for (size_t j = 0; j < ks.size(); ++j) {
                    double s = 0;
                    for (int i = 0; i < hd; ++i)
                        s += q[static_cast<size_t>(h * hd + i)] *
                             ks[j][static_cast<size_t>(kvh * hd + i)];
                    sc[j] = s * c.attn_scale;
                    mx = std::max(mx, sc[j]);
                }
                double z = 0;
                for (double& s : sc) z += (s = std::exp(s - mx));
                for (size_t j = 0; j < ks.size(); ++j)
                    for (int i = 0; i < hd; ++i)
                        att[static_cast<size_t>(h * hd + i)] +=
                            sc[j] / z * vs[j][static_cast<size_t>(kvh * hd + i)];
            }
            for (size_t i = 0; i < att.size(); ++i) att[i] *= 1.0 / (1.0 + std::exp(-g[i]));
            const Vec o = mv(b + "attn_output.weight", att);
            for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
            const Vec f = rms(x, vec(b + "post_attention_norm.weight"), eps);
            Vec gt = mv(b + "ffn_gate.weight", f);
            const Vec up = mv(b + "ffn_up.weight", f);
            for (size_t i = 0; i < gt.size(); ++i) gt[i] = gt[i] / (1.0 + std::exp(-gt[i])) * up[i];
            const Vec d = mv(b + "ffn_down.weight", gt);
            for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
            out_h.push_back(x);
            const Vec xo = rms(x,
                               vec(own_head ? b + "nextn.shared_head_norm.weight"
                                            : std::string("output_norm.weight")),
                               eps);
            out_logits.push_back(mv(
                own_head ? b + "nextn.shared_head_head.weight" : std::string("token_embd.weight"),
                xo));
        }
    }
};

// max |a - b| / max |b|
double rel_err(const float* a, const Vec& b) {
    double d = 0, m = 0;
    for (size_t i = 0; i < b.size(); ++i) {
        d = std::max(d, std::abs(a[i] - b[i]));
        m = std::max(m, std::abs(b[i]));
    }
    return d / m;
}

std::vector<int32_t> prompt_of(int seed, int n) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (auto& t : p) t = static_cast<int32_t>(rng() % kVocab);
    return p;
}

}  // namespace

// The trunk's hidden rows are the residual stream before the output norm: the head applied to
// them by hand gives the Context's logits. Then the NextN op list on 4 rows (tokens, h rows from
// the trunk) equals the reference in h and logits, with the shared head and with its own.
TEST(NextnForward, MatchesHandComposedReference) {
    for (bool own_head : {false, true}) {
        const Loaded& l = with_nextn(own_head);
        ASSERT_TRUE(l.model);
        const zm::Model& model = *l.model;
        ASSERT_EQ(model.n_nextn_layers(), 1);
        const Ref ref(model);
        zm::ContextOptions co;
        co.n_ctx = 64;
        co.n_threads = 2;
        auto ctx = zm::Context::create(model, co);
        ASSERT_TRUE(ctx.ok());
        ASSERT_TRUE(ctx.value()->keep_hidden().ok());
        const std::vector<int32_t> prompt = prompt_of(3, 9);
        ASSERT_TRUE(ctx.value()->eval(prompt, /*all_logits=*/true).ok());
        const size_t ne = kEmbd;
        std::vector<Vec> hs;
        for (int i = 0; i < 9; ++i) {
            const float* h = ctx.value()->hidden(i);
            hs.emplace_back(h, h + ne);
            const Vec lg =
                ref.mv("token_embd.weight",
                       Ref::rms(hs.back(), ref.vec("output_norm.weight"), model.config().rms_eps));
            // (token_embd is q8_0: the CPU tier quantizes the activations for that dot product)
            EXPECT_LT(rel_err(ctx.value()->logits(i), lg), 2e-2) << "trunk row " << i;
        }
        // NextN rows: position r has h_r and token t_{r+1}.
        const int n = 4;
        std::vector<int32_t> toks(prompt.begin() + 1, prompt.begin() + 1 + n);
        std::vector<Vec> h_in(hs.begin(), hs.begin() + n);
        std::vector<Vec> ref_h, ref_logits;
        ref.nextn(toks, h_in, own_head, ref_h, ref_logits);

        zm::RunnerOptions ro;
        ro.nextn = true;
        ro.n_blocks = 4;
        ro.block_size = 16;
        ro.max_batch_tokens = 8;
        ro.max_seqs = 1;
        ro.max_seq_len = 64;
        ro.n_threads = 2;
        auto r = zm::Runner::create_cpu(model, ro);
        ASSERT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
        EXPECT_EQ(r.value()->hidden_width(), kEmbd);
        std::vector<float> hin;
        for (const Vec& h : h_in) hin.insert(hin.end(), h.begin(), h.end());
        const std::vector<int32_t> table = {0};
        zm::BatchSeq bs;
        bs.n_tokens = n;
        bs.block_table = table;
        bs.all_logits = true;
        std::vector<float> logits(static_cast<size_t>(n) * kVocab), hout(n * ne);
        zm::Batch batch{toks, std::span<const zm::BatchSeq>(&bs, 1)};
        batch.hidden_in = hin.data();
        batch.hidden_out = hout.data();
        ASSERT_TRUE(r.value()->forward(batch, logits.data()).ok());
        for (int i = 0; i < n; ++i) {
            // f16 K/V in the cache: a few 1e-3 relative
            EXPECT_LT(rel_err(hout.data() + i * ne, ref_h[i]), 1e-2) << own_head << " row " << i;
            EXPECT_LT(rel_err(logits.data() + i * kVocab, ref_logits[i]), 1e-2)
                << own_head << " row " << i;
        }
        // The control: with the halves swapped (h first) the reference is far from the block.
        Ref swapped(model);
        swapped.swap_halves = true;
        std::vector<Vec> sw_h, sw_logits;
        swapped.nextn(toks, h_in, own_head, sw_h, sw_logits);
        EXPECT_GT(rel_err(logits.data(), sw_logits[0]), 0.1) << "the concatenation order matters";
        // A NextN batch without its h rows is refused.
        batch.hidden_in = nullptr;
        auto bad = r.value()->forward(batch, logits.data());
        ASSERT_FALSE(bad.ok());
        EXPECT_NE(bad.error().message.find("hidden_in"), std::string::npos);
    }
}

// A model without NextN layers: the drafter and a NextN Runner are refused, naming the key.
TEST(NextnErrors, NoNextnLayers) {
    const auto l = load(Bad{});
    ASSERT_TRUE(l->model);
    EXPECT_EQ(l->model->n_nextn_layers(), 0);
    auto d = ze::make_nextn_drafter(*l->model, {});
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.error().message.find("qwen35.nextn_predict_layers"), std::string::npos)
        << d.error().message;
    zm::RunnerOptions ro;
    ro.nextn = true;
    ro.n_blocks = 1;
    ro.max_batch_tokens = 4;
    ro.max_seqs = 1;
    auto r = zm::Runner::create_cpu(*l->model, ro);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("nextn_predict_layers"), std::string::npos);
    ze::NextnDrafterOptions bad;
    bad.n_seqs = 0;
    auto d2 = ze::make_nextn_drafter(*with_nextn().model, bad);
    ASSERT_FALSE(d2.ok());
    EXPECT_NE(d2.error().message.find("n_seqs 0"), std::string::npos);
}

namespace {

// Greedy tokens of the plain Context (no speculation).
std::vector<int32_t> context_greedy(const zm::Model& model, const std::vector<int32_t>& prompt,
                                    int n_gen) {
    zm::ContextOptions co;
    co.n_ctx = 256;
    co.n_threads = 2;
    auto ctx = zm::Context::create(model, co);
    EXPECT_TRUE(ctx.ok());
    zm::Context& c = *ctx.value();
    EXPECT_TRUE(c.eval(prompt).ok());
    std::vector<int32_t> out;
    for (int i = 0; i < n_gen; ++i) {
        out.push_back(ze::draft_argmax({c.logits(-1), static_cast<size_t>(kVocab)}));
        if (i + 1 < n_gen) {
            EXPECT_TRUE(c.eval(std::span<const int32_t>(&out.back(), 1)).ok());
        }
    }
    return out;
}

using zinc::engine::test::Collector;

ze::EngineOptions nextn_engine(const zm::Model& model, int n_parallel) {
    ze::EngineOptions o;
    o.n_parallel = n_parallel;
    o.n_ctx = 128;
    o.block_size = 8;  // rejected drafts cross block boundaries
    o.max_batch_tokens = 64;
    o.n_threads = 2;
    ze::NextnDrafterOptions no;
    no.n_ctx = o.n_ctx;
    no.n_seqs = n_parallel;
    no.n_threads = 2;
    auto d = ze::make_nextn_drafter(model, no);
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
    o.drafter = std::move(d.value());
    o.spec_max = 3;
    return o;
}

void expect_nextn_exact(const zm::Model& model, const ze::EngineOptions& o, const char* what,
                        bool expect_preempt = false) {
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < 5; ++i) ps.push_back(prompt_of(60 + i, 5 + 7 * i));
    const int n_gen = 20;
    auto eng = ze::Engine::create(model, o);
    ASSERT_TRUE(eng.ok()) << (eng.ok() ? "" : eng.error().message);
    std::vector<std::unique_ptr<Collector>> cs;
    for (const auto& p : ps) {
        cs.push_back(std::make_unique<Collector>());
        ze::RequestParams rp;
        rp.prompt = p;
        rp.max_tokens = n_gen;
        rp.ignore_eos = true;
        rp.sampling.temperature = 0.0f;
        ASSERT_TRUE(
            std::holds_alternative<ze::RequestId>(eng.value()->submit(rp, cs.back()->sink())));
    }
    for (size_t i = 0; i < ps.size(); ++i) {
        ASSERT_TRUE(cs[i]->wait());
        EXPECT_EQ(cs[i]->reason, ze::FinishReason::Length) << what << ": " << cs[i]->error;
        EXPECT_EQ(cs[i]->ids, context_greedy(model, ps[i], n_gen)) << what << ", request " << i;
    }
    for (int i = 0; i < 200 && eng.value()->stats().slots_busy > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const ze::EngineStats s = eng.value()->stats();
    EXPECT_EQ(s.spec_drafter, "nextn") << what;
    EXPECT_GT(s.spec_steps, 0u) << what;
    EXPECT_GT(s.spec_drafted, s.spec_accepted) << what;  // random weights: drafts are rejected
    EXPECT_EQ(s.kv_blocks_used, 0) << what;
    if (expect_preempt) {
        EXPECT_GT(s.preemptions, 0u) << what;
    }
}

}  // namespace

// Greedy output with --spec nextn is the plain output: one sequence, four in parallel, and with
// a KV pool that forces preemption (recompute from 0: the drafter's history restarts).
TEST(NextnSpec, GreedyEqualsPlainAloneBatchedPreempted) {
    const zm::Model& model = *with_nextn().model;
    expect_nextn_exact(model, nextn_engine(model, 1), "alone");
    expect_nextn_exact(model, nextn_engine(model, 4), "4 parallel");
    ze::EngineOptions o = nextn_engine(model, 4);
    o.n_ctx = 64;
    o.n_kv_blocks = 10;  // one full sequence (8 blocks) + 2
    expect_nextn_exact(model, o, "preempted", true);
}

namespace {

// A drafter that checks what the engine hands it: hidden rows at the positions of kept tokens,
// each the Context's hidden state there; it proposes the pending token's successor from a
// plain Context so that drafts are accepted too.
class HiddenSpy : public ze::Drafter {
  public:
    explicit HiddenSpy(const zm::Model& m) : model_(m) {}
    const char* name() const override { return "spy"; }
    bool wants_hidden() const override { return true; }
    void observe_hidden(uint64_t, int32_t pos0, std::span<const float> rows) override {
        for (size_t r = 0; r < rows.size() / kEmbd; ++r)
            seen_[pos0 + static_cast<int32_t>(r)].assign(rows.begin() + r * kEmbd,
                                                         rows.begin() + (r + 1) * kEmbd);
    }
    void propose(uint64_t, std::span<const int32_t> tokens, int32_t,
                 std::vector<int32_t>& out) override {
        out.clear();
        // The hidden state of every position but the pending token's seen so far must be the
        // Context's (all-logits eval of the same tokens).
        zm::ContextOptions co;
        co.n_ctx = 256;
        co.n_threads = 1;
        auto ctx = zm::Context::create(model_, co);
        ASSERT_TRUE(ctx.ok());
        ASSERT_TRUE(ctx.value()->keep_hidden().ok());
        const auto known = tokens.first(tokens.size() - 1);
        ASSERT_TRUE(ctx.value()->eval(known, true).ok());
        for (const auto& [pos, h] : seen_) {
            if (pos >= static_cast<int32_t>(known.size())) continue;
            const float* want = ctx.value()->hidden(pos);
            for (int i = 0; i < kEmbd; ++i) ASSERT_FLOAT_EQ(h[i], want[i]) << "pos " << pos;
            ++checked;
        }
        ASSERT_TRUE(ctx.value()->eval(tokens.last(1)).ok());
        out.push_back(ze::draft_argmax({ctx.value()->logits(-1), static_cast<size_t>(kVocab)}));
    }
    int checked = 0;

  private:
    const zm::Model& model_;
    std::map<int32_t, std::vector<float>> seen_;
};

}  // namespace

TEST(NextnSpec, EngineHandsTheDrafterTheKeptRowsHiddenStates) {
    const zm::Model& model = *with_nextn().model;
    ze::EngineOptions o;
    o.n_parallel = 1;
    o.n_ctx = 64;
    o.n_threads = 2;
    auto spy = std::make_shared<HiddenSpy>(model);
    o.drafter = spy;
    o.spec_max = 2;
    auto eng = ze::Engine::create(model, o);
    ASSERT_TRUE(eng.ok()) << (eng.ok() ? "" : eng.error().message);
    Collector c;
    ze::RequestParams rp;
    rp.prompt = prompt_of(7, 6);
    rp.max_tokens = 8;
    rp.ignore_eos = true;
    rp.sampling.temperature = 0.0f;
    ASSERT_TRUE(std::holds_alternative<ze::RequestId>(eng.value()->submit(rp, c.sink())));
    ASSERT_TRUE(c.wait());
    EXPECT_EQ(c.ids, context_greedy(model, rp.prompt, 8));
    EXPECT_GT(spy->checked, 5);
    EXPECT_GT(eng.value()->stats().spec_accepted, 0u);  // the spy drafts the right token
}

// A Runner that does not return hidden states (here: the CPU tier with it hidden) is refused.
TEST(NextnErrors, EngineRefusesARunnerWithoutHiddenStates) {
    const zm::Model& model = *with_nextn().model;
    struct NoHidden : zm::Runner {
        std::unique_ptr<zm::Runner> in;
        zinc::Result<void> forward(const zm::Batch& b, float* l) override {
            return in->forward(b, l);
        }
        void copy_block(int32_t s, int32_t d) override { in->copy_block(s, d); }
        const zm::RunnerOptions& options() const override { return in->options(); }
        std::string tier() const override { return "test"; }
        size_t kv_bytes() const override { return in->kv_bytes(); }
        int32_t state_checkpoints() const override { return in->state_checkpoints(); }
    };
    ze::EngineOptions o = nextn_engine(model, 1);
    o.make_runner = [&](const zm::RunnerOptions& ro) -> zinc::Result<std::unique_ptr<zm::Runner>> {
        auto r = zm::Runner::create_cpu(model, ro);
        if (!r) return r.error();
        auto w = std::make_unique<NoHidden>();
        w->in = std::move(r.value());
        return std::unique_ptr<zm::Runner>(std::move(w));
    };
    auto eng = ze::Engine::create(model, o);
    ASSERT_FALSE(eng.ok());
    EXPECT_NE(eng.error().message.find("nextn drafter reads the model's hidden states"),
              std::string::npos)
        << eng.error().message;
    EXPECT_NE(eng.error().message.find("test tier"), std::string::npos);
}
