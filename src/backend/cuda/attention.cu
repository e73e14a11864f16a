// zinc/backend/cuda/attention.cu — causal attention over the paged f16 KV cache (Kwon et al.
// 2023), grouped-query heads, optional sliding window; the same kernel serves prefill rows and
// decode rows of any mix of sequences (each row carries its position and block table).
//
// Canonical chunked order (backend/canon.h, docs/exactness.md), bit-identical to
// cpu::paged_attention: key positions are split into chunks aligned to canon::kAttnChunk; a
// chunk's scores are canon::dot8(q, k) * scale (one thread per position, 8 chains + tree8), its
// max, e = exp(s - max), l = the sum of e in position order (one thread), and o[d] = fma chains
// over the chunk's positions in order (one thread per output dimension). Chunks are merged in
// increasing order with canon::merge_factor / merge_value (then the attention sink, if any, as
// one more chunk: canon::merge_sink), and the output is o / l. No score
// matrix is materialized, so any context length works (the earlier kernel kept a row's scores in
// shared memory).
//
// Two schedules of the same arithmetic:
//  * walk (prefill, and any step with more than kAttnSplitRows rows): one block per (row, head)
//    walks its chunks in order, merging as it goes (flash-attention style tiling and online
//    softmax, on CUDA cores: tensor cores would change the summation order);
//  * split-K (decode steps): one block per (row, head, chunk) writes the chunk's partial state to
//    scratch; the block that arrives last for its (row, head) (an atomic counter, reset by that
//    block) merges all partials in chunk order. The merge order is fixed, so the result does not
//    depend on which block finishes first.
#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = canon::kAttnChunk;
constexpr int kMaxHd = 256;
constexpr int kDims = kMaxHd / kThreads;  // output dimensions per thread

struct Shared {
    float q[kMaxHd];
    float s[kChunk];        // scores, then exp(s - m)
    int slot[kChunk];       // physical KV row of each position of the chunk
    float red[kThreads / 32];
    float m, l;
};

__device__ __forceinline__ float max_keep(float a, float b) {  // NaN-ignoring, as the CPU loop
    return b > a ? b : a;
}

// One chunk [jb, je] of row `row`, head h: returns m and l in sh.m / sh.l and o[e] for the
// thread's dimensions d = threadIdx.x + e * kThreads.
__device__ void chunk_partial(const AttnJob& j, int row, int h, int jb, int je, Shared& sh,
                              float (&o)[kDims]) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int hkv = h / (j.n_head / j.n_head_kv);
    const int hd = j.head_dim, hdv = j.head_dim_v;
    const int kvd = j.n_head_kv * hd, kvdv = j.n_head_kv * hdv;
    const int len = je - jb + 1;
    const int* bt = j.bt + j.row_bt[row];
    float mx = -INFINITY;
    for (int t = tid; t < len; t += kThreads) {
        const int pos = jb + t;
        const int slot = bt[pos / j.block_size] * j.block_size + pos % j.block_size;
        sh.slot[t] = slot;
        const uint16_t* k = j.k_cache + static_cast<size_t>(slot) * kvd + hkv * hd;
        float d;
        if ((hd & 7) == 0) {
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            for (int i = 0; i < hd; i += 8) {
                const uint4 kv = *reinterpret_cast<const uint4*>(k + i);
                const __half2* h2 = reinterpret_cast<const __half2*>(&kv);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float2 f = __half22float2(h2[e]);
                    acc[2 * e] = canon::fma(sh.q[i + 2 * e], f.x, acc[2 * e]);
                    acc[2 * e + 1] = canon::fma(sh.q[i + 2 * e + 1], f.y, acc[2 * e + 1]);
                }
            }
            d = canon::tree8(acc);
        } else {
            d = canon::dot8(sh.q, [k](int i) { return dev::h2f(k[i]); }, hd);
        }
        d = canon::mul(d, j.scale);
        sh.s[t] = d;
        mx = max_keep(mx, d);
    }
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) mx = max_keep(mx, __shfl_xor_sync(0xffffffffu, mx, m));
    if (lane == 0) sh.red[warp] = mx;
    __syncthreads();
    mx = sh.red[0];
    for (int w = 1; w < kThreads / 32; ++w) mx = max_keep(mx, sh.red[w]);
    for (int t = tid; t < len; t += kThreads) sh.s[t] = canon::exp(canon::sub(sh.s[t], mx));
    __syncthreads();
    if (tid == 0) {
        float l = 0.f;
        for (int t = 0; t < len; ++t) l = canon::add(l, sh.s[t]);
        sh.l = l;
        sh.m = mx;
    }
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
        const int d = tid + e * kThreads;
        float acc = 0.f;
        if (d < hdv) {
            const uint16_t* vb = j.v_cache + hkv * hdv + d;
            for (int t = 0; t < len; ++t)
                acc = canon::fma(sh.s[t], dev::h2f(vb[static_cast<size_t>(sh.slot[t]) * kvdv]), acc);
        }
        o[e] = acc;
    }
    __syncthreads();  // sh.m / sh.l visible; sh.s and sh.slot free for the next chunk
}

__device__ __forceinline__ void load_q(const AttnJob& j, int row, int h, Shared& sh) {
    for (int i = threadIdx.x; i < j.head_dim; i += kThreads)
        sh.q[i] = j.q[static_cast<size_t>(row) * j.q_ld + h * j.head_dim + i];
    __syncthreads();
}

__device__ __forceinline__ void row_range(const AttnJob& j, int row, int& lo, int& pos, int& c_first) {
    pos = j.row_pos[row];
    lo = j.window > 0 ? max(0, pos - j.window + 1) : 0;
    c_first = lo - lo % kChunk;
}

__device__ __forceinline__ void store_out(const AttnJob& j, int row, int h, float (&o)[kDims],
                                          float m, float l) {
    if (j.sinks) {  // the sink chunk, merged last (canon::merge_sink), as the CPU tier
        float fa, fb;
        canon::merge_sink(m, l, j.sinks[h], fa, fb);
#pragma unroll
        for (int e = 0; e < kDims; ++e) o[e] = canon::merge_value(o[e], fa, 0.0f, fb);
    }
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
        const int d = threadIdx.x + e * kThreads;
        if (d < j.head_dim_v)
            j.out[static_cast<size_t>(row) * j.out_ld + h * j.head_dim_v + d] = canon::div(o[e], l);
    }
}

__global__ void __launch_bounds__(kThreads) attention_walk_kernel(AttnJob j) {
    __shared__ Shared sh;
    const int row = blockIdx.x, h = blockIdx.y;
    int lo, pos, c0;
    row_range(j, row, lo, pos, c0);
    load_q(j, row, h, sh);
    float o[kDims], oc[kDims], m = 0.f, l = 0.f;
    bool first = true;
    for (; c0 <= pos; c0 += kChunk) {
        chunk_partial(j, row, h, max(lo, c0), min(pos, c0 + kChunk - 1), sh, oc);
        const float mc = sh.m, lc = sh.l;
        if (first) {
#pragma unroll
            for (int e = 0; e < kDims; ++e) o[e] = oc[e];
            m = mc;
            l = lc;
            first = false;
        } else {
            const float mn = m > mc ? m : mc;  // as the CPU tier
            const float fa = canon::merge_factor(m, mn), fb = canon::merge_factor(mc, mn);
            l = canon::merge_value(l, fa, lc, fb);
#pragma unroll
            for (int e = 0; e < kDims; ++e) o[e] = canon::merge_value(o[e], fa, oc[e], fb);
            m = mn;
        }
        __syncthreads();  // everyone has read sh.m / sh.l before the next chunk overwrites them
    }
    store_out(j, row, h, o, m, l);
}

__global__ void __launch_bounds__(kThreads) attention_split_kernel(AttnJob j, int max_chunks) {
    __shared__ Shared sh;
    __shared__ bool last;
    const int row = blockIdx.x, h = blockIdx.y, k = blockIdx.z;
    int lo, pos, c_first;
    row_range(j, row, lo, pos, c_first);
    const int n_ch = (pos - c_first) / kChunk + 1;
    if (k >= n_ch) return;
    const int c0 = c_first + k * kChunk;
    load_q(j, row, h, sh);
    float o[kDims];
    chunk_partial(j, row, h, max(lo, c0), min(pos, c0 + kChunk - 1), sh, o);
    if (n_ch == 1) {
        store_out(j, row, h, o, sh.m, sh.l);
        return;
    }
    const int hdv = j.head_dim_v, stride = hdv + 2;
    const size_t unit = static_cast<size_t>(row) * j.n_head + h;
    float* part = j.part + unit * max_chunks * stride;
    float* mine = part + static_cast<size_t>(k) * stride;
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
        const int d = threadIdx.x + e * kThreads;
        if (d < hdv) mine[2 + d] = o[e];
    }
    if (threadIdx.x == 0) {
        mine[0] = sh.m;
        mine[1] = sh.l;
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned prev = atomicAdd(j.counters + unit, 1u);
        last = prev == static_cast<unsigned>(n_ch - 1);
        if (last) j.counters[unit] = 0;  // ready for the next step (or graph replay)
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float m = __ldcg(part), l = __ldcg(part + 1);
    float acc[kDims];
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
        const int d = threadIdx.x + e * kThreads;
        acc[e] = d < hdv ? __ldcg(part + 2 + d) : 0.f;
    }
    for (int c = 1; c < n_ch; ++c) {
        const float* pc = part + static_cast<size_t>(c) * stride;
        const float mc = __ldcg(pc), lc = __ldcg(pc + 1);
        const float mn = m > mc ? m : mc;
        const float fa = canon::merge_factor(m, mn), fb = canon::merge_factor(mc, mn);
        l = canon::merge_value(l, fa, lc, fb);
#pragma unroll
        for (int e = 0; e < kDims; ++e) {
            const int d = threadIdx.x + e * kThreads;
            if (d < hdv) acc[e] = canon::merge_value(acc[e], fa, __ldcg(pc + 2 + d), fb);
        }
        m = mn;
    }
    store_out(j, row, h, acc, m, l);
}

}  // namespace

int attn_max_chunks(int max_pos) {
    return max_pos / kChunk + 2;
}

cudaError_t attention_prepare(int max_pos, int head_dim_v) {
    return cudaSuccess;
}

void attention(const AttnJob& j, int n_rows, cudaStream_t s) {
    if (j.part && j.counters && n_rows <= kAttnSplitRows) {
        const int mc = attn_max_chunks(j.max_pos);
        attention_split_kernel<<<dim3(n_rows, j.n_head, mc), kThreads, 0, s>>>(j, mc);
    } else {
        attention_walk_kernel<<<dim3(n_rows, j.n_head), kThreads, 0, s>>>(j);
    }
}

}  // namespace zinc::cuda
