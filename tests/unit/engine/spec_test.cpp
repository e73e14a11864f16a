// tests/unit/engine/spec_test.cpp — speculative decoding: the drafters, the verification rule
// and the engine with drafts (docs/speculative.md).
//
// Exactness at temperature 0: every request's tokens equal the single-sequence Context's greedy
// tokens (the oracle of engine_test.cpp) with each drafter, alone and 8 at a time, with partial
// acceptance (a drafter that is wrong on purpose), tiny blocks (rejected drafts crossing block
// boundaries) and a pool small enough to preempt. Above temperature 0: the distribution of the
// first two generated tokens over many seeded requests against the exact distribution computed
// from the model's logits (chi-square), with and without speculation; the same test with a
// deliberately broken acceptance rule must fail it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "engine/draft_model.h"
#include "engine/drafter.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/spec_verify.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace ze = zinc::engine;
namespace zm = zinc::model;

namespace {

// ---- the drafters and the rule, without a model ----

std::vector<int32_t> propose(ze::Drafter& d, const std::vector<int32_t>& t, int n) {
    std::vector<int32_t> out{99};
    d.propose(1, t, n, out);
    return out;
}

}  // namespace

TEST(SpecLookup, LongestNgramLatestMatchFallingBack) {
    auto d = ze::make_lookup_drafter(3);
    EXPECT_STREQ(d->name(), "lookup");
    // Trigram 1 2 3 occurs twice; the latest one continues with 7 8.
    EXPECT_EQ(propose(*d, {1, 2, 3, 4, 5, 1, 2, 3, 7, 8, 9, 1, 2, 3}, 2),
              (std::vector<int32_t>{7, 8}));
    // Capped by what follows the match.
    EXPECT_EQ(propose(*d, {5, 6, 1, 2, 3}, 4), (std::vector<int32_t>{}));
    EXPECT_EQ(propose(*d, {1, 2, 3, 9, 1, 2, 3}, 4), (std::vector<int32_t>{9, 1, 2, 3}));
    // No trigram match: the bigram 4 5 (latest at 2), then the unigram 5.
    EXPECT_EQ(propose(*d, {4, 5, 6, 4, 5, 7, 0, 4, 5}, 3), (std::vector<int32_t>{7, 0, 4}));
    EXPECT_EQ(propose(*d, {5, 8, 9, 1, 5}, 2), (std::vector<int32_t>{8, 9}));
    // Nothing matches, or too short.
    EXPECT_EQ(propose(*d, {1, 2, 3, 4}, 3), (std::vector<int32_t>{}));
    EXPECT_EQ(propose(*d, {1}, 3), (std::vector<int32_t>{}));
    EXPECT_EQ(propose(*d, {}, 3), (std::vector<int32_t>{}));
}

TEST(SpecLookup, ModeNamesParse) {
    EXPECT_EQ(ze::parse_spec_mode("lookup"), ze::SpecMode::Lookup);
    EXPECT_EQ(ze::parse_spec_mode("draft"), ze::SpecMode::Draft);
    EXPECT_EQ(ze::parse_spec_mode("off"), ze::SpecMode::Off);
    EXPECT_EQ(ze::parse_spec_mode("nextn"), ze::SpecMode::NextN);
    EXPECT_STREQ(ze::to_string(ze::SpecMode::NextN), "nextn");
    EXPECT_FALSE(ze::parse_spec_mode("mtp").has_value());
    EXPECT_FALSE(ze::parse_spec_mode("").has_value());
}

TEST(SpecLength, GrowsOnFullAcceptShrinksOnReject) {
    ze::DraftLength l(8);
    EXPECT_EQ(l.len, 4);
    l.update(4, 4);
    EXPECT_EQ(l.len, 5);
    for (int i = 0; i < 10; ++i) l.update(l.len, l.len);
    EXPECT_EQ(l.len, 8);  // bounded by max
    l.update(8, 3);
    EXPECT_EQ(l.len, 7);
    l.update(7, 0);
    EXPECT_EQ(l.len, 3);
    for (int i = 0; i < 10; ++i) l.update(l.len, 0);
    EXPECT_EQ(l.len, 1);  // bounded below by 1
    l.update(0, 0);       // no draft: unchanged
    EXPECT_EQ(l.len, 1);
    EXPECT_EQ(ze::DraftLength(2).len, 2);
}

namespace {

constexpr int32_t kV = 6;  // vocabulary of the synthetic rows

// One logits row with the given probabilities (log p; 0 -> -inf).
std::vector<float> row_of(std::initializer_list<double> p) {
    std::vector<float> r;
    for (double x : p) r.push_back(x > 0 ? static_cast<float>(std::log(x)) : -INFINITY);
    return r;
}

ze::SamplerOptions plain(float temp, uint64_t seed) {
    ze::SamplerOptions o;
    o.temperature = temp;
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    o.seed = seed;
    return o;
}

}  // namespace

TEST(SpecVerify, GreedyKeepsAgreeingPrefixThenTheTargetsToken) {
    const auto r0 = row_of({0.1, 0.6, 0.1, 0.1, 0.05, 0.05});  // argmax 1
    const auto r1 = row_of({0.1, 0.1, 0.1, 0.5, 0.1, 0.1});    // argmax 3
    const auto r2 = row_of({0.7, 0.1, 0.1, 0.05, 0.05, 0.0});  // argmax 0
    std::vector<float> rows;
    for (const auto* r : {&r0, &r1, &r2}) rows.insert(rows.end(), r->begin(), r->end());
    ze::Sampler s(plain(0.0f, 1));
    const std::vector<int32_t> hist = {4};
    auto v = ze::verify_draft(s, rows, kV, hist, std::vector<int32_t>{1, 3});
    EXPECT_EQ(v.n_accepted, 2);
    EXPECT_EQ(v.tokens, (std::vector<int32_t>{1, 3, 0}));  // both kept, then row 2's argmax
    v = ze::verify_draft(s, rows, kV, hist, std::vector<int32_t>{1, 2});
    EXPECT_EQ(v.n_accepted, 1);
    EXPECT_EQ(v.tokens, (std::vector<int32_t>{1, 3}));
    v = ze::verify_draft(s, rows, kV, hist, std::vector<int32_t>{5, 3});
    EXPECT_EQ(v.n_accepted, 0);
    EXPECT_EQ(v.tokens, (std::vector<int32_t>{1}));
    // Penalties see the kept drafts: with a strong repeat penalty, 1 kept at row 0 makes row 1's
    // choice avoid... the history decides, as it would without speculation.
    ze::SamplerOptions pen = plain(0.0f, 1);
    pen.repeat_penalty = 100.0f;
    ze::Sampler sp(pen);
    const auto q0 = row_of({0.1, 0.6, 0.1, 0.1, 0.05, 0.05});
    const auto q1 = row_of({0.1, 0.5, 0.1, 0.2, 0.05, 0.05});  // 1 best unless penalised
    std::vector<float> rows2(q0);
    rows2.insert(rows2.end(), q1.begin(), q1.end());
    v = ze::verify_draft(sp, rows2, kV, hist, std::vector<int32_t>{1});
    EXPECT_EQ(v.n_accepted, 1);
    EXPECT_EQ(v.tokens, (std::vector<int32_t>{1, 3}));
}

namespace {

// Chi-square statistic of observed counts against expected probabilities, cells with an
// expected count under 5 pooled; `df` gets the degrees of freedom.
double chi_square(const std::map<int64_t, double>& expect_p, const std::map<int64_t, int>& obs,
                  int n, int& df) {
    double chi = 0, pool_e = 0, pool_o = 0;
    int cells = 0;
    std::map<int64_t, int> left = obs;
    for (const auto& [k, p] : expect_p) {
        const double e = p * n;
        const int o = left.count(k) ? left[k] : 0;
        left.erase(k);
        if (e < 5) {
            pool_e += e;
            pool_o += o;
            continue;
        }
        chi += (o - e) * (o - e) / e;
        ++cells;
    }
    for (const auto& [k, o] : left) pool_o += o;  // outcomes of probability 0
    if (pool_e > 0 || pool_o > 0) {
        chi += pool_e > 0 ? (pool_o - pool_e) * (pool_o - pool_e) / pool_e : 1e9 * pool_o;
        ++cells;
    }
    df = std::max(1, cells - 1);
    return chi;
}

// Upper quantile of chi-square with df degrees of freedom at the standard normal quantile z
// (Wilson-Hilferty): z = 4.75 is a p-value of about 1e-6.
double chi_square_critical(int df, double z = 4.75) {
    const double a = 2.0 / (9.0 * df);
    const double c = 1 - a + z * std::sqrt(a);
    return df * c * c * c;
}

// Draws of the first emitted token and, when the draft token was kept, the second (99: none).
// With q, each draw's draft token is drawn from q first (as a sampling drafter would).
std::map<int64_t, int> draw_verified(ze::SpecFault fault, const std::vector<float>& rows,
                                     int32_t point, const std::vector<float>& q, int n) {
    std::map<int64_t, int> obs;
    std::mt19937_64 g(5);
    std::discrete_distribution<int32_t> from_q(q.begin(), q.end());
    for (int i = 0; i < n; ++i) {
        const std::vector<int32_t> draft = {q.empty() ? point : from_q(g)};
        ze::Sampler s(plain(1.0f, 1000 + i));
        const auto v = ze::verify_draft(s, rows, kV, std::vector<int32_t>{0}, draft, q, fault);
        ++obs[v.tokens[0] * 100 + (v.n_accepted == 1 ? v.tokens[1] : 99)];
    }
    return obs;
}

}  // namespace

// The rule keeps the target distribution: the first token is distributed as row 0, and after a
// kept draft token the second as row 1. Point-mass drafts and drafts drawn from a drafter
// distribution q alike; both broken rules fail the same test.
TEST(SpecVerify, RejectionSamplingKeepsTheTargetDistribution) {
    const std::vector<double> p0 = {0.05, 0.3, 0.25, 0.2, 0.15, 0.05};
    const std::vector<double> p1 = {0.4, 0.1, 0.1, 0.2, 0.1, 0.1};
    std::vector<float> rows = row_of({0.05, 0.3, 0.25, 0.2, 0.15, 0.05});
    const auto r1 = row_of({0.4, 0.1, 0.1, 0.2, 0.1, 0.1});
    rows.insert(rows.end(), r1.begin(), r1.end());
    const int32_t point = 2;
    const std::vector<float> q = {0.1f, 0.1f, 0.5f, 0.1f, 0.1f, 0.1f};
    const int n = 20000;
    for (const auto& qq : {std::vector<float>{}, q}) {
        // P(first = a, kept) = min(p(a), q(a)), then the second from row 1; else p(a) - that.
        std::map<int64_t, double> expect;
        for (int a = 0; a < kV; ++a) {
            const double qa = qq.empty() ? (a == point ? 1.0 : 0.0) : qq[static_cast<size_t>(a)];
            const double kept = std::min(p0[a], qa);
            for (int b = 0; b < kV; ++b)
                if (kept > 0) expect[a * 100 + b] = kept * p1[b];
            if (p0[a] - kept > 1e-12) expect[a * 100 + 99] = p0[a] - kept;
        }
        const char* what = qq.empty() ? "point mass" : "distribution q";
        int df = 0;
        const double chi =
            chi_square(expect, draw_verified(ze::SpecFault::None, rows, point, qq, n), n, df);
        EXPECT_LT(chi, chi_square_critical(df)) << what;
        for (auto f : {ze::SpecFault::AcceptAll, ze::SpecFault::ResampleFromP}) {
            const double bad = chi_square(expect, draw_verified(f, rows, point, qq, n), n, df);
            EXPECT_GT(bad, chi_square_critical(df)) << "a broken rule passed: " << what;
        }
    }
}

// ---- the engine with drafts, on SmolLM2 ----

namespace {

struct Loaded {
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

const Loaded& smollm() {
    static Loaded* l = [] {
        auto* x = new Loaded;
        const std::string path =
            std::string(ZINC_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
        auto f = zinc::gguf::File::open(path);
        if (!f.ok()) return x;
        x->file = std::move(f.value());
        auto m = zm::Model::load(*x->file, {});
        if (m.ok()) x->model = std::move(m.value());
        return x;
    }();
    return *l;
}

#define NEED_MODEL()                                                          \
    const Loaded& L = smollm();                                               \
    ASSERT_TRUE(L.model) << "models/SmolLM2-135M-Instruct.Q4_1.gguf missing"; \
    const zm::Model& model = *L.model

std::vector<int32_t> prompt_of(int seed, int n, int32_t n_vocab) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    std::mt19937 g(static_cast<uint32_t>(seed));
    for (auto& t : p) t = 50 + static_cast<int32_t>(g() % static_cast<uint32_t>(n_vocab - 100));
    return p;
}

// A prompt that repeats itself, so prompt lookup finds matches and the model tends to copy.
std::vector<int32_t> repetitive_prompt(int seed, int32_t n_vocab) {
    const auto unit = prompt_of(seed, 9, n_vocab);
    std::vector<int32_t> p;
    for (int i = 0; i < 4; ++i) p.insert(p.end(), unit.begin(), unit.end());
    p.resize(p.size() - 4);  // ends inside the unit: the continuation is the unit's rest
    return p;
}

int32_t argmax(const float* l, int32_t n) {
    return static_cast<int32_t>(std::max_element(l, l + n) - l);
}

std::vector<int32_t> context_greedy(const zm::Model& model, const std::vector<int32_t>& prompt,
                                    int n_gen) {
    zm::ContextOptions co;
    co.n_ctx = 512;
    co.n_threads = 2;
    auto ctx = zm::Context::create(model, co);
    EXPECT_TRUE(ctx.ok());
    zm::Context& c = *ctx.value();
    EXPECT_TRUE(c.eval(prompt).ok());
    std::vector<int32_t> out;
    for (int i = 0; i < n_gen; ++i) {
        const int32_t t = argmax(c.logits(-1), model.n_vocab());
        out.push_back(t);
        const int32_t one[1] = {t};
        if (i + 1 < n_gen) {
            EXPECT_TRUE(c.eval(one).ok());
        }
    }
    return out;
}

struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> ids;
    bool finished = false;
    ze::FinishReason reason = ze::FinishReason::Error;
    ze::Usage usage;
    std::string error;
    int events_after_finish = 0;
    ze::EventSink sink() {
        return [this](const ze::Event& ev) {
            std::lock_guard<std::mutex> lk(mu);
            if (finished) ++events_after_finish;
            for (const auto& t : ev.tokens) ids.push_back(t.id);
            usage = ev.usage;
            if (ev.finished) {
                finished = true;
                reason = ev.reason;
                error = ev.error;
                cv.notify_all();
            }
        };
    }
    bool wait(int seconds = 300) {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::seconds(seconds), [&] { return finished; });
    }
};

ze::EngineOptions spec_options(std::shared_ptr<ze::Drafter> d) {
    ze::EngineOptions o;
    o.n_parallel = 8;
    o.n_ctx = 256;
    o.block_size = 16;
    o.max_batch_tokens = 256;
    o.n_threads = 2;
    o.drafter = std::move(d);
    o.spec_max = 6;
    return o;
}

// Wraps a drafter and corrupts every third proposed token: partial acceptance on purpose.
class NoisyDrafter : public ze::Drafter {
  public:
    explicit NoisyDrafter(std::unique_ptr<ze::Drafter> inner) : inner_(std::move(inner)) {}
    const char* name() const override { return "noisy"; }
    void propose(uint64_t seq, std::span<const int32_t> t, int32_t n,
                 std::vector<int32_t>& out) override {
        inner_->propose(seq, t, n, out);
        // Never empty: with no match, propose the last token again (usually wrong).
        if (out.empty()) out.push_back(t.back());
        for (size_t i = 2; i < out.size(); i += 3) out[i] = (out[i] + 1) % 1000 + 50;
    }

  private:
    std::unique_ptr<ze::Drafter> inner_;
};

struct RunStats {
    std::vector<std::vector<int32_t>> ids;
    ze::EngineStats stats;
    std::vector<ze::Usage> usage;
};

RunStats run_greedy(const zm::Model& model, const ze::EngineOptions& o,
                    const std::vector<std::vector<int32_t>>& prompts, int n_gen) {
    RunStats r;
    auto eng = ze::Engine::create(model, o);
    EXPECT_TRUE(eng.ok()) << (eng.ok() ? "" : eng.error().message);
    if (!eng.ok()) return r;
    std::vector<std::unique_ptr<Collector>> cs;
    for (const auto& p : prompts) {
        cs.push_back(std::make_unique<Collector>());
        ze::RequestParams rp;
        rp.prompt = p;
        rp.max_tokens = n_gen;
        rp.sampling.temperature = 0.0f;
        rp.ignore_eos = true;
        auto id = eng.value()->submit(std::move(rp), cs.back()->sink());
        EXPECT_TRUE(std::holds_alternative<ze::RequestId>(id));
    }
    for (auto& c : cs) {
        EXPECT_TRUE(c->wait());
        EXPECT_EQ(c->reason, ze::FinishReason::Length) << c->error;
        EXPECT_EQ(c->events_after_finish, 0);
        r.ids.push_back(c->ids);
        r.usage.push_back(c->usage);
    }
    for (int i = 0; i < 2000; ++i) {
        r.stats = eng.value()->stats();
        if (r.stats.kv_blocks_used == 0 && r.stats.slots_busy == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(r.stats.kv_blocks_used, 0);  // rejected drafts' blocks came back too
    EXPECT_EQ(r.stats.kv_blocks_free + r.stats.kv_blocks_cached, r.stats.kv_blocks_total);
    return r;
}

std::vector<std::vector<int32_t>> mixed_prompts(int32_t n_vocab, int n) {
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < n; ++i)
        ps.push_back(i % 2 == 0 ? repetitive_prompt(10 + i, n_vocab)
                                : prompt_of(30 + i, 7 + 5 * i, n_vocab));
    return ps;
}

void expect_exact(const zm::Model& model, const ze::EngineOptions& o, int n_prompts, int n_gen,
                  bool expect_accepts) {
    const auto prompts = mixed_prompts(model.n_vocab(), n_prompts);
    const RunStats r = run_greedy(model, o, prompts, n_gen);
    ASSERT_EQ(r.ids.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(r.ids[i], context_greedy(model, prompts[i], n_gen)) << "request " << i;
    EXPECT_EQ(r.stats.spec_drafter, o.drafter->name());
    EXPECT_GT(r.stats.spec_steps, 0u);
    EXPECT_LE(r.stats.spec_accepted, r.stats.spec_drafted);
    if (expect_accepts) {
        EXPECT_GT(r.stats.spec_accepted, 0u);
    }
    uint64_t drafted = 0, accepted = 0;
    for (const auto& u : r.usage) {
        EXPECT_EQ(u.completion_tokens, n_gen);
        drafted += static_cast<uint64_t>(u.spec_drafted);
        accepted += static_cast<uint64_t>(u.spec_accepted);
    }
    EXPECT_EQ(drafted, r.stats.spec_drafted);
    EXPECT_EQ(accepted, r.stats.spec_accepted);
    // Fewer steps than tokens: accepted drafts saved forwards.
    if (expect_accepts && n_prompts == 1) {
        EXPECT_LT(r.stats.steps, static_cast<uint64_t>(n_gen));
    }
}

}  // namespace

TEST(SpecEngine, LookupGreedyAloneEqualsContext) {
    NEED_MODEL();
    expect_exact(model, spec_options(ze::make_lookup_drafter()), 1, 24, true);
}

TEST(SpecEngine, LookupGreedyBatchedEqualsContext) {
    NEED_MODEL();
    expect_exact(model, spec_options(ze::make_lookup_drafter()), 8, 20, true);
}

TEST(SpecEngine, PartialAcceptanceTinyBlocksAndPreemptionEqualContext) {
    NEED_MODEL();
    auto o = spec_options(std::make_shared<NoisyDrafter>(ze::make_lookup_drafter()));
    o.block_size = 4;  // rejected drafts cross block boundaries
    expect_exact(model, o, 6, 18, true);
    o.n_ctx = 64;
    o.n_kv_blocks = 16;  // one full context for six: preemption by recompute happens
    const auto prompts = mixed_prompts(model.n_vocab(), 6);
    const RunStats r = run_greedy(model, o, prompts, 18);
    for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(r.ids[i], context_greedy(model, prompts[i], 18)) << "request " << i;
    EXPECT_GT(r.stats.preemptions, 0u);
}

TEST(SpecEngine, BudgetCutsDraftRowsNotDecodes) {
    NEED_MODEL();
    auto o = spec_options(std::make_shared<NoisyDrafter>(ze::make_lookup_drafter()));
    o.max_batch_tokens = 10;  // 8 decodes leave 2 draft rows a step, or none beside a prefill
    o.min_prefill_chunk = 2;
    const auto prompts = mixed_prompts(model.n_vocab(), 8);
    const RunStats r = run_greedy(model, o, prompts, 12);
    for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(r.ids[i], context_greedy(model, prompts[i], 12)) << "request " << i;
    EXPECT_GT(r.stats.spec_rows_cut, 0u);
    EXPECT_GT(r.stats.spec_steps, 0u);
}

TEST(SpecEngine, DraftModelGreedyEqualsContextAndAcceptsAll) {
    NEED_MODEL();
    // SmolLM2 drafting for itself: the only compatible pair here. Every draft is the target's
    // own greedy choice (both CPU tier, batch-invariant), so all are accepted.
    ze::DraftModelOptions dmo;
    dmo.n_ctx = 256;
    dmo.n_threads = 2;
    auto o = spec_options(ze::make_draft_model_drafter(model, dmo));
    const auto prompts = mixed_prompts(model.n_vocab(), 3);
    const RunStats r = run_greedy(model, o, prompts, 16);
    for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(r.ids[i], context_greedy(model, prompts[i], 16)) << "request " << i;
    EXPECT_EQ(r.stats.spec_drafter, "draft");
    EXPECT_GT(r.stats.spec_drafted, 0u);
    EXPECT_EQ(r.stats.spec_accepted, r.stats.spec_drafted);
}

TEST(SpecEngine, CreateRejectsSpecMaxOutOfRange) {
    NEED_MODEL();
    auto o = spec_options(ze::make_lookup_drafter());
    o.spec_max = 0;
    auto e = ze::Engine::create(model, o);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().message, "engine: spec_max 0 out of range [1, 16]");
    o.spec_max = 17;
    EXPECT_FALSE(ze::Engine::create(model, o).ok());
}

namespace {

// Proposes, for the token after the first generated one, a fixed token per first token (the
// target's second most likely), so drafts are accepted and rejected often.
class TableDrafter : public ze::Drafter {
  public:
    TableDrafter(size_t n_prompt, std::map<int32_t, int32_t> table)
        : n_prompt_(n_prompt), table_(std::move(table)) {}
    const char* name() const override { return "table"; }
    void propose(uint64_t, std::span<const int32_t> t, int32_t,
                 std::vector<int32_t>& out) override {
        out.clear();
        if (t.size() != n_prompt_ + 1) return;
        auto it = table_.find(t.back());
        if (it != table_.end()) out.push_back(it->second);
    }

  private:
    size_t n_prompt_;
    std::map<int32_t, int32_t> table_;
};

ze::SamplerOptions stat_sampling(uint64_t seed) {
    ze::SamplerOptions o;
    o.temperature = 1.0f;
    o.top_k = 4;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    o.seed = seed;
    return o;
}

// The exact joint distribution of the first two tokens (top-4 at temperature 1), from the
// Context's logits; `second` gets each first token's second most likely follower.
std::map<int64_t, double> exact_two_tokens(const zm::Model& model,
                                           const std::vector<int32_t>& prompt,
                                           std::map<int32_t, int32_t>& second) {
    zm::ContextOptions co;
    co.n_ctx = 128;
    co.n_threads = 2;
    auto ctx = zm::Context::create(model, co);
    zm::Context& c = *ctx.value();
    EXPECT_TRUE(c.eval(prompt).ok());
    const auto nv = static_cast<size_t>(model.n_vocab());
    std::vector<float> l0(c.logits(-1), c.logits(-1) + nv);
    ze::Sampler s(stat_sampling(1));
    std::vector<std::pair<float, int32_t>> p1, p2;
    const double z1 = s.distribution(l0, prompt, p1);
    std::map<int64_t, double> joint;
    for (const auto& [m1, x1] : p1) {
        c.truncate(static_cast<int>(prompt.size()));
        const int32_t one[1] = {x1};
        EXPECT_TRUE(c.eval(one).ok());
        std::vector<int32_t> hist = prompt;
        hist.push_back(x1);
        const double z2 = s.distribution({c.logits(-1), nv}, hist, p2);
        std::vector<std::pair<float, int32_t>> by_p = p2;
        std::sort(by_p.begin(), by_p.end(), [](auto& a, auto& b) { return a.first > b.first; });
        second[x1] = by_p.size() > 1 ? by_p[1].second : by_p[0].second;
        for (const auto& [m2, x2] : p2)
            joint[static_cast<int64_t>(x1) * nv + x2] = (m1 / z1) * (m2 / z2);
    }
    return joint;
}

std::map<int64_t, int> engine_draws(const zm::Model& model, std::shared_ptr<ze::Drafter> d,
                                    ze::SpecFault fault, const std::vector<int32_t>& prompt, int n,
                                    ze::EngineStats* st) {
    ze::EngineOptions o = spec_options(std::move(d));
    o.n_parallel = 16;
    o.spec_fault = fault;
    auto eng = ze::Engine::create(model, o);
    EXPECT_TRUE(eng.ok());
    std::vector<std::unique_ptr<Collector>> cs;
    std::map<int64_t, int> obs;
    const auto nv = static_cast<int64_t>(model.n_vocab());
    auto drain = [&] {
        for (auto& c : cs) {
            EXPECT_TRUE(c->wait());
            EXPECT_EQ(c->ids.size(), 2u);
            if (c->ids.size() == 2) ++obs[c->ids[0] * nv + c->ids[1]];
        }
        cs.clear();
    };
    for (int i = 0; i < n; ++i) {
        if (cs.size() == 200) drain();  // within the queue limit
        cs.push_back(std::make_unique<Collector>());
        ze::RequestParams rp;
        rp.prompt = prompt;
        rp.max_tokens = 2;
        rp.ignore_eos = true;
        rp.sampling = stat_sampling(static_cast<uint64_t>(7000 + i));
        auto id = eng.value()->submit(std::move(rp), cs.back()->sink());
        EXPECT_TRUE(std::holds_alternative<ze::RequestId>(id));
    }
    drain();
    if (st) *st = eng.value()->stats();
    return obs;
}

}  // namespace

// Many seeded requests of two tokens at temperature 1 (top-4): the joint distribution with a
// drafter proposing the second token (accepted about as often as the target's second choice
// has mass) matches the exact one as well as without speculation; accepting every draft, or
// resampling from p after a rejection, is caught.
TEST(SpecEngine, SampledTwoTokenDistributionKept) {
    NEED_MODEL();
    const auto prompt = prompt_of(77, 32, model.n_vocab());  // two full blocks: cached after one
    std::map<int32_t, int32_t> second;
    const auto joint = exact_two_tokens(model, prompt, second);
    ASSERT_GE(joint.size(), 8u);
    const int n = 1200;
    const auto drafter = std::make_shared<TableDrafter>(prompt.size(), second);
    auto chi_of = [&](std::shared_ptr<ze::Drafter> d, ze::SpecFault f, ze::EngineStats* st) {
        int df = 0;
        const double chi = chi_square(joint, engine_draws(model, d, f, prompt, n, st), n, df);
        return std::make_pair(chi, chi_square_critical(df));
    };
    ze::EngineStats st;
    const auto off = chi_of(nullptr, ze::SpecFault::None, nullptr);
    EXPECT_LT(off.first, off.second) << "the test itself is off (no speculation)";
    const auto on = chi_of(drafter, ze::SpecFault::None, &st);
    EXPECT_LT(on.first, on.second);
    EXPECT_GT(st.spec_steps, static_cast<uint64_t>(n) * 9 / 10);  // nearly every request drafted
    EXPECT_GT(st.spec_accepted, 0u);
    EXPECT_LT(st.spec_accepted, st.spec_drafted);
    for (auto f : {ze::SpecFault::AcceptAll, ze::SpecFault::ResampleFromP}) {
        const auto bad = chi_of(drafter, f, nullptr);
        EXPECT_GT(bad.first, bad.second) << "a broken acceptance rule passed";
    }
}

// ---- the scheduler's side: draft rows, rolled-back blocks, the prefix cache ----

namespace {

struct SchedFixture {
    SchedFixture(int max_batch, int n_blocks, int bs)
        : bm(n_blocks, bs, true),
          fcfs(ze::make_fcfs_policy()),
          sched({1, max_batch}, bm, *fcfs, [](int32_t, int32_t) {}) {}
    ze::Sequence* add(int n_prompt, int max_tokens) {
        ze::RequestParams p;
        for (int i = 0; i < n_prompt; ++i) p.prompt.push_back(100 + i);
        p.max_tokens = max_tokens;
        seq = std::make_unique<ze::Sequence>(1, 1, p, nullptr);
        sched.add(seq.get());
        return seq.get();
    }
    ze::BlockManager bm;
    std::unique_ptr<ze::SchedulingPolicy> fcfs;
    ze::Scheduler sched;
    std::unique_ptr<ze::Sequence> seq;
};

}  // namespace

TEST(SpecScheduler, RejectedDraftBlocksReleasedCacheSeesAcceptedOnly) {
    SchedFixture f(64, 32, 4);
    ze::Sequence* s = f.add(8, 32);
    ze::StepPlan p = f.sched.schedule();
    f.sched.commit(p);
    s->tokens.push_back(7);  // the first generated token: pending
    EXPECT_EQ(f.bm.cache().n_registered(), 2);
    // A 7-token draft: positions 8..15, two blocks more.
    s->draft = {20, 21, 22, 23, 24, 25, 26};
    p = f.sched.schedule();
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].n_tokens, 8);
    EXPECT_EQ(p.seqs[0].n_draft, 7);
    EXPECT_EQ(p.n_draft_rows, 7);
    EXPECT_EQ(p.n_decode_rows, 8);
    EXPECT_EQ(s->blocks.size(), 4u);
    f.sched.commit(p);
    EXPECT_EQ(s->n_computed, 9);  // only the pending token; drafts wait for acceptance
    // One draft kept (20), then the target's own token (9).
    s->tokens.push_back(20);
    s->tokens.push_back(9);
    f.sched.accept_drafts(*s, 1);
    EXPECT_EQ(s->n_computed, 10);
    EXPECT_EQ(s->blocks.size(), 3u);  // the block of positions 12..15 held rejected drafts only
    EXPECT_EQ(f.bm.n_used(), 3);
    EXPECT_EQ(f.bm.cache().n_registered(), 2);  // block 2 is not full of accepted tokens
    f.sched.check_invariants();
    // Next: 3 drafts kept fill block 2 (positions 8..11 = 7 20 9 30): registered under the
    // accepted tokens' hash.
    s->draft = {30, 31, 32};
    p = f.sched.schedule();
    EXPECT_EQ(p.seqs[0].n_draft, 3);
    f.sched.commit(p);
    for (int32_t t : {30, 31, 32, 5}) s->tokens.push_back(t);
    f.sched.accept_drafts(*s, 3);
    EXPECT_EQ(s->n_computed, 14);
    EXPECT_EQ(f.bm.cache().n_registered(), 3);
    const std::vector<int32_t> b2 = {7, 20, 9, 30};
    EXPECT_TRUE(f.bm.cache().contains(ze::chain_hash(s->block_hashes[1], b2)));
    f.sched.check_invariants();
    f.sched.remove(s);
    EXPECT_EQ(f.bm.n_used(), 0);
}

TEST(SpecScheduler, DraftRowsCutByBudgetAndBlocksNeverPreempt) {
    {
        SchedFixture f(5, 32, 4);  // budget 5: one decode row + 4 draft rows
        ze::Sequence* s = f.add(5, 32);
        f.sched.commit(f.sched.schedule());
        s->tokens.push_back(1);
        s->draft = {2, 3, 4, 5, 6, 7};
        const ze::StepPlan p = f.sched.schedule();
        EXPECT_EQ(p.seqs[0].n_draft, 4);
        EXPECT_EQ(p.n_draft_cut, 2);
        EXPECT_EQ(p.n_tokens, 5);
    }
    {
        SchedFixture f(64, 3, 4);  // 3 blocks: 12 positions
        ze::Sequence* s = f.add(7, 5);
        f.sched.commit(f.sched.schedule());
        s->tokens.push_back(1);            // 8 tokens: 2 blocks used, 1 free
        s->draft = {2, 3, 4, 5, 6, 7, 8};  // would need positions up to 14: 4 blocks
        const ze::StepPlan p = f.sched.schedule();
        ASSERT_EQ(p.seqs.size(), 1u);
        EXPECT_EQ(p.seqs[0].n_draft, 0);  // no room: a plain decode, nothing preempted
        EXPECT_EQ(p.n_draft_cut, 7);
        EXPECT_TRUE(p.preempted.empty());
    }
}
