// tests/unit/engine/engine_test.cpp — the Engine on the real SmolLM2-135M model (CPU tier).
//
// The oracle for every greedy run is model::Context (one sequence, contiguous KV, checked
// against llama.cpp by tests/py/test_model_goldens.py) driven token by token with argmax: a
// request through the engine must give exactly its tokens, whether it runs alone, beside 15
// others, after a prefix-cache hit, with any prefill chunk size, or after being preempted by a
// KV pool too small for all of them. Also: logprobs against a log-softmax of the Context's
// logits, cancellation releasing blocks, EOG stops, and submit() refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
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

#define NEED_MODEL()                                                        \
    const Loaded& L = smollm();                                             \
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
        t = static_cast<int32_t>((x * 2685821657736338717ull) % static_cast<uint64_t>(n_vocab - 100)) + 50;
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
