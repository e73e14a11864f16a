// tests/unit/engine/device_sampling_test.cpp — the host side of sampling on a device
// (model::Runner::forward_sample, engine::Sampler::device_row / device_done) without a GPU.
//
// * Sampler: device_row's penalty window (distinct in-range ids with counts, the last
//   penalty_last_n tokens), its uniform is the seed's next mt19937_64 draw and stays pending
//   until device_done(used) or sample() consumes it, and sample()'s draw walks the kept
//   candidates in ascending id (the order a device sampler reproduces without sorting).
// * Engine: over a fake "device" Runner (the CPU tier plus a brute-force sampler fed the rows
//   and uniforms the engine hands to forward_sample), seeded requests with temperature,
//   truncation and penalties give exactly the tokens of the plain CPU-tier engine; a step with a
//   logprobs request takes the host path.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/model.h"

namespace ze = zinc::engine;
namespace zm = zinc::model;

namespace {

double uniform_of(std::mt19937_64& r) {
    return static_cast<double>(r() >> 11) * 0x1.0p-53;
}

ze::SamplerOptions sampling(float t, int k, float p, float m) {
    ze::SamplerOptions o;
    o.temperature = t;
    o.top_k = k;
    o.top_p = p;
    o.min_p = m;
    return o;
}

TEST(DeviceSampling, PenaltyWindowIsDistinctInRangeIdsWithCounts) {
    ze::SamplerOptions o = sampling(1.f, 0, 1.f, 0.f);
    o.repeat_penalty = 1.1f;
    o.penalty_last_n = 6;
    ze::Sampler s(o);
    const std::vector<int32_t> h = {9, 9, 3, 7, 3, 3, -1, 12, 3};  // window: 7 3 3 -1 12 3
    const zm::RowSampling r = s.device_row(h, 10);
    ASSERT_EQ(r.penalty_ids.size(), 2u);
    EXPECT_EQ(r.penalty_ids[0], 3);
    EXPECT_EQ(r.penalty_counts[0], 3);
    EXPECT_EQ(r.penalty_ids[1], 7);
    EXPECT_EQ(r.penalty_counts[1], 1);
    EXPECT_FLOAT_EQ(r.repeat_penalty, 1.1f);
    // No penalty on: no window.
    ze::Sampler plain(sampling(1.f, 0, 1.f, 0.f));
    EXPECT_TRUE(plain.device_row(h, 10).penalty_ids.empty());
}

TEST(DeviceSampling, UniformIsTheSeedsNextDrawAndStaysPending) {
    ze::SamplerOptions o = sampling(0.8f, 40, 0.95f, 0.05f);
    o.seed = 4242;
    std::mt19937_64 ref(4242);
    const double u1 = uniform_of(ref), u2 = uniform_of(ref), u3 = uniform_of(ref);
    ze::Sampler s(o);
    EXPECT_EQ(s.device_row({}, 100).uniform, u1);
    EXPECT_EQ(s.device_row({}, 100).uniform, u1);  // peeking twice does not advance
    zm::SampledToken unused;
    unused.used_uniform = false;  // e.g. no finite logit
    s.device_done(unused);
    EXPECT_EQ(s.device_row({}, 100).uniform, u1);
    zm::SampledToken used;
    used.used_uniform = true;
    s.device_done(used);
    EXPECT_EQ(s.device_row({}, 100).uniform, u2);
    // sample() consumes the pending draw: afterwards the stream continues at u3.
    std::vector<float> l = {1.f, 2.f, 3.f};
    s.sample(l, {});
    EXPECT_EQ(s.device_row({}, 100).uniform, u3);
    // Greedy never draws.
    ze::Sampler g(sampling(0.f, 0, 1.f, 0.f));
    EXPECT_EQ(g.device_row({}, 100).uniform, 0.0);
}

TEST(DeviceSampling, PeekingDoesNotChangeTheHostTokens) {
    std::mt19937 rng(7);
    std::normal_distribution<float> g(0.f, 2.f);
    ze::SamplerOptions o = sampling(0.9f, 50, 0.9f, 0.02f);
    o.seed = 99;
    ze::Sampler a(o), b(o);
    for (int step = 0; step < 200; ++step) {
        std::vector<float> l(500);
        for (auto& x : l) x = g(rng);
        if (step % 3 == 0) a.device_row({}, 500);  // peeked, then sampled on the host
        EXPECT_EQ(a.sample(l, {}), b.sample(l, {})) << step;
    }
}

// The first uniform of seed s.
double first_uniform(uint64_t s) {
    std::mt19937_64 r(s);
    return uniform_of(r);
}

TEST(DeviceSampling, DrawWalksKeptCandidatesInAscendingId) {
    // p = (1/4, 1/4, 1/2) before truncation; top-k 2 keeps ids 2 (best) and 0 (tie with 1,
    // lower id): 0 has 1/3 and 2 has 2/3 of the kept mass. Walking in ascending id, a uniform
    // below 1/3 picks 0 and above picks 2 (best-first order would do the opposite).
    const std::vector<float> l = {0.f, 0.f, std::log(2.f)};
    int checked_low = 0, checked_high = 0;
    for (uint64_t seed = 1; seed < 200 && (checked_low < 5 || checked_high < 5); ++seed) {
        const double u = first_uniform(seed);
        if (std::fabs(u - 1.0 / 3.0) < 1e-6) continue;
        ze::SamplerOptions o = sampling(1.f, 2, 1.f, 0.f);
        o.seed = seed;
        ze::Sampler s(o);
        const int32_t t = s.sample(l, {});
        if (u < 1.0 / 3.0) {
            EXPECT_EQ(t, 0) << "u " << u;
            ++checked_low;
        } else {
            EXPECT_EQ(t, 2) << "u " << u;
            ++checked_high;
        }
    }
    EXPECT_GE(checked_low, 5);
    EXPECT_GE(checked_high, 5);
}

// ---------------------------------------------------------------- engine over a fake device

// Brute force, written from sampler.h's contract: penalties, candidates sorted best-first,
// top-k, nucleus, min-p, probabilities at the temperature, draw in ascending id.
int32_t brute_sample(std::vector<float> l, const zm::RowSampling& r, bool& used) {
    const float ninf = -INFINITY;
    for (auto& x : l)
        if (std::isnan(x)) x = ninf;
    for (size_t j = 0; j < r.penalty_ids.size(); ++j) {
        float& x = l[static_cast<size_t>(r.penalty_ids[j])];
        if (std::isinf(x)) continue;
        x = x <= 0.f ? x * r.repeat_penalty : x / r.repeat_penalty;
        x -= static_cast<float>(r.penalty_counts[j]) * r.frequency_penalty + r.presence_penalty;
    }
    used = false;
    if (r.temperature <= 0.f) return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    std::vector<int32_t> c;
    for (size_t i = 0; i < l.size(); ++i)
        if (l[i] != ninf) c.push_back(static_cast<int32_t>(i));
    if (c.empty()) return 0;
    used = true;
    std::sort(c.begin(), c.end(), [&](int32_t a, int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; });
    if (r.top_k > 0 && static_cast<size_t>(r.top_k) < l.size() && c.size() > static_cast<size_t>(r.top_k))
        c.resize(static_cast<size_t>(r.top_k));
    const float mx = l[c[0]];
    if (r.top_p < 1.f) {
        double z = 0, cum = 0;
        for (int32_t i : c) z += std::exp(static_cast<double>(l[i] - mx));
        for (size_t j = 0; j < c.size(); ++j) {
            cum += std::exp(static_cast<double>(l[c[j]] - mx));
            if (cum >= static_cast<double>(r.top_p) * z) {
                c.resize(j + 1);
                break;
            }
        }
    }
    if (r.min_p > 0.f) {
        const float thr = mx + std::log(std::min(r.min_p, 1.f));
        c.erase(std::remove_if(c.begin(), c.end(), [&](int32_t i) { return l[i] < thr; }), c.end());
    }
    std::sort(c.begin(), c.end());
    const float inv_t = 1.f / r.temperature;
    std::vector<float> p;
    double z = 0;
    for (int32_t i : c) {
        const double d = static_cast<double>(l[i] - mx);
        p.push_back(d == 0.0 ? 1.f : static_cast<float>(std::exp(d * inv_t)));
        z += p.back();
    }
    const double target = r.uniform * z;
    double cum = 0;
    for (size_t j = 0; j < c.size(); ++j) {
        cum += p[j];
        if (target < cum) return c[j];
    }
    return c.back();
}

// The host sampler against the brute force fed the same uniform, on large vocabularies whose
// kept sets are large and come out of the top-p bucketed path unordered (the id-order draw then
// rebuilds them from a mask), and on the top-k path.
TEST(DeviceSampling, HostSamplerEqualsBruteForceWithTheSameUniform) {
    std::mt19937 rng(11);
    const int V = 100000;
    int n = 0;
    for (int c = 0; c < 24; ++c) {
        std::normal_distribution<float> g(0.f, c % 3 == 0 ? 0.2f : c % 3 == 1 ? 1.0f : 4.0f);
        std::vector<float> l(V);
        for (auto& x : l) x = g(rng);
        ze::SamplerOptions o = c % 4 == 0   ? sampling(1.f, 0, 0.95f, 0.f)
                               : c % 4 == 1 ? sampling(0.7f, 0, 0.5f, 0.001f)
                               : c % 4 == 2 ? sampling(1.2f, 0, 1.f, 0.f)
                                            : sampling(0.9f, 300, 0.9f, 0.f);
        o.seed = 500 + static_cast<uint64_t>(c);
        ze::Sampler s(o);
        zm::RowSampling r = s.device_row({}, V);  // the uniform the host will use
        bool used = false;
        const int32_t want = brute_sample(l, r, used);
        EXPECT_EQ(s.sample(l, {}), want) << "case " << c;
        EXPECT_TRUE(used);
        ++n;
    }
    EXPECT_EQ(n, 24);
}

class FakeDeviceRunner final : public zm::Runner {
  public:
    FakeDeviceRunner(std::unique_ptr<zm::Runner> cpu, int32_t n_vocab, std::atomic<int>* n_sampled,
                     std::atomic<int>* n_forward)
        : cpu_(std::move(cpu)), n_vocab_(n_vocab), n_sampled_(n_sampled), n_forward_(n_forward) {}
    zinc::Result<void> forward(const zm::Batch& b, float* logits) override {
        ++*n_forward_;
        return cpu_->forward(b, logits);
    }
    void copy_block(int32_t s, int32_t d) override { cpu_->copy_block(s, d); }
    const zm::RunnerOptions& options() const override { return cpu_->options(); }
    std::string tier() const override { return "fake-device"; }
    size_t kv_bytes() const override { return cpu_->kv_bytes(); }
    bool samples_on_device() const override { return true; }
    zinc::Result<void> forward_sample(const zm::Batch& b, std::span<const zm::RowSampling> rows,
                                      zm::SampledToken* out, bool want_logprob) override {
        ++*n_sampled_;
        std::vector<float> l(rows.size() * static_cast<size_t>(n_vocab_));
        if (auto r = cpu_->forward(b, l.data()); !r) return r;
        for (size_t i = 0; i < rows.size(); ++i) {
            std::vector<float> row(l.begin() + static_cast<std::ptrdiff_t>(i * n_vocab_),
                                   l.begin() + static_cast<std::ptrdiff_t>((i + 1) * n_vocab_));
            bool used = false;
            out[i].id = brute_sample(row, rows[i], used);
            out[i].used_uniform = used;
        }
        return {};
    }

  private:
    std::unique_ptr<zm::Runner> cpu_;
    int32_t n_vocab_;
    std::atomic<int>* n_sampled_;
    std::atomic<int>* n_forward_;
};

struct Loaded {
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

const Loaded& smollm() {
    static Loaded* l = [] {
        auto* x = new Loaded;
        auto f = zinc::gguf::File::open(std::string(ZINC_SOURCE_DIR) +
                                        "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
        if (!f.ok()) return x;
        x->file = std::move(f.value());
        auto m = zm::Model::load(*x->file, {});
        if (m.ok()) x->model = std::move(m.value());
        return x;
    }();
    return *l;
}

struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> ids;
    bool finished = false;
    ze::EventSink sink() {
        return [this](const ze::Event& ev) {
            std::lock_guard<std::mutex> lk(mu);
            for (const auto& t : ev.tokens) ids.push_back(t.id);
            if (ev.finished) {
                finished = true;
                cv.notify_all();
            }
        };
    }
    bool wait() {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::seconds(120), [&] { return finished; });
    }
};

std::vector<ze::RequestParams> requests(int32_t n_vocab, int logprobs_every) {
    std::vector<ze::RequestParams> v;
    for (int i = 0; i < 6; ++i) {
        ze::RequestParams p;
        for (int j = 0; j < 5 + i; ++j) p.prompt.push_back(50 + (i * 977 + j * 131) % (n_vocab - 100));
        p.max_tokens = 20;
        p.ignore_eos = true;
        p.sampling = i % 3 == 0   ? sampling(0.f, 0, 1.f, 0.f)
                     : i % 3 == 1 ? sampling(0.9f, 40, 0.95f, 0.05f)
                                  : sampling(1.3f, 0, 0.9f, 0.f);
        if (i == 5) {
            p.sampling.repeat_penalty = 1.3f;
            p.sampling.presence_penalty = 0.5f;
            p.sampling.frequency_penalty = 0.2f;
        }
        p.sampling.seed = 1000 + static_cast<uint64_t>(i);
        if (logprobs_every > 0 && i % logprobs_every == 0) p.top_logprobs = 2;
        v.push_back(std::move(p));
    }
    return v;
}

std::vector<std::vector<int32_t>> run(const zm::Model& model, bool fake, int logprobs_every,
                                      std::atomic<int>& n_sampled, std::atomic<int>& n_forward) {
    ze::EngineOptions o;
    o.n_parallel = 8;
    o.n_ctx = 128;
    o.block_size = 16;
    o.max_batch_tokens = 128;
    o.n_threads = 2;
    if (fake) {
        const int32_t V = model.n_vocab();
        o.make_runner = [&model, V, &n_sampled,
                         &n_forward](const zm::RunnerOptions& ro) -> zinc::Result<std::unique_ptr<zm::Runner>> {
            auto cpu = zm::Runner::create_cpu(model, ro);
            if (!cpu) return cpu.error();
            return std::unique_ptr<zm::Runner>(
                new FakeDeviceRunner(std::move(cpu.value()), V, &n_sampled, &n_forward));
        };
    }
    auto eng = ze::Engine::create(model, o);
    EXPECT_TRUE(eng.ok());
    if (!eng.ok()) return {};
    std::vector<std::unique_ptr<Collector>> cs;
    for (auto& p : requests(model.n_vocab(), logprobs_every)) {
        cs.push_back(std::make_unique<Collector>());
        auto r = eng.value()->submit(std::move(p), cs.back()->sink());
        EXPECT_TRUE(std::holds_alternative<ze::RequestId>(r));
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& c : cs) {
        EXPECT_TRUE(c->wait());
        out.push_back(c->ids);
    }
    return out;
}

TEST(DeviceSampling, EngineOverADeviceSamplerGivesTheHostTokens) {
    const Loaded& L = smollm();
    ASSERT_TRUE(L.model) << "models/SmolLM2-135M-Instruct.Q4_1.gguf missing";
    std::atomic<int> s0{0}, f0{0}, s1{0}, f1{0};
    const auto host = run(*L.model, false, 0, s0, f0);
    const auto dev = run(*L.model, true, 0, s1, f1);
    ASSERT_EQ(host.size(), 6u);
    EXPECT_EQ(dev, host);
    for (const auto& t : host) EXPECT_EQ(t.size(), 20u);
    EXPECT_GT(s1.load(), 0);
    EXPECT_EQ(f1.load(), 0) << "every step should have sampled on the device";
    // Different seeds would differ: the sampled requests are not all greedy-equal.
    EXPECT_NE(host[1], host[4]);
}

TEST(DeviceSampling, StepsWithALogprobsRequestUseTheHostPath) {
    const Loaded& L = smollm();
    ASSERT_TRUE(L.model) << "models/SmolLM2-135M-Instruct.Q4_1.gguf missing";
    std::atomic<int> s0{0}, f0{0}, s1{0}, f1{0};
    const auto host = run(*L.model, false, 5, s0, f0);  // requests 0 and 5 want logprobs
    const auto dev = run(*L.model, true, 5, s1, f1);
    EXPECT_EQ(dev, host);
    EXPECT_GT(f1.load(), 0);
}

}  // namespace
