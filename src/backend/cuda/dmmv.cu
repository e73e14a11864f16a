// zinc/backend/cuda/dmmv.cu — quantized matrix x few-vectors products (decode and small batches).
// dmmv() runs dmmv_fast.cu's kernels (v3) where they cover the call and measured faster
// (dmmv_fast_preferred), else these (v2, also the float types); ZINC_DMMV=v2 / v3 force one.
//
// A block of 4 warps per RW weight rows; its threads walk the rows' 32-element chunks
// (decode_chunk in common.cuh), and every decoded chunk is used for NB activation rows at once,
// so a batch of up to NB sequences streams the weights once. Integer dot products with __dp4a on
// int8-packed activations (pack.cu); F32/F16/BF16 weights take a float path with f32 activations.
// Up to three matrices of one type share a launch (fused Q/K/V or gate/up projections): the grid
// spans their rows back to back.
#include <cstdlib>
#include <cstring>

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

// A block of 4 warps computes RW weight rows for NB activation rows: the 128 threads split the
// row's chunks (thread t takes chunks t, t + 128, ...), each loaded activation chunk is used for
// the RW weight rows (cutting activation traffic from L2 by RW), and the 4 warps' partial sums
// meet in shared memory. The per-row arithmetic (which thread adds which chunk, in which order,
// with explicit roundings) does not depend on NB or RW: a batch gives the same bits as one row.
template <int T, int NB, int RW>
__global__ void __launch_bounds__(kWarps * 32)
    dmmv_q_kernel(Jobs J, int n_chunks, const int8_t* __restrict__ aq,
                  const float4* __restrict__ ad, int n_act, bool accumulate) {
    __shared__ float red[kWarps][RW][NB];
    const int total = J.row_end[J.n_jobs - 1];
    const int row0 = blockIdx.x * RW;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int a0 = blockIdx.y * NB;
    const int nb = min(NB, n_act - a0);
    const size_t k = static_cast<size_t>(n_chunks) * 32;
    const uint8_t* w[RW];
    int jrow[RW], jj[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        int row = min(row0 + r, total - 1);
        jj[r] = pick_job(J, row);
        jrow[r] = row;
        w[r] = job_matrix(J.m[jj[r]].w, J.m[jj[r]].expert, J.m[jj[r]].expert_stride, a0) +
               static_cast<size_t>(row) * J.m[jj[r]].row_bytes;
    }
    float acc[RW][NB];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int b = 0; b < NB; ++b) acc[r][b] = 0.f;
    for (int c = threadIdx.x; c < n_chunks; c += kWarps * 32) {
        int4 x0[NB], x1[NB];
        float4 sc[NB];
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (b < nb) {
                const int4* ap = reinterpret_cast<const int4*>(aq + (a0 + b) * k + c * 32);
                x0[b] = ap[0];
                x1[b] = ap[1];
                sc[b] = ad[(a0 + b) * static_cast<size_t>(n_chunks) + c];
            }
        }
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            Chunk ch;
            decode_chunk<T>(w[r], c, ch, n_chunks / (Traits<T>::qk / 32));
#pragma unroll
            for (int b = 0; b < NB; ++b) {
                if (b < nb) {
                    int lo = __dp4a(ch.q[0], x0[b].x, 0);
                    lo = __dp4a(ch.q[1], x0[b].y, lo);
                    lo = __dp4a(ch.q[2], x0[b].z, lo);
                    lo = __dp4a(ch.q[3], x0[b].w, lo);
                    int hi = __dp4a(ch.q[4], x1[b].x, 0);
                    hi = __dp4a(ch.q[5], x1[b].y, hi);
                    hi = __dp4a(ch.q[6], x1[b].z, hi);
                    hi = __dp4a(ch.q[7], x1[b].w, hi);
                    float t = __fadd_rn(__fmul_rn(ch.d_lo, static_cast<float>(lo)),
                                        __fmul_rn(ch.d_hi, static_cast<float>(hi)));
                    t = __fmul_rn(sc[b].x, t);
                    t = __fadd_rn(t, __fmul_rn(ch.m_lo, sc[b].y));
                    t = __fadd_rn(t, __fmul_rn(ch.m_hi, sc[b].z));
                    acc[r][b] = __fadd_rn(acc[r][b], t);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const float v = warp_sum(acc[r][b]);
            if (lane == 0) red[warp][r][b] = v;
        }
    __syncthreads();
    const int t = threadIdx.x;
    if (t < RW * NB) {
        const int r = t / NB, b = t % NB;
        if (b < nb && row0 + r < total) {
            float v = red[0][r][b];
#pragma unroll
            for (int q = 1; q < kWarps; ++q) v = __fadd_rn(v, red[q][r][b]);
            const MatJob& m = J.m[jj[r]];
            float* y = m.y + static_cast<size_t>(a0 + b) * m.ldy + jrow[r];
            const float res = __fadd_rn(v, m.bias ? m.bias[jrow[r]] : 0.f);
            *y = accumulate ? __fadd_rn(*y, res) : res;
        }
    }
}

template <int T>
__device__ __forceinline__ float load_f(const uint8_t* w, int i) {
    if constexpr (T == kF32)
        return reinterpret_cast<const float*>(w)[i];
    else if constexpr (T == kF16)
        return h2f(reinterpret_cast<const uint16_t*>(w)[i]);
    else
        return bf2f(reinterpret_cast<const uint16_t*>(w)[i]);
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
    const uint8_t* w =
        job_matrix(m.w, m.expert, m.expert_stride, a0) + static_cast<size_t>(row) * m.row_bytes;
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
                acc[b] = __fadd_rn(acc[b], __fadd_rn(__fmul_rn(w0, xv.x), __fmul_rn(w1, xv.y)));
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        const float v = warp_sum(acc[b]);
        if (lane == 0 && b < nb) {
            float* y = m.y + static_cast<size_t>(a0 + b) * m.ldy + row;
            const float r = __fadd_rn(v, m.bias ? m.bias[row] : 0.f);
            *y = accumulate ? __fadd_rn(*y, r) : r;
        }
    }
}

template <int T, int NB, int RW>
void launch_q(const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
              cudaStream_t s) {
    const int rows = J.row_end[J.n_jobs - 1];
    dim3 grid((rows + RW - 1) / RW, (n_act + NB - 1) / NB);
    dmmv_q_kernel<T, NB, RW><<<grid, kWarps * 32, 0, s>>>(J, k / 32, aq, ad, n_act, acc);
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
    // Gathered (MoE) calls: each activation row has its own matrix, one row per block.
    if (n_act == 1 || J.m[0].expert)
        launch_q<T, 1, 4>(J, k, aq, ad, n_act, acc, s);
    else if (n_act == 2)
        launch_q<T, 2, 4>(J, k, aq, ad, n_act, acc, s);
    else if (n_act <= 4)
        launch_q<T, 4, 2>(J, k, aq, ad, n_act, acc, s);
    else
        launch_q<T, 8, 2>(J, k, aq, ad, n_act, acc, s);
}
template <int T>
void by_batch_f(const Jobs& J, int k, const float* x, int n_act, bool acc, cudaStream_t s) {
    if (n_act == 1 || J.m[0].expert)
        launch_f<T, 1>(J, k, x, n_act, acc, s);
    else if (n_act <= 4)
        launch_f<T, 4>(J, k, x, n_act, acc, s);
    else
        launch_f<T, 8>(J, k, x, n_act, acc, s);
}

}  // namespace

bool dmmv_supports(int type) {
    switch (type) {
        case kF32:
        case kF16:
        case kBF16:
        case kQ4_0:
        case kQ4_1:
        case kQ5_0:
        case kQ5_1:
        case kQ8_0:
        case kQ2_K:
        case kQ3_K:
        case kQ4_K:
        case kQ5_K:
        case kQ6_K:
        case kQ4_0R:
        case kQ8_0R:
        case kQ6_KR:
        case kMXFP4:
            return true;
        default:
            return false;
    }
}

void dmmv_v2(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
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
        case kQ4_0:
            by_batch_q<kQ4_0>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ4_1:
            by_batch_q<kQ4_1>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ5_0:
            by_batch_q<kQ5_0>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ5_1:
            by_batch_q<kQ5_1>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ8_0:
            by_batch_q<kQ8_0>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ2_K:
            by_batch_q<kQ2_K>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ3_K:
            by_batch_q<kQ3_K>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ4_K:
            by_batch_q<kQ4_K>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ5_K:
            by_batch_q<kQ5_K>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ6_K:
            by_batch_q<kQ6_K>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ4_0R:
            by_batch_q<kQ4_0R>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ8_0R:
            by_batch_q<kQ8_0R>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kQ6_KR:
            by_batch_q<kQ6_KR>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kMXFP4:
            by_batch_q<kMXFP4>(J, k, aq, ad, n_act, accumulate, s);
            break;
        case kF32:
            by_batch_f<kF32>(J, k, xf, n_act, accumulate, s);
            break;
        case kF16:
            by_batch_f<kF16>(J, k, xf, n_act, accumulate, s);
            break;
        case kBF16:
            by_batch_f<kBF16>(J, k, xf, n_act, accumulate, s);
            break;
        default:
            break;  // callers check dmmv_supports
    }
}

// ZINC_DMMV: "v2" (dmmv_v2 only), "v3" (dmmv_fast wherever it covers the call), unset: by
// dmmv_fast_preferred. Read once.
static int dmmv_choice() {
    static const int choice = [] {
        const char* e = std::getenv("ZINC_DMMV");
        if (e && std::strcmp(e, "v2") == 0) return 2;
        if (e && std::strcmp(e, "v3") == 0) return 3;
        return 0;
    }();
    return choice;
}

void dmmv(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
          const float* xf, int n_act, bool accumulate, cudaStream_t s) {
    static const bool pdl = [] {
        const char* e = std::getenv("ZINC_DMMV_PDL");
        return e && std::strcmp(e, "1") == 0;
    }();
    const int choice = dmmv_choice();
    int rows = 0;
    for (int i = 0; i < n_jobs; ++i) rows += jobs[i].n_out;
    // (a gathered MoE call is n_act single-row products: preferred as one activation row)
    const int n_pref = jobs[0].expert ? 1 : n_act;
    if (choice != 2 && (choice == 3 || dmmv_fast_preferred(type, rows, n_pref)) &&
        dmmv_fast(type, jobs, n_jobs, k, aq, ad, n_act, accumulate, s, 0, pdl))
        return;
    dmmv_v2(type, jobs, n_jobs, k, aq, ad, xf, n_act, accumulate, s);
}

}  // namespace zinc::cuda
