// zinc/backend/cuda/dmmv_fast.cu — the bandwidth-oriented matrix x few-vectors kernels (v3) of
// the fast path (ZINC_EXACT=0), for 1..16 activation rows; dmmv() (dmmv.cu) calls them first.
//
// Work unit (dmmv_units.cuh): 32 consecutive-in-memory weight codes of one row (one 16-byte load of
// 4-bit codes, two of 8-bit codes), seen as two groups of 16 elements with their own scale and
// offset. A warp owns 32 / LPR rows; the LPR lanes of a row take consecutive units (lane i: units
// i, i + LPR,
// ...), so a warp's loads of one step are contiguous 16-byte pieces (coalesced), and each lane
// issues U units' weight loads before the first use. A row's partial sums meet in a shuffle
// butterfly over its LPR lanes: no shared memory, no block barrier. Each decoded unit is used for
// all NB activation rows (the weights are read once for a batch).
//
// 16-byte weight loads for Q4_K and Q5_K in the GGUF layout (144- and 176-byte blocks are 16-byte
// multiples), for Q6_K, Q4_0 and Q8_0 in the GGUF layout (2-byte aligned blocks: two aligned
// 16-byte loads per piece, shifted into place, ld_un16) and in the repacked layouts of repack.h
// (102, 108, 114: one aligned load per piece). Q4_1, Q5_0, Q5_1, Q2_K, Q3_K and MXFP4 take the same
// thread mapping over decode_chunk (common.cuh), whose loads are narrower. Not bit-identical to the
// CPU tier (float sums in another order); tests/cuda/bench_dmmv.cpp and test_parity check the
// relative error against quant::vec_dot.
#include "backend/cuda/common.cuh"
#include "backend/cuda/dmmv_units.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using namespace dev;
using namespace units;

constexpr int kWarps = 4;  // warps per block

struct Jobs {
    MatJob m[3];
    int n_jobs;
    int row_end[3];  // cumulative row counts
};

template <int T, int NB, int LPR, int U>
__global__ void __launch_bounds__(kWarps * 32)
    dmmv_fast_kernel(Jobs J, int k, const int8_t* __restrict__ aq, const float4* __restrict__ ad,
                     int n_act, bool accumulate) {
    launch_dependents();  // a fused projection launched after this one (V after Q+K) may start
    constexpr int RPW = 32 / LPR;  // rows per warp
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int li = lane & (LPR - 1);
    const int total = J.row_end[J.n_jobs - 1];
    int row = (static_cast<int>(blockIdx.x) * kWarps + (static_cast<int>(threadIdx.x) >> 5)) * RPW +
              lane / LPR;
    const bool valid = row < total;  // rows past the end compute row total - 1, write nothing
    if (!valid) row = total - 1;
    int j = 0;
    if (J.n_jobs > 1 && row >= J.row_end[0]) j = 1;
    if (J.n_jobs > 2 && row >= J.row_end[1]) j = 2;
    const int jrow = j == 0 ? row : row - J.row_end[j - 1];
    const uint8_t* wbase = j == 0 ? J.m[0].w : (j == 1 ? J.m[1].w : J.m[2].w);
    const size_t rb = j == 0 ? J.m[0].row_bytes : (j == 1 ? J.m[1].row_bytes : J.m[2].row_bytes);
    const int nu = k >> 5;  // units per row
    const int nbk = k / Traits<T>::qk;
    const int a0 = static_cast<int>(blockIdx.y) * NB;
    if (J.m[0].expert) {
        // Expert gathering (NB == 1: one activation row per block): the row's expert id comes
        // from the previous kernel (the routing), so wait for it before the first weight load.
        grid_dependency_wait();
        const MatJob& m = j == 0 ? J.m[0] : (j == 1 ? J.m[1] : J.m[2]);
        wbase = job_matrix(wbase, m.expert, m.expert_stride, a0);
    }
    const uint8_t* w = wbase + static_cast<size_t>(jrow) * rb;
    const int na = min(NB, n_act - a0);
    const int8_t* aq0 = aq + static_cast<size_t>(a0) * k;
    const float4* ad0 = ad + static_cast<size_t>(a0) * nu;

    float acc[NB];
#pragma unroll
    for (int b = 0; b < NB; ++b) acc[b] = 0.f;
    // Every weight load of a step first; the guards make the arithmetic separate basic blocks,
    // which keeps ptxas from sinking later units' loads below earlier units' arithmetic (it did
    // when the step had no branches: one DRAM latency per unit instead of per step).
    for (int u0 = li; u0 < nu; u0 += LPR * U) {
        typename Fast<T>::Raw raw[U];
#pragma unroll
        for (int i = 0; i < U; ++i)
            if (u0 + LPR * i < nu) Fast<T>::load(w, nbk, u0 + LPR * i, raw[i]);
        // The weights do not depend on the previous kernel; its outputs (the activations, y
        // when accumulating) are read only after this (a no-op unless launched with PDL).
        if (u0 == li) grid_dependency_wait();
#pragma unroll
        for (int i = 0; i < U; ++i) {
            const int u = u0 + LPR * i;
            if (u < nu) {
                Unit un;
                Fast<T>::decode(raw[i], u, nbk, un);
#pragma unroll
                for (int b = 0; b < NB; ++b) {
                    // rows past na re-read row na - 1 (never written): no branch per row
                    const int bb = NB == 1 ? 0 : min(b, na - 1);
                    ActUnit a;
                    load_act(un, aq0 + static_cast<size_t>(bb) * k,
                             ad0 + static_cast<size_t>(bb) * nu, a);
                    acc[b] += unit_dot(un, a);
                }
            }
        }
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {
#pragma unroll
        for (int off = LPR / 2; off > 0; off >>= 1)
            acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], off);
    }
    grid_dependency_wait();
    if (valid && li == 0) {
        float* y = j == 0 ? J.m[0].y : (j == 1 ? J.m[1].y : J.m[2].y);
        const int ldy = j == 0 ? J.m[0].ldy : (j == 1 ? J.m[1].ldy : J.m[2].ldy);
        const float* bias = j == 0 ? J.m[0].bias : (j == 1 ? J.m[1].bias : J.m[2].bias);
        const float bv = bias ? bias[jrow] : 0.f;
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (b < na) {
                float* p = y + static_cast<size_t>(a0 + b) * ldy + jrow;
                const float r = acc[b] + bv;
                *p = accumulate ? *p + r : r;
            }
        }
    }
}

template <int T, int NB, int LPR, int U>
void launch(const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc, bool pdl,
            cudaStream_t s) {
    const int rows = J.row_end[J.n_jobs - 1];
    constexpr int rows_per_block = kWarps * (32 / LPR);
    const dim3 grid(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block),
                    static_cast<unsigned>((n_act + NB - 1) / NB));
    constexpr auto kernel = dmmv_fast_kernel<T, NB, LPR, U>;
#if defined(ZINC_SIMT_EMULATION)
    (void)pdl;
    (void)s;
    zinc_simt::launch(kernel, grid, kWarps * 32, J, k, aq, ad, n_act, acc);
#else
    // PDL (pdl): this grid may start while the previous kernel drains, and stream its weights then.
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kWarps * 32);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kernel, J, k, aq, ad, n_act, acc);
#endif
}

// Lanes per row: one row per warp (32 lanes) for matrices of few rows, so that there are enough
// warps to fill the GPU (132 SMs x ~24 warps); 8 lanes per row (4 rows per warp, which share
// their activation loads) for tall matrices and for batches of 4+ rows. The decode_chunk types
// always take 32 (H200 run 1: 8 lanes were 1.1-2x slower for them on every shape).
bool narrow_loads(int type) {
    return type == kQ4_1 || type == kQ5_0 || type == kQ5_1 || type == kQ2_K || type == kQ3_K ||
           type == kMXFP4;
}
int auto_lpr(int type, int rows, int n_act) {
    constexpr int kWarpsWanted = 132 * 24;
    if (narrow_loads(type)) return 32;
    return n_act >= 4 || rows / 4 >= kWarpsWanted ? 8 : 32;
}

// Units per lane and step for one activation row: Q4_K's 18-byte units at 4 per step left too
// few bytes in flight on tall matrices (H200 run 1: gate+up at 2.2 TB/s while repacked Q6_K,
// 26-byte units, reached 3.7 TB/s at the same occupancy): 8 there (145 registers). Not at 32
// lanes per row: a 4096-weight row is 128 units, 4 per lane (8 would leave half of them idle and
// take 236 registers).
template <int T, int LPR>
constexpr int units_one_row() {
    return T == kQ4_K && LPR == 8 ? 8 : 4;
}

template <int T, int LPR>
void by_batch(const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
              bool pdl, cudaStream_t s) {
    // Gathered (MoE) calls: each activation row has its own matrix, one row per block.
    if (n_act == 1 || J.m[0].expert)
        launch<T, 1, LPR, units_one_row<T, LPR>()>(J, k, aq, ad, n_act, acc, pdl, s);
    else if (n_act == 2)
        launch<T, 2, LPR, 2>(J, k, aq, ad, n_act, acc, pdl, s);
    else if (n_act <= 4)
        launch<T, 4, LPR, 2>(J, k, aq, ad, n_act, acc, pdl, s);
    else if (n_act <= 8)
        launch<T, 8, LPR, 1>(J, k, aq, ad, n_act, acc, pdl, s);
    else
        launch<T, 16, LPR, 1>(J, k, aq, ad, n_act, acc, pdl, s);
}

template <int T>
void by_lpr(int lpr, const Jobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
            bool pdl, cudaStream_t s) {
    if (lpr == 32)
        by_batch<T, 32>(J, k, aq, ad, n_act, acc, pdl, s);
    else
        by_batch<T, 8>(J, k, aq, ad, n_act, acc, pdl, s);
}

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

bool dmmv_fast_covers(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                      int n_act) {
    if (n_act < 1 || n_jobs < 1 || n_jobs > 3 || k % 32 != 0 || !aligned16(aq) || k % 16 != 0)
        return false;
    // Gathered calls take one activation row per block (any count); the others at most
    // kDmmvFastMaxRows. All jobs of a call gather or none does.
    if (n_act > kDmmvFastMaxRows && !jobs[0].expert) return false;
    for (int i = 1; i < n_jobs; ++i)
        if ((jobs[i].expert == nullptr) != (jobs[0].expert == nullptr)) return false;
    switch (type) {
        case kQ4_1:
        case kQ5_0:
        case kQ5_1:
        case kQ2_K:
        case kQ3_K:
        case kMXFP4:  // decode_chunk's byte loads: any alignment
            break;
        case kQ4_0:
        case kQ8_0:
        case kQ6_K:  // ld_un16: 2-byte aligned rows
            for (int i = 0; i < n_jobs; ++i)
                if ((reinterpret_cast<uintptr_t>(jobs[i].w) & 1u) != 0 ||
                    jobs[i].row_bytes % 2 != 0 || jobs[i].expert_stride % 2 != 0)
                    return false;
            break;
        case kQ4_K:
        case kQ5_K:
        case kQ4_0R:
        case kQ8_0R:
        case kQ6_KR:
            // 16-byte loads: 16-byte aligned rows
            for (int i = 0; i < n_jobs; ++i)
                if (!aligned16(jobs[i].w) || jobs[i].row_bytes % 16 != 0 ||
                    jobs[i].expert_stride % 16 != 0)
                    return false;
            break;
        default:
            return false;
    }
    const int qk = (type == kQ2_K || type == kQ3_K || type == kQ4_K || type == kQ5_K ||
                    type == kQ6_K || type == kQ6_KR)
                       ? 256
                       : 32;
    return k % qk == 0;
}

bool dmmv_fast_preferred(int type, int rows, int n_act) {
    // From the H200 run of bench_dmmv (docs/perf-notes.md "dmmv", run 1): v3 ties or wins at one
    // activation row except for Q8_0 (v2's 34-byte-block path was 10-20 % faster) and Q2_K/Q3_K
    // (5 % slower); at two rows it wins for the 16-byte-load types; from 3 rows on v2's blocks
    // (4 warps splitting a row's chunks, activation loads shared by 2-4 rows) win except on tall
    // matrices (gate+up, lm_head) at 8-16 rows, where v3 is 1.3-1.7x faster for Q4_K, Q5_K and
    // repacked Q4_0/Q6_K.
    if (type == kQ8_0 || type == kQ8_0R || type == kQ2_K || type == kQ3_K) return false;
    if (narrow_loads(type)) return n_act == 1;
    if (n_act <= 2) return true;
    const bool tall = rows >= 4 * 132 * 24;
    return tall && n_act >= 8 &&
           (type == kQ4_K || type == kQ5_K || type == kQ4_0R || type == kQ6_KR);
}

bool dmmv_fast(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
               int n_act, bool accumulate, cudaStream_t s, int lanes_per_row, bool pdl) {
    if (!dmmv_fast_covers(type, jobs, n_jobs, k, aq, n_act)) return false;
    if (lanes_per_row != 0 && lanes_per_row != 8 && lanes_per_row != 32) return false;
    Jobs J{};
    J.n_jobs = n_jobs;
    int total = 0;
    for (int i = 0; i < n_jobs; ++i) {
        J.m[i] = jobs[i];
        total += jobs[i].n_out;
        J.row_end[i] = total;
    }
    if (total == 0) return true;
    // (gathered: n_act blocks of one activation row each, as many warps as total * n_act rows)
    const int lpr = lanes_per_row    ? lanes_per_row
                    : jobs[0].expert ? auto_lpr(type, total * n_act, 1)
                                     : auto_lpr(type, total, n_act);
    switch (type) {
        case kQ4_0:
            by_lpr<kQ4_0>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ4_1:
            by_lpr<kQ4_1>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ5_0:
            by_lpr<kQ5_0>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ5_1:
            by_lpr<kQ5_1>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ8_0:
            by_lpr<kQ8_0>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ2_K:
            by_lpr<kQ2_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ3_K:
            by_lpr<kQ3_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ4_K:
            by_lpr<kQ4_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ5_K:
            by_lpr<kQ5_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ6_K:
            by_lpr<kQ6_K>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ4_0R:
            by_lpr<kQ4_0R>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ8_0R:
            by_lpr<kQ8_0R>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kQ6_KR:
            by_lpr<kQ6_KR>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        case kMXFP4:
            by_lpr<kMXFP4>(lpr, J, k, aq, ad, n_act, accumulate, pdl, s);
            break;
        default:
            return false;
    }
    return true;
}

}  // namespace zinc::cuda
