// zinc/backend/cuda/attention_fast_decode.cu — fast-mode decode attention at depth: split-K over
// the key positions, grouped by KV head, over the paged f16 KV cache (the layout attention.cu
// reads). Exact mode never runs it (attention.cu keeps the CPU tier's bits).
//
// A block of 128 threads takes one row, one KV head (up to GM = 4 or 8 of the query heads that
// share it, by the group's size: a GQA group of more than 8 heads is split into chunks of 8) and
// one of n_live key ranges of equal length (ceil(n / n_live), n = the row's attended positions,
// n_live = ceil(n / kMinKeys) at most the grid's n_split; the grid is fixed per row count, so a
// CUDA graph stays valid as the context grows). Every K and V row of the range is read once,
// with 16-byte loads, for all the group's query heads; f32 math:
//   scores: D / 8 lanes per key, each lane one 16-byte piece of K times the same 8 dimensions of
//   every head's q (registers), summed over the lanes by shuffles; scale; into shared memory;
//   online softmax per 64-key tile (one warp per head: max, exp, sum; running m, l);
//   values: DV / 8 lanes per key piece, each thread accumulates its 8 dimensions for every head
//   over the keys of its lane (o rescaled by exp(m_old - m_new) per tile), then the key lanes
//   are summed through shared memory at the end of the range.
// Each block writes its (m, l, o) partial per query head to j.part; the block that arrives last
// for its (row, group) (j.counters, reset by that block) merges the partials (a warp a query
// head: the maximum and the weights, each output dimension's sum in split order),
// adds the sink (exp(sink - m) in the denominator) when j.sinks is set, and writes o / l.
#include <algorithm>
#include <cmath>

#include "backend/cuda/attn_mma.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using namespace fa;

constexpr int kThreads = 128;
constexpr int kTile = 64;  // keys per softmax tile
// Keys a live split takes at least: the grid has n_split splits for the longest context; a row
// of n attended positions uses ceil(n / kMinKeys) of them (at most n_split) and the blocks past
// those exit at once, so one captured graph serves short and long contexts (H200 run 10: with
// the grid's splits all live, 4 splits at -c 1024 left 32 blocks for an 8-KV-head layer, and 66
// at long -c left most of them a fraction of a tile at short depth).
constexpr int kMinKeys = 64;
// Splits a row may have at most (about 4 blocks an SM of the H200's 132 at one row and KV head).
constexpr int kMaxSplits = 4 * 132;
// Query heads per block: GM = 4 when the GQA group has at most 4 (Llama 3, Gemma 3, SmolLM2),
// else 8 (q, o and the scores are GM-sized registers and shared arrays).
template <int GM>
constexpr bool kValidGM = GM == 4 || GM == 8;

// (the SIMT shim of tests/unit/cuda_emul supplies these intrinsics for the host build)
__device__ __forceinline__ unsigned atomic_add(unsigned* p, unsigned v) {
    return atomicAdd(p, v);
}
__device__ __forceinline__ void fence() {
    __threadfence();
}
__device__ __forceinline__ float ld_cg(const float* p) {
    return __ldcg(p);
}

template <int GM>
struct Shared {
    float s[GM][kTile];  // scores, then exp(s - m)
    float m[GM], l[GM], alpha[GM];
    int slot[kTile];
    float red[kThreads * 8];  // cross-lane sums of o, one head at a time
    float fw[kThreads / 32][kMaxSplits];  // the merge's split maxima, then weights, per warp
    bool last;
};

template <int D, int GM>
__global__ void __launch_bounds__(kThreads)
    fa_decode_kernel(AttnJob j, int row0, int n_split, int n_hchunks) {
    static_assert(kValidGM<GM>);
    constexpr int kGMax = GM;
    __shared__ Shared<GM> sh;
    constexpr int kLpk = D / 8;            // lanes per key (scores and values)
    constexpr int kKpp = kThreads / kLpk;  // keys per pass
    // A tile is kPasses passes of kKpp keys; a thread's K (and V) pieces of up to 8 passes are
    // loaded before the first is used (H200 run 9: one piece at a time left ~1 TB/s of KV
    // reads at depth 16384, every pass a DRAM round trip).
    constexpr int kPasses = kTile / kKpp;
    constexpr int kChunk = kPasses < 8 ? kPasses : 8;
    constexpr bool kVEarly = kPasses <= 8;  // V pieces issued with K's (D <= 128)
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int split = blockIdx.x;
    const int n_groups = j.n_head_kv * n_hchunks;
    const int lr = static_cast<int>(blockIdx.y) / n_groups,
              grp = static_cast<int>(blockIdx.y) % n_groups;
    const int row = row0 + lr;
    const int kvh = grp / n_hchunks, hc = grp % n_hchunks;
    const int G = j.n_head / j.n_head_kv;
    const int h0 = kvh * G + hc * kGMax;
    const int ng = min(kGMax, G - hc * kGMax);
    const int pos = j.row_pos[row];
    const int lo = j.window > 0 ? max(0, pos - j.window + 1) : 0;
    const int n = pos - lo + 1;
    const int n_live = min(n_split, (n + kMinKeys - 1) / kMinKeys);  // the same for the row's blocks
    if (split >= n_live) return;  // block-uniform, before any barrier
    const int per = (n + n_live - 1) / n_live;
    const int kb = lo + split * per;
    const int ke = min(pos + 1, kb + per);  // exclusive
    const int* bt = j.bt + j.row_bt[row];
    const int bs = j.block_size;
    const size_t kvd = static_cast<size_t>(j.n_head_kv) * D;
    const uint16_t* kc = j.k_cache + static_cast<size_t>(kvh) * D;
    const uint16_t* vc = j.v_cache + static_cast<size_t>(kvh) * D;
    const int c = tid % kLpk, ks = tid / kLpk;

    float qr[kGMax][8];
#pragma unroll
    for (int g = 0; g < kGMax; ++g) {
#pragma unroll
        for (int e = 0; e < 8; ++e)
            qr[g][e] = g < ng ? j.q[static_cast<size_t>(row) * j.q_ld +
                                    static_cast<size_t>(h0 + g) * D + c * 8 + e]
                              : 0.f;
    }
    if (tid < kGMax) {
        sh.m[tid] = -INFINITY;
        sh.l[tid] = 0.f;
    }
    float o[kGMax][8];
#pragma unroll
    for (int g = 0; g < kGMax; ++g)
#pragma unroll
        for (int e = 0; e < 8; ++e) o[g][e] = 0.f;

    for (int t0 = kb; t0 < ke; t0 += kTile) {  // uniform over the block
        const int nt = min(kTile, ke - t0);
        if (tid < kTile) {
            const int p = t0 + tid;
            sh.slot[tid] = tid < nt ? bt[p / bs] * bs + p % bs : 0;
        }
        __syncthreads();
        uint4 vr[kVEarly ? kPasses : 1];
#pragma unroll
        for (int c0 = 0; c0 < kPasses; c0 += kChunk) {
            uint4 kr[kChunk];
#pragma unroll
            for (int i = 0; i < kChunk; ++i) {  // key ks + (c0 + i) kKpp (< kTile always)
                const int kk = ks + (c0 + i) * kKpp;
                kr[i] = kk < nt ? *reinterpret_cast<const uint4*>(
                                      kc + static_cast<size_t>(sh.slot[kk]) * kvd + c * 8)
                                : uint4{0u, 0u, 0u, 0u};
            }
            if constexpr (kVEarly) {
#pragma unroll
                for (int i = 0; i < kPasses; ++i) {
                    const int kk = ks + i * kKpp;
                    vr[i] = kk < nt ? *reinterpret_cast<const uint4*>(
                                          vc + static_cast<size_t>(sh.slot[kk]) * kvd + c * 8)
                                    : uint4{0u, 0u, 0u, 0u};
                }
            }
#pragma unroll
            for (int i = 0; i < kChunk; ++i) {
                const int kk = ks + (c0 + i) * kKpp;
                const bool valid = kk < nt;
                float kf[8];
                unpack8(kr[i], kf);
#pragma unroll
                for (int g = 0; g < kGMax; ++g) {
                    float d = 0.f;
#pragma unroll
                    for (int e = 0; e < 8; ++e) d = fmaf(qr[g][e], kf[e], d);
#pragma unroll
                    for (int m = kLpk / 2; m >= 1; m >>= 1)
                        d += __shfl_xor_sync(0xffffffffu, d, m);
                    if (c == 0) sh.s[g][kk] = (valid && g < ng) ? d * j.scale : -INFINITY;
                }
            }
        }
        __syncthreads();
        for (int g = warp; g < kGMax; g += kThreads / 32) {  // two heads per warp
            const float s0 = sh.s[g][lane], s1 = sh.s[g][lane + 32];
            float mx = fmaxf(s0, s1);
#pragma unroll
            for (int m = 16; m >= 1; m >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, m));
            const float m_old = sh.m[g];
            const float m_new = fmaxf(m_old, mx);
            const float mu = m_new == -INFINITY ? 0.f : m_new;
            const float p0 = expf(s0 - mu), p1 = expf(s1 - mu);
            float sum = p0 + p1;
#pragma unroll
            for (int m = 16; m >= 1; m >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
            sh.s[g][lane] = p0;
            sh.s[g][lane + 32] = p1;
            if (lane == 0) {
                const float al = expf(m_old - mu);
                sh.alpha[g] = al;
                sh.l[g] = sh.l[g] * al + sum;
                sh.m[g] = m_new;
            }
        }
        __syncthreads();
#pragma unroll
        for (int g = 0; g < kGMax; ++g) {
            const float al = sh.alpha[g];
#pragma unroll
            for (int e = 0; e < 8; ++e) o[g][e] *= al;
        }
#pragma unroll
        for (int c0 = 0; c0 < kPasses; c0 += kChunk) {
            uint4 vv[kChunk];
#pragma unroll
            for (int i = 0; i < kChunk; ++i) {
                const int kk = ks + (c0 + i) * kKpp;
                if constexpr (kVEarly)
                    vv[i] = vr[c0 + i];
                else
                    vv[i] = kk < nt ? *reinterpret_cast<const uint4*>(
                                          vc + static_cast<size_t>(sh.slot[kk]) * kvd + c * 8)
                                    : uint4{0u, 0u, 0u, 0u};
            }
#pragma unroll
            for (int i = 0; i < kChunk; ++i) {
                const int kk = ks + (c0 + i) * kKpp;
                if (kk >= nt) continue;  // (the keys in order, as one loop over kk < nt)
                float vf[8];
                unpack8(vv[i], vf);
#pragma unroll
                for (int g = 0; g < kGMax; ++g) {
                    const float p = sh.s[g][kk];
#pragma unroll
                    for (int e = 0; e < 8; ++e) o[g][e] = fmaf(p, vf[e], o[g][e]);
                }
            }
        }
        __syncthreads();  // sh.s / sh.slot free for the next tile
    }

    // Sum o over the key lanes (ks) and write this block's partial (or, alone, the output).
    const int hdv = D, stride = hdv + 2;
    const bool alone = n_live == 1;
#pragma unroll
    for (int g = 0; g < kGMax; ++g) {  // unrolled: o stays in registers
        if (g >= ng) break;            // block-uniform
#pragma unroll
        for (int e = 0; e < 8; ++e) sh.red[tid * 8 + e] = o[g][e];
        __syncthreads();
        for (int d = tid; d < hdv; d += kThreads) {
            float acc = 0.f;
            for (int k2 = 0; k2 < kKpp; ++k2) acc += sh.red[(k2 * kLpk + d / 8) * 8 + d % 8];
            const int h = h0 + g;
            if (alone) {
                float m = sh.m[g], l = sh.l[g], f = 1.f;
                if (j.sinks) {
                    const float m2 = fmaxf(m, j.sinks[h]);
                    f = expf(m - m2);
                    l = l * f + expf(j.sinks[h] - m2);
                }
                j.out[static_cast<size_t>(row) * j.out_ld + static_cast<size_t>(h) * hdv + d] =
                    l > 0.f ? acc * f / l : 0.f;
            } else {
                float* mine =
                    j.part + ((static_cast<size_t>(lr) * j.n_head + h) * n_split + split) * stride;
                mine[2 + d] = acc;
                if (d == 0) {
                    mine[0] = sh.m[g];
                    mine[1] = sh.l[g];
                }
            }
        }
        __syncthreads();
    }
    if (alone) return;
    fence();
    __syncthreads();
    const size_t unit = static_cast<size_t>(lr) * j.n_head + h0;
    if (tid == 0) {
        const unsigned prev = atomic_add(j.counters + unit, 1u);
        sh.last = prev == static_cast<unsigned>(n_live - 1);
        if (sh.last) j.counters[unit] = 0;  // ready for the next step (or graph replay)
    }
    __syncthreads();
    if (!sh.last) return;
    fence();
    // The merge: one warp per query head (the GM heads over the block's warps), no block
    // barrier. Each lane folds the (m, l) of splits lane, lane + 32, ... into a running pair and
    // keeps their maxima in its warp's row of sh.fw; the warp's butterflies combine the lanes'
    // pairs (+ the sink); sh.fw becomes the weights exp(m_sp - m); each output dimension (lane,
    // lane + 32, ...) is the weighted sum over the splits in split order, 8 loads in flight.
    // (H200 run 10: the merge per head with the whole block, 3 block-wide rounds of L2 loads a
    // head, was ~12 serial round trips at GM = 4, about half of the 14.3 us a layer took at ~600
    // positions.)
    // (The loop is block-uniform and idle warps shuffle along: the host emulation's shuffles
    // are block-wide exchanges.)
    float* fw = sh.fw[warp];
    for (int g0 = 0; g0 < ng; g0 += kThreads / 32) {
        const int g = g0 + warp;
        const bool on = g < ng;
        const int h = h0 + (on ? g : 0);
        const float* part = j.part + (static_cast<size_t>(lr) * j.n_head + h) * n_split * stride;
        float m = -INFINITY, l = 0.f;
        for (int sp = lane; on && sp < n_live; sp += 32) {
            const float ms = ld_cg(part + sp * stride), ls = ld_cg(part + sp * stride + 1);
            fw[sp] = ms;
            const float m2 = fmaxf(m, ms);
            const float mu = m2 == -INFINITY ? 0.f : m2;
            l = l * expf(m - mu) + (ms == -INFINITY ? 0.f : ls * expf(ms - mu));
            m = m2;
        }
        float mw = m;
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) mw = fmaxf(mw, __shfl_xor_sync(0xffffffffu, mw, o));
        const float mf = j.sinks ? fmaxf(mw, j.sinks[h]) : mw;
        const float mu = mf == -INFINITY ? 0.f : mf;
        float lw = m == -INFINITY ? 0.f : l * expf(m - mu);
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) lw += __shfl_xor_sync(0xffffffffu, lw, o);
        if (j.sinks) lw += expf(j.sinks[h] - mu);
        for (int sp = lane; on && sp < n_live; sp += 32)
            fw[sp] = fw[sp] == -INFINITY ? 0.f : expf(fw[sp] - mu);
        __syncwarp();
        for (int d = lane; on && d < hdv; d += 32) {
            float acc = 0.f;
#pragma unroll 8
            for (int sp = 0; sp < n_live; ++sp) acc += ld_cg(part + sp * stride + 2 + d) * fw[sp];
            j.out[static_cast<size_t>(row) * j.out_ld + static_cast<size_t>(h) * hdv + d] =
                lw > 0.f ? acc / lw : 0.f;
        }
        __syncwarp();  // fw is this warp's next head's
    }
}

int max_splits(const AttnJob& j) {
    return attn_max_chunks(j.max_pos);  // the capacity of j.part per (row, head)
}

// Query heads per block for this job (4 or 8) and the blocks per KV head.
int group_max(const AttnJob& j) {
    return j.n_head / j.n_head_kv <= 4 ? 4 : 8;
}
int hchunks(const AttnJob& j) {
    const int G = j.n_head / j.n_head_kv, gm = group_max(j);
    return (G + gm - 1) / gm;
}

template <int D, int GM>
void launch_decode_gm(const AttnJob& j, int row0, int n_rows, int n_split, cudaStream_t s) {
    const int nh = hchunks(j);
    const dim3 grid(n_split, n_rows * j.n_head_kv * nh);
#if defined(ZINC_SIMT_EMULATION)
    (void)s;
    zinc_simt::launch(fa_decode_kernel<D, GM>, grid, kThreads, j, row0, n_split, nh);
#else
    constexpr auto kernel = fa_decode_kernel<D, GM>;
    // clang-format off
    kernel<<<grid, kThreads, 0, s>>>(j, row0, n_split, nh);
    // clang-format on
#endif
}
template <int D>
void launch_decode(const AttnJob& j, int row0, int n_rows, int n_split, cudaStream_t s) {
    if (group_max(j) == 4)
        launch_decode_gm<D, 4>(j, row0, n_rows, n_split, s);
    else
        launch_decode_gm<D, 8>(j, row0, n_rows, n_split, s);
}

}  // namespace

int attention_fast_splits(const AttnJob& j, int n_rows) {
    // About 4 blocks per SM of the H200 (132 SMs), at least 256 keys per split at the runner's
    // longest context, at most the scratch's capacity.
    const int base = std::max(1, std::min(n_rows, kAttnSplitRows) * j.n_head_kv * hchunks(j));
    int n = (kMaxSplits + base - 1) / base;  // <= kMaxSplits: the merge's weights fit Shared::fw
    n = std::min(n, std::max(1, (j.max_pos + kMinKeys - 1) / kMinKeys));
    return std::max(1, std::min(n, max_splits(j)));
}

bool attention_fast_decode(const AttnJob& j, int row0, int n_rows, cudaStream_t s) {
    if (n_rows < 1 || !attention_fast_covers(j) || !j.part || !j.counters) return false;
    for (int r = 0; r < n_rows; r += kAttnSplitRows) {
        const int nr = std::min(kAttnSplitRows, n_rows - r);
        const int ns = attention_fast_splits(j, nr);
        switch (j.head_dim) {
            case 64:
                launch_decode<64>(j, row0 + r, nr, ns, s);
                break;
            case 128:
                launch_decode<128>(j, row0 + r, nr, ns, s);
                break;
            case 256:
                launch_decode<256>(j, row0 + r, nr, ns, s);
                break;
            default:
                return false;
        }
    }
    return true;
}

}  // namespace zinc::cuda
