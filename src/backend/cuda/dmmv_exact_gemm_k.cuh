// zinc/backend/cuda/dmmv_exact_gemm_k.cuh — the K-quant kernel of the exact prefill GEMM
// (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K x Q8_K), included once by dmmv_exact_gemm.cu, whose header
// comment describes the tiling and why it is exact; this part relies on that file's helpers
// (Jobs, stage_rows, pad_stride, magic_to_float, store, fadd_xor). The canonical order it performs
// per output is quant/canon_dot.h's dot_q2_k / dot_q3_k / dot_q45_k / dot_q6_k.
#pragma once

namespace zinc::cuda {
namespace {

// ---- K-quants: the 4 codes of lane l of 32-element group c of a super-block --------------------

template <int T>
struct KQ;
template <>
struct KQ<kQ2_K> {
    static constexpr int bytes = 84, d_off = 80;
    __device__ static int codes(const uint8_t* b, int c, int l) {
        return static_cast<int>((ld32(b + 16 + 32 * (c >> 2) + 4 * l) >> (2 * (c & 3))) & 0x03030303u);
    }
};
template <>
struct KQ<kQ3_K> {
    static constexpr int bytes = 110, d_off = 108;
    __device__ static int codes(const uint8_t* b, int c, int l) {
        const uint32_t lo = (ld32_a2(b + 32 + 32 * (c >> 2) + 4 * l) >> (2 * (c & 3))) & 0x03030303u;
        const uint32_t clear = (~(ld32_a2(b + 4 * l) >> c)) & 0x01010101u;
        return static_cast<int>(__vsubss4(lo, clear * 4u));
    }
};
template <>
struct KQ<kQ4_K> {
    static constexpr int bytes = 144, d_off = 0;
    __device__ static int codes(const uint8_t* b, int c, int l) {
        return static_cast<int>((ld32(b + 16 + 32 * (c >> 1) + 4 * l) >> (4 * (c & 1))) & 0x0f0f0f0fu);
    }
};
template <>
struct KQ<kQ5_K> {
    static constexpr int bytes = 176, d_off = 0;
    __device__ static int codes(const uint8_t* b, int c, int l) {
        const uint32_t lo = (ld32(b + 48 + 32 * (c >> 1) + 4 * l) >> (4 * (c & 1))) & 0x0f0f0f0fu;
        const uint32_t hi = ((ld32(b + 16 + 4 * l) >> c) & 0x01010101u) << 4;
        return static_cast<int>(lo | hi);
    }
};
template <>
struct KQ<kQ6_K> {
    static constexpr int bytes = 210, d_off = 208;
    __device__ static int codes(const uint8_t* b, int c, int l) {
        const int h = c >> 2, kq = c & 3;
        const uint32_t lo = (ld32_a2(b + 64 * h + 32 * (kq & 1) + 4 * l) >> (4 * (kq >> 1))) & 0x0f0f0f0fu;
        const uint32_t hi = ((ld32_a2(b + 128 + 32 * h + 4 * l) >> (2 * kq)) & 0x03030303u) << 4;
        return static_cast<int>(lo | hi);
    }
};

__device__ __forceinline__ int bsum_lo(float4 s) {
    return static_cast<int16_t>(__float_as_uint(s.w) & 0xffffu);
}
__device__ __forceinline__ int bsum_hi(float4 s) {
    return static_cast<int16_t>(__float_as_uint(s.w) >> 16);
}

// Tile geometry of the K-quant kernel: TM x TN outputs per 8-thread group, GM x GN groups (GM a
// multiple of 4: the four groups of a warp share their activation rows), KS super-blocks per stage.
template <int TM_, int TN_, int GM_, int GN_, int KS_>
struct KTile {
    static constexpr int TM = TM_, TN = TN_, GM = GM_, GN = GN_, KS = KS_;
    static constexpr int BM = TM * GM, BN = TN * GN;
    static constexpr int SQ = pad_stride(256 * KS);
    static_assert(GM * GN * 8 == kThreads && GM % 4 == 0 && TN % 2 == 0);
};

// Lane integers start at this bias where they provably stay below 2^22 and so convert exactly
// by the magic number: Q4_K |lane| <= 8 * 63 * 4 * 15 * 127, Q2_K <= 8 * 15 * 4 * 3 * 127,
// Q3_K <= 8 * 32 * 4 * 4 * 127; every Q4_K/Q5_K min lane <= 2 * 63 * 2 * 16 * 127 and Q2_K's
// summ <= 16 * 15 * 16 * 127. Q5_K and Q6_K lanes can exceed 2^22 and use cvt.rn (cd::i2f).
template <int T>
constexpr bool kMagicLane = (T == kQ4_K || T == kQ2_K || T == kQ3_K);

template <int T, class G>
__global__ void __launch_bounds__(kThreads)
    gemm_k(Jobs J, int nsb, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
           int n_act, bool accumulate, int wwidth) {
    using W = KQ<T>;
    constexpr int TM = G::TM, TN = G::TN, GM = G::GM, KS = G::KS, BM = G::BM, BN = G::BN;
    constexpr int SW = pad_stride(W::bytes * KS), SQ = G::SQ;
    constexpr bool kMin = (T == kQ4_K || T == kQ5_K);
    constexpr bool kSc16 = (T == kQ2_K || T == kQ3_K);  // 16 signed scales, unpacked in sSc
    constexpr int kSt = (TM * TN) / 8;                 // Q2_K: st chains per thread
    constexpr int kBias = kMagicLane<T> ? kMagicBits : 0;
    __shared__ __align__(16) uint8_t sW[BM * SW];
    __shared__ __align__(16) int8_t sQ[BN * SQ];
    __shared__ __align__(16) float4 sD[BN * KS * 8];
    // Per row and super-block, 32 bytes: Q4_K/Q5_K 8 scales, 8 mins; Q2_K/Q3_K 16 scales (int8),
    // Q2_K 16 mins.
    __shared__ __align__(16) uint8_t sSc[BM * KS * 32];
    __shared__ const uint8_t* sRow[BM];
    __shared__ const uint8_t* sAct[BN];

    const int total = J.row_end[J.n_jobs - 1];
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int n_grp = nsb * 8;
    const size_t k = static_cast<size_t>(nsb) * 256;
    for (int i = threadIdx.x; i < BM; i += kThreads) {
        int r = min(m0 + i, total - 1);
        const int jj = pick_job(J, r);
        sRow[i] = J.m[jj].w + static_cast<size_t>(r) * J.m[jj].row_bytes;
    }
    for (int i = threadIdx.x; i < BN; i += kThreads)
        sAct[i] = reinterpret_cast<const uint8_t*>(aq) + static_cast<size_t>(min(n0 + i, n_act - 1)) * k;

    // Thread l of group (gm, gn) owns lane l's chain of weight rows gm + GM m and activation rows
    // gn TN + n; Q4_K/Q5_K's min chain am[l & 3] of the activation rows n = 2 j + (l >> 2).
    const int g = threadIdx.x >> 3, l = threadIdx.x & 7, kk = l & 3, h = l >> 2;
    const int gm = g % GM, gn = g / GM;
    float acc[TM][TN], mn[TM][TN / 2], st[kSt];
#pragma unroll
    for (int q = 0; q < kSt; ++q) st[q] = 0.0f;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
#pragma unroll
        for (int j = 0; j < TN / 2; ++j) mn[i][j] = 0.0f;
    }

    for (int s0 = 0; s0 < nsb; s0 += KS) {
        const int nss = min(KS, nsb - s0);
        __syncthreads();
        stage_rows(sW, SW, sRow, static_cast<size_t>(s0) * W::bytes, BM, nss * W::bytes,
                   unit_for(nss * W::bytes, wwidth));
        stage_rows(reinterpret_cast<uint8_t*>(sQ), SQ, sAct, static_cast<size_t>(s0) * 256, BN,
                   nss * 256, 16);
        for (int u = threadIdx.x; u < BN * nss * 8; u += kThreads) {
            const int n = u / (nss * 8), j = u - n * (nss * 8);
            sD[n * (KS * 8) + j] = ad[static_cast<size_t>(min(n0 + n, n_act - 1)) * n_grp + 8 * s0 + j];
        }
        if constexpr (kMin || kSc16) {  // scales (and mins), unpacked once per row and super-block
            for (int u = threadIdx.x; u < BM * nss; u += kThreads) {
                const int r = u / nss, s = u - r * nss;
                const uint8_t* b = sRow[r] + static_cast<size_t>(s0 + s) * W::bytes;
                uint8_t* d = sSc + (r * KS + s) * 32;
                if constexpr (kMin) {
#pragma unroll
                    for (int j = 0; j < 8; ++j) {
                        d[j] = static_cast<uint8_t>(cd::scale_min_k4(b + 4, j, false));
                        d[8 + j] = static_cast<uint8_t>(cd::scale_min_k4(b + 4, j, true));
                    }
                } else if constexpr (T == kQ2_K) {
#pragma unroll
                    for (int j = 0; j < 16; ++j) {
                        d[j] = b[j] & 0x0F;
                        d[16 + j] = b[j] >> 4;
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < 16; ++j)
                        d[j] = static_cast<uint8_t>(
                            cd::scale_q3_k(*reinterpret_cast<const quant::detail::BlockQ3_K*>(b), j));
                }
            }
        }
        __syncthreads();
        for (int s = 0; s < nss; ++s) {
            float da[TN];
            int b0[TN], b1[TN];  // Q6_K: bsums 2l, 2l + 1 of every row
            float dam[TN / 2];   // Q4_K/Q5_K: d_a and the min pair sums of rows 2 j + h
            int bm0[TN / 2], bm1[TN / 2];
#pragma unroll
            for (int n = 0; n < TN; ++n) {
                const float4* dr = sD + (gn * TN + n) * (KS * 8) + 8 * s;
                da[n] = dr[0].x;
                if constexpr (T == kQ6_K) {
                    const float4 gl = dr[l];
                    b0[n] = bsum_lo(gl);
                    b1[n] = bsum_hi(gl);
                }
            }
            if constexpr (kMin) {
#pragma unroll
                for (int j = 0; j < TN / 2; ++j) {
                    const float4* dr = sD + (gn * TN + 2 * j + h) * (KS * 8) + 8 * s;
                    const float4 g0 = dr[2 * kk], g1 = dr[2 * kk + 1];
                    dam[j] = dr[0].x;
                    bm0[j] = bsum_lo(g0) + bsum_hi(g0);
                    bm1[j] = bsum_lo(g1) + bsum_hi(g1);
                }
            }
            int isum[TM][TN];
            uint32_t scw[TM][2];  // Q4_K/Q5_K: the 8 scales of the row as bytes
#pragma unroll
            for (int m = 0; m < TM; ++m) {
                const int mm = gm + GM * m;
                if constexpr (kMin) {
                    const uint2 w2 = *reinterpret_cast<const uint2*>(sSc + (mm * KS + s) * 32);
                    scw[m][0] = w2.x;
                    scw[m][1] = w2.y;
                }
#pragma unroll
                for (int n = 0; n < TN; ++n) {
                    isum[m][n] = kBias;
                    if constexpr (T == kQ6_K) {  // lane l's share of the -32 offset: scales 2l, 2l + 1
                        const int8_t* sc = reinterpret_cast<const int8_t*>(sW + mm * SW + s * W::bytes + 192);
                        isum[m][n] = -32 * (sc[2 * l] * b0[n] + sc[2 * l + 1] * b1[n]);
                    }
                }
            }
#pragma unroll
            for (int c = 0; c < 8; ++c) {
                int x[TN];
#pragma unroll
                for (int n = 0; n < TN; ++n)
                    x[n] = *reinterpret_cast<const int*>(sQ + (gn * TN + n) * SQ + 256 * s + 32 * c + 4 * l);
#pragma unroll
                for (int m = 0; m < TM; ++m) {
                    const uint8_t* blk = sW + (gm + GM * m) * SW + s * W::bytes;
                    const int q = W::codes(blk, c, l);
                    int sc;
                    if constexpr (kMin) sc = static_cast<int>((scw[m][c >> 2] >> (8 * (c & 3))) & 0xffu);
                    else if constexpr (kSc16)
                        sc = static_cast<int8_t>(sSc[((gm + GM * m) * KS + s) * 32 + 2 * c + (l >> 2)]);
                    else sc = static_cast<int8_t>(blk[192 + 2 * c + (l >> 2)]);
#pragma unroll
                    for (int n = 0; n < TN; ++n) isum[m][n] += sc * __dp4a(q, x[n], 0);
                }
            }
#pragma unroll
            for (int m = 0; m < TM; ++m) {
                const int mm = gm + GM * m;
                const uint8_t* blk = sW + mm * SW + s * W::bytes;
                const float dw = h2f(ld16(blk + W::d_off));
#pragma unroll
                for (int n = 0; n < TN; ++n) {
                    const float lane = kMagicLane<T> ? magic_to_float(isum[m][n]) : cd::i2f(isum[m][n]);
                    acc[m][n] = cn::fma(cn::mul(da[n], dw), lane, acc[m][n]);
                }
                if constexpr (kMin) {
                    const float dminw = h2f(ld16(blk + 2));
                    const int mw0 = sSc[(mm * KS + s) * 32 + 8 + 2 * kk];
                    const int mw1 = sSc[(mm * KS + s) * 32 + 8 + 2 * kk + 1];
#pragma unroll
                    for (int j = 0; j < TN / 2; ++j) {
                        const int mins = kMagicBits + mw0 * bm0[j] + mw1 * bm1[j];
                        mn[m][j] = cn::fma(cn::mul(-dam[j], dminw), magic_to_float(mins), mn[m][j]);
                    }
                }
            }
            if constexpr (T == kQ2_K) {
                // st -= (d_a dmin_w) summ, summ = sum_k (scales[k] >> 4) bsums[k]; thread l keeps
                // the chains of outputs o = l + 8 q of the micro-tile (m = o / TN, n = o % TN).
#pragma unroll
                for (int q = 0; q < kSt; ++q) {
                    const int o = l + 8 * q, mm = gm + GM * (o / TN), nn = gn * TN + o % TN;
                    const uint8_t* mins = sSc + (mm * KS + s) * 32 + 16;
                    const float4* dr = sD + nn * (KS * 8) + 8 * s;
                    int summ = kMagicBits;
#pragma unroll
                    for (int c = 0; c < 8; ++c) {
                        const float4 gq = dr[c];
                        summ += mins[2 * c] * bsum_lo(gq) + mins[2 * c + 1] * bsum_hi(gq);
                    }
                    const float dmin = cn::mul(dr[0].x, h2f(ld16(sW + mm * SW + s * W::bytes + 82)));
                    st[q] = cn::sub(st[q], cn::mul(dmin, magic_to_float(summ)));
                }
            }
        }
    }
    // Close: xor 4, 2, 1 over the group's 8 lanes is canon::tree8; the min chains of rows
    // 2 j + h are closed by xor 2, 1 within lanes 4 h .. 4 h + 3 ((am0 + am2) + (am1 + am3)) and
    // fetched from lane 4 h of the group; Q2_K's st from the lane that kept it.
    const int base = threadIdx.x & 24;  // the group's first lane in the warp
#pragma unroll
    for (int m = 0; m < TM; ++m) {
        float mc[TN / 2];
        if constexpr (kMin) {
#pragma unroll
            for (int j = 0; j < TN / 2; ++j) {
                const float a = fadd_xor(mn[m][j], 2);
                mc[j] = fadd_xor(a, 1);
            }
        }
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            float v = fadd_xor(acc[m][n], 4);
            v = fadd_xor(v, 2);
            v = fadd_xor(v, 1);
            if constexpr (kMin) v = cn::add(v, __shfl_sync(kFull, mc[n >> 1], base + 4 * (n & 1)));
            if constexpr (T == kQ2_K) {
                const int o = m * TN + n;
                v = cn::add(v, __shfl_sync(kFull, st[o / 8], base + o % 8));
            }
            const int row = m0 + gm + GM * m, col = n0 + gn * TN + n;
            if (l == 0 && row < total && col < n_act) store(J, row, col, v, accumulate);
        }
    }
}

}  // namespace
}  // namespace zinc::cuda
