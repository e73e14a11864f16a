// zinc/backend/cuda/dmmv_exact_gemm.cu — the exact quantized matrix products for many activation
// rows (prefill): a shared-memory tiled __dp4a GEMM that performs, for every (weight row,
// activation row) output, exactly the float operations of the CPU tier's vec_dot in its order
// (quant/canon_dot.h), so the result equals quant::vec_dot / gemm_tile / dmmv_exact bit for bit.
// docs/exactness.md ("Matrix products"), docs/cuda.md ("Exact prefill GEMM").
//
// Why it is exact. The canonical order of a quantized dot product has two parts: integer "lane"
// sums (4 consecutive elements of a 32-element group, times the integer sub-block scale for the
// K-quants), which are exact however they are formed, and float chains (one fma per lane per
// block, in increasing block order, then a fixed closing tree). The tiling here only decides
// which thread computes which output and how the bytes reach it; each output's chains are walked
// by the threads that own them in increasing block order, and closed by the same xor butterfly
// as dmmv_exact (tree8). Every float operation is a canon:: (correctly rounded, never fused by
// nvcc) one. int -> float of a 32-element format's lane uses the exact magic-number conversion:
// __dp4a(w, a, 0x4B400000) is the float 1.5 * 2^23 + lane (|lane| <= 4 * 127 * 127 < 2^22), and
// subtracting 1.5 * 2^23 is exact, so the result is the lane as cvt.rn would give it, without the
// quarter-rate conversion unit.
//
// Tiles (a block of 256 threads computes BM weight rows x BN activation rows; the K dimension is
// walked in stages staged in shared memory, 16-byte coalesced loads where the rows allow it):
//  * 32-element formats (Q4_0, Q5_0, Q8_0; Q4_1, Q5_1 with the min chain): 16 threads per output
//    group, thread (p, l) owns chain p (block parity) lane l of a TM x TN = 8 x 8 micro-tile;
//    16 groups as 4 x 4 -> BM = BN = 32; stages of 8 blocks (256 elements). Per block a thread
//    loads 8 weight lane words and 8 activation lane words from shared memory and does 64
//    dp4a + 64 exact converts + 64 dd products + 64 fma. The min chain of Q4_1/Q5_1 (one per
//    output) is spread over the 16 threads of the group, 4 outputs each, and fetched by shuffle
//    at the end.
//  * K-quants (Q2_K..Q6_K; dmmv_exact_gemm_k.cuh): 8 threads per output group, thread l owns lane l's chain of a
//    TM x TN = 4 x 8 micro-tile: over the 8 groups c of a super-block it accumulates the lane
//    integers sum_c sc_c * dp4a(q_c, a_c) (integer registers; the 6-bit scales and mins are
//    unpacked once per row and super-block into shared memory while staging), then one fma per
//    super-block and output. Q4_K/Q5_K's min chain am[l & 3] of activation rows n = 2 j + (l >> 2)
//    (lanes 0-3 even rows, 4-7 odd rows) is closed by xor 2, 1 and fetched by shuffle; Q2_K's
//    st chain of output o is kept by lane o % 8. 32 groups as 8 x 4 -> BM = BN = 32; stages of
//    2 super-blocks.
// Rows are padded in shared memory so that the weight rows of the groups of one warp fall in
// different banks; the activation rows of one warp are the same (broadcast).
// These are tile variant 0, the one dmmv_exact_gemm (and so dmmv_exact's routing) uses. Variants
// 1..4 (dmmv_exact_gemm_variant) exist to be measured on the device: other tile shapes, and for
// the 32-element formats a kernel whose threads own two lanes each (one dd product per two lane
// steps). All give the same bits (tests/cuda/test_exact_gemm.cpp on the device,
// tests/unit/cuda_emul on the host through a SIMT shim).
// Expected bound: issue rate. The canonical order needs one fma per 4 products per output for
// the 32-element formats (dp4a + exact convert + dd + fma = 4 instructions per 4 MACs, about
// 1/4 of the dp4a peak, ~30 TOPS on an H200 at best), and about 2.2 instructions per 4 MACs for
// the K-quants (dp4a + imad per group lane, the float work once per 256 elements).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "quant/canon_dot.h"

namespace zinc::cuda {
namespace {

using namespace dev;
namespace cn = zinc::canon;
namespace cd = zinc::quant::canon_dot;

constexpr int kThreads = 256;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kMagicBits = 0x4B400000;      // 1.5 * 2^23 as float bits
constexpr float kMagic = 12582912.0f;       // 1.5 * 2^23

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

// y = v (+ bias), or y = y + (v (+ bias)): each one rounded add (dmmv_exact's store).
__device__ __forceinline__ void store(const Jobs& J, int row, int a, float v, bool accumulate) {
    int r = row;
    const MatJob& m = J.m[pick_job(J, r)];
    if (m.bias) v = cn::add(v, m.bias[r]);
    float* y = m.y + static_cast<size_t>(a) * m.ldy + r;
    *y = accumulate ? cn::add(*y, v) : v;
}

__device__ __forceinline__ float fadd_xor(float v, int o) {
    return cn::add(v, __shfl_xor_sync(kFull, v, o));
}

// Exact int -> float for |v| < 2^22 from the dp4a result biased by kMagicBits.
__device__ __forceinline__ float magic_to_float(int biased) {
    return cn::sub(__int_as_float(biased), kMagic);
}

// Smallest shared row stride >= bytes, a multiple of 16, whose word stride is 8 or 24 mod 32:
// consecutive rows start 8 banks apart, so 4 groups reading 8 consecutive words each of 4
// consecutive rows never conflict.
__host__ __device__ constexpr int pad_stride(int bytes) {
    int s = (bytes + 15) / 16 * 16;
    while ((s / 4) % 32 != 8 && (s / 4) % 32 != 24) s += 16;
    return s;
}

// Copy n_rows rows of `bytes` bytes (src row i at rows[i] + off) into dst (row stride `stride`),
// in units of `width` bytes (16, 8, 4 or 2; every address and `bytes` a multiple of it).
__device__ __forceinline__ void stage_rows(uint8_t* dst, int stride, const uint8_t* const* rows,
                                           size_t off, int n_rows, int bytes, int width) {
    const int units = bytes / width;
    const int total = n_rows * units;
    for (int u = threadIdx.x; u < total; u += kThreads) {
        const int r = u / units, c = (u - r * units) * width;
        const uint8_t* s = rows[r] + off + c;
        uint8_t* d = dst + r * stride + c;
        if (width == 16) *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
        else if (width == 8) *reinterpret_cast<uint2*>(d) = *reinterpret_cast<const uint2*>(s);
        else if (width == 4) *reinterpret_cast<uint32_t*>(d) = *reinterpret_cast<const uint32_t*>(s);
        else *reinterpret_cast<uint16_t*>(d) = *reinterpret_cast<const uint16_t*>(s);
    }
}
// Widest unit (<= 16) dividing `bytes`, given that the addresses allow `width`.
__device__ __forceinline__ int unit_for(int bytes, int width) {
    while (width > 2 && bytes % width != 0) width >>= 1;
    return width;
}

// ---- 32-element formats: the 4 signed codes of lane l (elements 4l..4l+3) as packed int8 ------

template <int T>
struct Legacy;
template <>
struct Legacy<kQ4_0> {
    static constexpr int bytes = 18;
    static constexpr bool asym = false;
    __device__ static int codes(const uint8_t* b, int l) {
        return nib4(ld32_a2(b + 2 + 4 * (l & 3)), 4 * (l >> 2), 8);
    }
};
template <>
struct Legacy<kQ5_0> {
    static constexpr int bytes = 22;
    static constexpr bool asym = false;
    __device__ static int codes(const uint8_t* b, int l) {
        const uint32_t v = (ld32_a2(b + 6 + 4 * (l & 3)) >> (4 * (l >> 2))) & 0x0f0f0f0fu;
        return static_cast<int>(__vsubss4(v | hbits4(ld32_a2(b + 2), 4 * l), 0x10101010u));
    }
};
template <>
struct Legacy<kQ8_0> {
    static constexpr int bytes = 34;
    static constexpr bool asym = false;
    __device__ static int codes(const uint8_t* b, int l) {
        return static_cast<int>(ld32_a2(b + 2 + 4 * l));
    }
};
template <>
struct Legacy<kQ4_1> {
    static constexpr int bytes = 20;
    static constexpr bool asym = true;
    __device__ static int codes(const uint8_t* b, int l) {
        return nib4(ld32(b + 4 + 4 * (l & 3)), 4 * (l >> 2), 0);
    }
};
template <>
struct Legacy<kQ5_1> {
    static constexpr int bytes = 24;
    static constexpr bool asym = true;
    __device__ static int codes(const uint8_t* b, int l) {
        const uint32_t v = (ld32(b + 8 + 4 * (l & 3)) >> (4 * (l >> 2))) & 0x0f0f0f0fu;
        return static_cast<int>(v | hbits4(ld32(b + 4), 4 * l));
    }
};

// Tile geometry of the 32-element kernel: TM x TN outputs per 16-thread group, GM x GN groups
// (GM even: the two groups of a warp share their activation rows), KB blocks per stage (even).
template <int TM_, int TN_, int GM_, int GN_, int KB_>
struct LegacyTile {
    static constexpr int TM = TM_, TN = TN_, GM = GM_, GN = GN_, KB = KB_;
    static constexpr int BM = TM * GM, BN = TN * GN;
    static constexpr int SQ = pad_stride(32 * KB);  // activation code row stride
    static_assert(GM * GN * 16 == kThreads && GM % 2 == 0 && KB % 2 == 0 && (TM * TN) % 16 == 0);
};

template <int T, class G>
__global__ void __launch_bounds__(kThreads)
    gemm_legacy(Jobs J, int nb, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
                int n_act, bool accumulate, int wwidth) {
    using W = Legacy<T>;
    constexpr int TM = G::TM, TN = G::TN, GM = G::GM, KB = G::KB, BM = G::BM, BN = G::BN;
    constexpr int SW = pad_stride(W::bytes * KB), SQ = G::SQ;
    __shared__ __align__(16) uint8_t sW[BM * SW];
    __shared__ __align__(16) int8_t sQ[BN * SQ];
    __shared__ __align__(16) float4 sD[BN * KB];
    __shared__ const uint8_t* sRow[BM];
    __shared__ const uint8_t* sAct[BN];

    const int total = J.row_end[J.n_jobs - 1];
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const size_t k = static_cast<size_t>(nb) * 32;
    for (int i = threadIdx.x; i < BM; i += kThreads) {
        int r = min(m0 + i, total - 1);
        const int jj = pick_job(J, r);
        sRow[i] = J.m[jj].w + static_cast<size_t>(r) * J.m[jj].row_bytes;
    }
    for (int i = threadIdx.x; i < BN; i += kThreads)
        sAct[i] = reinterpret_cast<const uint8_t*>(aq) + static_cast<size_t>(min(n0 + i, n_act - 1)) * k;

    const int g = threadIdx.x >> 4, sub = threadIdx.x & 15, p = sub >> 3, l = sub & 7;
    const int gm = g % GM, gn = g / GM;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    // The min chain (Q4_1/Q5_1): output o = sub + 16 q of the micro-tile (m = o / TN, n = o % TN).
    constexpr int kAm = (TM * TN) / 16;
    float am[kAm];
#pragma unroll
    for (int q = 0; q < kAm; ++q) am[q] = 0.0f;

    for (int i0 = 0; i0 < nb; i0 += KB) {
        const int nbs = min(KB, nb - i0);
        __syncthreads();  // sRow/sAct ready; the previous stage fully consumed
        stage_rows(sW, SW, sRow, static_cast<size_t>(i0) * W::bytes, BM, nbs * W::bytes,
                   unit_for(nbs * W::bytes, wwidth));
        stage_rows(reinterpret_cast<uint8_t*>(sQ), SQ, sAct, static_cast<size_t>(i0) * 32, BN,
                   nbs * 32, 16);
        for (int u = threadIdx.x; u < BN * nbs; u += kThreads) {
            const int n = u / nbs, j = u - n * nbs;
            sD[n * KB + j] = ad[static_cast<size_t>(min(n0 + n, n_act - 1)) * nb + i0 + j];
        }
        __syncthreads();
        for (int j = p; j < nbs; j += 2) {
            int x[TN];
            float da[TN];
#pragma unroll
            for (int n = 0; n < TN; ++n) {
                const int nn = gn * TN + n;
                x[n] = *reinterpret_cast<const int*>(sQ + nn * SQ + 32 * j + 4 * l);
                da[n] = sD[nn * KB + j].x;
            }
#pragma unroll
            for (int m = 0; m < TM; ++m) {
                const uint8_t* blk = sW + (gm + GM * m) * SW + j * W::bytes;
                const int wq = W::codes(blk, l);
                const float dw = h2f(ld16(blk));
#pragma unroll
                for (int n = 0; n < TN; ++n) {
                    const float lane = magic_to_float(__dp4a(wq, x[n], kMagicBits));
                    acc[m][n] = cn::fma(cn::mul(dw, da[n]), lane, acc[m][n]);
                }
            }
        }
        if constexpr (W::asym) {
            // am += (m_w0 s_a0 + m_w1 s_a1) per block pair (stages start at even blocks, so
            // pairs never straddle two); a lone last block (odd nb): am += m_w s_a.
#pragma unroll
            for (int q = 0; q < kAm; ++q) {
                const int o = sub + 16 * q, mm = gm + GM * (o / TN), nn = gn * TN + o % TN;
                const uint8_t* wr = sW + mm * SW;
                const float4* sr = sD + nn * KB;
                int j = 0;
                for (; j + 2 <= nbs; j += 2) {
                    const float p0 = cn::mul(h2f(ld16(wr + j * W::bytes + 2)), sr[j].y);
                    const float p1 = cn::mul(h2f(ld16(wr + (j + 1) * W::bytes + 2)), sr[j + 1].y);
                    am[q] = cn::add(am[q], cn::add(p0, p1));
                }
                if (j < nbs) am[q] = cn::add(am[q], cn::mul(h2f(ld16(wr + j * W::bytes + 2)), sr[j].y));
            }
        }
    }
    // Close: xor 8 adds the parities (c0 + c1 lane-wise), xor 4, 2, 1 is canon::tree8.
    const int base = threadIdx.x & 16;  // the group's first lane in the warp
#pragma unroll
    for (int m = 0; m < TM; ++m) {
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            float v = fadd_xor(acc[m][n], 8);
            v = fadd_xor(v, 4);
            v = fadd_xor(v, 2);
            v = fadd_xor(v, 1);
            if constexpr (W::asym) {
                const int o = m * TN + n;
                const float a = __shfl_sync(kFull, am[o / 16], base + o % 16);
                v = cn::add(v, a);
            }
            const int row = m0 + gm + GM * m, col = n0 + gn * TN + n;
            if (sub == 0 && row < total && col < n_act) store(J, row, col, v, accumulate);
        }
    }
}

// ---- 32-element formats, two lanes per thread -------------------------------------------------
// Thread (p, lp) of an 8-thread group owns chain p, lanes 2 lp and 2 lp + 1 of a TM x TN
// micro-tile: the block's scale product dd serves both lanes (one multiply per 2 lane steps
// instead of one per lane step) and the two activation lane words are one 8-byte load. Closing:
// xor 4 adds the parities, then per lane parity xor 2, xor 1 and the final even + odd sum are
// canon::tree8's ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
template <int TM_, int TN_, int GM_, int GN_, int KB_>
struct Legacy2Tile {
    static constexpr int TM = TM_, TN = TN_, GM = GM_, GN = GN_, KB = KB_;
    static constexpr int BM = TM * GM, BN = TN * GN;
    static constexpr int SQ = pad_stride(32 * KB);
    static_assert(GM * GN * 8 == kThreads && GM % 4 == 0 && KB % 2 == 0 && (TM * TN) % 8 == 0);
};

template <int T, class G>
__global__ void __launch_bounds__(kThreads)
    gemm_legacy2(Jobs J, int nb, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
                 int n_act, bool accumulate, int wwidth) {
    using W = Legacy<T>;
    constexpr int TM = G::TM, TN = G::TN, GM = G::GM, KB = G::KB, BM = G::BM, BN = G::BN;
    constexpr int SW = pad_stride(W::bytes * KB), SQ = G::SQ;
    __shared__ __align__(16) uint8_t sW[BM * SW];
    __shared__ __align__(16) int8_t sQ[BN * SQ];
    __shared__ __align__(16) float4 sD[BN * KB];
    __shared__ const uint8_t* sRow[BM];
    __shared__ const uint8_t* sAct[BN];

    const int total = J.row_end[J.n_jobs - 1];
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const size_t k = static_cast<size_t>(nb) * 32;
    for (int i = threadIdx.x; i < BM; i += kThreads) {
        int r = min(m0 + i, total - 1);
        const int jj = pick_job(J, r);
        sRow[i] = J.m[jj].w + static_cast<size_t>(r) * J.m[jj].row_bytes;
    }
    for (int i = threadIdx.x; i < BN; i += kThreads)
        sAct[i] = reinterpret_cast<const uint8_t*>(aq) + static_cast<size_t>(min(n0 + i, n_act - 1)) * k;

    const int g = threadIdx.x >> 3, sub = threadIdx.x & 7, p = sub >> 2, lp = sub & 3;
    const int gm = g % GM, gn = g / GM;
    float acc0[TM][TN], acc1[TM][TN];  // lanes 2 lp and 2 lp + 1
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc0[i][j] = acc1[i][j] = 0.0f;
    // The min chain (Q4_1/Q5_1): output o = sub + 8 q of the micro-tile (m = o / TN, n = o % TN).
    constexpr int kAm = (TM * TN) / 8;
    float am[kAm];
#pragma unroll
    for (int q = 0; q < kAm; ++q) am[q] = 0.0f;

    for (int i0 = 0; i0 < nb; i0 += KB) {
        const int nbs = min(KB, nb - i0);
        __syncthreads();
        stage_rows(sW, SW, sRow, static_cast<size_t>(i0) * W::bytes, BM, nbs * W::bytes,
                   unit_for(nbs * W::bytes, wwidth));
        stage_rows(reinterpret_cast<uint8_t*>(sQ), SQ, sAct, static_cast<size_t>(i0) * 32, BN,
                   nbs * 32, 16);
        for (int u = threadIdx.x; u < BN * nbs; u += kThreads) {
            const int n = u / nbs, j = u - n * nbs;
            sD[n * KB + j] = ad[static_cast<size_t>(min(n0 + n, n_act - 1)) * nb + i0 + j];
        }
        __syncthreads();
        for (int j = p; j < nbs; j += 2) {
            uint2 x[TN];
            float da[TN];
#pragma unroll
            for (int n = 0; n < TN; ++n) {
                const int nn = gn * TN + n;
                x[n] = *reinterpret_cast<const uint2*>(sQ + nn * SQ + 32 * j + 8 * lp);
                da[n] = sD[nn * KB + j].x;
            }
#pragma unroll
            for (int m = 0; m < TM; ++m) {
                const uint8_t* blk = sW + (gm + GM * m) * SW + j * W::bytes;
                const int wq0 = W::codes(blk, 2 * lp), wq1 = W::codes(blk, 2 * lp + 1);
                const float dw = h2f(ld16(blk));
#pragma unroll
                for (int n = 0; n < TN; ++n) {
                    const float dd = cn::mul(dw, da[n]);
                    const float l0 = magic_to_float(__dp4a(wq0, static_cast<int>(x[n].x), kMagicBits));
                    const float l1 = magic_to_float(__dp4a(wq1, static_cast<int>(x[n].y), kMagicBits));
                    acc0[m][n] = cn::fma(dd, l0, acc0[m][n]);
                    acc1[m][n] = cn::fma(dd, l1, acc1[m][n]);
                }
            }
        }
        if constexpr (W::asym) {
#pragma unroll
            for (int q = 0; q < kAm; ++q) {
                const int o = sub + 8 * q, mm = gm + GM * (o / TN), nn = gn * TN + o % TN;
                const uint8_t* wr = sW + mm * SW;
                const float4* sr = sD + nn * KB;
                int j = 0;
                for (; j + 2 <= nbs; j += 2) {
                    const float p0 = cn::mul(h2f(ld16(wr + j * W::bytes + 2)), sr[j].y);
                    const float p1 = cn::mul(h2f(ld16(wr + (j + 1) * W::bytes + 2)), sr[j + 1].y);
                    am[q] = cn::add(am[q], cn::add(p0, p1));
                }
                if (j < nbs) am[q] = cn::add(am[q], cn::mul(h2f(ld16(wr + j * W::bytes + 2)), sr[j].y));
            }
        }
    }
    const int base = threadIdx.x & 24;  // the group's first lane in the warp
#pragma unroll
    for (int m = 0; m < TM; ++m) {
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            float e = fadd_xor(acc0[m][n], 4);  // c0 + c1 of lane 2 lp
            float od = fadd_xor(acc1[m][n], 4);  // of lane 2 lp + 1
            e = fadd_xor(e, 2);                  // a0 + a4, a2 + a6
            e = fadd_xor(e, 1);                  // (a0 + a4) + (a2 + a6)
            od = fadd_xor(od, 2);
            od = fadd_xor(od, 1);
            float v = cn::add(e, od);
            if constexpr (W::asym) {
                const int o = m * TN + n;
                v = cn::add(v, __shfl_sync(kFull, am[o / 8], base + o % 8));
            }
            const int row = m0 + gm + GM * m, col = n0 + gn * TN + n;
            if (sub == 0 && row < total && col < n_act) store(J, row, col, v, accumulate);
        }
    }
}

}  // namespace
}  // namespace zinc::cuda

#include "backend/cuda/dmmv_exact_gemm_k.cuh"

namespace zinc::cuda {
namespace {

// ---- launches ----------------------------------------------------------------------------------

// tests/unit/cuda_emul compiles this file for the host over a SIMT shim (fake CUDA headers that
// define ZINC_SIMT_EMULATION and run each block's threads as host threads), so the kernels above
// are checked against the CPU tier in CI, without a GPU.
#if defined(ZINC_SIMT_EMULATION)
#define ZINC_GEMM_LAUNCH(kernel, grid, stream, ...) \
    ((void)(stream), zinc_simt::launch(kernel, grid, kThreads, __VA_ARGS__))
#else
#define ZINC_GEMM_LAUNCH(kernel, grid, stream, ...) kernel<<<grid, kThreads, 0, stream>>>(__VA_ARGS__)
#endif

// Widest load unit (16, 8, 4, 2) that every weight row start of every job and every stage start
// (a multiple of stage_bytes into the row) allows.
int weight_width(const Jobs& J, int stage_bytes) {
    int w = 16;
    while (w > 2 && stage_bytes % w != 0) w >>= 1;
    for (int i = 0; i < J.n_jobs; ++i) {
        const uintptr_t a = reinterpret_cast<uintptr_t>(J.m[i].w);
        while (w > 2 && ((a % w) != 0 || (J.m[i].row_bytes % w) != 0)) w >>= 1;
    }
    return w;
}

template <int T, class G>
void launch_legacy(const Jobs& J, int rows, int k, const int8_t* aq, const float4* ad, int n_act,
                   bool acc, cudaStream_t s) {
    const dim3 grid((rows + G::BM - 1) / G::BM, (n_act + G::BN - 1) / G::BN);
    constexpr auto kernel = gemm_legacy<T, G>;
    ZINC_GEMM_LAUNCH(kernel, grid, s, J, k / 32, aq, ad, n_act, acc,
                     weight_width(J, G::KB * Legacy<T>::bytes));
}
template <int T, class G>
void launch_legacy2(const Jobs& J, int rows, int k, const int8_t* aq, const float4* ad, int n_act,
                    bool acc, cudaStream_t s) {
    const dim3 grid((rows + G::BM - 1) / G::BM, (n_act + G::BN - 1) / G::BN);
    constexpr auto kernel = gemm_legacy2<T, G>;
    ZINC_GEMM_LAUNCH(kernel, grid, s, J, k / 32, aq, ad, n_act, acc,
                     weight_width(J, G::KB * Legacy<T>::bytes));
}
template <int T, class G>
void launch_k(const Jobs& J, int rows, int k, const int8_t* aq, const float4* ad, int n_act,
              bool acc, cudaStream_t s) {
    const dim3 grid((rows + G::BM - 1) / G::BM, (n_act + G::BN - 1) / G::BN);
    constexpr auto kernel = gemm_k<T, G>;
    ZINC_GEMM_LAUNCH(kernel, grid, s, J, k / 256, aq, ad, n_act, acc,
                     weight_width(J, G::KS * KQ<T>::bytes));
}

// Tile variants: 0 is the one dmmv_exact_gemm uses; the others are kept so that the device test
// can time them all (cuda_test_exact_gemm) and the default can follow the measurements.
using L0 = LegacyTile<8, 8, 4, 4, 8>;  // 32 x 32 outputs per block
using L1 = LegacyTile<4, 8, 8, 2, 8>;  // 32 x 16, fewer registers
using L2 = LegacyTile<8, 8, 8, 2, 8>;  // 64 x 16
using K0 = KTile<4, 8, 8, 4, 2>;       // 32 x 32
using K1 = KTile<4, 4, 8, 4, 2>;       // 32 x 16, fewer registers
using K2 = KTile<4, 8, 8, 4, 1>;       // 32 x 32, one super-block per stage
using L3 = Legacy2Tile<4, 8, 8, 4, 8>;  // two lanes per thread, 32 x 32
using L4 = Legacy2Tile<2, 16, 8, 4, 8>;  // two lanes per thread, 16 x 64
constexpr int kVariants = 5;

template <int T, class GL>
void launch_32(const Jobs& J, int total, int k, const int8_t* aq, const float4* ad, int n_act,
               bool acc, cudaStream_t s) {
    if constexpr (GL::GM * GL::GN == kThreads / 8)  // Legacy2Tile: 8-thread groups
        launch_legacy2<T, GL>(J, total, k, aq, ad, n_act, acc, s);
    else
        launch_legacy<T, GL>(J, total, k, aq, ad, n_act, acc, s);
}

template <class GL, class GK>
void run_tiles(int type, const Jobs& J, int total, int k, const int8_t* aq, const float4* ad,
               int n_act, bool acc, cudaStream_t s) {
    switch (type) {
        case kQ4_0: launch_32<kQ4_0, GL>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ4_1: launch_32<kQ4_1, GL>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ5_0: launch_32<kQ5_0, GL>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ5_1: launch_32<kQ5_1, GL>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ8_0: launch_32<kQ8_0, GL>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ2_K: launch_k<kQ2_K, GK>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ3_K: launch_k<kQ3_K, GK>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ4_K: launch_k<kQ4_K, GK>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ5_K: launch_k<kQ5_K, GK>(J, total, k, aq, ad, n_act, acc, s); break;
        case kQ6_K: launch_k<kQ6_K, GK>(J, total, k, aq, ad, n_act, acc, s); break;
        default: break;
    }
}

}  // namespace

bool exact_gemm_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("ZINC_EXACT_GEMM");
        return !(e && std::strcmp(e, "0") == 0);
    }();
    return on;
}

bool dmmv_exact_gemm_supports(int type) {
    switch (type) {
        case kQ4_0: case kQ4_1: case kQ5_0: case kQ5_1: case kQ8_0: case kQ2_K: case kQ3_K:
        case kQ4_K: case kQ5_K: case kQ6_K:
            return true;
        default:
            return false;
    }
}

int dmmv_exact_gemm_variants() {
    return kVariants;
}

bool dmmv_exact_gemm_variant(int variant, int type, const MatJob* jobs, int n_jobs, int k,
                             const int8_t* aq, const float4* ad, int n_act, bool accumulate,
                             cudaStream_t s) {
    if (variant < 0 || variant >= kVariants) return false;
    if (!dmmv_exact_gemm_supports(type) || n_jobs < 1 || n_jobs > 3) return false;
    if (reinterpret_cast<uintptr_t>(aq) % 16 != 0 || k % 32 != 0) return false;  // 16-byte rows
    Jobs J{};
    J.n_jobs = n_jobs;
    int total = 0;
    for (int i = 0; i < n_jobs; ++i) {
        J.m[i] = jobs[i];
        total += jobs[i].n_out;
        J.row_end[i] = total;
    }
    if (total == 0 || n_act == 0) return true;
    if (variant == 0) run_tiles<L0, K0>(type, J, total, k, aq, ad, n_act, accumulate, s);
    else if (variant == 1) run_tiles<L1, K1>(type, J, total, k, aq, ad, n_act, accumulate, s);
    else if (variant == 2) run_tiles<L2, K2>(type, J, total, k, aq, ad, n_act, accumulate, s);
    else if (variant == 3) run_tiles<L3, K0>(type, J, total, k, aq, ad, n_act, accumulate, s);
    else run_tiles<L4, K0>(type, J, total, k, aq, ad, n_act, accumulate, s);
    return true;
}

bool dmmv_exact_gemm(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                     const float4* ad, int n_act, bool accumulate, cudaStream_t s) {
    // Variant 3 (two lanes per thread for the 32-element formats, the K-quants as variant 0):
    // on the H200 10-16 % faster than variant 0 for Q4_0/Q4_1/Q8_0 and equal for the K-quants
    // (cuda_test_exact_gemm timings, 2026-11-29); every variant gives the same bits.
    return dmmv_exact_gemm_variant(3, type, jobs, n_jobs, k, aq, ad, n_act, accumulate, s);
}

}  // namespace zinc::cuda
