// zinc/backend/cuda/pack.cu — row-finishing kernels: RMS norm, gated activations (SwiGLU,
// GeGLU) and residual adds, each fused with the int8 activation packing that the quantized
// matrix-vector kernels read (kernels.h), and/or f32 / f16 outputs. The arithmetic is canon.h's
// (exact mode's RMS scale: 32 f64 chains, lane l of one warp owning chain l, the xor butterfly
// as tree32; the fast path's: a block-wide f32 tree, row_rms_scale_fast;
// rms_apply; silu / gelu_tanh; each op a correctly rounded intrinsic), and the packings are the
// CPU quantizers' (quant::quantize_row Q8_0 / Q8_1 / Q8_K) operation for operation, so both tiers
// feed the same bytes to their dot products (docs/exactness.md; tests/cuda/test_parity.cpp checks
// the bytes).
#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using dev::warp_max;
namespace cn = zinc::canon;

constexpr int kThreads = 256;

// Pack one group of elements (32, or 256 for Q8_K) of a row, held as NV values per lane (element
// g0 + 32 * i + lane), into the requested outputs. The int8 codes and scales are computed exactly
// as the CPU tier's activation packings (src/quant: quantize_row_q8_0 / _q8_1 / _q8_k), so the
// integer dot products of both tiers see the same codes:
//   Q8_0: d = amax / 127, q = roundf(x * (1 / d)), scale used = fp16(d)
//   Q8_1: as Q8_0, plus s = fp16(sum q * d) over the 32 (stored in the low half's slot)
//   Q8_K: 256 elements, max = the first element of largest |x|, q = min(127, rint(-127/max * x)),
//         d = 1 / (-127 / max) (f32); per 32-element chunk the half sums d * sum q.
// Every chunk's float4 also carries the two 16-element integer code sums in .w (sums_bits).
__device__ __forceinline__ float sums_bits(int s_lo, int s_hi) {
    return __uint_as_float((static_cast<uint32_t>(s_lo) & 0xffffu) |
                           (static_cast<uint32_t>(s_hi) << 16));
}

template <int NV>
__device__ __forceinline__ void emit_group(const float (&v)[NV], int row, int dim, int g0, int mode,
                                           const RowOut& o) {
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
        const float d = cn::div(amax, 127.0f);
        const float id = d != 0.0f ? cn::div(1.0f, d) : 0.0f;
        const int q = static_cast<int>(roundf(cn::mul(v[0], id)));
        o.q[base + lane] = static_cast<int8_t>(q);
        int s = q;
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        const int s_lo = __shfl_sync(0xffffffffu, s, 0), s_hi = __shfl_sync(0xffffffffu, s, 16);
        const float dh = __half2float(__float2half_rn(d));
        if (lane == 0) {
            float4 r;
            if (mode == kPackQ8_1)
                r = make_float4(
                    dh, __half2float(__float2half_rn(cn::mul(static_cast<float>(s_lo + s_hi), d))),
                    0.f, sums_bits(s_lo, s_hi));
            else
                r = make_float4(dh, cn::mul(dh, static_cast<float>(s_lo)),
                                cn::mul(dh, static_cast<float>(s_hi)), sums_bits(s_lo, s_hi));
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
    const float iscale = amax != 0.f ? cn::div(-127.0f, mx) : 0.f;
    const float d = amax != 0.f ? cn::div(1.0f, iscale) : 0.f;
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const int q = min(127, __float2int_rn(cn::mul(iscale, v[i])));
        o.q[base + 32 * i + lane] = static_cast<int8_t>(q);
        int s = q;
#pragma unroll
        for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        const int s_lo = __shfl_sync(0xffffffffu, s, 0), s_hi = __shfl_sync(0xffffffffu, s, 16);
        if (lane == 0)
            o.d[static_cast<size_t>(row) * (dim / 32) + g0 / 32 + i] =
                make_float4(d, cn::mul(d, static_cast<float>(s_lo)),
                            cn::mul(d, static_cast<float>(s_hi)), sums_bits(s_lo, s_hi));
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
        // All of the warp's loads first (one round of L2 latency instead of one a group: H200
        // run 10 measured the 14336-wide GLU at 5.3 us a launch, ~8 dependent rounds), then the
        // groups in order, each exactly as before.
        const int ng = (min(dim, g0 + 256) - g0 + 31) / 32;
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = i < ng ? f(g0 + 32 * i + lane) : 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            if (i < ng) {
                const float vi[1] = {v[i]};
                emit_group<1>(vi, row, dim, g0 + 32 * i, mode, o);
            }
        }
    }
}

inline dim3 pack_grid(int n_rows, int dim) {
    return dim3(n_rows, (dim + 256 * kGroupsPerBlock - 1) / (256 * kGroupsPerBlock));
}

// Whether a row can be read as float4 pieces.
__device__ __forceinline__ bool vec4_row(const float* xr, int dim) {
    return (dim & 3) == 0 && (reinterpret_cast<uintptr_t>(xr) & 15u) == 0;
}

// canon::rms_scale of a row, computed by warp 0 (lane l owns chain l: elements l, l + 32, ...
// squared in f32, summed in f64 in increasing order; the xor butterfly is canon::tree32) and
// shared with the block. Every thread of the block must call it.
// Rows of up to kStagedDim elements are first staged in shared memory by the whole block (one
// round of loads instead of warp 0's dim / 32 dependent ones); the chains are the same.
constexpr int kStagedDim = 8192;
__device__ float row_rms_scale(const float* __restrict__ xr, int dim, float eps) {
    __shared__ float s_scale;
    __shared__ __align__(16) float s_x[kStagedDim];  // (float4 stores: 16-byte aligned)
    const bool staged = dim <= kStagedDim;
    if (staged) {  // float4 pieces where the row allows them, 8 loads in flight a thread
        if (vec4_row(xr, dim)) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            float4* s4 = reinterpret_cast<float4*>(s_x);
#pragma unroll 8
            for (int i = threadIdx.x; i < dim / 4; i += blockDim.x) s4[i] = x4[i];
        } else {
            for (int i = threadIdx.x; i < dim; i += blockDim.x) s_x[i] = xr[i];
        }
        __syncthreads();
    }
    if (threadIdx.x < 32) {
        const float* src = staged ? s_x : xr;
        double ch = 0.0;
#pragma unroll 8
        for (int i = threadIdx.x; i < dim; i += 32)
            ch = cn::dadd(ch, static_cast<double>(cn::mul(src[i], src[i])));
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            ch = cn::dadd(ch, __shfl_xor_sync(0xffffffffu, ch, off));
        const float mean = static_cast<float>(cn::ddiv(ch, static_cast<double>(dim)));
        if (threadIdx.x == 0) s_scale = cn::div(1.0f, cn::sqrt(cn::add(mean, eps)));
    }
    __syncthreads();
    return s_scale;
}

// The fast path's RMS scale: each thread's strided float4 pieces summed in f32 (4 chains, one
// per component, added at the end), then the warps' xor butterflies and warp 0's over their sums
// (a fixed order for a given dim and block size: no batch dependence). Its kernels are separate
// instantiations (kExact = false) without row_rms_scale's 32 KB of static shared memory. H200 run
// 9 measured the fused norm at 6.7 us a launch against 2.8 us for the same packing without a
// norm; the loop over single floats kept a thread's 16 loads of a 4096-wide row in ~4 rounds
// of L2 latency, which these float4 loads (all in flight at once up to 8192 elements) remove.
__device__ float row_rms_scale_fast(const float* __restrict__ xr, int dim, float eps) {
    __shared__ float s_part[kThreads / 32];
    __shared__ float s_scale;
    float acc;
    if (vec4_row(xr, dim)) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4 a4 = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
        for (int i = threadIdx.x; i < dim / 4; i += blockDim.x) {
            const float4 v = x4[i];
            a4.x = fmaf(v.x, v.x, a4.x);
            a4.y = fmaf(v.y, v.y, a4.y);
            a4.z = fmaf(v.z, v.z, a4.z);
            a4.w = fmaf(v.w, v.w, a4.w);
        }
        acc = (a4.x + a4.y) + (a4.z + a4.w);
    } else {  // (a row of dim % 4 != 0 or not 16-byte aligned: f32 outputs only)
        acc = 0.f;
        for (int i = threadIdx.x; i < dim; i += blockDim.x) acc = fmaf(xr[i], xr[i], acc);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) s_part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        const int nw = static_cast<int>(blockDim.x) >> 5;
        float v = static_cast<int>(threadIdx.x) < nw ? s_part[threadIdx.x] : 0.f;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (threadIdx.x == 0) s_scale = 1.0f / sqrtf(v / static_cast<float>(dim) + eps);
    }
    __syncthreads();
    return s_scale;
}

template <bool kExact>
__device__ __forceinline__ float rms_scale_of(const float* __restrict__ xr, int dim, float eps) {
    if constexpr (kExact)
        return row_rms_scale(xr, dim, eps);
    else
        return row_rms_scale_fast(xr, dim, eps);
}

template <bool kExact>
__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, float eps,
                                int dim, int mode, RowOut o) {
    dev::launch_dependents();  // the projection after it may start streaming its weights
    const int row = blockIdx.x;
    const float* xr = x + static_cast<size_t>(row) * dim;
    const float scale = rms_scale_of<kExact>(xr, dim, eps);
    pack_row(row, dim, mode, o, [&](int i) {
        return w ? cn::rms_apply(xr[i], scale, w[i]) : cn::rms_apply(xr[i], scale);
    });
}

__global__ void pack_kernel(const float* __restrict__ x, int dim, int mode, RowOut o,
                            const int32_t* __restrict__ src_rows) {
    dev::launch_dependents();  // the projection after it may start streaming its weights
    const int row = blockIdx.x;
    const float* xr = x + static_cast<size_t>(src_rows ? src_rows[row] : row) * dim;
    pack_row(row, dim, mode, o, [&](int i) { return xr[i]; });
}

__global__ void glu_kernel(const float* __restrict__ g, const float* __restrict__ u, int ld,
                           bool gelu, int dim, int mode, RowOut o) {
    dev::launch_dependents();  // the projection after it may start streaming its weights
    const int row = blockIdx.x;
    const float* gr = g + static_cast<size_t>(row) * ld;
    const float* ur = u + static_cast<size_t>(row) * ld;
    pack_row(row, dim, mode, o, [&](int i) {
        const float a = gelu ? cn::gelu_tanh(gr[i]) : cn::silu(gr[i]);
        return cn::mul(a, ur[i]);
    });
}

template <bool kExact>
__global__ void add_rms_norm_kernel(float* __restrict__ x, const float* __restrict__ h,
                                    const float* __restrict__ w, float eps, int dim) {
    const int row = blockIdx.x;
    const float* hr = h + static_cast<size_t>(row) * dim;
    float* xr = x + static_cast<size_t>(row) * dim;
    const float scale = rms_scale_of<kExact>(hr, dim, eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x)
        xr[i] = cn::add(xr[i], cn::rms_apply(hr[i], scale, w[i]));
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ h, int64_t n) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) x[i] = cn::add(x[i], h[i]);
}

}  // namespace

void rms_norm_out(const float* x, const float* w, float eps, int n_rows, int dim, RowOut out,
                  bool exact, cudaStream_t s) {
    const auto kernel = exact ? rms_norm_kernel<true> : rms_norm_kernel<false>;
    kernel<<<pack_grid(n_rows, dim), kThreads, 0, s>>>(x, w, eps, dim, out.mode, out);
}
void pack_rows(const float* x, int n_rows, int dim, RowOut out, cudaStream_t s,
               const int32_t* src_rows) {
    pack_kernel<<<pack_grid(n_rows, dim), kThreads, 0, s>>>(x, dim, out.mode, out, src_rows);
}
void glu_out(const float* gate, const float* up, int ld, bool gelu, int n_rows, int dim, RowOut out,
             cudaStream_t s) {
    glu_kernel<<<pack_grid(n_rows, dim), kThreads, 0, s>>>(gate, up, ld, gelu, dim, out.mode, out);
}
void add_rms_norm(float* x, const float* h, const float* w, float eps, int n_rows, int dim,
                  bool exact, cudaStream_t s) {
    const auto kernel = exact ? add_rms_norm_kernel<true> : add_rms_norm_kernel<false>;
    kernel<<<n_rows, kThreads, 0, s>>>(x, h, w, eps, dim);
}
void add_inplace(float* x, const float* h, int64_t n, cudaStream_t s) {
    add_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, h, n);
}

}  // namespace zinc::cuda
