// zinc/backend/cuda/dmmv.cu — quantized matrix x few-vectors products (decode and small batches).
//
// One warp per weight row; each lane walks the row's 32-element chunks (decode_chunk in
// common.cuh), and every decoded chunk is used for NB activation rows at once, so a batch of up
// to NB sequences streams the weights once. Integer dot products with __dp4a on int8-packed
// activations (pack.cu); F32/F16/BF16 weights take a float path with f32 activations. Up to three
// matrices of one type share a launch (fused Q/K/V or gate/up projections): the grid spans their
// rows back to back.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using namespace dev;

constexpr int kWarps = 4;  // rows per block

struct Jobs {
    MatJob m[3];
    int n_jobs;
    int row_end[3];  // cumulative row counts
};

__device__ __forceinline__ int pick_job(const Jobs& J, int& row) {
    int j = 0;
    if (J.n_jobs > 1 && row >= J.row_end[0]) j = 1;
    if (J.n_jobs > 2 && row >= J.row_end[1]) j = 2;
    if (j > 0) row -= J.row_end[j - 1];
    return j;
}

template <int T, int NB>
__global__ void __launch_bounds__(kWarps * 32)
    dmmv_q_kernel(Jobs J, int n_chunks, const int8_t* __restrict__ aq,
                  const float4* __restrict__ ad, int n_act, bool accumulate) {
    int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (row >= J.row_end[J.n_jobs - 1]) return;
    const int j = pick_job(J, row);
    const MatJob& m = J.m[j];
    const int lane = threadIdx.x & 31;
    const int a0 = blockIdx.y * NB;
    const int nb = min(NB, n_act - a0);
    const uint8_t* w = m.w + static_cast<size_t>(row) * m.row_bytes;
    const size_t k = static_cast<size_t>(n_chunks) * 32;
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) acc[b] = 0.f;
    for (int c = lane; c < n_chunks; c += 32) {
        Chunk ch;
        decode_chunk<T>(w, c, ch);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (b < nb) {
                const int4* ap = reinterpret_cast<const int4*>(aq + (a0 + b) * k + c * 32);
                const int4 x0 = ap[0], x1 = ap[1];
                const float4 s = ad[(a0 + b) * static_cast<size_t>(n_chunks) + c];
                int lo = __dp4a(ch.q[0], x0.x, 0);
                lo = __dp4a(ch.q[1], x0.y, lo);
                lo = __dp4a(ch.q[2], x0.z, lo);
                lo = __dp4a(ch.q[3], x0.w, lo);
                int hi = __dp4a(ch.q[4], x1.x, 0);
                hi = __dp4a(ch.q[5], x1.y, hi);
                hi = __dp4a(ch.q[6], x1.z, hi);
                hi = __dp4a(ch.q[7], x1.w, hi);
                acc[b] += s.x * (ch.d_lo * static_cast<float>(lo) + ch.d_hi * static_cast<float>(hi)) +
                          ch.m_lo * s.y + ch.m_hi * s.z;
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        const float v = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* y = m.y + static_cast<size_t>(a0 + b) * m.ldy + row;
            const float r = v + (m.bias ? m.bias[row] : 0.f);
            *y = accumulate ? *y + r : r;
        }
    }
}

template <int T>
__device__ __forceinline__ float load_f(const uint8_t* w, int i) {
    if constexpr (T == kF32) return reinterpret_cast<const float*>(w)[i];
    else if constexpr (T == kF16) return h2f(reinterpret_cast<const uint16_t*>(w)[i]);
    else return bf2f(reinterpret_cast<const uint16_t*>(w)[i]);
}

template <int T, int NB>
__global__ void __launch_bounds__(kWarps * 32)
    dmmv_f_kernel(Jobs J, int k, const float* __restrict__ x, int n_act, bool accumulate) {
    int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
    if (row >= J.row_end[J.n_jobs - 1]) return;
    const int j = pick_job(J, row);
    const MatJob& m = J.m[j];
    const int lane = threadIdx.x & 31;
    const int a0 = blockIdx.y * NB;
    const int nb = min(NB, n_act - a0);
    const uint8_t* w = m.w + static_cast<size_t>(row) * m.row_bytes;
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) acc[b] = 0.f;
    for (int i = lane * 2; i < k; i += 64) {
        const float w0 = load_f<T>(w, i), w1 = load_f<T>(w, i + 1);
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (b < nb) {
                const float2 xv =
                    *reinterpret_cast<const float2*>(x + static_cast<size_t>(a0 + b) * k + i);
                acc[b] += w0 * xv.x + w1 * xv.y;
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        const float v = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* y = m.y + static_cast<size_t>(a0 + b) * m.ldy + row;
            const float r = v + (m.bias ? m.bias[row] : 0.f);
            *y = accumulate ? *y + r : r;
        }
    }
}

template <int T, int NB>
void launch_q(const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
              cudaStream_t s) {
    const int rows = J.row_end[J.n_jobs - 1];
    dim3 grid((rows + kWarps - 1) / kWarps, (n_act + NB - 1) / NB);
    dmmv_q_kernel<T, NB><<<grid, kWarps * 32, 0, s>>>(J, k / 32, aq, ad, n_act, acc);
}
template <int T, int NB>
void launch_f(const Jobs& J, int k, const float* x, int n_act, bool acc, cudaStream_t s) {
    const int rows = J.row_end[J.n_jobs - 1];
    dim3 grid((rows + kWarps - 1) / kWarps, (n_act + NB - 1) / NB);
    dmmv_f_kernel<T, NB><<<grid, kWarps * 32, 0, s>>>(J, k, x, n_act, acc);
}

template <int T>
void by_batch_q(const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
                cudaStream_t s) {
    if (n_act == 1) launch_q<T, 1>(J, k, aq, ad, n_act, acc, s);
    else if (n_act == 2) launch_q<T, 2>(J, k, aq, ad, n_act, acc, s);
    else if (n_act <= 4) launch_q<T, 4>(J, k, aq, ad, n_act, acc, s);
    else launch_q<T, 8>(J, k, aq, ad, n_act, acc, s);
}
template <int T>
void by_batch_f(const Jobs& J, int k, const float* x, int n_act, bool acc, cudaStream_t s) {
    if (n_act == 1) launch_f<T, 1>(J, k, x, n_act, acc, s);
    else if (n_act <= 4) launch_f<T, 4>(J, k, x, n_act, acc, s);
    else launch_f<T, 8>(J, k, x, n_act, acc, s);
}

}  // namespace

bool dmmv_supports(int type) {
    switch (type) {
        case kF32: case kF16: case kBF16: case kQ4_0: case kQ4_1: case kQ5_0: case kQ5_1:
        case kQ8_0: case kQ2_K: case kQ3_K: case kQ4_K: case kQ5_K: case kQ6_K:
            return true;
        default:
            return false;
    }
}

void dmmv(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
          const float* xf, int n_act, bool accumulate, cudaStream_t s) {
    Jobs J{};
    J.n_jobs = n_jobs;
    int total = 0;
    for (int i = 0; i < n_jobs; ++i) {
        J.m[i] = jobs[i];
        total += jobs[i].n_out;
        J.row_end[i] = total;
    }
    switch (type) {
        case kQ4_0: by_batch_q<kQ4_0>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ4_1: by_batch_q<kQ4_1>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ5_0: by_batch_q<kQ5_0>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ5_1: by_batch_q<kQ5_1>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ8_0: by_batch_q<kQ8_0>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ2_K: by_batch_q<kQ2_K>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ3_K: by_batch_q<kQ3_K>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ4_K: by_batch_q<kQ4_K>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ5_K: by_batch_q<kQ5_K>(J, k, aq, ad, n_act, accumulate, s); break;
        case kQ6_K: by_batch_q<kQ6_K>(J, k, aq, ad, n_act, accumulate, s); break;
        case kF32: by_batch_f<kF32>(J, k, xf, n_act, accumulate, s); break;
        case kF16: by_batch_f<kF16>(J, k, xf, n_act, accumulate, s); break;
        case kBF16: by_batch_f<kBF16>(J, k, xf, n_act, accumulate, s); break;
        default: break;  // callers check dmmv_supports
    }
}

}  // namespace zinc::cuda
