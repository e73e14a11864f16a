// zinc/backend/cuda/dmmv_exact.cu — exact quantized matrix x vectors products: for every weight
// row and every activation row, the float operations of the CPU tier's vec_dot in its order
// (quant/canon_dot.h), so the result equals quant::vec_dot / gemm_tile bit for bit. Any number of
// activation rows (decode and prefill); docs/exactness.md, "Matrix products".
//
// Thread mapping. Only the float chains have an order; the integer lane sums (4 products of one
// lane of one 32-element group) are exact however they are formed, so they are done by __dp4a
// and, where useful, split over threads and combined with integer shuffles.
//  * 32-element formats (Q4_0, Q5_0, Q8_0, Q4_1, Q5_1): 8 threads per weight row, thread (p, h)
//    owns chain p (blocks of parity p) lanes h and h + 4, which for the nibble formats are the
//    low and high nibbles of the same 4 bytes; it walks its blocks in increasing order and keeps
//    two accumulators per activation row. Four rows per warp, 16 per block of 128. The closing
//    sum: xor 4 adds the parities (c0 + c1) lane-wise, lane h + lane h + 4 is tree8's first
//    level, xor 2 and 1 the others. The min-term chain of Q4_1/Q5_1 is thread (0, 0)'s: per
//    block pair (m0 s0 + m1 s1), a lone last block m s. Decode steps issue the loads of 8 of a
//    thread's blocks before their chain operations (4 for 2 activation rows, 2 for 3-16).
//  * MXFP4: Q4_0's mapping and order (Legacy<kMXFP4>: byte loads, the E8M0 scale).
//  * K-quants (Q2_K..Q6_K): 8 threads per weight row (4 rows per warp, 16 per block); thread l
//    owns lane l's chain and forms the whole lane integer of each super-block (its 4 elements of
//    each of the eight 32-element groups, times their scales); the row's 8 threads read 32
//    contiguous bytes of each quant array per load. The min chains (Q2_K's st, whose integer
//    is summed over the 8 threads by integer shuffles; Q4_K/Q5_K's am[k], k = l & 3, kept by
//    lanes l and l + 4 alike) and xor 4, 2, 1 close the trees.
//  * F32/F16/BF16: one warp per row, thread t = 8 g + l owns chain (g, l) of the 4 x 8 chains of
//    canon_dot::dot_float (coalesced: a warp reads 32 consecutive elements), groups of 8 left
//    over go to chain 0 (threads 0..7), xor 8, 16 then 4, 2, 1 close the sum, thread 0 adds the
//    last n % 8 products.
// Activations (pack.cu): aq (n_act, k) int8 codes, ad (n_act, k / 32) float4 with x = the
// packing's scale as the CPU holds it (f16 value for Q8_0/Q8_1, f32 for Q8_K), y = Q8_1's s, and
// w = the two 16-element code sums of the group as int16 bits (low, high): Q8_K's bsums.
// Output: y = v (+ bias) or, accumulating, y = y + (v (+ bias)), each one rounded add — as the
// CPU tier's `v += bias` and residual `x += y`.
#include <type_traits>

#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "quant/canon_dot.h"

namespace zinc::cuda {
namespace {

using namespace dev;
namespace cn = zinc::canon;
namespace cd = zinc::quant::canon_dot;

constexpr int kThreads = 128;
constexpr unsigned kFull = 0xffffffffu;

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

__device__ __forceinline__ void store(const MatJob& m, int row, int a, float v, bool accumulate) {
    if (m.bias) v = cn::add(v, m.bias[row]);
    float* y = m.y + static_cast<size_t>(a) * m.ldy + row;
    *y = accumulate ? cn::add(*y, v) : v;
}

__device__ __forceinline__ float fadd_xor(float v, int o) {
    return cn::add(v, __shfl_xor_sync(kFull, v, o));
}

// ---- 32-element formats: lanes h and h + 4 (elements 4h..4h+3 and 16+4h..16+4h+3) -----------
// codes(b, h, lo, hi): the 4 signed codes of each as packed int8 (for the nibble formats both
// come from the same 4 bytes: low and high nibbles).

template <int T>
struct Legacy;
template <>
struct Legacy<kQ4_0> {
    static constexpr int bytes = 18;
    static constexpr bool asym = false;
    __device__ static void codes(const uint8_t* b, int h, int& lo, int& hi) {
        const uint32_t v = ld32_a2(b + 2 + 4 * h);
        lo = nib4(v, 0, 8);
        hi = nib4(v, 4, 8);
    }
};
template <>
struct Legacy<kQ5_0> {
    static constexpr int bytes = 22;
    static constexpr bool asym = false;
    __device__ static void codes(const uint8_t* b, int h, int& lo, int& hi) {
        const uint32_t v = ld32_a2(b + 6 + 4 * h), qh = ld32_a2(b + 2);
        lo = static_cast<int>(__vsubss4((v & 0x0f0f0f0fu) | hbits4(qh, 4 * h), 0x10101010u));
        hi = static_cast<int>(
            __vsubss4(((v >> 4) & 0x0f0f0f0fu) | hbits4(qh, 16 + 4 * h), 0x10101010u));
    }
};
template <>
struct Legacy<kQ8_0> {
    static constexpr int bytes = 34;
    static constexpr bool asym = false;
    __device__ static void codes(const uint8_t* b, int h, int& lo, int& hi) {
        lo = static_cast<int>(ld32_a2(b + 2 + 4 * h));
        hi = static_cast<int>(ld32_a2(b + 18 + 4 * h));
    }
};
template <>
struct Legacy<kQ4_1> {
    static constexpr int bytes = 20;
    static constexpr bool asym = true;
    __device__ static void codes(const uint8_t* b, int h, int& lo, int& hi) {
        const uint32_t v = ld32(b + 4 + 4 * h);
        lo = nib4(v, 0, 0);
        hi = nib4(v, 4, 0);
    }
};
template <>
struct Legacy<kQ5_1> {
    static constexpr int bytes = 24;
    static constexpr bool asym = true;
    __device__ static void codes(const uint8_t* b, int h, int& lo, int& hi) {
        const uint32_t v = ld32(b + 8 + 4 * h), qh = ld32(b + 4);
        lo = static_cast<int>((v & 0x0f0f0f0fu) | hbits4(qh, 4 * h));
        hi = static_cast<int>(((v >> 4) & 0x0f0f0f0fu) | hbits4(qh, 16 + 4 * h));
    }
};

template <>
struct Legacy<kMXFP4> {  // 17-byte blocks: e, qs[16] (byte loads); codes by e2m1x4
    static constexpr int bytes = 17;
    static constexpr bool asym = false;
    __device__ static void codes(const uint8_t* b, int h, int& lo, int& hi) {
        const uint32_t v = ld32_a1(b + 1 + 4 * h);
        lo = e2m1x4(v & 0x0f0f0f0fu);
        hi = e2m1x4((v >> 4) & 0x0f0f0f0fu);
    }
};
// The weight scale of a block: the f16 d at byte 0, or MXFP4's E8M0 byte as 2^(e - 128).
template <int T>
__device__ __forceinline__ float legacy_scale(const uint8_t* b) {
    if constexpr (T == kMXFP4)
        return e8m0_half(b[0]);
    else
        return h2f(ld16(b));
}

// 8 threads per weight row (4 rows per warp, 16 per block): thread (p, h) owns chain p (block
// parity) lanes h and h + 4, walks blocks p, p + 2, ... in order. Closing: xor 4 adds the two
// parities lane-wise, lane h + lane h + 4 is tree8's first level, xor 2 and 1 its others.
template <int T, int NB>
__global__ void __launch_bounds__(kThreads)
    exact_legacy(Jobs J, int nb, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
                 int n_act, bool accumulate) {
    using W = Legacy<T>;
    const int total = J.row_end[J.n_jobs - 1];
    const int row = blockIdx.x * (kThreads / 8) + (threadIdx.x >> 3);
    const int sub = threadIdx.x & 7, p = sub >> 2, h = sub & 3;
    int r = min(row, total - 1);
    const int jj = pick_job(J, r);
    const int a0 = blockIdx.y * NB;
    const uint8_t* w = job_matrix(J.m[jj].w, J.m[jj].expert, J.m[jj].expert_stride, a0) +
                       static_cast<size_t>(r) * J.m[jj].row_bytes;
    const int na = min(NB, n_act - a0);
    const size_t k = static_cast<size_t>(nb) * 32;
    const int8_t* aqb = aq + static_cast<size_t>(a0) * k + 4 * h;
    const float4* adb = ad + static_cast<size_t>(a0) * nb;
    float acc_lo[NB], acc_hi[NB], am[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) acc_lo[b] = acc_hi[b] = am[b] = 0.0f;
    // One step: this thread's blocks i0, i0 + 2, ..., i0 + 2 (U - 1), in that order. All loads of
    // the step are issued before its chain operations (U blocks in flight per thread).
    auto step = [&](int i0, auto u_tag) {
        constexpr int U = decltype(u_tag)::value;
        int wlo[U], whi[U];
        float dw[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const uint8_t* blk = w + static_cast<size_t>(i0 + 2 * u) * W::bytes;
            W::codes(blk, h, wlo[u], whi[u]);
            dw[u] = legacy_scale<T>(blk);
        }
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (b < na) {
                int xlo[U], xhi[U];
                float da[U];
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const size_t i = static_cast<size_t>(i0 + 2 * u);
                    const int8_t* xa = aqb + b * k + 32 * i;
                    xlo[u] = *reinterpret_cast<const int*>(xa);
                    xhi[u] = *reinterpret_cast<const int*>(xa + 16);
                    da[u] =
                        reinterpret_cast<const float*>(adb + b * static_cast<size_t>(nb) + i)[0];
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const float dd = cn::mul(dw[u], da[u]);
                    acc_lo[b] =
                        cn::fma(dd, static_cast<float>(__dp4a(wlo[u], xlo[u], 0)), acc_lo[b]);
                    acc_hi[b] =
                        cn::fma(dd, static_cast<float>(__dp4a(whi[u], xhi[u], 0)), acc_hi[b]);
                }
            }
        }
        if constexpr (W::asym) {
            if (sub == 0) {  // the min chain: block pairs (i, i + 1), i = i0, i0 + 2, ...
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int i = i0 + 2 * u;
                    const uint8_t* blk = w + static_cast<size_t>(i) * W::bytes;
                    const float m0 = h2f(ld16(blk + 2));
                    const bool pair = i + 1 < nb;
                    const float m1 = pair ? h2f(ld16(blk + W::bytes + 2)) : 0.0f;
#pragma unroll
                    for (int b = 0; b < NB; ++b) {
                        if (b < na) {
                            const float4* s = adb + b * static_cast<size_t>(nb) + i;
                            const float p0 = cn::mul(m0, s[0].y);
                            am[b] = pair ? cn::add(am[b], cn::add(p0, cn::mul(m1, s[1].y)))
                                         : cn::add(am[b], p0);
                        }
                    }
                }
            }
        }
    };
    constexpr int kU = NB == 1 ? 8 : NB == 2 ? 4 : 2;  // blocks in flight per thread and step
    int i = p;
    for (; i + 2 * (kU - 1) < nb; i += 2 * kU) step(i, std::integral_constant<int, kU>{});
    for (; i < nb; i += 2) step(i, std::integral_constant<int, 1>{});
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        const float vlo = fadd_xor(acc_lo[b], 4);  // chain 0 + chain 1, lane h
        const float vhi = fadd_xor(acc_hi[b], 4);  // lane h + 4
        float v = cn::add(vlo, vhi);               // tree8: (a_h + a_h+4) ...
        v = fadd_xor(v, 2);
        v = fadd_xor(v, 1);
        if (sub == 0 && row < total && b < na) {
            if constexpr (W::asym) v = cn::add(v, am[b]);
            store(J.m[jj], r, a0 + b, v, accumulate);
        }
    }
}

// ---- K-quants: lane l of the eight 32-element groups of a super-block --------------------------
// load(b, l, q, sc): q[c] = the 4 codes of lane l of group c (packed int8), sc[c] = the integer
// scale of those 4 elements (sub-block (32 c + 4 l) / 16, or / 32).

template <int T>
struct KQ;
template <>
struct KQ<kQ2_K> {
    static constexpr int bytes = 84, d_off = 80;
    __device__ static void load(const uint8_t* b, int l, int (&q)[8], int (&sc)[8]) {
        const uint32_t w[2] = {ld32(b + 16 + 4 * l), ld32(b + 48 + 4 * l)};
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            q[c] = static_cast<int>((w[c >> 2] >> (2 * (c & 3))) & 0x03030303u);
            sc[c] = b[2 * c + (l >> 2)] & 0x0F;
        }
    }
};
template <>
struct KQ<kQ3_K> {
    static constexpr int bytes = 110, d_off = 108;
    __device__ static void load(const uint8_t* b, int l, int (&q)[8], int (&sc)[8]) {
        const uint32_t hm = ld32_a2(b + 4 * l);
        const uint32_t w[2] = {ld32_a2(b + 32 + 4 * l), ld32_a2(b + 64 + 4 * l)};
        const auto& blk = *reinterpret_cast<const quant::detail::BlockQ3_K*>(b);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            const uint32_t lo = (w[c >> 2] >> (2 * (c & 3))) & 0x03030303u;
            const uint32_t clear = (~(hm >> c)) & 0x01010101u;
            q[c] = static_cast<int>(__vsubss4(lo, clear * 4u));
            sc[c] = cd::scale_q3_k(blk, 2 * c + (l >> 2));
        }
    }
};
template <int T>
struct KQ45 {  // Q4_K (qs at 16) and Q5_K (qh at 16, qs at 48)
    static constexpr int bytes = T == kQ4_K ? 144 : 176, d_off = 0;
    __device__ static void load(const uint8_t* b, int l, int (&q)[8], int (&sc)[8]) {
        constexpr int qs = T == kQ4_K ? 16 : 48;
        uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = ld32(b + qs + 32 * j + 4 * l);
        uint32_t hb = 0;
        if constexpr (T == kQ5_K) hb = ld32(b + 16 + 4 * l);
        uint8_t s12[12];
        const uint32_t s0 = ld32(b + 4), s1 = ld32(b + 8), s2 = ld32(b + 12);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            s12[j] = static_cast<uint8_t>(s0 >> (8 * j));
            s12[4 + j] = static_cast<uint8_t>(s1 >> (8 * j));
            s12[8 + j] = static_cast<uint8_t>(s2 >> (8 * j));
        }
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            uint32_t v = (w[c >> 1] >> (4 * (c & 1))) & 0x0f0f0f0fu;
            if constexpr (T == kQ5_K) v |= ((hb >> c) & 0x01010101u) << 4;
            q[c] = static_cast<int>(v);
            sc[c] = cd::scale_min_k4(s12, c, false);
        }
    }
};
template <>
struct KQ<kQ4_K> : KQ45<kQ4_K> {};
template <>
struct KQ<kQ5_K> : KQ45<kQ5_K> {};
template <>
struct KQ<kQ6_K> {
    static constexpr int bytes = 210, d_off = 208;
    __device__ static void load(const uint8_t* b, int l, int (&q)[8], int (&sc)[8]) {
        uint32_t lw[2][2], hw[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            lw[h][0] = ld32_a2(b + 64 * h + 4 * l);
            lw[h][1] = ld32_a2(b + 64 * h + 32 + 4 * l);
            hw[h] = ld32_a2(b + 128 + 32 * h + 4 * l);
        }
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            const int h = c >> 2, kq = c & 3;
            const uint32_t lo = (lw[h][kq & 1] >> (4 * (kq >> 1))) & 0x0f0f0f0fu;
            const uint32_t hi = ((hw[h] >> (2 * kq)) & 0x03030303u) << 4;
            q[c] = static_cast<int>(lo | hi);
            sc[c] = static_cast<int8_t>(b[192 + 2 * c + (l >> 2)]);
        }
    }
};

__device__ __forceinline__ int bsum_lo(float4 s) {
    return static_cast<int16_t>(__float_as_uint(s.w) & 0xffffu);
}
__device__ __forceinline__ int bsum_hi(float4 s) {
    return static_cast<int16_t>(__float_as_uint(s.w) >> 16);
}
__device__ __forceinline__ int isum_xor(int v, int o) {
    return v + __shfl_xor_sync(kFull, v, o);
}

// 8 threads per weight row (4 rows per warp, 16 per block): thread l owns lane l's chain and forms
// the whole lane integer (all eight groups) itself; the 8 lanes of a row read 32 contiguous
// bytes of each quant array per load. xor 4, 2, 1 close tree8 (and the min chains).
template <int T, int NB>
__global__ void __launch_bounds__(kThreads)
    exact_k(Jobs J, int nsb, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
            int n_act, bool accumulate) {
    using W = KQ<T>;
    const int total = J.row_end[J.n_jobs - 1];
    const int row = blockIdx.x * (kThreads / 8) + (threadIdx.x >> 3);
    const int l = threadIdx.x & 7;
    int r = min(row, total - 1);
    const int jj = pick_job(J, r);
    const int a0 = blockIdx.y * NB;
    const uint8_t* w = job_matrix(J.m[jj].w, J.m[jj].expert, J.m[jj].expert_stride, a0) +
                       static_cast<size_t>(r) * J.m[jj].row_bytes;
    const int na = min(NB, n_act - a0);
    const int n_grp = nsb * 8;  // 32-element groups per row
    const size_t k = static_cast<size_t>(nsb) * 256;
    const int8_t* aqb = aq + static_cast<size_t>(a0) * k + 4 * l;
    const float4* adb = ad + static_cast<size_t>(a0) * n_grp;
    const int kk = l & 3;   // Q4_K/Q5_K: this thread's min chain (sub-blocks 2kk, 2kk + 1)
    float acc[NB], mn[NB];  // mn: Q2_K's st, or Q4_K/Q5_K's am[kk]
#pragma unroll
    for (int b = 0; b < NB; ++b) acc[b] = mn[b] = 0.0f;
    // One step: super-blocks i0 .. i0 + U - 1, weight loads for all of them first, then the chain
    // operations in super-block order.
    auto step = [&](int i0, auto u_tag) {
        constexpr int U = decltype(u_tag)::value;
        int q[U][8], sc[U][8];
        float dw[U], dmin[U];
        int sx[U][2];  // Q2_K: 4-bit mins of sub-blocks 2l, 2l + 1; Q4_K/Q5_K: mins 2kk, 2kk + 1;
                       // Q6_K: scales 2l, 2l + 1
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const uint8_t* blk = w + static_cast<size_t>(i0 + u) * W::bytes;
            W::load(blk, l, q[u], sc[u]);
            dw[u] = h2f(ld16(blk + W::d_off));
            dmin[u] = 0.0f;
            if constexpr (T == kQ2_K) {
                sx[u][0] = blk[2 * l] >> 4;
                sx[u][1] = blk[2 * l + 1] >> 4;
                dmin[u] = h2f(ld16(blk + 82));
            } else if constexpr (T == kQ4_K || T == kQ5_K) {
                sx[u][0] = cd::scale_min_k4(blk + 4, 2 * kk, true);
                sx[u][1] = cd::scale_min_k4(blk + 4, 2 * kk + 1, true);
                dmin[u] = h2f(ld16(blk + 2));
            } else if constexpr (T == kQ6_K) {
                sx[u][0] = static_cast<int8_t>(blk[192 + 2 * l]);
                sx[u][1] = static_cast<int8_t>(blk[192 + 2 * l + 1]);
            } else {
                sx[u][0] = sx[u][1] = 0;
            }
        }
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (b < na) {
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int i = i0 + u;
                    const int8_t* xa = aqb + b * k + 256 * static_cast<size_t>(i);
                    const float4* sa = adb + b * static_cast<size_t>(n_grp) + 8 * i;
                    int s = 0;
#pragma unroll
                    for (int c = 0; c < 8; ++c)
                        s += sc[u][c] *
                             __dp4a(q[u][c], *reinterpret_cast<const int*>(xa + 32 * c), 0);
                    if constexpr (T == kQ6_K) {  // lane l's share of the -32 offset
                        const float4 g = sa[l];
                        s -= 32 * (sx[u][0] * bsum_lo(g) + sx[u][1] * bsum_hi(g));
                    }
                    const float da = sa[0].x;
                    acc[b] = cn::fma(cn::mul(da, dw[u]), static_cast<float>(s), acc[b]);
                    if constexpr (T == kQ2_K) {
                        // summ = sum_k (scales[k] >> 4) * bsums[k]: thread l takes k = 2l, 2l + 1
                        const float4 g = sa[l];
                        int m = sx[u][0] * bsum_lo(g) + sx[u][1] * bsum_hi(g);
                        m = isum_xor(m, 4);
                        m = isum_xor(m, 2);
                        m = isum_xor(m, 1);
                        mn[b] =
                            cn::sub(mn[b], cn::mul(cn::mul(da, dmin[u]), static_cast<float>(m)));
                    } else if constexpr (T == kQ4_K || T == kQ5_K) {
                        const float4 g0 = sa[2 * kk], g1 = sa[2 * kk + 1];
                        const int m = sx[u][0] * (bsum_lo(g0) + bsum_hi(g0)) +
                                      sx[u][1] * (bsum_lo(g1) + bsum_hi(g1));
                        mn[b] = cn::fma(cn::mul(-da, dmin[u]), static_cast<float>(m), mn[b]);
                    }
                }
            }
        }
    };
    constexpr int kU = NB == 1 ? 4 : NB == 2 ? 2 : 1;  // super-blocks in flight per step
    int i = 0;
    for (; i + kU <= nsb; i += kU) step(i, std::integral_constant<int, kU>{});
    for (; i < nsb; ++i) step(i, std::integral_constant<int, 1>{});
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        float v = fadd_xor(acc[b], 4);
        v = fadd_xor(v, 2);
        v = fadd_xor(v, 1);
        float m = mn[b];
        if constexpr (T == kQ4_K || T == kQ5_K) {
            m = fadd_xor(m, 2);  // (am0 + am2) + (am1 + am3)
            m = fadd_xor(m, 1);
        }
        if (l == 0 && row < total && b < na) {
            if constexpr (T == kQ2_K || T == kQ4_K || T == kQ5_K) v = cn::add(v, m);
            store(J.m[jj], r, a0 + b, v, accumulate);
        }
    }
}

// ---- float weights x f32 activations -----------------------------------------------------------

template <int T>
__device__ __forceinline__ float load_w(const uint8_t* w, int i) {
    if constexpr (T == kF32)
        return reinterpret_cast<const float*>(w)[i];
    else if constexpr (T == kF16)
        return h2f(reinterpret_cast<const uint16_t*>(w)[i]);
    else
        return bf2f(reinterpret_cast<const uint16_t*>(w)[i]);
}

template <int T, int NB>
__global__ void __launch_bounds__(kThreads)
    exact_f(Jobs J, int k, const float* __restrict__ x, int n_act, bool accumulate) {
    const int total = J.row_end[J.n_jobs - 1];
    const int row = blockIdx.x * (kThreads / 32) + (threadIdx.x >> 5);
    const int t = threadIdx.x & 31;
    int r = min(row, total - 1);
    const int jj = pick_job(J, r);
    const int a0 = blockIdx.y * NB;
    const uint8_t* w = job_matrix(J.m[jj].w, J.m[jj].expert, J.m[jj].expert_stride, a0) +
                       static_cast<size_t>(r) * J.m[jj].row_bytes;
    const int na = min(NB, n_act - a0);
    const float* xb = x + static_cast<size_t>(a0) * k;
    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) acc[b] = 0.0f;
    const int n32 = k / 32 * 32, n8 = k / 8 * 8;
    for (int i = t; i < n32; i += 32) {
        const float wv = load_w<T>(w, i);
#pragma unroll
        for (int b = 0; b < NB; ++b)
            if (b < na) acc[b] = cn::fma(wv, xb[b * static_cast<size_t>(k) + i], acc[b]);
    }
    if (t < 8) {
        for (int i = n32 + t; i < n8; i += 8) {
            const float wv = load_w<T>(w, i);
#pragma unroll
            for (int b = 0; b < NB; ++b)
                if (b < na) acc[b] = cn::fma(wv, xb[b * static_cast<size_t>(k) + i], acc[b]);
        }
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        float v = fadd_xor(acc[b], 8);  // (c0 + c1), (c2 + c3)
        v = fadd_xor(v, 16);            // (c0 + c1) + (c2 + c3)
        v = fadd_xor(v, 4);
        v = fadd_xor(v, 2);
        v = fadd_xor(v, 1);
        if (t == 0 && row < total && b < na) {
            for (int i = n8; i < k; ++i)
                v = cn::add(v, cn::mul(load_w<T>(w, i), xb[b * static_cast<size_t>(k) + i]));
            store(J.m[jj], r, a0 + b, v, accumulate);
        }
    }
}

// ---- launches ----------------------------------------------------------------------------------

template <int NB>
dim3 grid_of(const Jobs& J, int rows_per_block, int n_act) {
    const int rows = J.row_end[J.n_jobs - 1];
    return dim3((rows + rows_per_block - 1) / rows_per_block, (n_act + NB - 1) / NB);
}

template <int T, int NB>
void launch(const Jobs& J, int k, const int8_t* aq, const float4* ad, const float* xf, int n_act,
            bool acc, cudaStream_t s) {
    if constexpr (T == kF32 || T == kF16 || T == kBF16) {
        exact_f<T, NB>
            <<<grid_of<NB>(J, kThreads / 32, n_act), kThreads, 0, s>>>(J, k, xf, n_act, acc);
    } else if constexpr (T == kQ2_K || T == kQ3_K || T == kQ4_K || T == kQ5_K || T == kQ6_K) {
        exact_k<T, NB><<<grid_of<NB>(J, kThreads / 8, n_act), kThreads, 0, s>>>(J, k / 256, aq, ad,
                                                                                n_act, acc);
    } else {
        exact_legacy<T, NB><<<grid_of<NB>(J, kThreads / 8, n_act), kThreads, 0, s>>>(
            J, k / 32, aq, ad, n_act, acc);
    }
}

// Activation rows per thread: one weight read serves NB activation rows.
template <int T>
void by_batch(const Jobs& J, int k, const int8_t* aq, const float4* ad, const float* xf, int n_act,
              bool acc, cudaStream_t s) {
    // Gathered (MoE) calls: each activation row has its own matrix, one row per block.
    if (n_act == 1 || J.m[0].expert)
        launch<T, 1>(J, k, aq, ad, xf, n_act, acc, s);
    else if (n_act == 2)
        launch<T, 2>(J, k, aq, ad, xf, n_act, acc, s);
    else if (n_act <= 4)
        launch<T, 4>(J, k, aq, ad, xf, n_act, acc, s);
    else if (n_act <= 8)
        launch<T, 8>(J, k, aq, ad, xf, n_act, acc, s);
    else
        launch<T, 16>(J, k, aq, ad, xf, n_act, acc, s);
}

}  // namespace

bool dmmv_exact_supports(int type) {
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
        case kMXFP4:
            return true;
        default:
            return false;
    }
}

void dmmv_exact(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
                const float* xf, int n_act, bool accumulate, cudaStream_t s) {
    // Prefill: the tiled GEMM (dmmv_exact_gemm.cu, same bits) for the types it covers.
    if (n_act > 16 && !jobs[0].expert && exact_gemm_enabled() &&
        dmmv_exact_gemm(type, jobs, n_jobs, k, aq, ad, n_act, accumulate, s))
        return;
    Jobs J{};
    J.n_jobs = n_jobs;
    int total = 0;
    for (int i = 0; i < n_jobs; ++i) {
        J.m[i] = jobs[i];
        total += jobs[i].n_out;
        J.row_end[i] = total;
    }
    if (total == 0 || n_act == 0) return;
    switch (type) {
        case kQ4_0:
            by_batch<kQ4_0>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ4_1:
            by_batch<kQ4_1>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ5_0:
            by_batch<kQ5_0>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ5_1:
            by_batch<kQ5_1>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ8_0:
            by_batch<kQ8_0>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ2_K:
            by_batch<kQ2_K>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ3_K:
            by_batch<kQ3_K>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ4_K:
            by_batch<kQ4_K>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ5_K:
            by_batch<kQ5_K>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kQ6_K:
            by_batch<kQ6_K>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kF32:
            by_batch<kF32>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kF16:
            by_batch<kF16>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kBF16:
            by_batch<kBF16>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        case kMXFP4:
            by_batch<kMXFP4>(J, k, aq, ad, xf, n_act, accumulate, s);
            break;
        default:
            break;  // callers check dmmv_exact_supports
    }
}

}  // namespace zinc::cuda
