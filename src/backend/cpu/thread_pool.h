// zinc/backend/cpu/thread_pool.h — a persistent pool of worker threads for the CPU ops.
//
// Threads are created once (per Context) and parked between ops: a worker spins for a short
// while on the job generation counter (cheap hand-off between the many small ops of a decode
// step), then sleeps on it with std::atomic::wait (futex). run() hands the same callable to every
// thread, the caller included as thread 0, and returns when all have finished. Inside a job,
// barrier() synchronises all threads of the pool (e.g. "pack activations, then multiply").
// No allocation happens per job.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace zinc::cpu {

class ThreadPool {
public:
    /// n_threads <= 0 means std::thread::hardware_concurrency().
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int n_threads() const { return n_threads_; }

    /// Call fn(ith, nth) once on every thread (ith in [0, nth)), the caller being ith 0; returns
    /// when all calls have returned. Not reentrant: fn must not call run().
    template <class F>
    void run(F&& fn) {
        using Fn = std::remove_reference_t<F>;
        run_erased(
            [](void* ctx, int ith, int nth) { (*static_cast<Fn*>(ctx))(ith, nth); },
            const_cast<void*>(static_cast<const void*>(&fn)));
    }

    /// Wait until every thread of the current job has reached the barrier. Only valid inside a
    /// job passed to run(), and every thread must call it the same number of times.
    void barrier();

private:
    using Call = void (*)(void* ctx, int ith, int nth);
    void run_erased(Call call, void* ctx);
    void worker_main(int ith);

    int n_threads_ = 1;
    std::vector<std::thread> workers_;
    Call call_ = nullptr;
    void* ctx_ = nullptr;
    alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job
    alignas(64) std::atomic<int> n_running_{0};        // workers still inside the job
    alignas(64) std::atomic<int> barrier_count_{0};
    alignas(64) std::atomic<uint32_t> barrier_phase_{0};
    std::atomic<bool> stop_{false};
};

/// Split [0, n) into nth nearly equal contiguous ranges; range of thread ith.
struct Range {
    int64_t begin;
    int64_t end;
};
inline Range split_range(int64_t n, int ith, int nth) {
    const int64_t per = n / nth;
    const int64_t rem = n % nth;
    const int64_t b = ith * per + (ith < rem ? ith : rem);
    return {b, b + per + (ith < rem ? 1 : 0)};
}

}  // namespace zinc::cpu
