// zinc/backend/cpu/thread_pool.cpp — persistent workers, claimable job parts, spin-then-wait.
#include "backend/cpu/thread_pool.h"

#include <immintrin.h>

#include "util/check.h"

namespace zinc::cpu {
namespace {

// How long a parked worker polls before sleeping. Decode issues a few hundred small jobs per
// token, so the next job usually arrives within microseconds; polling avoids a futex round trip.
constexpr int kSpinIterations = 1 << 14;

inline void cpu_relax() {
    _mm_pause();
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (n_threads <= 0) n_threads = 1;
    n_threads_ = n_threads;
    parts_.reset(new Part[n_threads_]);
    workers_.reserve(n_threads_ - 1);
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
}

bool ThreadPool::try_run_part(int ith) {
    uint32_t expected = kFree;
    if (!parts_[ith].state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) {
        return false;
    }
    call_(ctx_, ith, n_threads_);
    parts_[ith].state.store(kDone, std::memory_order_release);
    return true;
}

void ThreadPool::run_erased(Call call, void* ctx) {
    if (n_threads_ == 1) {
        call(ctx, 0, 1);
        return;
    }
    call_ = call;
    ctx_ = ctx;
    for (int i = 1; i < n_threads_; ++i) parts_[i].state.store(kFree, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);  // publishes call_, ctx_ and the parts
    generation_.notify_all();
    call(ctx, 0, n_threads_);
    // Run every part no worker has claimed yet, then wait for the claimed ones.
    for (int i = 1; i < n_threads_; ++i) try_run_part(i);
    for (int i = 1; i < n_threads_; ++i) {
        int spins = 0;
        while (parts_[i].state.load(std::memory_order_acquire) != kDone) {
            if (++spins < kSpinIterations) {
                cpu_relax();
            } else {
                std::this_thread::yield();
            }
        }
    }
}

void ThreadPool::worker_main(int ith) {
    // Jobs are counted from generation 0 (the value before any run()).
    uint32_t seen = 0;
    for (;;) {
        uint32_t g = generation_.load(std::memory_order_acquire);
        for (int i = 0; g == seen && i < kSpinIterations; ++i) {
            cpu_relax();
            g = generation_.load(std::memory_order_acquire);
        }
        while (g == seen) {
            generation_.wait(seen, std::memory_order_acquire);
            g = generation_.load(std::memory_order_acquire);
        }
        seen = g;
        if (stop_.load(std::memory_order_acquire)) return;
        // The part may already have been taken by the caller (we woke late), or this may be a
        // newer job than the generation we read: the claim decides, and call_/ctx_ are read
        // only after a successful claim, which happens-after the caller published them.
        try_run_part(ith);
    }
}

}  // namespace zinc::cpu
