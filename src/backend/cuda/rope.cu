// zinc/backend/cuda/rope.cu — the attention input stage, fused: Q/K/V biases, per-head Q/K RMS
// norm (qwen3, gemma3), rotary embedding (Su et al. 2021; Norm or NeoX pairing) and the write of
// each row's K and V into the paged f16 KV cache. One block per (row, head slot): slots
// [0, n_head) are Q heads, [n_head, n_head + n_head_kv) K heads, then V heads.
//
// Bit-exact with the CPU tier (backend/canon.h, docs/exactness.md): the cos/sin of every
// (position, pair) come from the table the host computed with cpu::rope_cache (RopeJob::cs), the
// rotation is canon::rope_pair, and the head norm is canon::rms_scale's order (warp 0, lane l
// owns chain l, tree32 by xor shuffles) and canon::rms_apply.
#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

// canon::rms_scale over n floats in shared memory, by warp 0; every thread gets the result.
__device__ float block_rms_scale(const float* x, int n, float eps, float* bcast) {
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        double ch = 0.0;
        for (int i = lane; i < n; i += 32)
            ch = canon::dadd(ch, static_cast<double>(canon::mul(x[i], x[i])));
#pragma unroll
        for (int m = 16; m >= 1; m >>= 1) ch = canon::dadd(ch, __shfl_xor_sync(0xffffffffu, ch, m));
        if (lane == 0) {
            const float mean = static_cast<float>(canon::ddiv(ch, static_cast<double>(n)));
            *bcast = canon::div(1.0f, canon::sqrt(canon::add(mean, eps)));
        }
    }
    __syncthreads();
    return *bcast;
}

__global__ void rope_kv_kernel(RopeJob j) {
    extern __shared__ float sh[];  // max(head_dim, head_dim_v) floats + 1 broadcast slot
    const int row = blockIdx.x, slot = blockIdx.y;
    const int tid = threadIdx.x, nt = blockDim.x;
    if (slot >= j.n_head + j.n_head_kv) {  // V head: bias, f16 into the cache
        const int h = slot - j.n_head - j.n_head_kv;
        const float* v = j.v + static_cast<size_t>(row) * j.v_ld + h * j.head_dim_v;
        const int kvd = j.n_head_kv * j.head_dim_v;
        uint16_t* dst = j.v_cache + static_cast<size_t>(j.row_slot[row]) * kvd + h * j.head_dim_v;
        for (int i = tid; i < j.head_dim_v; i += nt) {
            float x = v[i];
            if (j.bv) x = canon::add(x, j.bv[h * j.head_dim_v + i]);
            dst[i] = __half_as_ushort(__float2half_rn(x));
        }
        return;
    }
    const bool is_q = slot < j.n_head;
    const int h = is_q ? slot : slot - j.n_head;
    float* x = is_q ? j.q + static_cast<size_t>(row) * j.q_ld + h * j.head_dim
                    : j.k + static_cast<size_t>(row) * j.k_ld + h * j.head_dim;
    const float* bias = is_q ? j.bq : j.bk;
    const float* nw = is_q ? j.q_norm : j.k_norm;
    const int hd = j.head_dim;
    float* bcast = sh + max(j.head_dim, j.head_dim_v);
    for (int i = tid; i < hd; i += nt) sh[i] = bias ? canon::add(x[i], bias[h * hd + i]) : x[i];
    __syncthreads();
    if (nw) {
        const float scale = block_rms_scale(sh, hd, j.eps, bcast);
        for (int i = tid; i < hd; i += nt) sh[i] = canon::rms_apply(sh[i], scale, nw[i]);
        __syncthreads();
    }
    const int half = j.n_rot / 2;
    const float* cs = j.cs + static_cast<size_t>(j.row_pos[row]) * j.n_rot;
    for (int i = tid; i < half; i += nt) {
        const int ia = j.neox ? i : 2 * i, ib = j.neox ? i + half : 2 * i + 1;
        canon::rope_pair(sh[ia], sh[ib], cs[2 * i], cs[2 * i + 1]);
    }
    __syncthreads();
    if (is_q) {
        for (int i = tid; i < hd; i += nt) x[i] = sh[i];
    } else {
        const int kvd = j.n_head_kv * hd;
        uint16_t* dst = j.k_cache + static_cast<size_t>(j.row_slot[row]) * kvd + h * hd;
        for (int i = tid; i < hd; i += nt) dst[i] = __half_as_ushort(__float2half_rn(sh[i]));
    }
}

}  // namespace

void rope_kv(const RopeJob& j, int n_rows, cudaStream_t s) {
    dim3 grid(n_rows, j.n_head + 2 * j.n_head_kv);
    const int threads = 128;
    const size_t smem = (static_cast<size_t>(max(j.head_dim, j.head_dim_v)) + 1) * sizeof(float);
    rope_kv_kernel<<<grid, threads, smem, s>>>(j);
}

}  // namespace zinc::cuda
