// Per-request evidence (runtime/request_evidence.h) cannot lie: the row split sums exactly to the
// step, a request's steps, rows and whole-step op counts follow from its prompt and max_tokens
// (ops per step from the architecture, as test_checked_runner.cpp), the row shares of concurrent
// requests sum to the process counters, and events (a CPU fallback, validation) are reported by
// exactly the requests whose steps had them. The engine runs SmolLM2 on the CPU tier; the
// fallback case wraps the CPU runner in a test runner that reports a forced op on chosen steps
// (the real forced op, ZINC_CPU_OPS, exists only on the CUDA tier: test_evidence_cuda.py).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/model.h"
#include "runtime/checked_runner.h"
#include "runtime/evidence.h"
#include "runtime/request_evidence.h"

namespace rt = zinc::runtime;
namespace zm = zinc::model;
namespace ze = zinc::engine;

namespace {

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

#define NEED_MODEL()                                                          \
    const Loaded& L = smollm();                                               \
    ASSERT_TRUE(L.model) << "models/SmolLM2-135M-Instruct.Q4_1.gguf missing"; \
    const zm::Model& model = *L.model

// One request's events; wait() returns the final one.
struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    ze::Event last;
    int tokens = 0;
    ze::EventSink sink() {
        return [this](const ze::Event& ev) {
            std::lock_guard<std::mutex> lk(mu);
            tokens += static_cast<int>(ev.tokens.size());
            if (ev.finished) {
                last = ev;
                done = true;
                cv.notify_all();
            }
        };
    }
    bool wait() {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::seconds(120), [&] { return done; });
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

std::vector<int32_t> prompt_of(int seed, int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(100 + (seed * 131 + i * 17) % 5000);
    return p;
}

ze::EngineOptions engine_options() {
    ze::EngineOptions o;
    o.n_parallel = 4;
    o.n_ctx = 128;
    o.block_size = 16;
    o.max_batch_tokens = 256;
    o.n_threads = 2;
    o.prefix_cache = false;  // every prompt row runs: rows follow from the prompt alone
    return o;
}

// An engine whose Runner comes from create_tiered_runner (the server's path) on the CPU tier,
// with step evidence wired as zinc serve does.
struct Served {
    std::shared_ptr<rt::Evidence> evidence;
    std::unique_ptr<ze::Engine> engine;
};

Served serve(const zm::Model& model, const rt::RuntimeOptions& ro) {
    Served s;
    ze::EngineOptions eo = engine_options();
    rt::TierChoice choice;
    choice.tier = rt::Tier::Cpu;
    choice.reason = "test";
    auto holder = std::make_shared<std::shared_ptr<rt::Evidence>>();
    eo.make_runner = [&](const zm::RunnerOptions& o) -> zinc::Result<std::unique_ptr<zm::Runner>> {
        auto tr = rt::create_tiered_runner(model, o, ro, choice);
        if (!tr) return tr.error();
        *holder = tr->evidence;
        return std::move(tr->runner);
    };
    eo.step_evidence = [holder] { return (*holder)->last_step(); };
    auto e = ze::Engine::create(model, eo);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    if (e.ok()) s.engine = std::move(e.value());
    s.evidence = *holder;
    return s;
}

uint64_t op(const rt::OpTally& t, rt::Op o) {
    return t.ops[static_cast<int>(rt::Device::Cpu)][static_cast<int>(o)];
}

}  // namespace

TEST(SplitByRows, PartsSumExactlyAndFollowRows) {
    rt::OpTally t;
    for (int k = 0; k < rt::kNumOps; ++k) t.ops[0][k] = 7 * k + 3;
    t.weight_bytes[0] = 1000003;
    t.act_bytes[0] = 999;
    t.weight_bytes[1] = 5;
    const std::vector<uint64_t> rows = {1, 30, 1, 0, 2};
    const auto parts = rt::split_by_rows(t, rows);
    ASSERT_EQ(parts.size(), rows.size());
    rt::OpTally sum;
    for (const auto& p : parts) sum += p;
    for (int d = 0; d < rt::kNumDevices; ++d) {
        EXPECT_EQ(sum.weight_bytes[d], t.weight_bytes[d]);
        EXPECT_EQ(sum.act_bytes[d], t.act_bytes[d]);
        for (int k = 0; k < rt::kNumOps; ++k) EXPECT_EQ(sum.ops[d][k], t.ops[d][k]);
    }
    // Proportional within one unit; a sequence with no rows gets nothing.
    for (size_t i = 0; i < rows.size(); ++i) {
        const double exact = 1000003.0 * static_cast<double>(rows[i]) / 34.0;
        EXPECT_LE(std::abs(static_cast<double>(parts[i].weight_bytes[0]) - exact), 1.0) << i;
    }
    EXPECT_EQ(parts[3].total_ops(rt::Device::Cpu), 0u);
    EXPECT_EQ(parts[3].weight_bytes[0], 0u);
    // Equal rows, an odd count: the earlier sequence gets the extra one.
    rt::OpTally one;
    one.ops[0][0] = 3;
    const std::vector<uint64_t> two = {5, 5};
    const auto halves = rt::split_by_rows(one, two);
    EXPECT_EQ(halves[0].ops[0][0], 2u);
    EXPECT_EQ(halves[1].ops[0][0], 1u);
}

TEST(RequestEvidence, StepEventsAndTier) {
    rt::RequestEvidence e;
    rt::StepRecord clean;
    clean.index = 1;
    clean.tier = "cuda";
    clean.ops.ops[1][static_cast<int>(rt::Op::Matmul)] = 10;
    e.add_step(clean, clean.ops, 5, 0);
    EXPECT_EQ(e.execution_tier, "cuda");
    rt::StepRecord fb = clean;
    fb.index = 2;
    fb.fallbacks = {"glu", "glu"};
    fb.validated = true;
    fb.validation_failed = true;
    fb.shortcuts = {"layer 1 skipped"};
    e.add_step(fb, rt::OpTally{}, 0, 1);
    EXPECT_EQ(e.execution_tier, "cuda+cpu");
    EXPECT_EQ(e.steps, 2u);
    EXPECT_EQ(e.prompt_rows, 5u);
    EXPECT_EQ(e.generated_rows, 1u);
    EXPECT_EQ(e.cpu_fallback, 2u);
    EXPECT_EQ(e.fallback_ops.at("glu"), 2u);
    EXPECT_EQ(e.validated_steps, 1u);
    EXPECT_EQ(e.validation_failures, 1u);
    EXPECT_FALSE(e.shortcut_free);
    EXPECT_EQ(e.step_totals.ops[1][static_cast<int>(rt::Op::Matmul)], 20u);
    EXPECT_EQ(e.share.ops[1][static_cast<int>(rt::Op::Matmul)], 10u);
    const std::string j = rt::request_evidence_json(e);
    EXPECT_NE(j.find("\"execution_tier\":\"cuda+cpu\""), std::string::npos) << j;
    EXPECT_NE(j.find("\"fallback_ops\":{\"glu\":2}"), std::string::npos) << j;
    EXPECT_NE(j.find("\"shortcut_free\":false"), std::string::npos) << j;
}

// Two concurrent requests of different lengths: each one's steps, rows and whole-step op counts
// follow from its own prompt and max_tokens, and their row shares sum to the process counters.
TEST(RequestEvidence, ConcurrentRequestsMatchTheFormulaAndSumToTheProcess) {
    NEED_MODEL();
    Served s = serve(model, rt::RuntimeOptions{});
    ASSERT_TRUE(s.engine);
    const int n_layer = model.config().n_layer;
    const std::vector<std::pair<int, int>> shapes = {{7, 5}, {19, 23}, {3, 12}};  // prompt, max
    std::vector<std::unique_ptr<Waiter>> ws;
    for (size_t i = 0; i < shapes.size(); ++i) {
        ws.push_back(std::make_unique<Waiter>());
        auto r = s.engine->submit(
            greedy(prompt_of(static_cast<int>(i), shapes[i].first), shapes[i].second),
            ws.back()->sink());
        ASSERT_TRUE(std::holds_alternative<ze::RequestId>(r));
    }
    rt::OpTally share_sum;
    uint64_t max_steps = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
        ASSERT_TRUE(ws[i]->wait());
        const ze::Event& ev = ws[i]->last;
        ASSERT_EQ(ev.reason, ze::FinishReason::Length);
        ASSERT_TRUE(ev.evidence.has_value());
        const rt::RequestEvidence& e = *ev.evidence;
        const auto [n_prompt, n_max] = shapes[i];
        // One prefill step (the prompt fits the token budget), then one decode step for every
        // generated token but the last: max_tokens steps in all.
        EXPECT_EQ(e.steps, static_cast<uint64_t>(n_max)) << i;
        EXPECT_EQ(e.prompt_rows, static_cast<uint64_t>(n_prompt)) << i;
        EXPECT_EQ(e.generated_rows, static_cast<uint64_t>(n_max - 1)) << i;
        // Every step produces logits for some row here, so each runs 4 projection calls per
        // layer + the LM head, one attention per layer and 2 norms per layer + the final one,
        // whatever else shares it.
        EXPECT_EQ(op(e.step_totals, rt::Op::Matmul), e.steps * (4 * n_layer + 1)) << i;
        EXPECT_EQ(op(e.step_totals, rt::Op::Attention), e.steps * n_layer) << i;
        EXPECT_EQ(op(e.step_totals, rt::Op::RmsNorm), e.steps * (2 * n_layer + 1)) << i;
        EXPECT_EQ(e.share.total_ops(rt::Device::Cuda), 0u);
        EXPECT_EQ(e.execution_tier, "cpu");
        EXPECT_TRUE(e.shortcut_free);
        EXPECT_EQ(e.cpu_fallback, 0u);
        EXPECT_LE(e.share.total_ops(rt::Device::Cpu), e.step_totals.total_ops(rt::Device::Cpu));
        share_sum += e.share;
        max_steps = std::max(max_steps, e.steps);
    }
    // The requests overlapped: the process ran fewer steps than their sum.
    const rt::EvidenceSnapshot p = s.evidence->snapshot();
    EXPECT_LT(p.steps, 5u + 23u + 12u);
    EXPECT_GE(p.steps, max_steps);
    for (int d = 0; d < rt::kNumDevices; ++d) {
        EXPECT_EQ(share_sum.weight_bytes[d], p.ops.weight_bytes[d]);
        EXPECT_EQ(share_sum.act_bytes[d], p.ops.act_bytes[d]);
        for (int k = 0; k < rt::kNumOps; ++k) EXPECT_EQ(share_sum.ops[d][k], p.ops.ops[d][k]) << k;
    }
    // Different lengths, different work.
    EXPECT_LT(ws[0]->last.evidence->share.total_ops(rt::Device::Cpu),
              ws[1]->last.evidence->share.total_ops(rt::Device::Cpu));
    s.engine->shutdown();
}

// Validation (ZINC_VALIDATE=N) covers the first N steps of the process: the request that ran
// them reports them, the one after reports finiteness checks only.
TEST(RequestEvidence, ValidatedStepsBelongToTheRequestThatRanThem) {
    NEED_MODEL();
    rt::RuntimeOptions ro;
    ro.validate_steps = 3;
    ro.skip_layers = {4};  // a shortcut the oracle does not take: every validated step fails
    Served s = serve(model, ro);
    ASSERT_TRUE(s.engine);
    Waiter a, b;
    ASSERT_TRUE(std::holds_alternative<ze::RequestId>(
        s.engine->submit(greedy(prompt_of(1, 6), 5), a.sink())));
    ASSERT_TRUE(a.wait());
    ASSERT_TRUE(std::holds_alternative<ze::RequestId>(
        s.engine->submit(greedy(prompt_of(2, 4), 4), b.sink())));
    ASSERT_TRUE(b.wait());
    const rt::RequestEvidence& ea = *a.last.evidence;
    const rt::RequestEvidence& eb = *b.last.evidence;
    EXPECT_EQ(ea.validated_steps, 3u);
    EXPECT_EQ(ea.validation_failures, 3u);
    EXPECT_EQ(ea.finiteness_checks, 2u);
    EXPECT_FALSE(ea.shortcut_free);
    EXPECT_EQ(ea.shortcuts.at("layer 4 skipped (ZINC_SKIP_LAYERS)"), 5u);
    EXPECT_EQ(eb.validated_steps, 0u);
    EXPECT_EQ(eb.validation_failures, 0u);
    EXPECT_EQ(eb.finiteness_checks, 4u);
    const rt::EvidenceSnapshot p = s.evidence->snapshot();
    EXPECT_EQ(p.validated_steps, ea.validated_steps + eb.validated_steps);
    EXPECT_EQ(p.validation_failures, ea.validation_failures + eb.validation_failures);
    s.engine->shutdown();
}

namespace {

// The CPU runner, reporting a forced-CPU "glu" on the steps listed (as the CUDA tier does under
// ZINC_CPU_OPS) into an Evidence whose tier is "cuda".
class FallbackRunner final : public zm::Runner {
  public:
    FallbackRunner(std::unique_ptr<zm::Runner> inner, std::shared_ptr<rt::Evidence> ev,
                   std::vector<uint64_t> fallback_steps)
        : inner_(std::move(inner)), ev_(std::move(ev)), steps_(std::move(fallback_steps)) {}
    zinc::Result<void> forward(const zm::Batch& batch, float* logits) override {
        const uint64_t step = step_++;
        ZINC_TRY(inner_->forward(batch, logits));
        rt::OpTally t;
        t.add(rt::Device::Cuda, rt::Op::Matmul, 100, 10);
        std::vector<rt::Fallback> fb;
        for (uint64_t s : steps_)
            if (s == step) {
                fb.push_back({"glu", 0});
                t.add(rt::Device::Cpu, rt::Op::Glu, 0, 10);
            }
        ev_->record_step(t, {}, fb);
        return {};
    }
    void copy_block(int32_t src, int32_t dst) override { inner_->copy_block(src, dst); }
    const zm::RunnerOptions& options() const override { return inner_->options(); }
    std::string tier() const override { return "cuda"; }
    size_t kv_bytes() const override { return inner_->kv_bytes(); }

  private:
    std::unique_ptr<zm::Runner> inner_;
    std::shared_ptr<rt::Evidence> ev_;
    std::vector<uint64_t> steps_;
    uint64_t step_ = 0;
};

}  // namespace

// A request whose steps included a forced CPU op reports it (op name, count, tier cuda+cpu);
// a request that ran later, on clean steps, does not.
TEST(RequestEvidence, ForcedCpuOpIsReportedByTheRequestsOfItsSteps) {
    NEED_MODEL();
    auto ev = std::make_shared<rt::Evidence>();
    ev->set_tier("cuda", "test");
    ze::EngineOptions eo = engine_options();
    eo.make_runner = [&](const zm::RunnerOptions& o) -> zinc::Result<std::unique_ptr<zm::Runner>> {
        auto r = zm::Runner::create_cpu(model, o);
        if (!r) return r.error();
        return std::unique_ptr<zm::Runner>(std::make_unique<FallbackRunner>(
            std::move(r.value()), ev, std::vector<uint64_t>{1, 2}));
    };
    eo.step_evidence = [ev] { return ev->last_step(); };
    auto e = ze::Engine::create(model, eo);
    ASSERT_TRUE(e.ok());
    Waiter a, b;
    ASSERT_TRUE(std::holds_alternative<ze::RequestId>(
        e.value()->submit(greedy(prompt_of(3, 5), 4), a.sink())));  // steps 0..3
    ASSERT_TRUE(a.wait());
    ASSERT_TRUE(std::holds_alternative<ze::RequestId>(
        e.value()->submit(greedy(prompt_of(4, 5), 3), b.sink())));  // steps 4..6
    ASSERT_TRUE(b.wait());
    const rt::RequestEvidence& ea = *a.last.evidence;
    const rt::RequestEvidence& eb = *b.last.evidence;
    EXPECT_EQ(ea.cpu_fallback, 2u);
    EXPECT_EQ(ea.fallback_ops.at("glu"), 2u);
    EXPECT_EQ(ea.execution_tier, "cuda+cpu");
    EXPECT_EQ(op(ea.share, rt::Op::Glu), 2u);
    EXPECT_EQ(eb.cpu_fallback, 0u);
    EXPECT_TRUE(eb.fallback_ops.empty());
    EXPECT_EQ(eb.execution_tier, "cuda");
    EXPECT_EQ(eb.share.ops[1][static_cast<int>(rt::Op::Matmul)], 3u);
    // The process says cuda+cpu with both fallbacks: the per-request view tells which request.
    const rt::EvidenceSnapshot p = ev->snapshot();
    EXPECT_EQ(p.execution_tier, "cuda+cpu");
    EXPECT_EQ(p.cpu_fallback, 2u);
    e.value()->shutdown();
}
