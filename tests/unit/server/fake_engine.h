// tests/unit/server/fake_engine.h — a test-only Engine for the server's unit tests: no model, a
// step thread that emits a scripted reply (token ids given by the test) one token per step (or
// Options::tokens_per_step), with
// the real Engine's contract for submit refusals, cancel, finish reasons, usage and stats.
// KV accounting is simulated: a running request holds ceil(len / 16) blocks of a fixed pool.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace zinc::test {

class FakeEngine : public engine::Engine {
  public:
    struct Options {
        std::vector<int32_t> reply;  // tokens each request generates, then EOG
        int n_parallel = 4;
        int n_ctx = 256;
        int max_queue = 8;
        int n_blocks = 64;
        std::chrono::microseconds step{1000};
        int tokens_per_step = 1;  // tokens of one event (several: as a speculative step sends)
    };

    explicit FakeEngine(Options o) : o_(std::move(o)) {
        opts_.n_parallel = o_.n_parallel;
        opts_.n_ctx = o_.n_ctx;
        opts_.max_queue = o_.max_queue;
        opts_.n_kv_blocks = o_.n_blocks;
        thread_ = std::thread([this] { loop(); });
    }
    ~FakeEngine() override { shutdown(); }

    std::variant<engine::RequestId, engine::SubmitError> submit(engine::RequestParams p,
                                                                engine::EventSink sink) override {
        std::lock_guard<std::mutex> lk(mu_);
        if (stopping_)
            return engine::SubmitError{engine::SubmitErrorKind::ShuttingDown, "stopping"};
        if (p.prompt.empty() || p.max_tokens < 1)
            return engine::SubmitError{engine::SubmitErrorKind::InvalidRequest, "bad request"};
        if (static_cast<int>(p.prompt.size()) + p.max_tokens > o_.n_ctx)
            return engine::SubmitError{engine::SubmitErrorKind::ContextLength, "too long"};
        if (static_cast<int>(waiting_.size()) >= o_.max_queue)
            return engine::SubmitError{engine::SubmitErrorKind::QueueFull, "queue full"};
        const engine::RequestId id = ++next_id_;
        Req r;
        r.id = id;
        r.params = std::move(p);
        r.sink = std::move(sink);
        waiting_.push_back(std::move(r));
        submitted_.push_back(params_of(waiting_.back()));
        cv_.notify_all();
        return id;
    }

    void cancel(engine::RequestId id) override {
        std::lock_guard<std::mutex> lk(mu_);
        cancels_.push_back(id);
        cv_.notify_all();
    }

    engine::EngineStats stats() const override {
        std::lock_guard<std::mutex> lk(mu_);
        engine::EngineStats s;
        s.slots_busy = static_cast<int32_t>(running_.size());
        s.slots_idle = o_.n_parallel - s.slots_busy;
        s.queue_depth = static_cast<int32_t>(waiting_.size());
        s.kv_blocks_total = o_.n_blocks;
        for (const auto& r : running_) s.kv_blocks_used += blocks_of(r);
        s.kv_blocks_free = s.kv_blocks_total - s.kv_blocks_used;
        s.requests_finished = finished_;
        s.requests_cancelled = cancelled_;
        return s;
    }
    const engine::EngineOptions& options() const override { return opts_; }
    void shutdown() override {
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (stopping_ && !thread_.joinable()) return;
            stopping_ = true;
            cv_.notify_all();
        }
        if (thread_.joinable()) thread_.join();
    }

    /// Pause/resume the step loop (to fill the queue deterministically).
    void set_paused(bool p) {
        std::lock_guard<std::mutex> lk(mu_);
        paused_ = p;
        cv_.notify_all();
    }
    std::vector<engine::RequestParams> submitted() const {
        std::lock_guard<std::mutex> lk(mu_);
        return submitted_;
    }
    uint64_t n_cancelled() const {
        std::lock_guard<std::mutex> lk(mu_);
        return cancelled_;
    }

  private:
    struct Req {
        engine::RequestId id = 0;
        engine::RequestParams params;
        engine::EventSink sink;
        int32_t generated = 0;
    };
    static engine::RequestParams params_of(const Req& r) { return r.params; }
    static int blocks_of(const Req& r) {
        return (static_cast<int>(r.params.prompt.size()) + r.generated + 15) / 16;
    }

    void finish(Req& r, engine::FinishReason why) {
        engine::Event ev;
        ev.finished = true;
        ev.reason = why;
        ev.usage.prompt_tokens = static_cast<int32_t>(r.params.prompt.size());
        ev.usage.completion_tokens = r.generated;
        r.sink(ev);
        if (why == engine::FinishReason::Cancelled)
            ++cancelled_;
        else
            ++finished_;
    }

    void loop() {
        std::unique_lock<std::mutex> lk(mu_);
        while (true) {
            cv_.wait_for(lk, o_.step, [&] { return stopping_; });
            if (stopping_) break;
            // Cancels first: "released within one step".
            for (engine::RequestId id : cancels_) {
                for (auto it = running_.begin(); it != running_.end(); ++it)
                    if (it->id == id) {
                        finish(*it, engine::FinishReason::Cancelled);
                        running_.erase(it);
                        break;
                    }
                for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
                    if (it->id == id) {
                        finish(*it, engine::FinishReason::Cancelled);
                        waiting_.erase(it);
                        break;
                    }
            }
            cancels_.clear();
            if (paused_) continue;
            while (static_cast<int>(running_.size()) < o_.n_parallel && !waiting_.empty()) {
                running_.push_back(std::move(waiting_.front()));
                waiting_.pop_front();
            }
            for (auto it = running_.begin(); it != running_.end();) {
                Req& r = *it;
                if (r.generated >= static_cast<int32_t>(o_.reply.size())) {
                    finish(r, engine::FinishReason::Eog);
                    it = running_.erase(it);
                    continue;
                }
                engine::Event ev;
                for (int n = 0; n < o_.tokens_per_step; ++n) {
                    engine::GeneratedToken t;
                    t.id = o_.reply[static_cast<size_t>(r.generated)];
                    if (r.params.top_logprobs >= 0) {
                        t.logprob = -0.25f;
                        for (int k = 0; k < r.params.top_logprobs; ++k)
                            t.top.push_back({t.id + k, -0.25f - k});
                    }
                    ev.tokens.push_back(t);
                    ++r.generated;
                    if (r.generated >= static_cast<int32_t>(o_.reply.size()) ||
                        r.generated >= r.params.max_tokens)
                        break;
                }
                ev.usage.prompt_tokens = static_cast<int32_t>(r.params.prompt.size());
                ev.usage.completion_tokens = r.generated;
                if (r.generated >= r.params.max_tokens) {
                    ev.finished = true;
                    ev.reason = engine::FinishReason::Length;
                    r.sink(ev);
                    ++finished_;
                    it = running_.erase(it);
                    continue;
                }
                r.sink(ev);
                ++it;
            }
        }
        for (auto& r : running_) finish(r, engine::FinishReason::Cancelled);
        for (auto& r : waiting_) finish(r, engine::FinishReason::Cancelled);
        running_.clear();
        waiting_.clear();
    }

    Options o_;
    engine::EngineOptions opts_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Req> waiting_;
    std::vector<Req> running_;
    std::vector<engine::RequestId> cancels_;
    std::vector<engine::RequestParams> submitted_;
    engine::RequestId next_id_ = 0;
    uint64_t finished_ = 0, cancelled_ = 0;
    bool stopping_ = false, paused_ = false;
    std::thread thread_;
};

}  // namespace zinc::test
