// tests/unit/engine/engine_test.cpp — the Engine on the real SmolLM2-135M model (CPU tier).
//
// The oracle for every greedy run is model::Context (one sequence, contiguous KV, checked
// against llama.cpp by tests/py/test_model_goldens.py) driven token by token with argmax: a
// request through the engine must give exactly its tokens, whether it runs alone, beside 15
// others, after a prefix-cache hit, with any prefill chunk size, or after being preempted by a
// KV pool too small for all of them. Also: logprobs against a log-softmax of the Context's
// logits, cancellation releasing blocks, EOG stops, and submit() refusals.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"

namespace ze = zinc::engine;
namespace zm = zinc::model;

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

// Deterministic pseudo-prompts: token ids from a fixed generator (no tokenizer needed).
std::vector<int32_t> prompt_of(int seed, int n, int32_t n_vocab) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(seed + 1);
    for (auto& t : p) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        t = static_cast<int32_t>((x * 2685821657736338717ull) %
                                 static_cast<uint64_t>(n_vocab - 100)) +
            50;
    }
    return p;
}

int32_t argmax(const float* l, int32_t n) {
    return static_cast<int32_t>(std::max_element(l, l + n) - l);
}

// Greedy continuation by the single-sequence Context (the oracle).
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
        if (i + 1 < n_gen) {
            const int32_t one[1] = {t};
            EXPECT_TRUE(c.eval(one).ok());
        }
    }
    return out;
}

// Collects one request's events; wait() blocks until the final one.
struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<ze::GeneratedToken> tokens;
    bool finished = false;
    ze::FinishReason reason = ze::FinishReason::Error;
    ze::Usage usage;
    std::string error;
    int events_after_finish = 0;

    ze::EventSink sink() {
        return [this](const ze::Event& ev) {
            std::lock_guard<std::mutex> lk(mu);
            if (finished) ++events_after_finish;
            for (const auto& t : ev.tokens) tokens.push_back(t);
            usage = ev.usage;
            if (ev.finished) {
                finished = true;
                reason = ev.reason;
                error = ev.error;
                cv.notify_all();
            }
        };
    }
    bool wait(int seconds = 120) {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::seconds(seconds), [&] { return finished; });
    }
    std::vector<int32_t> ids() {
        std::lock_guard<std::mutex> lk(mu);
        std::vector<int32_t> v;
        for (const auto& t : tokens) v.push_back(t.id);
        return v;
    }
};

ze::RequestParams greedy(std::vector<int32_t> prompt, int max_tokens) {
    ze::RequestParams p;
    p.prompt = std::move(prompt);
    p.max_tokens = max_tokens;
    p.sampling.temperature = 0.0f;
    p.ignore_eos = true;
    return p;
}

ze::EngineOptions base_options() {
    ze::EngineOptions o;
    o.n_parallel = 16;
    o.n_ctx = 256;
    o.block_size = 16;
    o.max_batch_tokens = 256;
    o.n_threads = 2;
    return o;
}

ze::RequestId submit_ok(ze::Engine& e, ze::RequestParams p, Collector& c) {
    auto r = e.submit(std::move(p), c.sink());
    EXPECT_TRUE(std::holds_alternative<ze::RequestId>(r))
        << (std::holds_alternative<ze::SubmitError>(r) ? std::get<ze::SubmitError>(r).message : "");
    return std::holds_alternative<ze::RequestId>(r) ? std::get<ze::RequestId>(r) : 0;
}

// Wait until the engine's stats satisfy pred (the step thread publishes after each step).
template <class P>
ze::EngineStats wait_stats(const ze::Engine& e, P pred) {
    for (int i = 0; i < 2000; ++i) {
        const ze::EngineStats s = e.stats();
        if (pred(s)) return s;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return e.stats();
}

}  // namespace

TEST(Engine, SingleGreedyRequestMatchesContext) {
    NEED_MODEL();
    const auto prompt = prompt_of(1, 21, model.n_vocab());
    const auto expect = context_greedy(model, prompt, 12);
    auto eng = ze::Engine::create(model, base_options());
    ASSERT_TRUE(eng.ok()) << eng.error().message;
    Collector c;
    submit_ok(*eng.value(), greedy(prompt, 12), c);
    ASSERT_TRUE(c.wait());
    EXPECT_EQ(c.reason, ze::FinishReason::Length);
    EXPECT_EQ(c.ids(), expect);
    EXPECT_EQ(c.usage.prompt_tokens, 21);
    EXPECT_EQ(c.usage.completion_tokens, 12);
    EXPECT_EQ(c.events_after_finish, 0);
}

namespace {

// Run every request of `prompts` at once through one engine and return each one's tokens.
std::vector<std::vector<int32_t>> run_all(const zm::Model& model, const ze::EngineOptions& o,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          int n_gen, ze::EngineStats* stats = nullptr) {
    auto eng = ze::Engine::create(model, o);
    EXPECT_TRUE(eng.ok()) << (eng.ok() ? "" : eng.error().message);
    if (!eng.ok()) return {};
    std::vector<std::unique_ptr<Collector>> cs;
    for (const auto& p : prompts) {
        cs.push_back(std::make_unique<Collector>());
        submit_ok(*eng.value(), greedy(p, n_gen), *cs.back());
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& c : cs) {
        EXPECT_TRUE(c->wait());
        EXPECT_EQ(c->reason, ze::FinishReason::Length);
        out.push_back(c->ids());
    }
    const ze::EngineStats s = wait_stats(*eng.value(), [](const ze::EngineStats& s) {
        return s.kv_blocks_used == 0 && s.slots_busy == 0;
    });
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.kv_blocks_free + s.kv_blocks_cached, s.kv_blocks_total);
    if (stats) *stats = s;
    return out;
}

std::vector<std::vector<int32_t>> oracle(const zm::Model& model,
                                         const std::vector<std::vector<int32_t>>& prompts,
                                         int n_gen) {
    std::vector<std::vector<int32_t>> out;
    for (const auto& p : prompts) out.push_back(context_greedy(model, p, n_gen));
    return out;
}

// 16 prompts of mixed lengths; half of them share a 37-token prefix (two full blocks + 5).
std::vector<std::vector<int32_t>> sixteen_prompts(int32_t n_vocab) {
    const auto shared = prompt_of(100, 37, n_vocab);
    std::vector<std::vector<int32_t>> ps;
    for (int i = 0; i < 16; ++i) {
        auto own = prompt_of(200 + i, 3 + (i * 7) % 29, n_vocab);
        if (i % 2 == 0) own.insert(own.begin(), shared.begin(), shared.end());
        ps.push_back(own);
    }
    return ps;
}

}  // namespace

TEST(Engine, SixteenConcurrentGreedyEqualEachAlone) {
    NEED_MODEL();
    const auto prompts = sixteen_prompts(model.n_vocab());
    const int n_gen = 8;
    const auto expect = oracle(model, prompts, n_gen);
    ze::EngineStats s;
    const auto got = run_all(model, base_options(), prompts, n_gen, &s);
    ASSERT_EQ(got.size(), expect.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expect[i]) << "request " << i;
    EXPECT_EQ(s.requests_finished, 16u);
    EXPECT_EQ(s.generated_tokens, 16u * n_gen);
    // They were batched: far fewer steps than 16 requests one after another would take.
    EXPECT_LT(s.steps, 16u * n_gen / 2);
}

TEST(Engine, ChunkedPrefillAnyChunkSizeSameTokens) {
    NEED_MODEL();
    auto prompts = sixteen_prompts(model.n_vocab());
    prompts.resize(4);
    const int n_gen = 6;
    const auto expect = oracle(model, prompts, n_gen);
    for (int chunk : {5, 16, 41}) {
        ze::EngineOptions o = base_options();
        o.max_batch_tokens = chunk;
        const auto got = run_all(model, o, prompts, n_gen);
        ASSERT_EQ(got.size(), expect.size());
        for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i], expect[i]) << "request " << i << " max_batch_tokens " << chunk;
        }
    }
}

// A TPOT target bounds each step's rows by the fitted cost model; tokens are the same, and the
// stats say how the steps were split.
TEST(Engine, TpotTargetSameTokensAndStepSplitCounted) {
    NEED_MODEL();
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(prompt_of(40 + i, 30 + 20 * i, model.n_vocab()));
    const int n_gen = 6;
    const auto expect = oracle(model, prompts, n_gen);
    ze::EngineOptions o = base_options();
    o.max_batch_tokens = 64;  // the first (unfitted) step cannot take every prompt
    o.tpot_target_ms = 0.5;   // below any real step: the budget sits at decodes + min chunk
    o.min_prefill_chunk = 4;
    ze::EngineStats s;
    const auto got = run_all(model, o, prompts, n_gen, &s);
    ASSERT_EQ(got.size(), expect.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expect[i]) << "request " << i;
    uint64_t prompt_rows = 0;
    for (const auto& p : prompts) prompt_rows += p.size();
    EXPECT_EQ(s.step_prefill_rows, prompt_rows);
    EXPECT_EQ(s.step_decode_rows, prompts.size() * (n_gen - 1));
    EXPECT_EQ(s.steps_decode_only + s.steps_prefill_only + s.steps_mixed, s.steps);
    EXPECT_GT(s.steps_mixed, 0u);
    uint64_t n = 0;
    for (uint64_t c : s.step_seconds_buckets) n += c;
    EXPECT_EQ(n, s.steps);
    EXPECT_GT(s.step_seconds_sum, 0.0);
    EXPECT_GT(s.step_model_b_ms, 0.0);
    // Each step was held to at most its decodes + 4 prefill rows once the model had a fit:
    // the budget over all steps is far below steps x max_batch_tokens.
    EXPECT_LT(s.step_budget_rows, s.steps * static_cast<uint64_t>(o.max_batch_tokens) / 2);
}

TEST(Engine, PrefixCacheHitEqualsMiss) {
    NEED_MODEL();
    // 48 tokens: three full blocks, so a repeat is a full hit (the last token is recomputed in
    // a private copy of the last block); 45 tokens: two full blocks hit, a partial one not.
    for (int n_prompt : {48, 45}) {
        const auto prompt = prompt_of(7, n_prompt, model.n_vocab());
        const auto expect = context_greedy(model, prompt, 10);
        auto eng = ze::Engine::create(model, base_options());
        ASSERT_TRUE(eng.ok());
        Collector first;
        submit_ok(*eng.value(), greedy(prompt, 10), first);
        ASSERT_TRUE(first.wait());
        EXPECT_EQ(first.ids(), expect);
        EXPECT_EQ(first.usage.cached_prompt_tokens, 0);
        // Twice more at once: both hit the cache and share its blocks with each other.
        Collector a, b;
        submit_ok(*eng.value(), greedy(prompt, 10), a);
        submit_ok(*eng.value(), greedy(prompt, 10), b);
        ASSERT_TRUE(a.wait() && b.wait());
        EXPECT_EQ(a.ids(), expect) << n_prompt;
        EXPECT_EQ(b.ids(), expect) << n_prompt;
        const int full = n_prompt / 16;
        EXPECT_EQ(a.usage.cached_prompt_tokens, std::min(full * 16, n_prompt - 1));
        const ze::EngineStats s = wait_stats(
            *eng.value(), [](const ze::EngineStats& s) { return s.kv_blocks_used == 0; });
        EXPECT_EQ(s.prefix_hits_blocks, 2u * full);
        EXPECT_EQ(s.prefix_miss_cold, static_cast<uint64_t>(full));
        EXPECT_EQ(s.prefix_miss_partial, n_prompt % 16 ? 3u : 0u);
        EXPECT_EQ(s.kv_blocks_used, 0);
        EXPECT_GT(s.kv_blocks_cached, 0);
    }
}

TEST(Engine, PrefixCacheOffSameTokensAndCountsDisabled) {
    NEED_MODEL();
    const auto prompt = prompt_of(8, 40, model.n_vocab());
    const auto expect = context_greedy(model, prompt, 6);
    ze::EngineOptions o = base_options();
    o.prefix_cache = false;
    ze::EngineStats s;
    const auto got = run_all(model, o, {prompt, prompt}, 6, &s);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], expect);
    EXPECT_EQ(got[1], expect);
    EXPECT_EQ(s.prefix_hits_blocks, 0u);
    EXPECT_EQ(s.prefix_miss_disabled, 2u * 3u);  // 2 full blocks + 1 partial, twice
    EXPECT_EQ(s.kv_blocks_cached, 0);
}

TEST(Engine, PreemptionUnderTinyPoolSameTokens) {
    NEED_MODEL();
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(prompt_of(300 + i, 18 + 3 * i, model.n_vocab()));
    const int n_gen = 24;
    const auto expect = oracle(model, prompts, n_gen);
    ze::EngineOptions o = base_options();
    o.n_ctx = 64;
    o.n_kv_blocks = 5;  // one full sequence (4 blocks) + 1: four requests cannot all fit
    o.n_parallel = 4;
    ze::EngineStats s;
    const auto got = run_all(model, o, prompts, n_gen, &s);
    ASSERT_EQ(got.size(), expect.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expect[i]) << "request " << i;
    EXPECT_GT(s.preemptions, 0u);
}

TEST(Engine, SeededSamplingSameAloneOrBatched) {
    NEED_MODEL();
    const auto prompt = prompt_of(9, 30, model.n_vocab());
    auto sampled = [&](ze::Engine& e, Collector& c) {
        ze::RequestParams p = greedy(prompt, 12);
        p.sampling.temperature = 0.9f;
        p.sampling.top_k = 0;
        p.sampling.top_p = 1.0f;
        p.sampling.min_p = 0.0f;
        p.sampling.seed = 42;
        submit_ok(e, std::move(p), c);
    };
    auto e1 = ze::Engine::create(model, base_options());
    ASSERT_TRUE(e1.ok());
    Collector alone;
    sampled(*e1.value(), alone);
    ASSERT_TRUE(alone.wait());
    auto e2 = ze::Engine::create(model, base_options());
    ASSERT_TRUE(e2.ok());
    std::vector<std::unique_ptr<Collector>> others;
    for (int i = 0; i < 7; ++i) {
        others.push_back(std::make_unique<Collector>());
        submit_ok(*e2.value(), greedy(prompt_of(400 + i, 10 + i, model.n_vocab()), 12),
                  *others.back());
    }
    Collector batched;
    sampled(*e2.value(), batched);
    ASSERT_TRUE(batched.wait());
    for (auto& c : others) ASSERT_TRUE(c->wait());
    EXPECT_EQ(alone.ids(), batched.ids());
    EXPECT_EQ(alone.ids().size(), 12u);
}

TEST(Engine, LogprobsAreLogSoftmaxOfRawLogits) {
    NEED_MODEL();
    const auto prompt = prompt_of(10, 15, model.n_vocab());
    zm::ContextOptions co;
    co.n_ctx = 64;
    co.n_threads = 2;
    auto ctx = zm::Context::create(model, co);
    ASSERT_TRUE(ctx.ok());
    auto eng = ze::Engine::create(model, base_options());
    ASSERT_TRUE(eng.ok());
    Collector c;
    ze::RequestParams p = greedy(prompt, 3);
    p.top_logprobs = 5;
    p.sampling.repeat_penalty = 1.3f;  // changes the pick's logits, not the reported logprobs
    submit_ok(*eng.value(), std::move(p), c);
    ASSERT_TRUE(c.wait());
    std::vector<ze::GeneratedToken> toks;
    {
        std::lock_guard<std::mutex> lk(c.mu);
        toks = c.tokens;
    }
    ASSERT_EQ(toks.size(), 3u);
    std::vector<int32_t> feed = prompt;
    for (const auto& g : toks) {
        ASSERT_TRUE(ctx.value()->eval(feed).ok());
        const float* l = ctx.value()->logits(-1);
        const int32_t n = model.n_vocab();
        double mx = -1e300, sum = 0;
        for (int32_t i = 0; i < n; ++i) mx = std::max(mx, double(l[i]));
        for (int32_t i = 0; i < n; ++i) sum += std::exp(double(l[i]) - mx);
        const double lse = mx + std::log(sum);
        EXPECT_NEAR(g.logprob, double(l[g.id]) - lse, 1e-4);
        ASSERT_EQ(g.top.size(), 5u);
        std::vector<int32_t> order(static_cast<size_t>(n));
        for (int32_t i = 0; i < n; ++i) order[i] = i;
        std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                          [&](int32_t a, int32_t b) { return l[a] > l[b]; });
        for (int k = 0; k < 5; ++k) {
            EXPECT_EQ(g.top[k].id, order[k]);
            EXPECT_NEAR(g.top[k].logprob, double(l[order[k]]) - lse, 1e-4);
        }
        feed = {g.id};
    }
}

TEST(Engine, EogStopsWithoutReportingTheToken) {
    NEED_MODEL();
    const auto prompt = prompt_of(11, 12, model.n_vocab());
    const auto expect = context_greedy(model, prompt, 8);
    size_t stop_at = 3;
    while (stop_at < expect.size() && std::find(expect.begin(), expect.begin() + stop_at,
                                                expect[stop_at]) != expect.begin() + stop_at) {
        ++stop_at;
    }
    ASSERT_LT(stop_at, expect.size());
    ze::EngineOptions o = base_options();
    o.eog_tokens = {expect[stop_at]};
    auto eng = ze::Engine::create(model, o);
    ASSERT_TRUE(eng.ok());
    Collector c;
    ze::RequestParams p = greedy(prompt, 8);
    p.ignore_eos = false;
    submit_ok(*eng.value(), std::move(p), c);
    ASSERT_TRUE(c.wait());
    EXPECT_EQ(c.reason, ze::FinishReason::Eog);
    EXPECT_EQ(c.ids(), std::vector<int32_t>(expect.begin(), expect.begin() + stop_at));
    EXPECT_EQ(c.usage.completion_tokens, static_cast<int32_t>(stop_at));
}

TEST(Engine, CancelReleasesBlocksWithinAStep) {
    NEED_MODEL();
    ze::EngineOptions o = base_options();
    o.n_parallel = 2;
    auto eng = ze::Engine::create(model, o);
    ASSERT_TRUE(eng.ok());
    ze::Engine& e = *eng.value();
    // 1. A running request, cancelled after a few tokens from the test thread.
    Collector running;
    const ze::RequestId id = submit_ok(e, greedy(prompt_of(12, 40, model.n_vocab()), 200), running);
    for (int i = 0; i < 4000 && running.ids().size() < 3; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_GE(running.ids().size(), 3u);
    EXPECT_GT(e.stats().kv_blocks_used, 0);
    e.cancel(id);
    ASSERT_TRUE(running.wait());
    EXPECT_EQ(running.reason, ze::FinishReason::Cancelled);
    EXPECT_LT(running.ids().size(), 200u);
    // 2. A request that cancels itself from its own sink at its first token.
    Collector self;
    ze::RequestId self_id = 0;
    std::mutex id_mu;
    auto inner = self.sink();
    auto r = e.submit(greedy(prompt_of(13, 20, model.n_vocab()), 100), [&](const ze::Event& ev) {
        inner(ev);
        if (!ev.finished) {
            std::lock_guard<std::mutex> lk(id_mu);
            e.cancel(self_id);
        }
    });
    {
        std::lock_guard<std::mutex> lk(id_mu);
        self_id = std::get<ze::RequestId>(r);
    }
    ASSERT_TRUE(self.wait());
    EXPECT_EQ(self.reason, ze::FinishReason::Cancelled);
    EXPECT_LE(self.ids().size(), 3u);
    // 3. Requests cancelled while still waiting for a slot (n_parallel = 2).
    std::vector<std::unique_ptr<Collector>> cs;
    std::vector<ze::RequestId> ids;
    for (int i = 0; i < 5; ++i) {
        cs.push_back(std::make_unique<Collector>());
        ids.push_back(
            submit_ok(e, greedy(prompt_of(500 + i, 25, model.n_vocab()), 100), *cs.back()));
    }
    for (ze::RequestId i : ids) e.cancel(i);
    for (auto& c : cs) {
        ASSERT_TRUE(c->wait());
        EXPECT_EQ(c->reason, ze::FinishReason::Cancelled);
        EXPECT_EQ(c->events_after_finish, 0);
    }
    e.cancel(id);         // finished: ignored
    e.cancel(987654321);  // unknown: ignored
    const ze::EngineStats s = wait_stats(e, [](const ze::EngineStats& s) {
        return s.requests_cancelled == 7 && s.kv_blocks_used == 0 && s.slots_busy == 0 &&
               s.queue_depth == 0;
    });
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.kv_blocks_free + s.kv_blocks_cached, s.kv_blocks_total);
    EXPECT_EQ(s.requests_cancelled, 7u);
}

// queue_depth counts every waiting request at every moment: one taken from the inbox is counted
// as waiting until the step after it publishes the scheduler's queue (it read 0 during that
// step before, so a client watching /metrics saw the queue empty while it was not).
TEST(Engine, QueueDepthNeverDipsWhileRequestsWait) {
    NEED_MODEL();
    ze::EngineOptions o = base_options();
    o.n_parallel = 1;
    auto eng = ze::Engine::create(model, o);
    ASSERT_TRUE(eng.ok());
    ze::Engine& e = *eng.value();
    Collector running;
    const ze::RequestId id = submit_ok(e, greedy(prompt_of(14, 30, model.n_vocab()), 200), running);
    for (int i = 0; i < 6000 && running.ids().empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_FALSE(running.ids().empty());
    std::vector<std::unique_ptr<Collector>> cs;
    std::vector<ze::RequestId> ids;
    for (int i = 0; i < 4; ++i) {
        cs.push_back(std::make_unique<Collector>());
        ids.push_back(submit_ok(e, greedy(prompt_of(600 + i, 20, model.n_vocab()), 8), *cs.back()));
        // From its submission on, each one is counted (in the inbox, then in the queue), over
        // several steps of the running request.
        const auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(60))
            ASSERT_EQ(e.stats().queue_depth, i + 1);
    }
    e.cancel(id);
    for (ze::RequestId i : ids) e.cancel(i);
    for (auto& c : cs) ASSERT_TRUE(c->wait());
    ASSERT_TRUE(running.wait());
    EXPECT_EQ(
        wait_stats(e, [](const ze::EngineStats& s) { return s.queue_depth == 0; }).queue_depth, 0);
}

TEST(Engine, SubmitRefusals) {
    NEED_MODEL();
    ze::EngineOptions o = base_options();
    o.n_ctx = 64;
    o.n_parallel = 1;
    o.max_queue = 2;
    auto eng = ze::Engine::create(model, o);
    ASSERT_TRUE(eng.ok());
    ze::Engine& e = *eng.value();
    auto kind = [&](ze::RequestParams p) {
        auto r = e.submit(std::move(p), [](const ze::Event&) {});
        EXPECT_TRUE(std::holds_alternative<ze::SubmitError>(r));
        return std::holds_alternative<ze::SubmitError>(r) ? std::get<ze::SubmitError>(r).kind
                                                          : ze::SubmitErrorKind::ShuttingDown;
    };
    EXPECT_EQ(kind(greedy({}, 4)), ze::SubmitErrorKind::InvalidRequest);
    EXPECT_EQ(kind(greedy({1, model.n_vocab()}, 4)), ze::SubmitErrorKind::InvalidRequest);
    EXPECT_EQ(kind(greedy({1, 2}, 0)), ze::SubmitErrorKind::InvalidRequest);
    EXPECT_EQ(kind(greedy(prompt_of(1, 60, model.n_vocab()), 5)),
              ze::SubmitErrorKind::ContextLength);
    // Fill the slot and the queue with long requests, then one more is QueueFull.
    std::vector<std::unique_ptr<Collector>> cs;
    std::vector<ze::RequestId> ids;
    for (int i = 0; i < 3; ++i) {
        cs.push_back(std::make_unique<Collector>());
        ids.push_back(submit_ok(e, greedy(prompt_of(600 + i, 8, model.n_vocab()), 50), *cs.back()));
        if (i == 0) wait_stats(e, [](const ze::EngineStats& s) { return s.slots_busy == 1; });
    }
    EXPECT_EQ(kind(greedy({1, 2, 3}, 4)), ze::SubmitErrorKind::QueueFull);
    e.shutdown();
    EXPECT_EQ(kind(greedy({1, 2, 3}, 4)), ze::SubmitErrorKind::ShuttingDown);
    for (auto& c : cs) {
        ASSERT_TRUE(c->wait());
        EXPECT_EQ(c->reason, ze::FinishReason::Cancelled);
    }
    e.shutdown();  // idempotent
}

// --max-queue counts requests that wait for a slot, not those about to take a free one: with
// one slot and a queue of one, four requests at once give one running, one queued and two
// refusals; with no queue, exactly the slots are admitted. (A request still in the engine's
// inbox used to count as waiting, so the second one here was refused.)
TEST(Engine, QueueAdmitsSlotsPlusMaxQueue) {
    NEED_MODEL();
    for (const auto& [parallel, queue] : {std::pair{1, 1}, std::pair{2, 0}, std::pair{1, 0}}) {
        ze::EngineOptions o = base_options();
        o.n_ctx = 128;
        o.n_parallel = parallel;
        o.max_queue = queue;
        auto eng = ze::Engine::create(model, o);
        ASSERT_TRUE(eng.ok());
        ze::Engine& e = *eng.value();
        std::vector<std::unique_ptr<Collector>> cs;
        int accepted = 0, full = 0;
        for (int i = 0; i < 4; ++i) {
            cs.push_back(std::make_unique<Collector>());
            auto r =
                e.submit(greedy(prompt_of(700 + i, 8, model.n_vocab()), 60), cs.back()->sink());
            if (std::holds_alternative<ze::RequestId>(r)) {
                ++accepted;
            } else {
                EXPECT_EQ(std::get<ze::SubmitError>(r).kind, ze::SubmitErrorKind::QueueFull);
                ++full;
                cs.pop_back();
            }
        }
        EXPECT_EQ(accepted, parallel + queue) << "parallel " << parallel << " queue " << queue;
        EXPECT_EQ(full, 4 - parallel - queue);
        e.shutdown();
        for (auto& c : cs) ASSERT_TRUE(c->wait());
    }
}

TEST(Engine, CreateRejectsAPoolSmallerThanOneSequence) {
    NEED_MODEL();
    ze::EngineOptions o = base_options();
    o.n_ctx = 256;
    o.n_kv_blocks = 15;  // 16 needed
    auto eng = ze::Engine::create(model, o);
    ASSERT_FALSE(eng.ok());
    EXPECT_NE(eng.error().message.find("cannot hold one full sequence"), std::string::npos);
}

TEST(Engine, CreateRejectsAnInteractiveGuardOutOfRange) {
    NEED_MODEL();
    for (double g : {-0.1, 1.5}) {
        ze::EngineOptions o = base_options();
        o.interactive_guard = g;
        auto eng = ze::Engine::create(model, o);
        ASSERT_FALSE(eng.ok()) << g;
        EXPECT_NE(eng.error().message.find("interactive_guard"), std::string::npos);
        EXPECT_NE(eng.error().message.find("out of range [0, 1]"), std::string::npos);
    }
}

TEST(Engine, ThrowingSinkEndsOnlyItsRequest) {
    NEED_MODEL();
    const auto prompt = prompt_of(14, 10, model.n_vocab());
    const auto expect = context_greedy(model, prompt, 6);
    auto eng = ze::Engine::create(model, base_options());
    ASSERT_TRUE(eng.ok());
    Collector bad_final, good;
    auto inner = bad_final.sink();
    int calls = 0;
    auto r = eng.value()->submit(greedy(prompt, 6), [&](const ze::Event& ev) {
        inner(ev);
        if (++calls == 2) throw std::runtime_error("client went away");
    });
    ASSERT_TRUE(std::holds_alternative<ze::RequestId>(r));
    submit_ok(*eng.value(), greedy(prompt, 6), good);
    ASSERT_TRUE(bad_final.wait() && good.wait());
    EXPECT_EQ(bad_final.reason, ze::FinishReason::Error);
    EXPECT_EQ(good.reason, ze::FinishReason::Length);
    EXPECT_EQ(good.ids(), expect);
    const ze::EngineStats s = eng.value()->stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
}

// Many threads submitting and cancelling requests of every shape against a tiny KV pool
// (preemption, prefix hits, chunked prefill all at once): every request ends exactly once, no
// event follows the final one, counts add up, uncancelled greedy requests still produce the
// Context's tokens, and afterwards no block is used.
TEST(Engine, ConcurrentSubmitCancelStress) {
    NEED_MODEL();
    ze::EngineOptions o = base_options();
    o.n_parallel = 4;
    o.n_ctx = 64;
    o.n_kv_blocks = 4;  // one full sequence: four running ones must preempt
    o.max_batch_tokens = 24;
    o.max_queue = 1000;
    auto eng = ze::Engine::create(model, o);
    ASSERT_TRUE(eng.ok());
    ze::Engine& e = *eng.value();
    const auto stem = prompt_of(700, 20, model.n_vocab());
    struct Req {
        std::vector<int32_t> prompt;
        int max_tokens = 0;
        bool greedy = false, cancelled = false;
        Collector c;
    };
    constexpr int kThreads = 3, kPerThread = 12;
    std::vector<std::unique_ptr<Req>> reqs(kThreads * kPerThread);
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; ++th) {
        threads.emplace_back([&, th] {
            std::mt19937 rng(static_cast<unsigned>(th + 1));
            for (int i = 0; i < kPerThread; ++i) {
                auto r = std::make_unique<Req>();
                r->prompt = rng() % 2 ? stem : prompt_of(800 + th * 100 + i, 0, model.n_vocab());
                const auto tail = prompt_of(900 + th * 100 + i, 1 + static_cast<int>(rng() % 12),
                                            model.n_vocab());
                r->prompt.insert(r->prompt.end(), tail.begin(), tail.end());
                r->max_tokens = 1 + static_cast<int>(rng() % 20);
                ze::RequestParams p = greedy(r->prompt, r->max_tokens);
                r->greedy = rng() % 2 == 0;
                if (!r->greedy) {
                    p.sampling.temperature = 0.8f;
                    p.sampling.seed = rng();
                }
                p.top_logprobs = static_cast<int>(rng() % 4) - 1;
                auto id = e.submit(std::move(p), r->c.sink());
                EXPECT_TRUE(std::holds_alternative<ze::RequestId>(id));
                const int action = static_cast<int>(rng() % 4);
                if (action == 0 && std::holds_alternative<ze::RequestId>(id)) {
                    r->cancelled = true;
                    e.cancel(std::get<ze::RequestId>(id));
                } else if (action == 1 && std::holds_alternative<ze::RequestId>(id)) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 30));
                    r->cancelled = true;
                    e.cancel(std::get<ze::RequestId>(id));
                }
                reqs[th * kPerThread + i] = std::move(r);
            }
        });
    }
    for (auto& t : threads) t.join();
    int checked = 0;
    uint64_t n_cancelled = 0;
    for (auto& r : reqs) {
        ASSERT_TRUE(r->c.wait(300));
        EXPECT_EQ(r->c.events_after_finish, 0);
        const auto ids = r->c.ids();
        EXPECT_LE(static_cast<int>(ids.size()), r->max_tokens);
        if (r->c.reason == ze::FinishReason::Cancelled) {
            EXPECT_TRUE(r->cancelled);
            ++n_cancelled;
            continue;
        }
        EXPECT_EQ(r->c.reason, ze::FinishReason::Length);
        EXPECT_EQ(static_cast<int>(ids.size()), r->max_tokens);
        if (r->greedy && checked < 6) {
            EXPECT_EQ(ids, context_greedy(model, r->prompt, r->max_tokens));
            ++checked;
        }
    }
    const ze::EngineStats s = e.stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.slots_busy, 0);
    EXPECT_EQ(s.queue_depth, 0);
    EXPECT_EQ(s.requests_cancelled, n_cancelled);
    EXPECT_EQ(s.requests_finished + s.requests_cancelled, reqs.size());
    std::printf("stress: %llu preemptions, %llu prefix hit blocks, %llu steps\n",
                static_cast<unsigned long long>(s.preemptions),
                static_cast<unsigned long long>(s.prefix_hits_blocks),
                static_cast<unsigned long long>(s.steps));
}
