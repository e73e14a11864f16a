// zinc/backend/cuda/mmq_jobs.cuh — which weights and activation rows an mmq block computes
// (mmq.cu): the launch's job table (up to 3 fused matrices, their rows back to back), the
// expert-grouped launch's tile table (mmq_grouped: tile t = expert e's sorted activation rows
// [c0, c1)), and the per-block row pointers into the right job's (and expert's) matrix.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda::mmq_jobs {

struct Jobs {
    MatJob m[3];
    int n_jobs;
    int row_end[3];  // cumulative row counts
    MmqGroups g;     // expert-grouped launch (mmq_grouped): g.tile_expert non-null
};

// The activation rows of block column blockIdx.y: [n0, lim), and the expert whose matrices the
// block multiplies (-1: ungrouped, every job's w). A grouped block past the launch's tile count
// has nothing to do (false; uniform per block, before any barrier).
struct Cols {
    int n0, lim, e;
};
template <int BN>
__device__ __forceinline__ bool block_cols(const Jobs& J, int n_act, Cols& c) {
    if (J.g.tile_expert == nullptr) {
        c.n0 = static_cast<int>(blockIdx.y) * BN;
        c.lim = n_act;
        c.e = -1;
        return true;
    }
    const int t = static_cast<int>(blockIdx.y);
    if (t >= *J.g.n_tiles) return false;
    c.e = J.g.tile_expert[t];
    c.n0 = J.g.tile_c0[t];
    c.lim = J.g.tile_c1[t];
    return true;
}

__device__ __forceinline__ int pick_job(const Jobs& J, int& row) {
    int j = 0;
    if (J.n_jobs > 1 && row >= J.row_end[0]) j = 1;
    if (J.n_jobs > 2 && row >= J.row_end[1]) j = 2;
    if (j > 0) row -= J.row_end[j - 1];
    return j;
}

// The row pointers (rows past the end repeat the last row; never stored).
template <int BM, int kThreads>
__device__ __forceinline__ void set_rows(const Jobs& J, const uint8_t** sRow, int m0, int e) {
    const int total = J.row_end[J.n_jobs - 1];
    for (int i = threadIdx.x; i < BM; i += kThreads) {
        int r = min(m0 + i, total - 1);
        const int jj = pick_job(J, r);
        const size_t base = e < 0 ? 0 : static_cast<size_t>(e) * J.m[jj].expert_stride;
        sRow[i] = J.m[jj].w + base + static_cast<size_t>(r) * J.m[jj].row_bytes;
    }
}

}  // namespace zinc::cuda::mmq_jobs
