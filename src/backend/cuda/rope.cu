// zinc/backend/cuda/rope.cu — the attention input stage, fused: Q/K/V biases, per-head Q/K RMS
// norm (qwen3, gemma3), rotary embedding (Su et al. 2021; Norm or NeoX pairing) and the write of
// each row's K and V into the paged f16 KV cache. One block per (row, head slot): slots
// [0, n_head) are Q heads, [n_head, n_head + n_head_kv) K heads, then V heads.
//
// theta_i = pos * freq_scale * base^(-2i/n_rot) / ff_i with base^(-2i/n_rot) formed by repeated
// float multiplication, as the CPU tier (backend/cpu/rope.cpp) and ggml do.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

__global__ void rope_kv_kernel(RopeJob j) {
    extern __shared__ float sh[];  // head_dim floats + 32 for the reduction
    float* red = sh + max(j.head_dim, j.head_dim_v);
    const int row = blockIdx.x, slot = blockIdx.y;
    const int tid = threadIdx.x, nt = blockDim.x;
    if (slot >= j.n_head + j.n_head_kv) {  // V head: bias, f16 into the cache
        const int h = slot - j.n_head - j.n_head_kv;
        const float* v = j.v + static_cast<size_t>(row) * j.v_ld + h * j.head_dim_v;
        const int kvd = j.n_head_kv * j.head_dim_v;
        uint16_t* dst = j.v_cache + static_cast<size_t>(j.row_slot[row]) * kvd + h * j.head_dim_v;
        for (int i = tid; i < j.head_dim_v; i += nt) {
            float x = v[i];
            if (j.bv) x += j.bv[h * j.head_dim_v + i];
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
    for (int i = tid; i < hd; i += nt) sh[i] = x[i] + (bias ? bias[h * hd + i] : 0.f);
    __syncthreads();
    if (nw) {
        float ss = 0.f;
        for (int i = tid; i < hd; i += nt) ss += sh[i] * sh[i];
        ss = dev::warp_sum(ss);
        if ((tid & 31) == 0) red[tid >> 5] = ss;
        __syncthreads();
        float t = 0.f;
        for (int w = 0; w < (nt + 31) / 32; ++w) t += red[w];
        const float scale = rsqrtf(t / hd + j.eps);
        __syncthreads();
        for (int i = tid; i < hd; i += nt) sh[i] = sh[i] * scale * nw[i];
        __syncthreads();
    }
    const int half = j.n_rot / 2;
    const float pos = static_cast<float>(j.row_pos[row]);
    const float theta_scale = powf(j.freq_base, -2.0f / static_cast<float>(j.n_rot));
    for (int i = tid; i < half; i += nt) {
        float theta = pos;
        for (int r = 0; r < i; ++r) theta *= theta_scale;
        const float ff = j.freq_factors ? j.freq_factors[i] : 1.0f;
        const float t = j.freq_scale * (theta / ff);
        const float c = cosf(t), s = sinf(t);
        const int ia = j.neox ? i : 2 * i, ib = j.neox ? i + half : 2 * i + 1;
        const float a = sh[ia], b = sh[ib];
        sh[ia] = a * c - b * s;
        sh[ib] = a * s + b * c;
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
    const size_t smem = (static_cast<size_t>(max(j.head_dim, j.head_dim_v)) + 32) * sizeof(float);
    rope_kv_kernel<<<grid, threads, smem, s>>>(j);
}

}  // namespace zinc::cuda
