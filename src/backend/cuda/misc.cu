// zinc/backend/cuda/misc.cu — small kernels: row gather (rows that want logits), argmax per
// logits row (greedy sampling on the device), logit soft-capping, f32 -> f16.
#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

__global__ void gather_kernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                              int dim, float* __restrict__ out) {
    const float* src = x + static_cast<size_t>(rows[blockIdx.x]) * dim;
    float* dst = out + static_cast<size_t>(blockIdx.x) * dim;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}

// Larger value wins; equal values: the smaller index (the CPU tier's first-max rule).
__device__ __forceinline__ void better(float& v, int& i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i) || (v != v && v2 == v2)) {
        v = v2;
        i = i2;
    }
}

constexpr int kArgmaxSpan = 8192;  // logits per stage-1 block

__device__ __forceinline__ void block_best(float& bv, int& bi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
        better(bv, bi, v2, i2);
    }
    __shared__ float sv[32];
    __shared__ int si[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) {
        sv[w] = bv;
        si[w] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int k = 1; k < static_cast<int>(blockDim.x >> 5); ++k) better(bv, bi, sv[k], si[k]);
}

// Stage 1: block (row, p) finds the best of logits [p * span, (p + 1) * span).
__global__ void argmax_part_kernel(const float* __restrict__ logits, int n_vocab, float2* part) {
    const float* l = logits + static_cast<size_t>(blockIdx.x) * n_vocab;
    const int lo = blockIdx.y * kArgmaxSpan, hi = min(n_vocab, lo + kArgmaxSpan);
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) better(bv, bi, l[i], i);
    block_best(bv, bi);
    if (threadIdx.x == 0)
        part[blockIdx.x * gridDim.y + blockIdx.y] = make_float2(bv, __int_as_float(bi));
}

// Stage 2: one warp per row over the row's partial results.
__global__ void argmax_final_kernel(const float2* part, int n_part, int32_t* out) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int p = threadIdx.x; p < n_part; p += 32) {
        const float2 v = part[blockIdx.x * n_part + p];
        better(bv, bi, v.x, __float_as_int(v.y));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
        better(bv, bi, v2, i2);
    }
    if (threadIdx.x == 0) out[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] = canon::softcap(x[i], cap);  // the CPU tier's bits (canon.h)
}

__global__ void f2h_kernel(const float* x, uint16_t* y, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __half_as_ushort(__float2half_rn(x[i]));
}

}  // namespace

void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out, cudaStream_t s) {
    gather_kernel<<<n, 256, 0, s>>>(x, rows, dim, out);
}
size_t argmax_scratch_bytes(int n_rows, int n_vocab) {
    return static_cast<size_t>(n_rows) * ((n_vocab + kArgmaxSpan - 1) / kArgmaxSpan) * sizeof(float2);
}
void argmax_rows(const float* logits, int n_rows, int n_vocab, int32_t* tokens, void* scratch,
                 cudaStream_t s) {
    const int n_part = (n_vocab + kArgmaxSpan - 1) / kArgmaxSpan;
    float2* part = static_cast<float2*>(scratch);
    argmax_part_kernel<<<dim3(n_rows, n_part), 256, 0, s>>>(logits, n_vocab, part);
    argmax_final_kernel<<<n_rows, 32, 0, s>>>(part, n_part, tokens);
}
void softcap(float* x, int64_t n, float cap, cudaStream_t s) {
    softcap_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, n, cap);
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t s) {
    f2h_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, y, n);
}

}  // namespace zinc::cuda
