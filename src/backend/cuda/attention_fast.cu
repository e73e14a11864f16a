// zinc/backend/cuda/attention_fast.cu — fast-mode prefill attention: FlashAttention-2 (Dao 2023,
// "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning", alg. 1) on
// tensor cores (mma.sync m16n8k16, f16 inputs, f32 accumulation) over the paged f16 KV cache that
// rope.cu writes and attention.cu reads (Kwon et al. 2023): causal, grouped-query heads, sliding
// window, attention sinks. Exact mode (ZINC_EXACT=1) never runs it: attention.cu keeps the CPU
// tier's bits; this kernel is held to a relative-error bound (tests/cuda/test_attn.cpp).
//
// Work split: a block of 4 warps takes 64 consecutive rows of the step and one query head
// (grid: row tiles x n_head, the tiles with the latest positions first). The rows of a tile that
// share a block table (one sequence: a prefill chunk's rows are consecutive positions) form a
// "run"; a tile walks its runs one after another (a tile crossing a sequence boundary, or a
// few decode rows mixed in, costs one pass per sequence). Per run, keys are walked in tiles of
// 64 positions from the run's lowest attended position (rounded down to 64) to its highest:
//   K tile and V tile -> shared memory (cp.async 16-byte copies; positions outside the run's
//   range are zero-filled so masked products never touch unwritten cache rows);
//   each warp: S (16 x 64) = Q (16 x D, f16 in shared memory) K^T, masked per row (key position
//   in [max(0, pos - window + 1), pos]) and scaled by scale * log2(e); online softmax in f32 with
//   exp2 (per row: running max m, running sum l, O rescaled by exp2(m_old - m_new)); P (f16,
//   straight from the S accumulators into A fragments) times V (ldmatrix.trans) into O (f32).
// Loads of the next K tile overlap the softmax and P V of the current one; the next V tile's
// load overlaps the next S. A warp skips the mma work of a key tile none of its rows attends.
// Sinks: at the end O and l are rescaled to m' = max(m, sink) and l += exp2(sink - m').
// Shared memory rows are padded by 8 f16 (16 bytes) so the 8 rows of an ldmatrix land in
// distinct banks. Fragment layouts: attn_mma.cuh.
#include <climits>
#include <cmath>

#include "backend/cuda/attn_mma.cuh"
#include "backend/cuda/kernels.h"

#if defined(ZINC_SIMT_EMULATION)
#include <atomic>
#endif

namespace zinc::cuda {
#if defined(ZINC_SIMT_EMULATION)
// The host model runs every warp through every tile (kSkip is off there); it counts the tiles a
// warp would have skipped on the device although one of its rows attends a key of them, so the
// skip rule is checked too (tests/unit/cuda_emul/attn_fast_emul_test.cpp expects 0).
std::atomic<int> fa_skip_violations{0};
#endif
namespace {

using namespace fa;

constexpr int kBM = 64;  // query rows per block (4 warps x 16)
constexpr int kBN = 64;  // key positions per tile
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
#if defined(ZINC_SIMT_EMULATION)
constexpr bool kSkip = false;  // the shim needs every thread at every mma / shuffle
#else
constexpr bool kSkip = true;
#endif

template <int D>
struct Smem {
    static constexpr int kLd = D + 8;  // f16 per shared row
    static constexpr int kHalves = (kBM + 2 * kBN) * kLd;
    static constexpr int kBytes = kHalves * 2 + 3 * kBM * 4;
};

#if defined(ZINC_SIMT_EMULATION)
#define ZINC_FA_SMEM(bytes) alignas(16) static uint8_t smem[bytes]
#else
#define ZINC_FA_SMEM(bytes) extern __shared__ __align__(16) uint8_t smem[]
#endif

template <int D>
__global__ void __launch_bounds__(kThreads) fa_prefill_kernel(AttnJob j, int row0, int row_end) {
    ZINC_FA_SMEM(Smem<D>::kBytes);
    constexpr int kLd = Smem<D>::kLd;
    constexpr int kCpr = D / 8;              // 16-byte chunks per K/V row
    constexpr int kRstep = kThreads / kCpr;  // rows one pass of the block copies
    constexpr int kRpt = kBN / kRstep;       // rows each thread copies per tile
    constexpr int kNt = D / 8;               // n-tiles of O (8 dims each)
    uint16_t* sQ = reinterpret_cast<uint16_t*>(smem);
    uint16_t* sK = sQ + kBM * kLd;
    uint16_t* sV = sK + kBN * kLd;
    int* sPos = reinterpret_cast<int*>(sV + kBN * kLd);
    int* sLo = sPos + kBM;
    int* sBt = sLo + kBM;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);  // latest positions first
    const int r0 = row0 + tile * kBM;
    const int nr = min(kBM, row_end - r0);
    const int h = blockIdx.y;
    const int hkv = h / (j.n_head / j.n_head_kv);
    const size_t kvd = static_cast<size_t>(j.n_head_kv) * D;
    const int bs = j.block_size;

    if (tid < kBM) {
        int p = -1, lo = 0, b = -1;
        if (tid < nr) {
            p = j.row_pos[r0 + tid];
            lo = j.window > 0 ? max(0, p - j.window + 1) : 0;
            b = j.row_bt[r0 + tid];
        }
        sPos[tid] = p;
        sLo[tid] = lo;
        sBt[tid] = b;
    }
    // Q tile as f16 (rows past the step's end: zeros)
    for (int i = tid; i < kBM * (D / 4); i += kThreads) {
        const int r = i / (D / 4), c = (i % (D / 4)) * 4;
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if (r < nr)
            v = *reinterpret_cast<const float4*>(j.q + static_cast<size_t>(r0 + r) * j.q_ld +
                                                 static_cast<size_t>(h) * D + c);
        uint2 pk;
        pk.x = pack_h2(v.x, v.y);
        pk.y = pack_h2(v.z, v.w);
        *reinterpret_cast<uint2*>(sQ + r * kLd + c) = pk;
    }
    __syncthreads();

    const float sl2 = j.scale * kLog2e;
    const uint16_t* kcache = j.k_cache + static_cast<size_t>(hkv) * D;
    const uint16_t* vcache = j.v_cache + static_cast<size_t>(hkv) * D;
    const int rA = warp * 16 + g, rB = rA + 8;  // this thread's two rows (local)
    const int ccol = (tid % kCpr) * 8, crow = tid / kCpr;

    for (int a = 0; a < nr;) {
        const int bt_off = sBt[a];
        int b = a + 1;
        while (b < nr && sBt[b] == bt_off) ++b;
        int klo = INT_MAX, khi = -1, wlo = INT_MAX, whi = -1;
        for (int i = a; i < b; ++i) {
            klo = min(klo, sLo[i]);
            khi = max(khi, sPos[i]);
            if (i >> 4 == warp) {
                wlo = min(wlo, sLo[i]);
                whi = max(whi, sPos[i]);
            }
        }
        const bool actA = rA >= a && rA < b, actB = rB >= a && rB < b;
        const int posA = actA ? sPos[rA] : -1, loA = sLo[rA];
        const int posB = actB ? sPos[rB] : -1, loB = sLo[rB];
        const int* bt = j.bt + bt_off;
        const int kt0 = klo - klo % kBN;
        const int n_tiles = (khi - kt0) / kBN + 1;

        int sl[kRpt];
        auto slots_for = [&](int kb) {
#pragma unroll
            for (int k = 0; k < kRpt; ++k) {
                const int p = kb + crow + k * kRstep;
                sl[k] = (p >= klo && p <= khi) ? bt[p / bs] * bs + p % bs : -1;
            }
        };
        auto issue = [&](uint16_t* dst, const uint16_t* cache) {
#pragma unroll
            for (int k = 0; k < kRpt; ++k) {
                uint16_t* d = dst + (crow + k * kRstep) * kLd + ccol;
                if (sl[k] >= 0)
                    cp16(d, cache + static_cast<size_t>(sl[k]) * kvd + ccol);
                else
                    *reinterpret_cast<uint4*>(d) = uint4{0u, 0u, 0u, 0u};
            }
            cp_commit();
        };

        float o[kNt][4];
#pragma unroll
        for (int i = 0; i < kNt; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
        float mA = -INFINITY, mB = -INFINITY, lA = 0.f, lB = 0.f;

        slots_for(kt0);
        issue(sK, kcache);
        issue(sV, vcache);
        for (int jt = 0; jt < n_tiles; ++jt) {
            const int kb = kt0 + jt * kBN;
            const bool needed = whi >= kb && wlo <= kb + kBN - 1;  // warp-uniform
            const bool work = !kSkip || needed;
            cp_wait1();  // K tile jt (only V tile jt may still be in flight)
            __syncthreads();
            float s[8][4];
#pragma unroll
            for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
            if (work) {
#pragma unroll
                for (int kk = 0; kk < D / 16; ++kk) {
                    uint32_t qa[4];
                    ldsm_x4(qa, sQ + (warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd +
                                    kk * 16 + (lane >> 4) * 8);
#pragma unroll
                    for (int np = 0; np < 4; ++np) {
                        uint32_t kf[4];
                        ldsm_x4(kf, sK + (np * 16 + (lane & 7) + (lane >> 4) * 8) * kLd + kk * 16 +
                                        ((lane >> 3) & 1) * 8);
                        mma16816(s[2 * np], qa, kf[0], kf[1]);
                        mma16816(s[2 * np + 1], qa, kf[2], kf[3]);
                    }
                }
            }
            __syncthreads();  // every warp is done with sK
            if (jt + 1 < n_tiles) {
                slots_for(kb + kBN);
                issue(sK, kcache);
            } else {
                cp_commit();  // keep one group per stage
            }
            uint32_t pa[4][4];
            if (work) {
                float mxA = -INFINITY, mxB = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int key = kb + nt * 8 + 2 * t + e;
                        const float va = (key >= loA && key <= posA) ? s[nt][e] * sl2 : -INFINITY;
                        const float vb =
                            (key >= loB && key <= posB) ? s[nt][2 + e] * sl2 : -INFINITY;
                        s[nt][e] = va;
                        s[nt][2 + e] = vb;
#if defined(ZINC_SIMT_EMULATION)
                        if (!needed && (va != -INFINITY || vb != -INFINITY)) ++fa_skip_violations;
#endif
                        mxA = fmaxf(mxA, va);
                        mxB = fmaxf(mxB, vb);
                    }
                }
                mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 1));
                mxA = fmaxf(mxA, __shfl_xor_sync(0xffffffffu, mxA, 2));
                mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 1));
                mxB = fmaxf(mxB, __shfl_xor_sync(0xffffffffu, mxB, 2));
                const float mnA = fmaxf(mA, mxA), mnB = fmaxf(mB, mxB);
                const float muA = mnA == -INFINITY ? 0.f : mnA;  // a row with nothing yet
                const float muB = mnB == -INFINITY ? 0.f : mnB;
                const float alA = exp2f(mA - muA), alB = exp2f(mB - muB);
                mA = mnA;
                mB = mnB;
                float sumA = 0.f, sumB = 0.f;
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
                    s[nt][0] = exp2f(s[nt][0] - muA);
                    s[nt][1] = exp2f(s[nt][1] - muA);
                    s[nt][2] = exp2f(s[nt][2] - muB);
                    s[nt][3] = exp2f(s[nt][3] - muB);
                    sumA += s[nt][0] + s[nt][1];
                    sumB += s[nt][2] + s[nt][3];
                }
                lA = lA * alA + sumA;  // per-thread partial sums; the quad is summed at the end
                lB = lB * alB + sumB;
#pragma unroll
                for (int i = 0; i < kNt; ++i) {
                    o[i][0] *= alA;
                    o[i][1] *= alA;
                    o[i][2] *= alB;
                    o[i][3] *= alB;
                }
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    pa[kk][0] = pack_h2(s[2 * kk][0], s[2 * kk][1]);
                    pa[kk][1] = pack_h2(s[2 * kk][2], s[2 * kk][3]);
                    pa[kk][2] = pack_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                    pa[kk][3] = pack_h2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
                }
            }
            cp_wait1();  // V tile jt (only K tile jt + 1 may still be in flight)
            __syncthreads();
            if (work) {
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
                    for (int dp = 0; dp < D / 16; ++dp) {
                        uint32_t vf[4];
                        ldsm_x4_t(vf, sV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd +
                                          dp * 16 + (lane >> 4) * 8);
                        mma16816(o[2 * dp], pa[kk], vf[0], vf[1]);
                        mma16816(o[2 * dp + 1], pa[kk], vf[2], vf[3]);
                    }
                }
            }
            __syncthreads();  // every warp is done with sV
            if (jt + 1 < n_tiles)
                issue(sV, vcache);
            else
                cp_commit();
        }

        lA += __shfl_xor_sync(0xffffffffu, lA, 1);
        lA += __shfl_xor_sync(0xffffffffu, lA, 2);
        lB += __shfl_xor_sync(0xffffffffu, lB, 1);
        lB += __shfl_xor_sync(0xffffffffu, lB, 2);
        float fA = 1.f, fB = 1.f;
        if (j.sinks) {
            const float sk = j.sinks[h] * kLog2e;
            const float m2A = fmaxf(mA, sk), m2B = fmaxf(mB, sk);
            fA = exp2f(mA - m2A);
            fB = exp2f(mB - m2B);
            lA = lA * fA + exp2f(sk - m2A);
            lB = lB * fB + exp2f(sk - m2B);
        }
        const float iA = lA > 0.f ? fA / lA : 0.f, iB = lB > 0.f ? fB / lB : 0.f;
        float* outA = j.out + static_cast<size_t>(r0 + rA) * j.out_ld + static_cast<size_t>(h) * D;
        float* outB = j.out + static_cast<size_t>(r0 + rB) * j.out_ld + static_cast<size_t>(h) * D;
#pragma unroll
        for (int i = 0; i < kNt; ++i) {
            const int d = i * 8 + 2 * t;
            if (actA) {
                outA[d] = o[i][0] * iA;
                outA[d + 1] = o[i][1] * iA;
            }
            if (actB) {
                outB[d] = o[i][2] * iB;
                outB[d + 1] = o[i][3] * iB;
            }
        }
        a = b;
    }
}

#if defined(ZINC_SIMT_EMULATION)
template <int D>
bool launch_prefill(const AttnJob& j, int row0, int n_rows, cudaStream_t s) {
    (void)s;
    const dim3 grid((n_rows + kBM - 1) / kBM, j.n_head);
    zinc_simt::launch(fa_prefill_kernel<D>, grid, kThreads, j, row0, row0 + n_rows);
    return true;
}
#else
template <int D>
bool launch_prefill(const AttnJob& j, int row0, int n_rows, cudaStream_t s) {
    constexpr int smem = Smem<D>::kBytes;
    static const bool attr_ok =
        cudaFuncSetAttribute(fa_prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem) == cudaSuccess;
    if (!attr_ok) return false;
    const dim3 grid((n_rows + kBM - 1) / kBM, j.n_head);
    constexpr auto kernel = fa_prefill_kernel<D>;
    // clang-format off
    kernel<<<grid, kThreads, smem, s>>>(j, row0, row0 + n_rows);
    // clang-format on
    return true;
}
#endif

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

bool attention_fast_covers(const AttnJob& j) {
    const int d = j.head_dim;
    if (d != j.head_dim_v || (d != 64 && d != 128 && d != 256)) return false;
    if (j.n_head_kv < 1 || j.n_head % j.n_head_kv != 0 || j.block_size < 1) return false;
    return j.q_ld % 4 == 0 && aligned16(j.q) && aligned16(j.k_cache) && aligned16(j.v_cache) &&
           j.out != nullptr;
}

bool attention_fast_prefill(const AttnJob& j, int row0, int n_rows, cudaStream_t s) {
    if (n_rows < 1 || !attention_fast_covers(j)) return false;
    switch (j.head_dim) {
        case 64:
            return launch_prefill<64>(j, row0, n_rows, s);
        case 128:
            return launch_prefill<128>(j, row0, n_rows, s);
        case 256:
            return launch_prefill<256>(j, row0, n_rows, s);
        default:
            return false;
    }
}

}  // namespace zinc::cuda
