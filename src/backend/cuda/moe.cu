// zinc/backend/cuda/moe.cu — Mixture-of-experts routing and the weighted sum of the experts'
// outputs, on the device, so a decode step stays one CUDA graph (no host round trip for the
// expert ids). The experts' matrix products are dmmv / dmmv_exact calls with MatJob::expert set
// (expert gathering); runner_exec.cpp's exec_moe strings the launches together.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_router.h"
#include "backend/moe_route.h"

// tests/unit/cuda_emul builds this file on the host over a SIMT shim.
#if defined(ZINC_SIMT_EMULATION)
#define ZINC_MOE_LAUNCH(kernel, grid, threads, stream, ...) \
    ((void)(stream), zinc_simt::launch(kernel, grid, threads, __VA_ARGS__))
#else
#define ZINC_MOE_LAUNCH(kernel, grid, threads, stream, ...) \
    kernel<<<grid, threads, 0, stream>>>(__VA_ARGS__)
#endif

namespace zinc::cuda {
namespace {

// Shared by both route kernels. The best entry (in moe::before's order) among v[i0], v[i0 +
// stride], ... that moe::eligible leaves after (prev_v, prev_i); bi = -1: none.
__device__ __forceinline__ void thread_best(const float* v, int n_expert, int i0, int stride,
                                            float prev_v, int prev_i, float& bv, int& bi) {
    bv = 0.0f;
    bi = -1;
    for (int i = i0; i < n_expert; i += stride)
        if (moe::eligible(prev_v, prev_i, v[i], i) && (bi < 0 || moe::before(v[i], i, bv, bi))) {
            bi = i;
            bv = v[i];
        }
}
// The warp's best of its lanes' (bv, bi) by an xor butterfly: every lane ends with it (a strict
// total order without NaN).
__device__ __forceinline__ void warp_best(float& bv, int& bi) {
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (oi >= 0 && (bi < 0 || moe::before(ov, oi, bv, bi))) {
            bv = ov;
            bi = oi;
        }
    }
}
// A routed row's gather list and expert loads (one thread, after it wrote row_ids).
__device__ __forceinline__ void finish_row(int t, int k, const int32_t* row_ids,
                                           int32_t* src_row, uint32_t* load) {
    for (int s = 0; s < k; ++s) src_row[t * k + s] = t;
    if (load)
        for (int s = 0; s < k; ++s) atomicAdd(&load[row_ids[s]], 1u);
}

// One block of kRouteThreads per row, the CPU tier's values (backend/moe_route.h): the logits
// into shared memory; thread 0 takes their max in the CPU tier's order; every thread the exp of
// its entries; thread 0 their double sum in index order (and looks for NaN); then k selection
// passes, each a block-wide maximum in moe::before's order over the entries moe::eligible
// leaves (a strict total order without NaN, so the parallel maximum is the serial one); thread 0
// finishes the weights (moe::finish_weights). A row whose values hold a NaN (the serial pass's
// result then depends on the scan order) runs moe::route_row on thread 0 instead. H200 run 8:
// the one-thread-per-row kernel took 92 us a layer (k passes of n_expert exps each), 44 % of a
// Qwen3-30B-A3B decode step.
constexpr int kRouteThreads = 128;
__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const float* __restrict__ logits, int n_rows, int n_expert, int k,
                 bool softmax_first, bool norm_w, float w_scale, int32_t* __restrict__ ids,
                 float* __restrict__ w, int32_t* __restrict__ src_row, bool exact,
                 uint32_t* __restrict__ load) {
    __shared__ float v[1024];
    __shared__ float s_mx, s_inv;
    __shared__ int s_nan;
    __shared__ float red_v[kRouteThreads / 32];
    __shared__ int red_i[kRouteThreads / 32];
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nthreads = blockDim.x, nwarps = nthreads / 32;
    const float* l = logits + static_cast<size_t>(t) * n_expert;
    int32_t* row_ids = ids + static_cast<size_t>(t) * k;
    float* row_w = w + static_cast<size_t>(t) * k;
    for (int i = tid; i < n_expert; i += nthreads) v[i] = l[i];
    __syncthreads();
    // A block-wide tree of f (fmaxf or +) over x: the fast path's maximum and sum.
    auto block_tree = [&](float x, bool is_max) {
        for (int off = 16; off > 0; off >>= 1) {
            const float o = __shfl_xor_sync(0xffffffffu, x, off);
            x = is_max ? fmaxf(x, o) : x + o;
        }
        if (lane == 0) red_v[warp] = x;
        __syncthreads();
        x = red_v[0];
        for (int j = 1; j < nwarps; ++j) x = is_max ? fmaxf(x, red_v[j]) : x + red_v[j];
        __syncthreads();  // (red_v is written again by the next tree)
        return x;
    };
    if (!exact) {  // fast path: trees; a NaN still sends the row to the serial fallback
        float mx = -INFINITY;
        for (int i = tid; i < n_expert; i += nthreads) mx = fmaxf(mx, v[i]);
        mx = block_tree(mx, true);
        float sum = 0.f;
        int nan = 0;
        for (int i = tid; i < n_expert; i += nthreads) {
            if (softmax_first) {
                v[i] = canon::exp(canon::sub(v[i], mx));
                sum += v[i];
            }
            nan |= v[i] != v[i];  // (after the exp, as exact mode: +inf - +inf is a NaN too)
        }
        nan = block_tree(nan ? 1.f : 0.f, true) > 0.f;
        sum = block_tree(sum, false);
        if (tid == 0) {
            s_inv = softmax_first ? 1.0f / sum : 1.0f;
            s_nan = nan;
        }
    } else {
        if (tid == 0) {
            float mx = v[0];
            for (int i = 1; i < n_expert; ++i) mx = canon::max_sse(v[i], mx);
            s_mx = mx;
        }
        __syncthreads();
        if (softmax_first)
            for (int i = tid; i < n_expert; i += nthreads)
                v[i] = canon::exp(canon::sub(v[i], s_mx));
    }
    __syncthreads();
    if (exact && tid == 0) {
        double sum = 0.0;
        int nan = 0;
        for (int i = 0; i < n_expert; ++i) {
            if (softmax_first) sum = canon::dadd(sum, static_cast<double>(v[i]));
            nan |= v[i] != v[i];
        }
        s_inv = softmax_first ? static_cast<float>(canon::ddiv(1.0, sum)) : 1.0f;
        s_nan = nan;
    }
    __syncthreads();
    if (s_nan) {
        if (tid == 0)
            moe::route_row(l, n_expert, k, softmax_first, norm_w, w_scale, row_ids, row_w);
    } else {
        if (softmax_first)
            for (int i = tid; i < n_expert; i += nthreads) v[i] = canon::mul(v[i], s_inv);
        __syncthreads();
        float prev_v = 0.0f;
        int prev_i = -1;
        for (int s = 0; s < k; ++s) {
            float bv;
            int bi;
            thread_best(v, n_expert, tid, nthreads, prev_v, prev_i, bv, bi);
            warp_best(bv, bi);
            if (lane == 0) {
                red_v[warp] = bv;
                red_i[warp] = bi;
            }
            __syncthreads();
            bv = red_v[0];
            bi = red_i[0];
            for (int j = 1; j < nwarps; ++j)
                if (red_i[j] >= 0 && (bi < 0 || moe::before(red_v[j], red_i[j], bv, bi))) {
                    bv = red_v[j];
                    bi = red_i[j];
                }
            __syncthreads();  // (red_ is written again by the next pass)
            if (bi < 0) {     // (no NaN: cannot happen while k <= n_expert; as route_row)
                bi = 0;
                bv = 0.0f;
            }
            if (tid == 0) {
                row_ids[s] = bi;
                row_w[s] = bv;
            }
            prev_v = bv;
            prev_i = bi;
        }
        if (tid == 0) moe::finish_weights(k, softmax_first, norm_w, w_scale, row_w);
    }
    if (tid == 0) finish_row(t, k, row_ids, src_row, load);
}

// The fast path's routing (not exact mode): one warp a row, no block barrier. The logits into
// the warp's shared memory (lane l owns entries l, l + 32, ...: every later read is its own
// write); the maximum and the softmax sum as xor butterflies; the k selection passes as warp
// arg-maxima in moe::before's order over the entries moe::eligible leaves (a strict total order
// without NaN, so every lane ends with the serial pass's choice); lane 0 finishes the weights.
// A NaN after the exp sends the row to moe::route_row on lane 0, as route_kernel. H200 run 9:
// route_kernel's fast path (128 threads, two barriers a selection pass) took 10.2 us a layer of
// Qwen3-30B-A3B, 10 % of the decode step.
constexpr int kRouteFastMax = 1024;  // entries a row may have (route_kernel: the same bound)
// Row t's routing by one warp (lane = its lane): logits l (read with ld.cg: route_router_kernel's
// come from other blocks of its grid), v: kRouteFastMax floats of shared memory of this warp's.
// Only a `writer` warp writes (ids, w, src_row, load); others compute alongside (the host
// emulation's shuffles are block-wide).
__device__ __forceinline__ void route_fast_row(const float* __restrict__ l, int t, int lane,
                                               bool writer, int n_expert, int k,
                                               bool softmax_first, bool norm_w, float w_scale,
                                               float* v,
                                               int32_t* __restrict__ ids, float* __restrict__ w,
                                               int32_t* __restrict__ src_row,
                                               uint32_t* __restrict__ load) {
    int32_t* row_ids = ids + static_cast<size_t>(t) * k;
    float* row_w = w + static_cast<size_t>(t) * k;
    float mx = -INFINITY;
    for (int i = lane; i < n_expert; i += 32) {
        v[i] = __ldcg(l + i);
        mx = fmaxf(mx, v[i]);
    }
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    float sum = 0.f;
    int nan = 0;
    for (int i = lane; i < n_expert; i += 32) {
        if (softmax_first) {
            v[i] = canon::exp(canon::sub(v[i], mx));
            sum += v[i];
        }
        nan |= v[i] != v[i];  // (after the exp, as route_kernel)
    }
    for (int off = 16; off > 0; off >>= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
        nan |= __shfl_xor_sync(0xffffffffu, nan, off);
    }
    const bool w0 = writer && lane == 0;
    if (nan) {
        if (w0) moe::route_row(l, n_expert, k, softmax_first, norm_w, w_scale, row_ids, row_w);
    } else {
        if (softmax_first) {
            const float inv = 1.0f / sum;
            for (int i = lane; i < n_expert; i += 32) v[i] = canon::mul(v[i], inv);
        }
        float prev_v = 0.0f;
        int prev_i = -1;
        for (int s = 0; s < k; ++s) {
            float bv;
            int bi;
            thread_best(v, n_expert, lane, 32, prev_v, prev_i, bv, bi);
            warp_best(bv, bi);
            if (bi < 0) {  // (no NaN: cannot happen while k <= n_expert; as route_row)
                bi = 0;
                bv = 0.0f;
            }
            if (w0) {
                row_ids[s] = bi;
                row_w[s] = bv;
            }
            prev_v = bv;
            prev_i = bi;
        }
        if (w0) moe::finish_weights(k, softmax_first, norm_w, w_scale, row_w);
    }
    if (w0) finish_row(t, k, row_ids, src_row, load);  // (row_ids: this lane's writes)
}

__global__ void __launch_bounds__(32)
    route_fast_kernel(const float* __restrict__ logits, int n_expert, int k, bool softmax_first,
                      bool norm_w, float w_scale, int32_t* __restrict__ ids, float* __restrict__ w,
                      int32_t* __restrict__ src_row, uint32_t* __restrict__ load) {
    __shared__ float v[kRouteFastMax];
    const int t = blockIdx.x;
    route_fast_row(logits + static_cast<size_t>(t) * n_expert, t, static_cast<int>(threadIdx.x),
                   true, n_expert, k, softmax_first, norm_w, w_scale, v, ids, w, src_row, load);
}

// The router's product and the fast routing in one launch (MoeP::router, fast mode, F32 router
// without bias): block (row t, part p) computes logits [4 p, 4 p + 4) of row t, a warp an expert,
// in dmmv_f's order (lane-strided pairs, each rounded, then the warp's butterfly; + 0.f as its
// absent bias), into `logits`; the block that finishes last for its row (tickets[t], reset by
// that block) routes the row as route_fast_kernel does (warp 0 writes). One launch and one dependent
// chain fewer a layer than dmmv_f + route_fast_kernel (H200 run 10: 7.2 + 8.4 us a layer of
// Qwen3-30B-A3B, mostly the per-kernel floor).
constexpr int kRouterWarps = 4;
__global__ void __launch_bounds__(kRouterWarps * 32)
    route_router_kernel(const float* __restrict__ x, int dim, const float* __restrict__ wr,
                        int n_expert, float* __restrict__ logits, unsigned* __restrict__ tickets,
                        int k, bool softmax_first, bool norm_w, float w_scale,
                        int32_t* __restrict__ ids, float* __restrict__ w,
                        int32_t* __restrict__ src_row, uint32_t* __restrict__ load) {
    __shared__ float v[kRouterWarps][kRouteFastMax];
    __shared__ bool last;
    const int t = blockIdx.x, warp = static_cast<int>(threadIdx.x) >> 5,
              lane = static_cast<int>(threadIdx.x) & 31;
    const int e = static_cast<int>(blockIdx.y) * kRouterWarps + warp;
    float* row_l = logits + static_cast<size_t>(t) * n_expert;
    {  // (a warp past the last expert computes the last one again and writes nothing)
        const float* we = wr + static_cast<size_t>(min(e, n_expert - 1)) * dim;
        const float* xr = x + static_cast<size_t>(t) * dim;
        float acc = 0.f;
        for (int i = lane * 2; i < dim; i += 64) {
            const float2 xv = *reinterpret_cast<const float2*>(xr + i);
            acc = __fadd_rn(acc, __fadd_rn(__fmul_rn(we[i], xv.x), __fmul_rn(we[i + 1], xv.y)));
        }
        const float r = dev::warp_sum(acc);
        if (e < n_expert && lane == 0) row_l[e] = __fadd_rn(r, 0.f);
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned prev = atomicAdd(tickets + t, 1u);
        last = prev == gridDim.y - 1;
        if (last) tickets[t] = 0;  // ready for the next step (or graph replay)
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    route_fast_row(row_l, t, lane, warp == 0, n_expert, k, softmax_first, norm_w, w_scale, v[warp],
                   ids, w, src_row, load);
}

// Block (row, blockIdx.y): kCombineThreads consecutive elements of the row, one per thread (a
// decode row is one row: one block a row left 8-16 us of serial loads per layer, H200 run 8).
constexpr int kCombineThreads = 128;
__global__ void combine_kernel(const float* __restrict__ ys, const float* __restrict__ w, int k,
                               int dim, float* __restrict__ out, bool acc) {
    const int t = blockIdx.x;
    const int d = static_cast<int>(blockIdx.y) * kCombineThreads + static_cast<int>(threadIdx.x);
    if (d >= dim) return;
    const float* y = ys + static_cast<size_t>(t) * k * dim;
    const float* wt = w + static_cast<size_t>(t) * k;
    float* o = out + static_cast<size_t>(t) * dim + d;
    const float v = moe::combine_elem(y, dim, wt, k, d);
    *o = acc ? canon::add(*o, v) : v;
}

// The same over rows in moe_group's sorted order.
__global__ void combine_sorted_kernel(const float* __restrict__ ys, const float* __restrict__ w,
                                      const int32_t* __restrict__ slot_pos, int k, int dim,
                                      float* __restrict__ out, bool acc) {
    const int t = blockIdx.x;
    const int d = static_cast<int>(blockIdx.y) * kCombineThreads + static_cast<int>(threadIdx.x);
    if (d >= dim) return;
    const float* wt = w + static_cast<size_t>(t) * k;
    const int32_t* pos = slot_pos + static_cast<size_t>(t) * k;
    float* o = out + static_cast<size_t>(t) * dim + d;
    const float v = moe::combine_elem(ys, dim, wt, k, d, pos);
    *o = acc ? canon::add(*o, v) : v;
}

// moe_group's one block: counts per expert (shared atomics), their prefix sums (rows and
// tiles), the tile table, then every slot's sorted position (a per-expert cursor).
constexpr int kGroupThreads = 1024, kGroupMaxExperts = 1024;
__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* __restrict__ ids, int n_slots, int k, int n_expert,
                 MoeGroupBufs b) {
    __shared__ unsigned cnt[kGroupMaxExperts], cur[kGroupMaxExperts];
    __shared__ int off[kGroupMaxExperts], toff[kGroupMaxExperts];  // first position, first tile
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) cnt[e] = cur[e] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n_slots; i += blockDim.x) atomicAdd(&cnt[ids[i]], 1u);
    __syncthreads();
    if (threadIdx.x == 0) {
        int rows = 0, tiles = 0;
        for (int e = 0; e < n_expert; ++e) {
            const int c = static_cast<int>(cnt[e]);
            off[e] = rows;
            toff[e] = tiles;
            rows += c;
            tiles += (c + kMmqGroupCols - 1) / kMmqGroupCols;
        }
        *b.n_tiles = tiles;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
        const int c = static_cast<int>(cnt[e]), nt = (c + kMmqGroupCols - 1) / kMmqGroupCols;
        for (int t = 0; t < nt; ++t) {
            const int c0 = off[e] + t * kMmqGroupCols;
            b.tile_expert[toff[e] + t] = e;
            b.tile_c0[toff[e] + t] = c0;
            b.tile_c1[toff[e] + t] = min(c0 + kMmqGroupCols, off[e] + c);
        }
    }
    for (int i = threadIdx.x; i < n_slots; i += blockDim.x) {
        const int e = ids[i];
        const int p = off[e] + static_cast<int>(atomicAdd(&cur[e], 1u));
        b.src[p] = i / k;
        b.expert[p] = e;
        b.slot_pos[i] = p;
    }
}

}  // namespace

bool moe_route_router(const float* x, int dim, const float* router, int n_rows, int n_expert,
                      float* logits, unsigned* tickets, int k, bool softmax_first, bool norm_w,
                      float w_scale, int32_t* ids, float* w, int32_t* src_row, cudaStream_t s,
                      uint32_t* load) {
    if (n_rows < 1) return true;
    if (n_expert > kRouteFastMax || dim % 2 != 0 ||
        (reinterpret_cast<uintptr_t>(x) & 7u) != 0)
        return false;
    const dim3 grid(static_cast<unsigned>(n_rows),
                    static_cast<unsigned>((n_expert + kRouterWarps - 1) / kRouterWarps));
    ZINC_MOE_LAUNCH(route_router_kernel, grid, kRouterWarps * 32, s, x, dim, router, n_expert,
                    logits, tickets, k, softmax_first, norm_w, w_scale, ids, w, src_row, load);
    return true;
}

void moe_route(const float* logits, int n_rows, int n_expert, int k, bool softmax_first,
               bool norm_w, float w_scale, int32_t* ids, float* w, int32_t* src_row, bool exact,
               cudaStream_t s, uint32_t* load) {
    if (n_rows < 1) return;
    if (!exact && n_expert <= kRouteFastMax) {
        ZINC_MOE_LAUNCH(route_fast_kernel, dim3(n_rows), 32, s, logits, n_expert, k,
                        softmax_first, norm_w, w_scale, ids, w, src_row, load);
        return;
    }
    ZINC_MOE_LAUNCH(route_kernel, dim3(n_rows), kRouteThreads, s, logits, n_rows, n_expert, k,
                    softmax_first, norm_w, w_scale, ids, w, src_row, exact, load);
}

void moe_combine(const float* ys, const float* w, int n_rows, int k, int dim, float* out,
                 cudaStream_t s, const int32_t* slot_pos, bool accumulate) {
    const dim3 grid(static_cast<unsigned>(n_rows),
                    static_cast<unsigned>((dim + kCombineThreads - 1) / kCombineThreads));
    if (slot_pos != nullptr)
        ZINC_MOE_LAUNCH(combine_sorted_kernel, grid, kCombineThreads, s, ys, w, slot_pos, k, dim,
                        out, accumulate);
    else
        ZINC_MOE_LAUNCH(combine_kernel, grid, kCombineThreads, s, ys, w, k, dim, out, accumulate);
}

MmqGroups moe_group(const int32_t* ids, int n_rows, int k, int n_expert, const MoeGroupBufs& b,
                    cudaStream_t s) {
    const int n_slots = n_rows * k;
    ZINC_MOE_LAUNCH(group_kernel, dim3(1), kGroupThreads, s, ids, n_slots, k, n_expert, b);
    MmqGroups g;
    g.tile_expert = b.tile_expert;
    g.tile_c0 = b.tile_c0;
    g.tile_c1 = b.tile_c1;
    g.n_tiles = b.n_tiles;
    g.max_tiles = mmq_group_max_tiles(n_slots, n_expert);
    return g;
}

}  // namespace zinc::cuda
