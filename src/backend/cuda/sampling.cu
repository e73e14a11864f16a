// zinc/backend/cuda/sampling.cu — sampling on the device: for each logits row, the CPU sampler's
// chain (engine/sampler.cpp: penalties -> top-k -> top-p -> min-p -> temperature -> draw from a
// uniform the host supplies) with the same float arithmetic, so only token ids cross to the host.
//
// One block of 512 threads per row. No sort: the candidate sets are found as cuts in the
// sampler's total order (logit descending, id ascending). A cut (T, I) keeps (key, id) when
// key > T or (key == T and id <= I), with key the order-preserving uint32 of the logit.
//  * top-k: radix select (4 passes of 8-bit digit histograms of counts) finds the k-th key; the
//    ties at it are kept lowest id first (the r-th smallest id among them).
//  * top-p: the same radix descent over histograms of probability mass (exp(l - max) in double)
//    finds where the best-first cumulative mass reaches top_p * z; ties at the crossing key are
//    added one at a time, as the CPU's sequential sum does.
//  * min-p: logit >= max + log(min_p) (log computed by the host, as the CPU computes it).
//  * draw: probabilities float(exp(double(l - max) * inv_t)) summed in double in ascending id
//    order (the CPU sampler's draw order), target = u * z, the first id whose cumulative mass
//    exceeds the target; the CPU's fallbacks when rounding leaves none.
// Where the CPU sums sequentially and the device sums in a different order (z, the masses), the
// results differ by double rounding (~1e-16 relative), so the token can differ only when the
// target falls that close to a boundary (docs/cuda.md, "Sampling on the GPU").
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// NaN -> -inf (the CPU sampler's rule), -0 -> +0 (equal logits must be equal keys).
__device__ __forceinline__ float canon(float x) {
    if (x != x) return -INFINITY;
    return x == 0.0f ? 0.0f : x;
}
// Order-preserving key: a larger float has a larger key.
__device__ __forceinline__ uint32_t fkey(float x) {
    const uint32_t b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float kfloat(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

struct Cut {
    bool on = false;
    uint32_t key = 0;
    int id = 0;
    __device__ bool keeps(uint32_t k, int i) const {
        return !on || k > key || (k == key && i <= id);
    }
};

struct Smem {
    unsigned cnt[256];
    double mass[256];
    double wd[kWarps];
    float wf[kWarps];
    int wi[kWarps];
    int wi2[kWarps];
    int bcast_i[4];
    double bcast_d[2];
};

__device__ float block_max(float v, Smem& sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0) sm.wf[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = sm.wf[0];
    for (int w = 1; w < kWarps; ++w) r = fmaxf(r, sm.wf[w]);
    __syncthreads();
    return r;
}
__device__ int block_sum_i(int v, Smem& sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sm.wi[threadIdx.x >> 5] = v;
    __syncthreads();
    int r = 0;
    for (int w = 0; w < kWarps; ++w) r += sm.wi[w];
    __syncthreads();
    return r;
}
__device__ double block_sum_d(double v, Smem& sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0) sm.wd[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = 0.0;
    for (int w = 0; w < kWarps; ++w) r = __dadd_rn(r, sm.wd[w]);
    __syncthreads();
    return r;
}
// argmax, lowest id on ties.
__device__ int block_argmax(float v, int i, Smem& sm) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, i, o);
        if (v2 > v || (v2 == v && i2 < i)) v = v2, i = i2;
    }
    if ((threadIdx.x & 31) == 0) {
        sm.wf[threadIdx.x >> 5] = v;
        sm.wi[threadIdx.x >> 5] = i;
    }
    __syncthreads();
    float bv = sm.wf[0];
    int bi = sm.wi[0];
    for (int w = 1; w < kWarps; ++w)
        if (sm.wf[w] > bv || (sm.wf[w] == bv && sm.wi[w] < bi)) bv = sm.wf[w], bi = sm.wi[w];
    __syncthreads();
    return bi;
}

// Warp w owns ids [w * seg, (w + 1) * seg), seg a multiple of 32.
__device__ __forceinline__ int warp_seg(int n) {
    return ((n + kWarps * 32 - 1) / (kWarps * 32)) * 32;
}

// The r-th smallest id (r >= 1) among ids with pred(id); -1 if there are fewer than r.
template <class Pred>
__device__ int nth_id(int n, int r, Pred pred, Smem& sm) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int seg = warp_seg(n), lo = w * seg, hi = min(n, lo + seg);
    int c = 0;
    for (int i = lo + lane; i < hi; i += 32) c += pred(i) ? 1 : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
    if (lane == 0) sm.wi[w] = c;
    if (threadIdx.x == 0) sm.bcast_i[0] = -1;
    __syncthreads();
    int before = 0;
    for (int k = 0; k < w; ++k) before += sm.wi[k];
    // Only the warp holding the r-th id looks, but every warp runs the same number of ballots
    // (block-uniform control flow around the warp intrinsics; tests/unit/cuda_emul relies on it).
    bool done = !(before < r && r <= before + sm.wi[w]);
    int seen = before;
    for (int base = lo; base < lo + seg; base += 32) {
        const int i = base + lane;
        const unsigned m = __ballot_sync(0xffffffffu, !done && i < hi && pred(i));
        if (done) continue;
        const int pc = __popc(m);
        if (seen + pc >= r) {
            int need = r - seen, bit = 0;
            for (; bit < 32; ++bit)
                if (((m >> bit) & 1u) && --need == 0) break;
            if (lane == 0) sm.bcast_i[0] = base + bit;
            done = true;
        }
        seen += pc;
    }
    __syncthreads();
    const int res = sm.bcast_i[0];
    __syncthreads();
    return res;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(float* __restrict__ logits_all, int n, const SampleRowParams* __restrict__ rows,
                  const int32_t* __restrict__ pen_ids, const int32_t* __restrict__ pen_counts,
                  float* __restrict__ pen_orig, SampleOut* __restrict__ out, int want_logprob) {
    __shared__ Smem sm;
    const SampleRowParams P = rows[blockIdx.x];
    float* l = logits_all + static_cast<size_t>(blockIdx.x) * n;
    const int tid = threadIdx.x;

    // log-softmax normaliser of the raw logits (engine/logprobs.cpp), before the penalties.
    double lse = 0.0;
    if (want_logprob) {
        float mx = -INFINITY;
        for (int i = tid; i < n; i += kThreads) mx = fmaxf(mx, canon(l[i]));
        mx = block_max(mx, sm);
        double s = 0.0;
        for (int i = tid; i < n; i += kThreads)
            s = __dadd_rn(s, exp(static_cast<double>(__fsub_rn(canon(l[i]), mx))));
        s = block_sum_d(s, sm);
        lse = __dadd_rn(static_cast<double>(mx), log(s));
    }

    // Penalties, in place (distinct ids, so no two threads touch one logit); the raw values are
    // kept for the logprob.
    for (int j = tid; j < P.pen_n; j += kThreads) {
        const int id = pen_ids[P.pen_off + j];
        const float raw = l[id];
        pen_orig[P.pen_off + j] = raw;
        float x = canon(raw);
        if (x != INFINITY && x != -INFINITY) {
            x = x <= 0.0f ? __fmul_rn(x, P.repeat) : __fdiv_rn(x, P.repeat);
            const float c = static_cast<float>(pen_counts[P.pen_off + j]);
            x = __fsub_rn(x, __fadd_rn(__fmul_rn(c, P.frequency), P.presence));
        }
        l[id] = x;
    }
    __syncthreads();

    auto finish = [&](int token, bool used) {
        if (tid != 0) return;
        SampleOut o;
        o.token = token;
        o.used = used ? 1 : 0;
        o.logprob = 0.0f;
        if (want_logprob) {
            float raw = l[token];
            for (int j = 0; j < P.pen_n; ++j)
                if (pen_ids[P.pen_off + j] == token) raw = pen_orig[P.pen_off + j];
            o.logprob = static_cast<float>(__dsub_rn(static_cast<double>(canon(raw)), lse));
        }
        out[blockIdx.x] = o;
    };

    if (!(P.temperature > 0.0f)) {  // greedy
        float bv = -INFINITY;
        int bi = 0x7fffffff;
        for (int i = tid; i < n; i += kThreads) {
            const float x = canon(l[i]);
            if (x > bv || (x == bv && i < bi)) bv = x, bi = i;
        }
        const int best = block_argmax(bv, bi, sm);
        finish(best == 0x7fffffff ? 0 : best, false);
        return;
    }

    float max_l = -INFINITY;
    int n_fin = 0;
    for (int i = tid; i < n; i += kThreads) {
        const float x = canon(l[i]);
        if (x != -INFINITY) {
            max_l = fmaxf(max_l, x);
            ++n_fin;
        }
    }
    max_l = block_max(max_l, sm);
    n_fin = block_sum_i(n_fin, sm);
    if (n_fin == 0) {
        finish(0, false);
        return;
    }

    // ---- top-k
    Cut ck;
    if (P.top_k > 0 && P.top_k < n && n_fin > P.top_k) {
        uint32_t prefix = 0;
        int remaining = P.top_k;
        for (int level = 0; level < 4; ++level) {
            const int shift = 24 - 8 * level;
            for (int b = tid; b < 256; b += kThreads) sm.cnt[b] = 0;
            __syncthreads();
            for (int i = tid; i < n; i += kThreads) {
                const float x = canon(l[i]);
                if (x == -INFINITY) continue;
                const uint32_t k = fkey(x);
                if (level > 0 && (k >> (shift + 8)) != prefix) continue;
                atomicAdd(&sm.cnt[(k >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (tid == 0) {
                int b = 255;
                for (; b > 0; --b) {
                    if (static_cast<int>(sm.cnt[b]) >= remaining) break;
                    remaining -= static_cast<int>(sm.cnt[b]);
                }
                sm.bcast_i[1] = b;
                sm.bcast_i[2] = remaining;
            }
            __syncthreads();
            prefix = (prefix << 8) | static_cast<uint32_t>(sm.bcast_i[1]);
            remaining = sm.bcast_i[2];
            __syncthreads();
        }
        ck.on = true;
        ck.key = prefix;
        const uint32_t T = prefix;
        ck.id = nth_id(
            n, remaining,
            [&](int i) {
                const float x = canon(l[i]);
                return x != -INFINITY && fkey(x) == T;
            },
            sm);
    }
    auto in_k = [&](int i, float& x, uint32_t& k) {
        x = canon(l[i]);
        if (x == -INFINITY) return false;
        k = fkey(x);
        return ck.keeps(k, i);
    };

    // ---- top-p
    Cut cp;
    if (P.top_p < 1.0f) {
        double z = 0.0;
        for (int i = tid; i < n; i += kThreads) {
            float x;
            uint32_t k;
            if (in_k(i, x, k)) z = __dadd_rn(z, exp(static_cast<double>(__fsub_rn(x, max_l))));
        }
        z = block_sum_d(z, sm);
        const double target = __dmul_rn(static_cast<double>(P.top_p), z);
        uint32_t prefix = 0;
        double cum = 0.0;
        bool cut = true;
        unsigned n_ties = 0;
        for (int level = 0; level < 4 && cut; ++level) {
            const int shift = 24 - 8 * level;
            for (int b = tid; b < 256; b += kThreads) {
                sm.cnt[b] = 0;
                sm.mass[b] = 0.0;
            }
            __syncthreads();
            for (int i = tid; i < n; i += kThreads) {
                float x;
                uint32_t k;
                if (!in_k(i, x, k)) continue;
                if (level > 0 && (k >> (shift + 8)) != prefix) continue;
                const unsigned d = (k >> shift) & 255u;
                atomicAdd(&sm.cnt[d], 1u);
                atomicAdd(&sm.mass[d], exp(static_cast<double>(__fsub_rn(x, max_l))));
            }
            __syncthreads();
            if (tid == 0) {
                int pick = -1, last = -1;
                for (int b = 255; b >= 0; --b) {
                    if (sm.cnt[b] == 0) continue;
                    if (__dadd_rn(cum, sm.mass[b]) >= target) {
                        pick = b;
                        break;
                    }
                    cum = __dadd_rn(cum, sm.mass[b]);
                    last = b;
                }
                if (pick < 0 && level > 0) {  // rounding between levels: the last bucket
                    pick = last;
                    cum = __dsub_rn(cum, sm.mass[last]);
                }
                sm.bcast_i[1] = pick;
                sm.bcast_i[2] = pick >= 0 ? static_cast<int>(sm.cnt[pick]) : 0;
                sm.bcast_d[0] = cum;
            }
            __syncthreads();
            const int pick = sm.bcast_i[1];
            n_ties = static_cast<unsigned>(sm.bcast_i[2]);
            cum = sm.bcast_d[0];
            __syncthreads();
            if (pick < 0) cut = false;  // the whole set is needed (rounding at top_p ~ 1)
            else prefix = (prefix << 8) | static_cast<uint32_t>(pick);
        }
        if (cut) {
            // Ties at the crossing key, lowest id first, one at a time as the CPU adds them.
            if (tid == 0) {
                const double e = exp(static_cast<double>(__fsub_rn(kfloat(prefix), max_l)));
                unsigned j = 0;
                while (j < n_ties) {
                    cum = __dadd_rn(cum, e);
                    ++j;
                    if (cum >= target) break;
                }
                sm.bcast_i[3] = static_cast<int>(j);
            }
            __syncthreads();
            const int j = sm.bcast_i[3];
            __syncthreads();
            cp.on = true;
            cp.key = prefix;
            const uint32_t T = prefix;
            cp.id = nth_id(
                n, j,
                [&](int i) {
                    float x;
                    uint32_t k;
                    return in_k(i, x, k) && k == T;
                },
                sm);
        }
    }

    // ---- min-p, temperature, draw in ascending id order
    const bool use_min_p = P.min_p_on != 0;
    const float thr = __fadd_rn(max_l, P.log_min_p);
    auto prob = [&](int i) -> float {  // 0 outside the candidate set; -1 marks "not a candidate"
        float x;
        uint32_t k;
        if (!in_k(i, x, k) || !cp.keeps(k, i) || (use_min_p && x < thr)) return -1.0f;
        const float d = __fsub_rn(x, max_l);
        if (d == 0.0f) return 1.0f;
        return static_cast<float>(exp(__dmul_rn(static_cast<double>(d), static_cast<double>(P.inv_t))));
    };
    const int lane = tid & 31, w = tid >> 5;
    const int seg = warp_seg(n), lo = w * seg, hi = min(n, lo + seg);
    double ws = 0.0;
    int last_pos = -1, first_cand = 0x7fffffff;
    for (int i = lo + lane; i < hi; i += 32) {
        const float p = prob(i);
        if (p < 0.0f) continue;
        ws = __dadd_rn(ws, static_cast<double>(p));
        if (p > 0.0f) last_pos = max(last_pos, i);
        first_cand = min(first_cand, i);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        ws = __dadd_rn(ws, __shfl_xor_sync(0xffffffffu, ws, o));
        last_pos = max(last_pos, __shfl_xor_sync(0xffffffffu, last_pos, o));
        first_cand = min(first_cand, __shfl_xor_sync(0xffffffffu, first_cand, o));
    }
    if (lane == 0) {
        sm.wd[w] = ws;
        sm.wi[w] = last_pos;
        sm.wi2[w] = first_cand;
    }
    if (tid == 0) sm.bcast_i[0] = 0x7fffffff;
    __syncthreads();
    double before = 0.0, z = 0.0;
    int fallback = -1, front = 0x7fffffff;
    for (int k = 0; k < kWarps; ++k) {
        if (k == w) before = z;
        z = __dadd_rn(z, sm.wd[k]);
        fallback = max(fallback, sm.wi[k]);
        front = min(front, sm.wi2[k]);
    }
    const double target = __dmul_rn(P.uniform, z);
    double cum = before;
    bool done = false;
    for (int base = lo; base < lo + seg; base += 32) {  // the same trip count in every warp
        const int i = base + lane;
        const float p = !done && i < hi ? prob(i) : -1.0f;
        double v = p > 0.0f ? static_cast<double>(p) : 0.0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {  // inclusive scan across the lanes
            const double u = __shfl_up_sync(0xffffffffu, v, o);
            if (lane >= o) v = __dadd_rn(v, u);
        }
        const double c = __dadd_rn(cum, v);
        const unsigned hit = __ballot_sync(0xffffffffu, p > 0.0f && target < c);
        if (hit && !done) {
            if (lane == 0) atomicMin(&sm.bcast_i[0], base + __ffs(static_cast<int>(hit)) - 1);
            done = true;
        }
        cum = __shfl_sync(0xffffffffu, c, 31);
    }
    __syncthreads();
    int token = sm.bcast_i[0];
    if (token == 0x7fffffff) token = fallback >= 0 ? fallback : front;
    finish(token, true);
}

}  // namespace

void sample_rows(float* logits, int n_rows, int n_vocab, const SampleRowParams* rows,
                 const int32_t* pen_ids, const int32_t* pen_counts, float* pen_orig,
                 SampleOut* out, bool want_logprob, cudaStream_t s) {
#if defined(ZINC_SIMT_EMULATION)  // tests/unit/cuda_emul: this file on the host over a SIMT shim
    (void)s;
    zinc_simt::launch(sample_kernel, dim3(static_cast<unsigned>(n_rows)), kThreads, logits, n_vocab,
                      rows, pen_ids, pen_counts, pen_orig, out, want_logprob ? 1 : 0);
#else
    sample_kernel<<<n_rows, kThreads, 0, s>>>(logits, n_vocab, rows, pen_ids, pen_counts, pen_orig,
                                              out, want_logprob ? 1 : 0);
#endif
}

}  // namespace zinc::cuda
