// zinc/backend/cuda/attention.cu — causal attention over the paged f16 KV cache (Kwon et al.
// 2023), grouped-query heads, optional sliding window; the same kernel serves prefill rows and
// decode rows of any mix of sequences (each row carries its position and block table).
//
// One block of 4 warps per (row, query head): each thread scores its own positions (q.k over
// head_dim, K read 16 bytes at a time), scores go to shared memory, a block-wide softmax (f32,
// max-subtracted), then each warp accumulates p_j * V_j over a quarter of the positions with
// lanes across head_dim_v, and the 4 partial outputs are summed in shared memory. Not split-K
// across blocks: a decode row of one head is one block (fine for contexts of a few thousand). Position j of a row
// lives in physical block bt[row_bt + j / block_size], slot j % block_size. Window semantics as
// backend/cpu/attention.h (the window counts the token itself).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHd = 256;

__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttnJob j) {
    extern __shared__ float sm[];
    float* scores = sm;                    // max_pos
    float* part = sm + j.max_pos;          // kWarps * head_dim_v
    __shared__ float red[kWarps];
    __shared__ float qs[kMaxHd];
    const int row = blockIdx.x, h = blockIdx.y;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int hkv = h / (j.n_head / j.n_head_kv);
    const int hd = j.head_dim, hdv = j.head_dim_v;
    const int p = j.row_pos[row];
    const int lo = j.window > 0 ? max(0, p - j.window + 1) : 0;
    const int n = p - lo + 1;
    const int* bt = j.bt + j.row_bt[row];
    const int kvd = j.n_head_kv * hd, kvdv = j.n_head_kv * hdv;
    for (int i = threadIdx.x; i < hd; i += blockDim.x)
        qs[i] = j.q[static_cast<size_t>(row) * j.q_ld + h * hd + i];
    __syncthreads();

    // Scores: one position per thread (q from shared memory, K rows read 16 bytes at a time),
    // so a block covers 128 positions per round instead of 4.
    float mx = -INFINITY;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const int pos = lo + t;
        const size_t slot = static_cast<size_t>(bt[pos / j.block_size]) * j.block_size + pos % j.block_size;
        const uint16_t* k = j.k_cache + slot * kvd + hkv * hd;
        float d = 0.f;
        if ((hd & 7) == 0) {
            for (int i = 0; i < hd; i += 8) {
                const uint4 kv = *reinterpret_cast<const uint4*>(k + i);
                const __half2* h2 = reinterpret_cast<const __half2*>(&kv);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float2 f = __half22float2(h2[e]);
                    d += qs[i + 2 * e] * f.x + qs[i + 2 * e + 1] * f.y;
                }
            }
        } else {
            for (int i = 0; i < hd; ++i) d += qs[i] * dev::h2f(k[i]);
        }
        d *= j.scale;
        scores[t] = d;
        mx = fmaxf(mx, d);
    }
    mx = dev::warp_max(mx);
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = red[0];
    for (int w = 1; w < kWarps; ++w) mx = fmaxf(mx, red[w]);
    __syncthreads();
    float sum = 0.f;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        const float e = expf(scores[t] - mx);
        scores[t] = e;
        sum += e;
    }
    sum = dev::warp_sum(sum);
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += red[w];

    float acc[kMaxHd / 32];
#pragma unroll
    for (int e = 0; e < kMaxHd / 32; ++e) acc[e] = 0.f;
#pragma unroll 4
    for (int t = warp; t < n; t += kWarps) {
        const int pos = lo + t;
        const size_t slot = static_cast<size_t>(bt[pos / j.block_size]) * j.block_size + pos % j.block_size;
        const uint16_t* v = j.v_cache + slot * kvdv + hkv * hdv;
        const float pj = scores[t];
#pragma unroll
        for (int e = 0; e < kMaxHd / 32; ++e) {
            const int i = lane + 32 * e;
            if (i < hdv) acc[e] += pj * dev::h2f(v[i]);
        }
    }
#pragma unroll
    for (int e = 0; e < kMaxHd / 32; ++e) {
        const int i = lane + 32 * e;
        if (i < hdv) part[warp * hdv + i] = acc[e];
    }
    __syncthreads();
    const float inv = 1.f / sum;
    for (int i = threadIdx.x; i < hdv; i += blockDim.x) {
        float o = 0.f;
        for (int w = 0; w < kWarps; ++w) o += part[w * hdv + i];
        j.out[static_cast<size_t>(row) * j.out_ld + h * hdv + i] = o * inv;
    }
}

}  // namespace

cudaError_t attention_prepare(int max_pos, int head_dim_v) {
    const size_t smem = (static_cast<size_t>(max_pos) + kWarps * head_dim_v) * sizeof(float);
    return cudaFuncSetAttribute(attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(smem));
}

void attention(const AttnJob& j, int n_rows, cudaStream_t s) {
    const size_t smem = (static_cast<size_t>(j.max_pos) + kWarps * j.head_dim_v) * sizeof(float);
    dim3 grid(n_rows, j.n_head);
    attention_kernel<<<grid, kWarps * 32, smem, s>>>(j);
}

}  // namespace zinc::cuda
