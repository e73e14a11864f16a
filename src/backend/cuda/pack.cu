// zinc/backend/cuda/pack.cu — row-finishing kernels: RMS norm, gated activations (SwiGLU,
// GeGLU) and residual adds, each fused with the int8 activation packing that the quantized
// matrix-vector kernels read (kernels.h), and/or f32 / f16 outputs.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using dev::warp_max;
using dev::warp_sum;

constexpr int kThreads = 256;

__device__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = 0.f;
    for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) t += sh[i];
    return t;
}

// Write one 32-element chunk (one value per lane) to every requested output.
__device__ __forceinline__ void emit_chunk(float v, int row, int dim, int c, const RowOut& o) {
    const int lane = threadIdx.x & 31;
    const size_t idx = static_cast<size_t>(row) * dim + c * 32 + lane;
    if (o.f) o.f[idx] = v;
    if (o.h) o.h[idx] = __half_as_ushort(__float2half_rn(v));
    if (o.q) {
        const float amax = warp_max(fabsf(v));
        const float d = amax / 127.f;
        const float id = d != 0.f ? 1.f / d : 0.f;
        const int q = __float2int_rn(v * id);
        o.q[idx] = static_cast<int8_t>(q);
        float s = static_cast<float>(q);
        // half sums: lanes 0..15 and 16..31
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        const float s_lo = __shfl_sync(0xffffffffu, s, 0);
        const float s_hi = __shfl_sync(0xffffffffu, s, 16);
        if (lane == 0)
            o.d[static_cast<size_t>(row) * (dim / 32) + c] = make_float4(d, d * s_lo, d * s_hi, 0.f);
    }
}

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float eps, int dim, RowOut o) {
    __shared__ float sh[32];
    const int row = blockIdx.x;
    const float* xr = x + static_cast<size_t>(row) * dim;
    float ss = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, sh);
    const float scale = rsqrtf(ss / dim + eps);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int c = warp; c < dim / 32; c += nw) {
        const int i = c * 32 + lane;
        float v = xr[i] * scale;
        if (w) v *= w[i];
        emit_chunk(v, row, dim, c, o);
    }
}

__global__ void pack_kernel(const float* __restrict__ x, int dim, RowOut o) {
    const int row = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int c = warp; c < dim / 32; c += nw)
        emit_chunk(x[static_cast<size_t>(row) * dim + c * 32 + lane], row, dim, c, o);
}

__device__ __forceinline__ float silu(float x) {
    return x / (1.f + expf(-x));
}
__device__ __forceinline__ float gelu_tanh(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.f + expf(-2.f * u));
}

__global__ void glu_kernel(const float* __restrict__ g, const float* __restrict__ u, int ld,
                           bool gelu, int dim, RowOut o) {
    const int row = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int c = warp; c < dim / 32; c += nw) {
        const size_t i = static_cast<size_t>(row) * ld + c * 32 + lane;
        const float a = gelu ? gelu_tanh(g[i]) : silu(g[i]);
        emit_chunk(a * u[i], row, dim, c, o);
    }
}

__global__ void add_rms_norm_kernel(float* __restrict__ x, const float* __restrict__ h,
                                    const float* __restrict__ w, float eps, int dim) {
    __shared__ float sh[32];
    const int row = blockIdx.x;
    const float* hr = h + static_cast<size_t>(row) * dim;
    float* xr = x + static_cast<size_t>(row) * dim;
    float ss = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += hr[i] * hr[i];
    ss = block_sum(ss, sh);
    const float scale = rsqrtf(ss / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) xr[i] += hr[i] * scale * w[i];
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ h, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] += h[i];
}

}  // namespace

void rms_norm_out(const float* x, const float* w, float eps, int n_rows, int dim, RowOut out,
                  cudaStream_t s) {
    rms_norm_kernel<<<n_rows, kThreads, 0, s>>>(x, w, eps, dim, out);
}
void pack_rows(const float* x, int n_rows, int dim, RowOut out, cudaStream_t s) {
    pack_kernel<<<n_rows, kThreads, 0, s>>>(x, dim, out);
}
void glu_out(const float* gate, const float* up, int ld, bool gelu, int n_rows, int dim,
             RowOut out, cudaStream_t s) {
    glu_kernel<<<n_rows, kThreads, 0, s>>>(gate, up, ld, gelu, dim, out);
}
void add_rms_norm(float* x, const float* h, const float* w, float eps, int n_rows, int dim,
                  cudaStream_t s) {
    add_rms_norm_kernel<<<n_rows, kThreads, 0, s>>>(x, h, w, eps, dim);
}
void add_inplace(float* x, const float* h, int64_t n, cudaStream_t s) {
    add_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, h, n);
}

}  // namespace zinc::cuda
