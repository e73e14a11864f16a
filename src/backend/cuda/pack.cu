// zinc/backend/cuda/pack.cu — row-finishing kernels: RMS norm, gated activations (SwiGLU,
// GeGLU) and residual adds, each fused with the int8 activation packing that the quantized
// matrix-vector kernels read (kernels.h), and/or f32 / f16 outputs. Norms and packings follow the
// CPU tier's arithmetic (f64 sum of squares, the Q8_0/Q8_1/Q8_K quantizers' rounding), so the two
// tiers feed the same int8 codes to their integer dot products.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using dev::warp_max;
using dev::warp_sum;

constexpr int kThreads = 256;

// Pack one group of elements (32, or 256 for Q8_K) of a row, held as NV values per lane (element
// g0 + 32 * i + lane), into the requested outputs. The int8 codes and scales are computed exactly
// as the CPU tier's activation packings (src/quant: quantize_row_q8_0 / _q8_1 / _q8_k), so the
// integer dot products of both tiers see the same codes:
//   Q8_0: d = amax / 127, q = roundf(x / d), scale used = fp16(d)
//   Q8_1: as Q8_0, plus s = fp16(d * sum q) over the 32 (stored in the low half's slot)
//   Q8_K: 256 elements, max = the first element of largest |x|, q = min(127, rint(-127/max * x)),
//         d = 1 / (-127 / max) (f32); per 32-element chunk the half sums d * sum q.
template <int NV>
__device__ __forceinline__ void emit_group(const float (&v)[NV], int row, int dim, int g0,
                                           int mode, const RowOut& o) {
    const int lane = threadIdx.x & 31;
    const size_t base = static_cast<size_t>(row) * dim + g0;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        if (o.f) o.f[base + 32 * i + lane] = v[i];
        if (o.h) o.h[base + 32 * i + lane] = __half_as_ushort(__float2half_rn(v[i]));
    }
    if (!o.q) return;
    if (NV == 1 && mode != kPackQ8K) {
        const float amax = warp_max(fabsf(v[0]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const int q = static_cast<int>(roundf(__fmul_rn(v[0], id)));
        o.q[base + lane] = static_cast<int8_t>(q);
        int s = q;
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        const int s_lo = __shfl_sync(0xffffffffu, s, 0), s_hi = __shfl_sync(0xffffffffu, s, 16);
        const float dh = __half2float(__float2half_rn(d));
        if (lane == 0) {
            float4 r;
            if (mode == kPackQ8_1)
                r = make_float4(dh, __half2float(__float2half_rn(static_cast<float>(s_lo + s_hi) * d)), 0.f, 0.f);
            else
                r = make_float4(dh, dh * s_lo, dh * s_hi, 0.f);
            o.d[static_cast<size_t>(row) * (dim / 32) + g0 / 32] = r;
        }
        return;
    }
    // Q8_K over NV * 32 elements (NV == 8)
    float amax = 0.f, mx = 0.f;
    int idx = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const float a = fabsf(v[i]);
        if (a > amax) {  // first (lowest index) of this lane's elements
            amax = a;
            mx = v[i];
            idx = 32 * i + lane;
        }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float a2 = __shfl_xor_sync(0xffffffffu, amax, off);
        const float m2 = __shfl_xor_sync(0xffffffffu, mx, off);
        const int i2 = __shfl_xor_sync(0xffffffffu, idx, off);
        if (a2 > amax || (a2 == amax && i2 < idx)) {
            amax = a2;
            mx = m2;
            idx = i2;
        }
    }
    const float iscale = amax != 0.f ? -127.0f / mx : 0.f;
    const float d = amax != 0.f ? 1.0f / iscale : 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const int q = min(127, __float2int_rn(__fmul_rn(iscale, v[i])));
        o.q[base + 32 * i + lane] = static_cast<int8_t>(q);
        int s = q;
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        const int s_lo = __shfl_sync(0xffffffffu, s, 0), s_hi = __shfl_sync(0xffffffffu, s, 16);
        if (lane == 0)
            o.d[static_cast<size_t>(row) * (dim / 32) + g0 / 32 + i] =
                make_float4(d, d * s_lo, d * s_hi, 0.f);
    }
}

// Calls f(i) -> value of row element i for the elements of this block's part of the row: block
// (row, blockIdx.y) covers kGroupsPerBlock groups of 256 elements, one per warp, so a row is
// spread over ceil(dim / 2048) blocks (decode rows are one row: one block would serialize).
constexpr int kGroupsPerBlock = 8;  // = warps of a 256-thread block
template <class F>
__device__ __forceinline__ void pack_row(int row, int dim, int mode, const RowOut& o, F f) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = blockIdx.y * kGroupsPerBlock + warp;
    const int g0 = g * 256;
    if (g0 >= dim) return;
    if (mode == kPackQ8K && o.q) {  // dim % 256 == 0 for K-quant weights
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = f(g0 + 32 * i + lane);
        emit_group<8>(v, row, dim, g0, mode, o);
    } else {
        for (int c = g0; c < min(dim, g0 + 256); c += 32) {
            float v[1] = {f(c + lane)};
            emit_group<1>(v, row, dim, c, mode, o);
        }
    }
}

inline dim3 pack_grid(int n_rows, int dim) {
    return dim3(n_rows, (dim + 256 * kGroupsPerBlock - 1) / (256 * kGroupsPerBlock));
}

// Sum of squares as the CPU tier's rms_norm: f32 products accumulated in f64.
__device__ double block_sum_d(double v, double* sh) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    double t = 0.0;
    for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) t += sh[i];
    return t;
}

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float eps, int dim, int mode, RowOut o) {
    __shared__ double sh[32];
    const int row = blockIdx.x;
    const float* xr = x + static_cast<size_t>(row) * dim;
    double ss = 0.0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += static_cast<double>(__fmul_rn(xr[i], xr[i]));
    ss = block_sum_d(ss, sh);
    const float mean = static_cast<float>(ss / static_cast<double>(dim));
    const float scale = 1.0f / sqrtf(mean + eps);
    pack_row(row, dim, mode, o, [&](int i) {
        const float v = __fmul_rn(xr[i], scale);
        return w ? __fmul_rn(v, w[i]) : v;
    });
}

__global__ void pack_kernel(const float* __restrict__ x, int dim, int mode, RowOut o) {
    const int row = blockIdx.x;
    const float* xr = x + static_cast<size_t>(row) * dim;
    pack_row(row, dim, mode, o, [&](int i) { return xr[i]; });
}

__device__ __forceinline__ float silu(float x) {
    return x / (1.f + expf(-x));
}
__device__ __forceinline__ float gelu_tanh(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.f + expf(-2.f * u));
}

__global__ void glu_kernel(const float* __restrict__ g, const float* __restrict__ u, int ld,
                           bool gelu, int dim, int mode, RowOut o) {
    const int row = blockIdx.x;
    const float* gr = g + static_cast<size_t>(row) * ld;
    const float* ur = u + static_cast<size_t>(row) * ld;
    pack_row(row, dim, mode, o, [&](int i) {
        const float a = gelu ? gelu_tanh(gr[i]) : silu(gr[i]);
        return __fmul_rn(a, ur[i]);
    });
}

__global__ void add_rms_norm_kernel(float* __restrict__ x, const float* __restrict__ h,
                                    const float* __restrict__ w, float eps, int dim) {
    __shared__ double sh[32];
    const int row = blockIdx.x;
    const float* hr = h + static_cast<size_t>(row) * dim;
    float* xr = x + static_cast<size_t>(row) * dim;
    double ss = 0.0;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += static_cast<double>(__fmul_rn(hr[i], hr[i]));
    ss = block_sum_d(ss, sh);
    const float mean = static_cast<float>(ss / static_cast<double>(dim));
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        xr[i] = __fadd_rn(xr[i], __fmul_rn(__fmul_rn(hr[i], scale), w[i]));
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ h, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] += h[i];
}

}  // namespace

void rms_norm_out(const float* x, const float* w, float eps, int n_rows, int dim, RowOut out,
                  cudaStream_t s) {
    rms_norm_kernel<<<pack_grid(n_rows, dim), kThreads, 0, s>>>(x, w, eps, dim, out.mode, out);
}
void pack_rows(const float* x, int n_rows, int dim, RowOut out, cudaStream_t s) {
    pack_kernel<<<pack_grid(n_rows, dim), kThreads, 0, s>>>(x, dim, out.mode, out);
}
void glu_out(const float* gate, const float* up, int ld, bool gelu, int n_rows, int dim,
             RowOut out, cudaStream_t s) {
    glu_kernel<<<pack_grid(n_rows, dim), kThreads, 0, s>>>(gate, up, ld, gelu, dim, out.mode, out);
}
void add_rms_norm(float* x, const float* h, const float* w, float eps, int n_rows, int dim,
                  cudaStream_t s) {
    add_rms_norm_kernel<<<n_rows, kThreads, 0, s>>>(x, h, w, eps, dim);
}
void add_inplace(float* x, const float* h, int64_t n, cudaStream_t s) {
    add_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, h, n);
}

}  // namespace zinc::cuda
