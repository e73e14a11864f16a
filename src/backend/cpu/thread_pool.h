// zinc/backend/cpu/thread_pool.h — a persistent pool of worker threads for the CPU ops.
//
// Threads are created once (per Context) and parked between jobs: a worker spins for a short
// while on the job generation counter (cheap hand-off between the many small jobs of a decode
// step), then sleeps on it with std::atomic::wait (futex). run() splits a job into n_threads
// parts fn(ith, nth); the caller runs part 0.
//
// Parts are *claimed*: each worker claims its part when it wakes, and when the caller has finished
// its own part it claims and runs every part no worker has started yet. A worker that the OS has
// descheduled (the machine is shared, or oversubscribed) therefore never stalls a job: the caller
// does its share instead of spinning until it is scheduled again. The price is that parts must
// be independent — no barrier inside a job; a phase that needs one is a separate run().
// No allocation happens per job.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
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

    /// Call fn(ith, nth) once for every ith in [0, nth), possibly several on the same thread, and
    /// return when all calls have returned. Parts must not wait for each other. Not reentrant.
    template <class F>
    void run(F&& fn) {
        using Fn = std::remove_reference_t<F>;
        run_erased([](void* ctx, int ith, int nth) { (*static_cast<Fn*>(ctx))(ith, nth); },
                   const_cast<void*>(static_cast<const void*>(&fn)));
    }

  private:
    using Call = void (*)(void* ctx, int ith, int nth);
    void run_erased(Call call, void* ctx);
    void worker_main(int ith);
    bool try_run_part(int ith);  // claim part ith of the current job and run it

    // Part states of the current job.
    static constexpr uint32_t kFree = 0, kClaimed = 1, kDone = 2;
    struct alignas(64) Part {
        std::atomic<uint32_t> state{kDone};
    };

    int n_threads_ = 1;
    std::vector<std::thread> workers_;
    std::unique_ptr<Part[]> parts_;
    Call call_ = nullptr;
    void* ctx_ = nullptr;
    alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job
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
