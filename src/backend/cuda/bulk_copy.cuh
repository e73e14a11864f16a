// zinc/backend/cuda/bulk_copy.cuh — Hopper bulk copies from global into shared memory, completed
// through shared-memory barriers (PTX ISA 8.x: cp.async.bulk, mbarrier with transaction counts;
// sm_90). One thread issues a copy of `bytes` (a multiple of 16, both addresses 16-byte aligned)
// into a stage buffer and arms the stage's barrier with the byte count; every thread that reads
// the stage first waits on the barrier's phase. Used by dmmv_stream.cu to keep several weight
// tiles in flight per block without holding them in registers.
//
// Under ZINC_SIMT_EMULATION (tests/unit/cuda_emul) a copy is a memcpy followed by a release
// increment of the barrier's completed-phase count, and a wait spins (acquire) until the phase
// with the awaited parity has completed: the same ordering contract as the hardware's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(ZINC_SIMT_EMULATION)
#include <atomic>
#include <cstring>
#include <thread>
#endif

namespace zinc::cuda::bulk {

/// A barrier word in shared memory (8 bytes, 8-byte aligned).
using Bar = uint64_t;

#if defined(ZINC_SIMT_EMULATION)

inline void init(Bar* b, int) {
    std::atomic_ref<uint64_t>(*b).store(0, std::memory_order_relaxed);
}
inline void fence_init() {}
inline void fence_proxy() {}
inline void copy(void* dst, const void* src, uint32_t bytes, Bar* b, bool = true) {
    std::memcpy(dst, src, bytes);
    std::atomic_ref<uint64_t>(*b).fetch_add(1, std::memory_order_release);
}
/// Waits until the phase of parity `parity` has completed (phases count from 0).
inline void wait(Bar* b, uint32_t parity) {
    while ((std::atomic_ref<uint64_t>(*b).load(std::memory_order_acquire) & 1u) == parity)
        std::this_thread::yield();
}

#else

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
/// mbarrier.init with `count` expected arrivals per phase (1: the issuing thread).
__device__ __forceinline__ void init(Bar* b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count)
                 : "memory");
}
/// Makes initialised barriers visible to the async proxy (before the block barrier that
/// publishes them).
__device__ __forceinline__ void fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
/// Orders this thread's earlier generic-proxy shared-memory accesses (the reads of a stage, seen
/// through the preceding block barrier) before a following bulk copy into that stage.
__device__ __forceinline__ void fence_proxy() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
/// Arms barrier b for `bytes` and starts the bulk copy global src -> shared dst, whose
/// completion completes b's current phase. evict_first: the copy's L2 policy is evict-first
/// (each byte is read once), else the default.
__device__ __forceinline__ void copy(void* dst, const void* src, uint32_t bytes, Bar* b,
                                     bool evict_first = true) {
    const uint32_t bar = smem_addr(b);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
    if (evict_first) {
        uint64_t policy;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
            " [%0], [%1], %2, [%3], %4;" ::"r"(smem_addr(dst)),
            "l"(src), "r"(bytes), "r"(bar), "l"(policy)
            : "memory");
    } else {
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
            "l"(src), "r"(bytes), "r"(bar)
            : "memory");
    }
}
/// Waits until the phase of parity `parity` has completed (phases count from 0).
__device__ __forceinline__ void wait(Bar* b, uint32_t parity) {
    const uint32_t bar = smem_addr(b);
    uint32_t done = 0;
    do {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
            "selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

#endif

}  // namespace zinc::cuda::bulk
