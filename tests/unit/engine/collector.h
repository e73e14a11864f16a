// zinc/tests/unit/engine/collector.h — the engine tests' event sink: collects one request's
// streamed token ids and its finish (reason, error message) and waits for it (120 s at most).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace zinc::engine::test {

namespace ze = zinc::engine;

struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> ids;
    bool finished = false;
    ze::FinishReason reason = ze::FinishReason::Error;
    std::string error;
    ze::EventSink sink() {
        return [this](const ze::Event& ev) {
            std::lock_guard<std::mutex> lk(mu);
            for (const auto& t : ev.tokens) ids.push_back(t.id);
            if (ev.finished) {
                finished = true;
                reason = ev.reason;
                error = ev.error;
                cv.notify_all();
            }
        };
    }
    bool wait() {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::seconds(120), [&] { return finished; });
    }
};

}  // namespace zinc::engine::test
