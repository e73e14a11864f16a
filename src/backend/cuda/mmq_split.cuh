// zinc/backend/cuda/mmq_split.cuh — mmq's split-K (docs/cuda.md "Decode batches: narrow tiles
// and split-K", docs/perf-notes.md "mmq v6"): the slice description a launch passes and the
// epilogue that adds a tile's partial sums in a fixed order.
#pragma once

#include <cstddef>

namespace zinc::cuda::mmq_split {

// Split-K: gridDim.z slices of k per output tile, `chunks` 32-element chunks each (a multiple of
// 8, so that a K-quant super-block never straddles two slices); every slice's block writes its
// partial tile to `part`, and the tile's last block to arrive (counted in `cnt`, which it returns
// to zero) adds the partials in slice order and stores: the sum's order is fixed whichever block
// finishes last, so results are deterministic (not equal to the unsplit kernel's bits).
struct Split {
    int chunks = 0;           // per slice (gridDim.z == 1: unused, the whole k)
    float* part = nullptr;    // [tile][slice][fragment element][thread]
    unsigned* cnt = nullptr;  // [tile]
};

// Split-K epilogue (Split above): true when this block holds the tile's complete sums in acc
// (no split, or it was the tile's last slice to finish), false when it only left its partial.
template <int kThreads, int MT, int NT>
__device__ __forceinline__ bool fixup(const Split& sp, float (&acc)[MT][NT][4]) {
    const int ks = static_cast<int>(gridDim.z);
    if (ks == 1) return true;
    constexpr int F = MT * NT * 4;
    const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
    float* base = sp.part + static_cast<size_t>(tile) * ks * F * kThreads;
    float* mine = base + static_cast<size_t>(blockIdx.z) * F * kThreads + threadIdx.x;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) mine[((mt * NT + nt) * 4 + e) * kThreads] = acc[mt][nt][e];
    __threadfence();  // the partial is visible device-wide before the count says so
    __shared__ unsigned s_last;
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(sp.cnt + tile, 1u) == static_cast<unsigned>(ks - 1);
    __syncthreads();
    if (!s_last) return false;
    __threadfence();
    const float* all = base + threadIdx.x;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = (mt * NT + nt) * 4 + e;
                float v = 0.0f;
                for (int z = 0; z < ks; ++z) {
                    const float p = z == static_cast<int>(blockIdx.z)
                                        ? acc[mt][nt][e]
                                        : __ldcg(all + (static_cast<size_t>(z) * F + i) * kThreads);
                    v = z == 0 ? p : v + p;
                }
                acc[mt][nt][e] = v;
            }
    if (threadIdx.x == 0) sp.cnt[tile] = 0u;  // ready for the next launch on the stream
    return true;
}

}  // namespace zinc::cuda::mmq_split
