// zinc/backend/cuda/moe.cu — Mixture-of-experts routing and the weighted sum of the experts'
// outputs, on the device, so a decode step stays one CUDA graph (no host round trip for the
// expert ids). The experts' matrix products are dmmv / dmmv_exact calls with MatJob::expert set
// (expert gathering); runner_exec.cpp's exec_moe strings the launches together.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/moe_route.h"

// tests/unit/cuda_emul builds this file on the host over a SIMT shim.
#if defined(ZINC_SIMT_EMULATION)
#define ZINC_MOE_LAUNCH(kernel, grid, threads, stream, ...) \
    ((void)(stream), zinc_simt::launch(kernel, grid, threads, __VA_ARGS__))
#else
#define ZINC_MOE_LAUNCH(kernel, grid, threads, stream, ...) \
    kernel<<<grid, threads, 0, stream>>>(__VA_ARGS__)
#endif

namespace zinc::cuda {
namespace {

// One thread per row: the CPU tier's routine (k passes over n_expert probabilities).
__global__ void route_kernel(const float* __restrict__ logits, int n_rows, int n_expert, int k,
                             bool softmax_first, bool norm_w, float w_scale,
                             int32_t* __restrict__ ids, float* __restrict__ w,
                             int32_t* __restrict__ src_row, uint32_t* __restrict__ load) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows) return;
    int32_t* row_ids = ids + static_cast<size_t>(t) * k;
    moe::route_row(logits + static_cast<size_t>(t) * n_expert, n_expert, k, softmax_first, norm_w,
                   w_scale, row_ids, w + static_cast<size_t>(t) * k);
    for (int s = 0; s < k; ++s) src_row[t * k + s] = t;
    if (load)
        for (int s = 0; s < k; ++s) atomicAdd(&load[row_ids[s]], 1u);
}

// One block per row; threads over the row's elements.
__global__ void combine_kernel(const float* __restrict__ ys, const float* __restrict__ w, int k,
                               int dim, float* __restrict__ out) {
    const int t = blockIdx.x;
    const float* y = ys + static_cast<size_t>(t) * k * dim;
    const float* wt = w + static_cast<size_t>(t) * k;
    for (int d = threadIdx.x; d < dim; d += blockDim.x)
        out[static_cast<size_t>(t) * dim + d] = moe::combine_elem(y, dim, wt, k, d);
}

// The same over rows in moe_group's sorted order.
__global__ void combine_sorted_kernel(const float* __restrict__ ys, const float* __restrict__ w,
                                      const int32_t* __restrict__ slot_pos, int k, int dim,
                                      float* __restrict__ out) {
    const int t = blockIdx.x;
    const float* wt = w + static_cast<size_t>(t) * k;
    const int32_t* pos = slot_pos + static_cast<size_t>(t) * k;
    for (int d = threadIdx.x; d < dim; d += blockDim.x)
        out[static_cast<size_t>(t) * dim + d] = moe::combine_elem(ys, dim, wt, k, d, pos);
}

// moe_group's one block: counts per expert (shared atomics), their prefix sums (rows and
// tiles), the tile table, then every slot's sorted position (a per-expert cursor).
constexpr int kGroupThreads = 1024, kGroupMaxExperts = 1024;
__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* __restrict__ ids, int n_slots, int k, int n_expert,
                 MoeGroupBufs b) {
    __shared__ unsigned cnt[kGroupMaxExperts], cur[kGroupMaxExperts];
    __shared__ int off[kGroupMaxExperts], toff[kGroupMaxExperts];  // first position, first tile
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) cnt[e] = cur[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n_slots; i += blockDim.x) atomicAdd(&cnt[ids[i]], 1u);
    __syncthreads();
    if (threadIdx.x == 0) {
        int rows = 0, tiles = 0;
        for (int e = 0; e < n_expert; ++e) {
            const int c = static_cast<int>(cnt[e]);
            off[e] = rows;
            toff[e] = tiles;
            rows += c;
            tiles += (c + kMmqGroupCols - 1) / kMmqGroupCols;
        }
        *b.n_tiles = tiles;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
        const int c = static_cast<int>(cnt[e]), nt = (c + kMmqGroupCols - 1) / kMmqGroupCols;
        for (int t = 0; t < nt; ++t) {
            const int c0 = off[e] + t * kMmqGroupCols;
            b.tile_expert[toff[e] + t] = e;
            b.tile_c0[toff[e] + t] = c0;
            b.tile_c1[toff[e] + t] = min(c0 + kMmqGroupCols, off[e] + c);
        }
    }
    for (int i = threadIdx.x; i < n_slots; i += blockDim.x) {
        const int e = ids[i];
        const int p = off[e] + static_cast<int>(atomicAdd(&cur[e], 1u));
        b.src[p] = i / k;
        b.expert[p] = e;
        b.slot_pos[i] = p;
    }
}

}  // namespace

void moe_route(const float* logits, int n_rows, int n_expert, int k, bool softmax_first,
               bool norm_w, float w_scale, int32_t* ids, float* w, int32_t* src_row, cudaStream_t s,
               uint32_t* load) {
    constexpr int kThreads = 64;
    ZINC_MOE_LAUNCH(route_kernel, dim3((n_rows + kThreads - 1) / kThreads), kThreads, s, logits,
                    n_rows, n_expert, k, softmax_first, norm_w, w_scale, ids, w, src_row, load);
}

void moe_combine(const float* ys, const float* w, int n_rows, int k, int dim, float* out,
                 cudaStream_t s, const int32_t* slot_pos) {
    if (slot_pos != nullptr)
        ZINC_MOE_LAUNCH(combine_sorted_kernel, dim3(n_rows), 256, s, ys, w, slot_pos, k, dim, out);
    else
        ZINC_MOE_LAUNCH(combine_kernel, dim3(n_rows), 256, s, ys, w, k, dim, out);
}

MmqGroups moe_group(const int32_t* ids, int n_rows, int k, int n_expert, const MoeGroupBufs& b,
                    cudaStream_t s) {
    const int n_slots = n_rows * k;
    ZINC_MOE_LAUNCH(group_kernel, dim3(1), kGroupThreads, s, ids, n_slots, k, n_expert, b);
    MmqGroups g;
    g.tile_expert = b.tile_expert;
    g.tile_c0 = b.tile_c0;
    g.tile_c1 = b.tile_c1;
    g.n_tiles = b.n_tiles;
    g.max_tiles = mmq_group_max_tiles(n_slots, n_expert);
    return g;
}

}  // namespace zinc::cuda
