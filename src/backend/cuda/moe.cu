// zinc/backend/cuda/moe.cu — Mixture-of-experts routing and the weighted sum of the experts'
// outputs, on the device, so a decode step stays one CUDA graph (no host round trip for the
// expert ids). The experts' matrix products are dmmv / dmmv_exact calls with MatJob::expert set
// (expert gathering); runner_exec.cpp's exec_moe strings the launches together.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/moe_route.h"

namespace zinc::cuda {
namespace {

// One thread per row: the CPU tier's routine (k passes over n_expert probabilities).
__global__ void route_kernel(const float* __restrict__ logits, int n_rows, int n_expert, int k,
                             bool softmax_first, bool norm_w, float w_scale,
                             int32_t* __restrict__ ids, float* __restrict__ w,
                             int32_t* __restrict__ src_row) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_rows) return;
    moe::route_row(logits + static_cast<size_t>(t) * n_expert, n_expert, k, softmax_first, norm_w,
                   w_scale, ids + static_cast<size_t>(t) * k, w + static_cast<size_t>(t) * k);
    for (int s = 0; s < k; ++s) src_row[t * k + s] = t;
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

}  // namespace

void moe_route(const float* logits, int n_rows, int n_expert, int k, bool softmax_first,
               bool norm_w, float w_scale, int32_t* ids, float* w, int32_t* src_row,
               cudaStream_t s) {
    constexpr int kThreads = 64;
    route_kernel<<<(n_rows + kThreads - 1) / kThreads, kThreads, 0, s>>>(
        logits, n_rows, n_expert, k, softmax_first, norm_w, w_scale, ids, w, src_row);
}

void moe_combine(const float* ys, const float* w, int n_rows, int k, int dim, float* out,
                 cudaStream_t s) {
    combine_kernel<<<n_rows, 256, 0, s>>>(ys, w, k, dim, out);
}

}  // namespace zinc::cuda
