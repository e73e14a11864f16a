// zinc/backend/cuda/mmq.cu — the fast path's quantized matrix products for many activation rows
// (prefill, and decode batches above dmmv's row limit): an int8 tensor-core GEMM in the manner of
// llama.cpp's MMQ. docs/cuda.md ("Quantized GEMM on tensor cores (mmq)").
//
// y[j][r] (+)= sum_i W[r][i] * a_j[i], with W in its GGUF block layout and a_j packed by pack.cu
// (kernels.h): int8 codes and per 32 elements a float4 (d, s_lo, s_hi, sums). A weight chunk of
// 32 elements decodes (common.cuh decode_chunk) to 32 int8 codes q and per half of 16 a scale
// d_w and an offset m_w (w = d_w q + m_w), so one output's chunk is
//   d_a * (d_lo * sum_lo q.aq + d_hi * sum_hi q.aq) + m_lo * s_lo + m_hi * s_hi.
// The integer sums are tensor-core products: mma.sync m16n8k32 (one scale per chunk: the
// 32-element formats, Q4_K, Q5_K) or two m16n8k16 (a scale per 16: Q6_K, Q3_K, Q2_K), s8 x s8
// -> s32. The products' accumulator input is the float 1.5 * 2^23 as int bits, so the int32 result
// read as a float is 1.5 * 2^23 + sum exactly (|sum| < 2^22) and one FADD converts it (the
// int -> float conversion unit runs at a quarter of the FMA rate). The scales are applied in f32
// per chunk: acc += (d_w * d_a) * sum (+ m_w * s). Not bit-identical to the CPU tier (the exact
// path is dmmv_exact / dmmv_exact_gemm); tests/cuda/test_mmq.cpp holds it to a relative-error
// bound against a float64 reference.
//
// Tiles: a block of 256 threads (8 warps as WM x WN) computes BM weight rows x BN activation rows;
// each warp a TM x TN = (BM / WM) x (BN / WN) tile of 16 x 8 mma tiles. K is walked in stages of
// KC chunks: the block decodes its BM x KC weight chunks straight from global memory into shared
// memory (int8 codes, row stride KC * 32 + 16 bytes so that ldmatrix's 8 rows hit distinct banks;
// scales and offsets as one float4 per chunk and row), copies the BN x KC activation chunks and
// their float4s, then every warp loads its A and B fragments with ldmatrix.x4 and runs the mmas.
// Tile variants (mmq_variant): 1 = 128 x 64 (prefill), 2 = 32 x 64 (decode batches: more blocks
// for few activation rows), 3 = 128 x 128, 4 = 64 x 64, 5-7 = 1, 4, 2 pipelined (cp.async),
// 8 = 128 x 32 and 9 = 64 x 32 (decode batches of at most 32 rows), 10 = 8 pipelined; 0 picks by
// the number of blocks the shape gives (the GPU must get at least about two blocks per
// multiprocessor).
//
// Split-K (docs/perf-notes.md "mmq v6"): a decode batch gives few output tiles (4096 rows x 32
// activation rows: 32 tiles of 128 x 32 on 132 multiprocessors), and each tile's block walks all
// of k serially, bound by its own load latency. Given a scratch (MmqScratch), the launch splits k
// into gridDim.z slices, one block per (tile, slice); each writes its partial tile and the last
// to finish adds them in slice order (mmq_split.cuh): deterministic, not bitwise equal to the
// unsplit sum.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mmq_jobs.cuh"
#include "backend/cuda/mmq_mma.cuh"
#include "backend/cuda/mmq_split.cuh"

namespace zinc::cuda {
namespace {

using namespace dev;
using mmq_split::Split;
using namespace mmq_jobs;

constexpr int kThreads = 256;
constexpr int kMagicBits = 0x4B400000;  // 1.5 * 2^23 as float bits
constexpr float kMagic = 12582912.0f;   // 1.5 * 2^23

// How a type's chunk scales are applied: one scale per 32 (k32 mma) or one per 16 (two k16
// mmas); no offset, one per chunk (m_lo == m_hi), or one per half (Q2_K).
template <int T>
struct MmqType {
    static constexpr bool half = T == kQ6_K || T == kQ6_KR || T == kQ3_K || T == kQ2_K;
    static constexpr int mins = (T == kQ4_1 || T == kQ5_1 || T == kQ4_K || T == kQ5_K) ? 1
                                : T == kQ2_K                                           ? 2
                                                                                       : 0;
    static constexpr int qk = Traits<T>::qk;
    // K-quants: the activations (Q8_K) have one scale per 256, so the per-chunk sums are
    // accumulated without it and multiplied by it once per super-block.
    static constexpr bool fold = qk == 256;
};

// An activation chunk's float4 as staged: (d, s_lo, s_hi, s_lo + s_hi); for the K-quants
// (fold) the offsets' multipliers without d: (d, sum_lo, sum_hi, sum_lo + sum_hi) of the codes.
template <int T>
__device__ __forceinline__ float4 stage_act(const float4& v) {
    if constexpr (MmqType<T>::fold) {
        const uint32_t bits = __float_as_uint(v.w);
        const float lo = static_cast<float>(static_cast<int16_t>(bits & 0xffffu));
        const float hi = static_cast<float>(static_cast<int16_t>(bits >> 16));
        return make_float4(v.x, lo, hi, lo + hi);
    } else {
        return make_float4(v.x, v.y, v.z, v.y + v.z);
    }
}

template <int BM_, int BN_, int WM_, int WN_, int KC_>
struct Tile {
    static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, KC = KC_;
    static constexpr int TM = BM / WM, TN = BN / WN, MT = TM / 16, NT = TN / 8;
    static constexpr int SA = KC * 32 + 16;             // shared row stride of codes (bytes)
    static constexpr int kOffB = BM * SA;               // activation codes
    static constexpr int kOffS = kOffB + BN * SA;       // weight (d_lo, d_hi, m_lo, m_hi) [KC][BM]
    static constexpr int kOffD = kOffS + KC * BM * 16;  // activation (d, s_lo, s_hi, s) [KC][BN]
    static constexpr int kOffR = kOffD + KC * BN * 16;  // weight row pointers [BM]
    static constexpr int kSmem = kOffR + BM * 8;
    static_assert(WM * WN == kThreads / 32 && TM % 16 == 0 && TN % 16 == 0);
    static_assert((BM * KC) % kThreads == 0 && (BN * KC) % kThreads == 0);
};

__device__ __forceinline__ float magic_to_float(int biased) {
    return __int_as_float(biased) - kMagic;
}

// One staged chunk cc of a warp's tile: A and B fragments by ldmatrix, the scales, the mmas and
// the per-chunk scale application into acc.
template <int T, class G>
__device__ __forceinline__ void compute_chunk(const uint8_t* sA, const uint8_t* sB,
                                              const float4* sS, const float4* sD, int cc, int wm0,
                                              int wn0, int lane, float (&acc)[G::MT][G::NT][4],
                                              float (&part)[G::MT][G::NT][4], bool fold) {
    using Y = MmqType<T>;
    constexpr int BM = G::BM, BN = G::BN, SA = G::SA, MT = G::MT, NT = G::NT;
    const int g = lane >> 2, t = lane & 3;
    // ldmatrix row addresses: A (matrix j = lane / 8: rows +8 for j odd, bytes +16 for j >= 2);
    // B (two n8 tiles: bytes +16 for j odd, rows +8 for j >= 2).
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 16;
    const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 16;
    int a[MT][4], b[NT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
        ldmatrix_x4(a[mt], sA + (wm0 + 16 * mt + a_row) * SA + cc * 32 + a_col);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
        int r[4];
        ldmatrix_x4(r, sB + (wn0 + 16 * np + b_row) * SA + cc * 32 + b_col);
        b[2 * np][0] = r[0];
        b[2 * np][1] = r[1];
        b[2 * np + 1][0] = r[2];
        b[2 * np + 1][1] = r[3];
    }
    float4 ws[MT][2], as[NT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) ws[mt][h] = sS[cc * BM + wm0 + 16 * mt + g + 8 * h];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int j = 0; j < 2; ++j) as[nt][j] = sD[cc * BN + wn0 + 8 * nt + 2 * t + j];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            if constexpr (!Y::half) {
                int d[4];
                mma_k32(d, a[mt], b[nt], kMagicBits);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float4& w = ws[mt][e >> 1];
                    const float4& x = as[nt][e & 1];
                    if constexpr (Y::fold) {  // Q4_K, Q5_K: part += d_w S + m_w sum
                        float v = fmaf(w.x, magic_to_float(d[e]), part[mt][nt][e]);
                        if constexpr (Y::mins == 1) v = fmaf(w.z, x.w, v);
                        part[mt][nt][e] = v;
                    } else {
                        float v = fmaf(w.x * x.x, magic_to_float(d[e]), acc[mt][nt][e]);
                        if constexpr (Y::mins == 1) v = fmaf(w.z, x.w, v);
                        acc[mt][nt][e] = v;
                    }
                }
            } else {  // Q6_K, Q3_K, Q2_K (all fold)
                int dl[4], dh[4];
                mma_k16(dl, a[mt][0], a[mt][1], b[nt][0], kMagicBits);
                mma_k16(dh, a[mt][2], a[mt][3], b[nt][1], kMagicBits);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float4& w = ws[mt][e >> 1];
                    const float4& x = as[nt][e & 1];
                    float v = fmaf(w.x, magic_to_float(dl[e]), part[mt][nt][e]);
                    v = fmaf(w.y, magic_to_float(dh[e]), v);
                    if constexpr (Y::mins == 2) {
                        v = fmaf(w.z, x.y, v);
                        v = fmaf(w.w, x.z, v);
                    }
                    part[mt][nt][e] = v;
                }
            }
            if constexpr (Y::fold) {
                if (fold) {  // the super-block's last chunk: acc += d_a * part
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        acc[mt][nt][e] = fmaf(as[nt][e & 1].x, part[mt][nt][e], acc[mt][nt][e]);
                        part[mt][nt][e] = 0.0f;
                    }
                }
            }
        }
    }
}

// A decoded chunk into the shared tiles: codes at row r, chunk cc; scales at [cc][r].
template <class G>
__device__ __forceinline__ void put_chunk(uint8_t* sA, float4* sS, int r, int cc, const Chunk& ch) {
    uint4 lo, hi;
    lo.x = static_cast<unsigned>(ch.q[0]);
    lo.y = static_cast<unsigned>(ch.q[1]);
    lo.z = static_cast<unsigned>(ch.q[2]);
    lo.w = static_cast<unsigned>(ch.q[3]);
    hi.x = static_cast<unsigned>(ch.q[4]);
    hi.y = static_cast<unsigned>(ch.q[5]);
    hi.z = static_cast<unsigned>(ch.q[6]);
    hi.w = static_cast<unsigned>(ch.q[7]);
    uint4* dst = reinterpret_cast<uint4*>(sA + r * G::SA + cc * 32);
    dst[0] = lo;
    dst[1] = hi;
    sS[cc * G::BM + r] = make_float4(ch.d_lo, ch.d_hi, ch.m_lo, ch.m_hi);
}

// The block's outputs: y = acc (+ bias), or y += that.
template <class G>
__device__ __forceinline__ void store_tile(const Jobs& J, const float (&acc)[G::MT][G::NT][4],
                                           int m0, int n0, int wm0, int wn0, int lane, int lim,
                                           bool accumulate) {
    const int total = J.row_end[J.n_jobs - 1];
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < G::MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < G::NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                int row = m0 + wm0 + 16 * mt + g + 8 * (e >> 1);
                const int col = n0 + wn0 + 8 * nt + 2 * t + (e & 1);
                if (row >= total || col >= lim) continue;
                const MatJob& m = J.m[pick_job(J, row)];
                float v = acc[mt][nt][e];
                if (m.bias) v += m.bias[row];
                float* y = m.y + static_cast<size_t>(col) * m.ldy + row;
                *y = accumulate ? *y + v : v;
            }
        }
    }
}

#if defined(ZINC_SIMT_EMULATION)
#define ZINC_MMQ_SMEM(bytes) alignas(16) static uint8_t smem[bytes]
#else
#define ZINC_MMQ_SMEM(bytes) extern __shared__ __align__(16) uint8_t smem[]
#endif

// Variants 1-4: each stage's weight chunks decoded straight from global memory.
// Blocks per SM the register allocation of mmq_kernel must allow (its stages are single-buffered:
// a second block overlaps one's loads with the other's mmas); 128 x 128 cannot.
template <class G>
constexpr int min_blocks() {
    return G::BM * G::BN > 128 * 64 ? 1 : 2;
}

template <int T, class G>
__global__ void __launch_bounds__(kThreads, min_blocks<G>())
    mmq_kernel(Jobs J, int k, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
               int n_act, bool accumulate, Split sp) {
    using Y = MmqType<T>;
    constexpr int BM = G::BM, BN = G::BN, KC = G::KC, SA = G::SA;
    ZINC_MMQ_SMEM(G::kSmem);
    uint8_t* sA = smem;
    uint8_t* sB = smem + G::kOffB;
    float4* sS = reinterpret_cast<float4*>(smem + G::kOffS);
    float4* sD = reinterpret_cast<float4*>(smem + G::kOffD);
    const uint8_t** sRow = reinterpret_cast<const uint8_t**>(smem + G::kOffR);
    Cols cl;
    if (!block_cols<BN>(J, n_act, cl)) return;
    const int m0 = blockIdx.x * BM, n0 = cl.n0, lim = cl.lim;
    const int nch = k / 32, nb = k / Y::qk;
    set_rows<G::BM, kThreads>(J, sRow, m0, cl.e);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm0 = (warp % G::WM) * G::TM, wn0 = (warp / G::WM) * G::TN;
    float acc[G::MT][G::NT][4], part[G::MT][G::NT][4];  // part: the super-block's (fold)
#pragma unroll
    for (int i = 0; i < G::MT; ++i)
#pragma unroll
        for (int j = 0; j < G::NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = part[i][j][e] = 0.0f;

    const int cb = gridDim.z > 1 ? static_cast<int>(blockIdx.z) * sp.chunks : 0;
    const int ce = gridDim.z > 1 ? min(nch, cb + sp.chunks) : nch;
    for (int c0 = cb; c0 < ce; c0 += KC) {
        const int kc = min(KC, ce - c0);
        __syncthreads();  // sRow written; the previous stage consumed
#pragma unroll
        for (int i = 0; i < BM * KC / kThreads; ++i) {
            const int u = threadIdx.x + kThreads * i, r = u / KC, cc = u % KC;
            if (cc < kc) {
                Chunk ch;
                decode_chunk<T>(sRow[r], c0 + cc, ch, nb);
                put_chunk<G>(sA, sS, r, cc, ch);
            }
        }
#pragma unroll
        for (int i = 0; i < BN * KC * 2 / kThreads; ++i) {
            const int u = threadIdx.x + kThreads * i, n = u / (2 * KC), p = u % (2 * KC);
            if (p / 2 < kc) {
                const int8_t* src = aq + static_cast<size_t>(min(n0 + n, lim - 1)) * k +
                                    static_cast<size_t>(c0) * 32 + 16 * p;
                *reinterpret_cast<uint4*>(sB + n * SA + 16 * p) =
                    *reinterpret_cast<const uint4*>(src);
            }
        }
#pragma unroll
        for (int i = 0; i < BN * KC / kThreads; ++i) {
            const int u = threadIdx.x + kThreads * i, n = u / KC, cc = u % KC;
            if (cc < kc) {
                const float4 v = ad[static_cast<size_t>(min(n0 + n, lim - 1)) * nch + c0 + cc];
                sD[cc * BN + n] = stage_act<T>(v);
            }
        }
        __syncthreads();
        for (int cc = 0; cc < kc; ++cc)
            compute_chunk<T, G>(sA, sB, sS, sD, cc, wm0, wn0, lane, acc, part,
                                ((c0 + cc) & 7) == 7);
    }
    if (mmq_split::fixup<kThreads>(sp, acc))
        store_tile<G>(J, acc, m0, n0, wm0, wn0, lane, lim, accumulate);
}

// Variants 5-7 (stages of 8 chunks = 256 elements), double-buffered with cp.async: while stage s
// is decoded and multiplied, the copies of stage s + 1 (each weight row's 16-byte-aligned window
// of raw block bytes, the activation codes and their float4s) are in flight into the other
// buffer; the weights are decoded from shared memory (decode_chunk on the staged window).
template <int T, class G>
struct Pipe {
    static constexpr int SB = (256 / Traits<T>::qk) * Traits<T>::bytes;  // raw bytes per stage
    static constexpr int U = (SB + 30) / 16;  // 16-byte units of a row's aligned window
    static constexpr int kOffA = 0, kOffS = G::BM * G::SA, kOffD = kOffS + G::KC * G::BM * 16,
                         kOffR = kOffD + G::KC * G::BN * 16, kOffRing = kOffR + G::BM * 8;
    // one ring slot: raw weight windows, activation codes, activation float4s
    static constexpr int kRaw = 0, kB = G::BM * U * 16, kDraw = kB + G::BN * G::SA,
                         kSlot = kDraw + G::KC * G::BN * 16;
    static constexpr int kSmem = kOffRing + 2 * kSlot;
    static_assert(G::KC == 8 && kOffRing % 16 == 0 && kSlot % 16 == 0);
    // (the Tile's own layout, unused here, named so that nvcc does not warn of it)
    static_assert(G::kOffB > 0 && G::kOffS > 0 && G::kOffD > 0 && G::kOffR > 0 && G::kSmem > 0);
};

template <int T, class G>
__global__ void __launch_bounds__(kThreads)
    mmq_pipe_kernel(Jobs J, int k, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
                    int n_act, bool accumulate, Split sp) {
    using P = Pipe<T, G>;
    constexpr int BM = G::BM, BN = G::BN, KC = G::KC, SA = G::SA, U = P::U;
    constexpr int bytes = Traits<T>::bytes, per_stage = 256 / Traits<T>::qk;  // blocks per stage
    ZINC_MMQ_SMEM(P::kSmem);
    uint8_t* sA = smem + P::kOffA;
    float4* sS = reinterpret_cast<float4*>(smem + P::kOffS);
    float4* sD = reinterpret_cast<float4*>(smem + P::kOffD);
    const uint8_t** sRow = reinterpret_cast<const uint8_t**>(smem + P::kOffR);
    uint8_t* ring = smem + P::kOffRing;
    Cols cl;
    if (!block_cols<BN>(J, n_act, cl)) return;
    const int m0 = blockIdx.x * BM, n0 = cl.n0, lim = cl.lim;
    const int nch = k / 32, nst = (nch + KC - 1) / KC;
    set_rows<G::BM, kThreads>(J, sRow, m0, cl.e);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm0 = (warp % G::WM) * G::TM, wn0 = (warp / G::WM) * G::TN;
    float acc[G::MT][G::NT][4], part[G::MT][G::NT][4];
#pragma unroll
    for (int i = 0; i < G::MT; ++i)
#pragma unroll
        for (int j = 0; j < G::NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = part[i][j][e] = 0.0f;
    __syncthreads();  // sRow
    // Issue the copies of stage s into ring slot s % 2 (units past a row's window, or past k, are
    // skipped) and commit them as one group.
    auto fetch = [&](int s) {
        uint8_t* slot = ring + (s & 1) * P::kSlot;
        const int c0 = s * KC, kc = min(KC, nch - c0);
        const int sb = (kc * 32 / Traits<T>::qk) * bytes;  // this stage's bytes per row
        for (int u = threadIdx.x; u < BM * U; u += kThreads) {
            const int r = u / U, j = u - r * U;
            const uintptr_t a = reinterpret_cast<uintptr_t>(sRow[r]) +
                                static_cast<uintptr_t>(s) * per_stage * bytes;
            const uintptr_t start = a & ~static_cast<uintptr_t>(15);
            if (start + 16 * j < a + sb)
                cp_async16(slot + P::kRaw + 16 * u, reinterpret_cast<const void*>(start + 16 * j));
        }
        for (int u = threadIdx.x; u < BN * KC * 2; u += kThreads) {
            const int n = u / (2 * KC), p = u % (2 * KC);
            if (p / 2 < kc)
                cp_async16(slot + P::kB + n * SA + 16 * p,
                           aq + static_cast<size_t>(min(n0 + n, lim - 1)) * k +
                               static_cast<size_t>(c0) * 32 + 16 * p);
        }
        for (int u = threadIdx.x; u < BN * KC; u += kThreads) {
            const int n = u / KC, cc = u % KC;
            if (cc < kc)
                cp_async16(slot + P::kDraw + 16 * (cc * BN + n),
                           ad + static_cast<size_t>(min(n0 + n, lim - 1)) * nch + c0 + cc);
        }
        cp_async_commit();
    };
    // this block's stages (split-K: its slice of sp.chunks = a whole number of stages)
    const int s_begin = gridDim.z > 1 ? static_cast<int>(blockIdx.z) * (sp.chunks / KC) : 0;
    const int s_end = gridDim.z > 1 ? min(nst, s_begin + sp.chunks / KC) : nst;
    fetch(s_begin);
    for (int s = s_begin; s < s_end; ++s) {
        const int kc = min(KC, nch - s * KC);
        const uint8_t* slot = ring + (s & 1) * P::kSlot;
        cp_async_wait_all();  // this thread's copies of stage s (the only group in flight)
        __syncthreads();      // everyone's; and stage s - 1's mmas are done with its slot
        if (s + 1 < s_end) fetch(s + 1);
        const float4* draw = reinterpret_cast<const float4*>(slot + P::kDraw);
        for (int u = threadIdx.x; u < BN * KC; u += kThreads)
            if (u / BN < kc) sD[u] = stage_act<T>(draw[u]);
#pragma unroll
        for (int i = 0; i < BM * KC / kThreads; ++i) {
            const int u = threadIdx.x + kThreads * i, r = u / KC, cc = u % KC;
            if (cc < kc) {
                const uintptr_t a = reinterpret_cast<uintptr_t>(sRow[r]) +
                                    static_cast<uintptr_t>(s) * per_stage * bytes;
                Chunk ch;
                decode_chunk<T>(slot + P::kRaw + r * U * 16 + (a & 15), cc, ch, 0);
                put_chunk<G>(sA, sS, r, cc, ch);
            }
        }
        __syncthreads();
        for (int cc = 0; cc < kc; ++cc)
            compute_chunk<T, G>(sA, slot + P::kB, sS, sD, cc, wm0, wn0, lane, acc, part,
                                cc == KC - 1);
        // (the next iteration's first barrier also orders these reads of sA / sS / sD / the slot
        // before the next stage's decode and copies overwrite them)
    }
    if (mmq_split::fixup<kThreads>(sp, acc))
        store_tile<G>(J, acc, m0, n0, wm0, wn0, lane, lim, accumulate);
}

// ---- launches ----------------------------------------------------------------------------------

using TileP = Tile<128, 64, 4, 2, 4>;   // variant 1: prefill
using TileD = Tile<32, 64, 2, 4, 8>;    // variant 2: decode batches (few activation rows)
using TileW = Tile<128, 128, 4, 2, 4>;  // variant 3: wide
using TileM = Tile<64, 64, 2, 4, 4>;    // variant 4: medium
using TileP8 = Tile<128, 64, 4, 2, 8>;  // variant 5: as 1, pipelined stages of 8 chunks
using TileM8 = Tile<64, 64, 2, 4, 8>;   // variant 6: as 4, pipelined
// variant 7: TileD, pipelined
using TileN = Tile<128, 32, 8, 1, 8>;  // variant 8: narrow (decode batches up to 32), split-K
using TileS = Tile<64, 32, 4, 2, 8>;   // variant 9: as 8, half the rows
// variant 10: TileN, pipelined
constexpr int kVariants = 11;

#if defined(ZINC_SIMT_EMULATION)
int sm_count() {
    return 132;
}
template <class F>
int blocks_per_sm(F, int) {
    return 2;
}
#define ZINC_MMQ_LAUNCH(kernel, grid, smem, stream, ...) \
    ((void)(smem), (void)(stream), zinc_simt::launch(kernel, grid, kThreads, __VA_ARGS__))
#else
// Resident blocks of `kernel` per multiprocessor (its registers and shared memory), at least 1.
template <class F>
int blocks_per_sm(F kernel, int smem) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kThreads, smem) != cudaSuccess)
        return 1;
    return n > 0 ? n : 1;
}
int sm_count() {
    static const int n = [] {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            v <= 0)
            return 132;
        return v;
    }();
    return n;
}
#define ZINC_MMQ_LAUNCH(kernel, grid, smem, stream, ...) \
    kernel<<<grid, kThreads, smem, stream>>>(__VA_ARGS__)
#endif

using KernelFn = void (*)(Jobs, int, const int8_t*, const float4*, int, bool, Split);
template <int T, class G, bool kPipe>
constexpr KernelFn kernel_for() {
    if constexpr (kPipe)
        return mmq_pipe_kernel<T, G>;
    else
        return mmq_kernel<T, G>;
}
template <int T, class G, bool kPipe>
constexpr int smem_bytes() {
    if constexpr (kPipe)
        return Pipe<T, G>::kSmem;
    else
        return G::kSmem;
}

// How many k slices (split-K, gridDim.z) a launch of `tiles` output tiles over nch chunks uses:
// the count that fills the GPU's resident-block slots best (slots: multiprocessors x blocks per
// multiprocessor), each slice at least kMinSliceChunks chunks, the partials within the scratch.
// 1 when the tiles alone fill a wave or a split would not help. `forced` > 0 asks for that count
// (bounded the same way).
constexpr int kMinSliceChunks = 16, kMaxSplit = 16;
int choose_split(long tiles, int nch, long slots, long tile_floats, const MmqScratch* sc,
                 int forced) {
    if (sc == nullptr || sc->partial == nullptr || sc->counters == nullptr) return 1;
    if (tiles > sc->n_counters) return 1;
    auto fits = [&](int ks) {
        return ks <= nch / kMinSliceChunks &&
               tiles * ks * tile_floats <= static_cast<long>(sc->partial_floats);
    };
    if (forced > 0) {
        int ks = forced > kMaxSplit ? kMaxSplit : forced;
        while (ks > 1 && !fits(ks)) --ks;
        return ks;
    }
    if (tiles >= slots) return 1;
    int best = 1;
    double best_util = static_cast<double>(tiles) / static_cast<double>(slots);
    for (int ks = 2; ks <= kMaxSplit && fits(ks); ++ks) {
        const long blocks = tiles * ks, waves = (blocks + slots - 1) / slots;
        const double util = static_cast<double>(blocks) / static_cast<double>(waves * slots);
        if (util > best_util + 0.05) best = ks, best_util = util;  // ties: fewer partials
    }
    return best;
}

// Launches one kernel; false (nothing launched) when its shared memory cannot be granted.
// ksplit: 0 = choose_split's choice, 1 = no split, n > 1 = n slices (bounded by choose_split).
template <int T, class G, bool kPipe>
bool launch(const Jobs& J, int total, int k, const int8_t* aq, const float4* ad, int n_act,
            bool acc, cudaStream_t s, const MmqScratch* sc, int ksplit) {
    constexpr auto kernel = kernel_for<T, G, kPipe>();
    constexpr int smem = smem_bytes<T, G, kPipe>();
#if !defined(ZINC_SIMT_EMULATION)
    static const bool attr_ok = [] {  // more than 48 KB of dynamic shared memory needs an opt-in
        if (smem <= 48 * 1024) return true;
        return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) ==
               cudaSuccess;
    }();
    if (!attr_ok) return false;
#endif
    static const int per_sm = blocks_per_sm(kernel, smem);
    const bool grouped = J.g.tile_expert != nullptr;  // grid.y: the grouping's tile bound
    const dim3 tiles((total + G::BM - 1) / G::BM,
                     grouped ? J.g.max_tiles : (n_act + G::BN - 1) / G::BN);
    const long n_tiles = static_cast<long>(tiles.x) * tiles.y;
    const int nch = k / 32;
    const int ks = ksplit == 1 || grouped
                       ? 1
                       : choose_split(n_tiles, nch, static_cast<long>(sm_count()) * per_sm,
                                      static_cast<long>(G::BM) * G::BN, sc, ksplit);
    Split sp;
    dim3 grid = tiles;
    if (ks > 1) {
        // whole stages of KC chunks and whole K-quant super-blocks (8 chunks) per slice
        constexpr int unit = G::KC > 8 ? G::KC : 8;
        static_assert(unit % G::KC == 0 && unit % 8 == 0);
        const int per = (nch + ks - 1) / ks;
        sp.chunks = (per + unit - 1) / unit * unit;
        grid.z = static_cast<unsigned>((nch + sp.chunks - 1) / sp.chunks);  // no empty slice
        sp.part = sc->partial;
        sp.cnt = sc->counters;
    }
    ZINC_MMQ_LAUNCH(kernel, grid, smem, s, J, k, aq, ad, n_act, acc, sp);
    return true;
}

template <class G, bool kPipe>
bool run_type(int type, const Jobs& J, int total, int k, const int8_t* aq, const float4* ad,
              int n_act, bool acc, cudaStream_t s, const MmqScratch* sc, int ks) {
    switch (type) {
        case kQ4_0:
            return launch<kQ4_0, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ4_1:
            return launch<kQ4_1, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ5_0:
            return launch<kQ5_0, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ5_1:
            return launch<kQ5_1, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ8_0:
            return launch<kQ8_0, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ2_K:
            return launch<kQ2_K, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ3_K:
            return launch<kQ3_K, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ4_K:
            return launch<kQ4_K, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ5_K:
            return launch<kQ5_K, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ6_K:
            return launch<kQ6_K, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kMXFP4:
            return launch<kMXFP4, G, kPipe>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        // The repacked layouts (repack.h): variants 1-4 only (the pipelined kernel stages
        // contiguous block bytes).
        case kQ4_0R:
            if constexpr (kPipe)
                return false;
            else
                return launch<kQ4_0R, G, false>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ8_0R:
            if constexpr (kPipe)
                return false;
            else
                return launch<kQ8_0R, G, false>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        case kQ6_KR:
            if constexpr (kPipe)
                return false;
            else
                return launch<kQ6_KR, G, false>(J, total, k, aq, ad, n_act, acc, s, sc, ks);
        default:
            return false;
    }
}

// Alignment decode_chunk needs of every weight row start: Q4_K and the repacked layouts read
// 16-byte vectors, the 4-byte-aligned formats 32-bit words, MXFP4 (17-byte blocks) bytes, the
// rest 16-bit halves.
int weight_align(int type) {
    switch (type) {
        case kMXFP4:
            return 1;
        case kQ4_K:
        case kQ4_0R:
        case kQ8_0R:
        case kQ6_KR:
            return 16;
        case kQ4_1:
        case kQ5_1:
        case kQ5_K:
        case kQ2_K:
            return 4;
        default:
            return 2;
    }
}

// Variant 0's choice by shape; `split`: a split-K scratch was given (a decode batch of at most 32
// rows then takes the narrow tiles, which split-K spreads over the GPU: 64-row ones up to 8192
// weight rows, H200 run 6 (docs/perf-notes.md "mmq v6"): 1024 x 4096 at 32 rows 0.019 ms with
// 64-row tiles, 0.038 ms with 128-row ones; 4096 and 6144 rows 10 % faster; 14336 and 28672 rows
// best with 128-row tiles).
int auto_variant(int total, int n_act, bool split) {
    const long sms = sm_count(), target = 2 * sms;
    auto blocks = [&](int bm, int bn) {
        return static_cast<long>((total + bm - 1) / bm) * ((n_act + bn - 1) / bn);
    };
    if (split && n_act <= TileN::BN) return total <= 8192 ? 9 : 8;
    if (n_act <= TileD::BN) {
        // One column of tiles (decode batches): the tallest tile that still gives every SM about
        // 1.5 blocks. H200 run 1 (docs/perf-notes.md "mmq"): 14336 rows x 32: 64-row tiles
        // 0.093 ms, 32-row 0.142 ms (448 blocks: 1.13 waves at 3 per SM); 128256 rows: 128-row
        // tiles best; 4096 rows: 32-row tiles.
        if (2 * blocks(TileP::BM, TileP::BN) >= 3 * sms) return 1;
        if (2 * blocks(TileM::BM, TileM::BN) >= 3 * sms) return 4;
        return 2;
    }
    if (blocks(TileP::BM, TileP::BN) >= target) return 1;
    if (blocks(TileM::BM, TileM::BN) >= target) return 4;
    return 2;
}

}  // namespace

bool mmq_supports(int type) {
    switch (type) {
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
        case kQ4_0R:
        case kQ8_0R:
        case kQ6_KR:
        case kMXFP4:
            return true;
        default:
            return false;
    }
}

int mmq_variants() {
    return kVariants;
}

namespace {

// mmq_variant's and mmq_grouped's checks and dispatch (groups: null for an ungrouped launch).
bool run_variant(int variant, int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                 const float4* ad, int n_act, bool accumulate, cudaStream_t s,
                 const MmqScratch* scratch, int ksplit, const MmqGroups* groups) {
    if (variant < 0 || variant >= kVariants || !mmq_supports(type) || ksplit < 0) return false;
    if (n_jobs < 1 || n_jobs > 3 || k <= 0 || k % 32 != 0) return false;
    if (reinterpret_cast<uintptr_t>(aq) % 16 != 0) return false;  // 16-byte activation loads
    const int qk = ((type >= kQ2_K && type <= kQ6_K) || type == kQ6_KR) ? 256 : 32;
    if (k % qk != 0) return false;
    Jobs J{};
    J.n_jobs = n_jobs;
    if (groups != nullptr) J.g = *groups;
    int total = 0;
    const int al = weight_align(type);
    for (int i = 0; i < n_jobs; ++i) {
        if (jobs[i].n_out > 0 &&
            (reinterpret_cast<uintptr_t>(jobs[i].w) % al != 0 || jobs[i].row_bytes % al != 0))
            return false;
        J.m[i] = jobs[i];
        total += jobs[i].n_out;
        J.row_end[i] = total;
    }
    if (total == 0 || n_act <= 0) return true;
    const MmqScratch* sc = ksplit == 1 || groups != nullptr ? nullptr : scratch;
    if (groups != nullptr) {
        // Tiles of kMmqGroupCols activation rows only (the grouping's tile table is cut for
        // them): 128 weight rows when that still gives the GPU two blocks per multiprocessor.
        if (variant == 0)
            variant = static_cast<long>((total + TileN::BM - 1) / TileN::BM) * groups->max_tiles >=
                              2L * sm_count()
                          ? 8
                          : 9;
        if (variant < 8 || groups->max_tiles <= 0) return false;
    } else if (variant == 0) {
        variant = auto_variant(total, n_act, sc != nullptr && sc->partial != nullptr);
    }
    const int ks = ksplit;
    switch (variant) {
        case 1:
            return run_type<TileP, false>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 2:
            return run_type<TileD, false>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 3:
            return run_type<TileW, false>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 4:
            return run_type<TileM, false>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 5:
            return run_type<TileP8, true>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 6:
            return run_type<TileM8, true>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 7:
            return run_type<TileD, true>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 8:
            return run_type<TileN, false>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        case 9:
            return run_type<TileS, false>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
        default:
            return run_type<TileN, true>(type, J, total, k, aq, ad, n_act, accumulate, s, sc, ks);
    }
}

}  // namespace

bool mmq_variant(int variant, int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                 const float4* ad, int n_act, bool accumulate, cudaStream_t s,
                 const MmqScratch* scratch, int ksplit) {
    return run_variant(variant, type, jobs, n_jobs, k, aq, ad, n_act, accumulate, s, scratch,
                       ksplit, nullptr);
}

bool mmq(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
         int n_act, bool accumulate, cudaStream_t s, const MmqScratch* scratch) {
    return mmq_variant(0, type, jobs, n_jobs, k, aq, ad, n_act, accumulate, s, scratch, 0);
}

bool mmq_grouped(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                 const float4* ad, int n_act, const MmqGroups& groups, cudaStream_t s,
                 int variant) {
    if (groups.tile_expert == nullptr || groups.tile_c0 == nullptr || groups.tile_c1 == nullptr ||
        groups.n_tiles == nullptr)
        return false;
    for (int i = 0; i < n_jobs && i < 3; ++i)
        if (jobs[i].expert != nullptr) return false;  // the grouping replaces per-row gathering
    return run_variant(variant, type, jobs, n_jobs, k, aq, ad, n_act, false, s, nullptr, 1,
                       &groups);
}

}  // namespace zinc::cuda
