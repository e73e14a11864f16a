// zinc/backend/cpu/thread_pool.cpp — persistent workers, spin-then-wait hand-off and barrier.
#include "backend/cpu/thread_pool.h"

#include <immintrin.h>

#include "util/check.h"

namespace zinc::cpu {
namespace {

// How long a parked worker polls before sleeping. Decode issues a few hundred small jobs per
// token, so the next job usually arrives within microseconds; polling avoids a futex round trip.
constexpr int kSpinIterations = 1 << 14;

inline void cpu_relax() { _mm_pause(); }

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (n_threads <= 0) n_threads = 1;
    n_threads_ = n_threads;
    workers_.reserve(n_threads_ - 1);
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_erased(Call call, void* ctx) {
    if (n_threads_ == 1) {
        call(ctx, 0, 1);
        return;
    }
    call_ = call;
    ctx_ = ctx;
    n_running_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    call(ctx, 0, n_threads_);
    int spins = 0;
    while (n_running_.load(std::memory_order_acquire) != 0) {
        if (++spins < kSpinIterations) {
            cpu_relax();
        } else {
            std::this_thread::yield();
        }
    }
}

void ThreadPool::worker_main(int ith) {
    // Start from the value the constructor saw (0), not a fresh load: a job can be issued before
    // this thread first runs, and a fresh load would then skip it and deadlock run_erased().
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
        call_(ctx_, ith, n_threads_);
        n_running_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::barrier() {
    if (n_threads_ == 1) return;
    const uint32_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n_threads_ - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_acq_rel);
        return;
    }
    int spins = 0;
    while (barrier_phase_.load(std::memory_order_acquire) == phase) {
        if (++spins < kSpinIterations) {
            cpu_relax();
        } else {
            std::this_thread::yield();
        }
    }
}

}  // namespace zinc::cpu
