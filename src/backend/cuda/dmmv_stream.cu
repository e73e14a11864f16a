// zinc/backend/cuda/dmmv_stream.cu — matrix x few-vectors kernels (v4) whose weights reach the
// SMs as bulk copies into shared memory (cp.async.bulk with mbarrier completion, sm_90), for 1..4
// activation rows: the decode step's projections (docs/perf-notes.md "dmmv v4").
//
// Why: v3 (dmmv_fast.cu) loads weights into registers; a lane holds at most one step of units in
// flight, the grid runs in waves, and each 8B projection paid 5-10 us beyond its bytes (ramp, the
// last wave; H200 run 4: gate+up 2.2 TB/s, q+k+v 1.6, o 1.3 against a 4.2 TB/s copy). Here a
// persistent grid (as many blocks as fit, 4 per SM) splits the matrices' rows evenly (+-1 row);
// each block walks its rows as tiles of R whole rows (R x row_bytes contiguous bytes of the GGUF
// or repacked layout), with S tiles in flight in S shared-memory stages. Thread 0 issues the
// copies; all threads wait on the stage's barrier, decode its units from shared memory with
// dmmv_units.cuh's decoders (SharedLd), and meet at a block barrier before the stage is refilled
// with the tile S ahead. The weight bytes never occupy registers before they are used, so the
// bytes in flight per SM (~100 KB) do not depend on register pressure, and a block's stream has
// no waves: one ramp per launch.
//
// Thread mapping within a tile: 4 warps; a row gets WPR = max(1, 4 / R) warps (32 lanes each,
// lane l of part p takes units p * 32 + l, + 32 WPR, ...); R = 8 runs two rows per warp. A
// row's partial sums meet in a shuffle butterfly over each warp, then (WPR > 1) through shared
// memory in a fixed order. Each decoded unit serves all NB activation rows. Not bit-identical to
// the CPU tier (float sums in another order): the same relative-error contract as dmmv_fast.
#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/dmmv_units.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using namespace dev;
using namespace units;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlocksPerSm = 4;
constexpr int kTileBytes = 44 * 1024;  // the stages' bytes per block (static shared memory)
constexpr int kMaxStages = 8;
constexpr int kMaxRows = 8;  // rows per tile

struct StreamJobs {
    MatJob m[3];
    int n_jobs;
    int row_end[3];  // cumulative row counts
    int tile_end[3];  // cumulative tile counts (interleaved walk)
    int rows_per_tile;
    int stages;
    uint32_t stage_bytes;  // rows_per_tile x row_bytes
    bool interleave;       // block b takes tiles b, b + G, ... (else a contiguous row range)
    bool evict_first;      // the copies' L2 policy
};

__device__ __forceinline__ int job_of(const StreamJobs& J, int row) {
    int j = 0;
    if (J.n_jobs > 1 && row >= J.row_end[0]) j = 1;
    if (J.n_jobs > 2 && row >= J.row_end[1]) j = 2;
    return j;
}
__device__ __forceinline__ int job_start(const StreamJobs& J, int j) {
    return j == 0 ? 0 : J.row_end[j - 1];
}
__device__ __forceinline__ const uint8_t* row_ptr(const StreamJobs& J, int j, int r) {
    const uint8_t* w = j == 0 ? J.m[0].w : (j == 1 ? J.m[1].w : J.m[2].w);
    return w + static_cast<size_t>(r - job_start(J, j)) * J.m[0].row_bytes;
}

// A block's walk over its tiles (the producer and the consumers each hold one). Contiguous: the
// rows [r_begin, r_end) of an even split (+-1 row), cut into tiles of <= R rows at job ends.
// Interleaved: the matrices' tiles (each job's rows cut into tiles of R, the last one short)
// numbered across jobs, block b taking tiles b, b + G, b + 2G, ...
struct Walk {
    int t = 0;  // tiles taken so far
    int r = 0;  // contiguous: the next tile's first row
    int r_end = 0;
};
__device__ __forceinline__ Walk walk_begin(const StreamJobs& J, int bi, int G) {
    Walk w;
    const int n_rows = J.row_end[J.n_jobs - 1];
    w.r = static_cast<int>(static_cast<int64_t>(n_rows) * bi / G);
    w.r_end = static_cast<int>(static_cast<int64_t>(n_rows) * (bi + 1) / G);
    return w;
}
// The next tile (job j, first row r, n rows), or false when the block has none left.
__device__ __forceinline__ bool walk_next(const StreamJobs& J, int bi, int G, Walk& w, int& j,
                                          int& r, int& n) {
    if (J.interleave) {
        const int g = bi + w.t * G;
        if (g >= J.tile_end[J.n_jobs - 1]) return false;
        j = 0;
        if (J.n_jobs > 1 && g >= J.tile_end[0]) j = 1;
        if (J.n_jobs > 2 && g >= J.tile_end[1]) j = 2;
        r = job_start(J, j) + (g - (j == 0 ? 0 : J.tile_end[j - 1])) * J.rows_per_tile;
        n = min(J.rows_per_tile, J.row_end[j] - r);
    } else {
        if (w.r >= w.r_end) return false;
        j = job_of(J, w.r);
        r = w.r;
        n = min(J.rows_per_tile, min(w.r_end - w.r, J.row_end[j] - w.r));
        w.r += n;
    }
    ++w.t;
    return true;
}

template <int T, int NB>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    dmmv_stream_kernel(StreamJobs J, int k, const int8_t* __restrict__ aq,
                       const float4* __restrict__ ad, int n_act, bool accumulate) {
    __shared__ __align__(128) uint8_t tiles[kTileBytes];
    __shared__ __align__(8) bulk::Bar bars[kMaxStages];
    __shared__ float part[2][kMaxRows][kWarps][NB];  // per-warp row sums (WPR > 1), by tile parity
    launch_dependents();
    const int G = static_cast<int>(gridDim.x), bi = static_cast<int>(blockIdx.x);
    const int R = J.rows_per_tile, S = J.stages;
    const size_t rb = J.m[0].row_bytes;
    const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
    const int wpr = R >= kWarps ? 1 : kWarps / R;  // warps per row
    const int rpp = kWarps / wpr;                  // rows per pass of the block
    const int part_i = warp % wpr, row_in_pass = warp / wpr;
    const int nu = k >> 5, nbk = k / Traits<T>::qk;
    const int na = min(NB, n_act);

    Walk pw = walk_begin(J, bi, G);  // the producer's walk (thread 0)
    auto issue = [&](int s) {  // the producer's next tile into stage s, if it has one
        int j, r, n;
        if (!walk_next(J, bi, G, pw, j, r, n)) return;
        bulk::copy(tiles + static_cast<size_t>(s) * J.stage_bytes, row_ptr(J, j, r),
                   static_cast<uint32_t>(n * rb), &bars[s], J.evict_first);
    };
    if (tid == 0) {
        for (int s = 0; s < S; ++s) bulk::init(&bars[s], 1);
        bulk::fence_init();
    }
    __syncthreads();
    if (tid == 0)
        for (int s = 0; s < S; ++s) issue(s);
    // The weights do not depend on the previous kernel; its outputs (the activations, y when
    // accumulating) are read only after this (a no-op unless launched with PDL).
    grid_dependency_wait();

    Walk cw = walk_begin(J, bi, G);  // the consumers' walk
    int j, r, n;
    for (int t = 0; walk_next(J, bi, G, cw, j, r, n); ++t) {
        const int s = t % S;
        bulk::wait(&bars[s], static_cast<uint32_t>((t / S) & 1));
        const uint8_t* tile = tiles + static_cast<size_t>(s) * J.stage_bytes;
        for (int p0 = 0; p0 < R; p0 += rpp) {
            // every warp runs every pass (uniform shuffles); rows past n compute row n - 1 and
            // write nothing
            const int i = p0 + row_in_pass;
            const int iv = min(i, n - 1);
            const uint8_t* w = tile + static_cast<size_t>(iv) * rb;
            float acc[NB];
#pragma unroll
            for (int b = 0; b < NB; ++b) acc[b] = 0.f;
            constexpr int U = NB >= 4 ? 1 : 2;  // units per lane and step (registers at 4 rows)
            for (int u0 = part_i * 32 + lane; u0 < nu; u0 += 32 * wpr * U) {
                typename Fast<T>::Raw raw[U];
#pragma unroll
                for (int q = 0; q < U; ++q)
                    if (u0 + 32 * wpr * q < nu)
                        Fast<T>::template load<SharedLd>(w, nbk, u0 + 32 * wpr * q, raw[q]);
#pragma unroll
                for (int q = 0; q < U; ++q) {
                    const int u = u0 + 32 * wpr * q;
                    if (u < nu) {
                        Unit un;
                        Fast<T>::decode(raw[q], u, nbk, un);
#pragma unroll
                        for (int b = 0; b < NB; ++b) {
                            const int bb = NB == 1 ? 0 : min(b, na - 1);
                            ActUnit a;
                            load_act(un, aq + static_cast<size_t>(bb) * k,
                                     ad + static_cast<size_t>(bb) * nu, a);
                            acc[b] += unit_dot(un, a);
                        }
                    }
                }
            }
#pragma unroll
            for (int b = 0; b < NB; ++b) acc[b] = warp_sum(acc[b]);
            if (lane == 0 && i < n) {
                if (wpr == 1) {
                    const int jr = r + i - job_start(J, j);
                    float* y = j == 0 ? J.m[0].y : (j == 1 ? J.m[1].y : J.m[2].y);
                    const int ldy = j == 0 ? J.m[0].ldy : (j == 1 ? J.m[1].ldy : J.m[2].ldy);
                    const float* bias = j == 0 ? J.m[0].bias : (j == 1 ? J.m[1].bias : J.m[2].bias);
                    const float bv = bias ? bias[jr] : 0.f;
#pragma unroll
                    for (int b = 0; b < NB; ++b) {
                        if (b < na) {
                            float* py = y + static_cast<size_t>(b) * ldy + jr;
                            const float v = acc[b] + bv;
                            *py = accumulate ? *py + v : v;
                        }
                    }
                } else {
#pragma unroll
                    for (int b = 0; b < NB; ++b) part[t & 1][i][part_i][b] = acc[b];
                }
            }
        }
        __syncthreads();  // the stage is read; part[t & 1] is complete
        if (wpr > 1 && tid < n * NB) {
            const int i = tid / NB, b = tid % NB;
            if (b < na) {
                float v = part[t & 1][i][0][b];
                for (int q = 1; q < wpr; ++q) v += part[t & 1][i][q][b];
                const int jr = r + i - job_start(J, j);
                float* y = j == 0 ? J.m[0].y : (j == 1 ? J.m[1].y : J.m[2].y);
                const int ldy = j == 0 ? J.m[0].ldy : (j == 1 ? J.m[1].ldy : J.m[2].ldy);
                const float* bias = j == 0 ? J.m[0].bias : (j == 1 ? J.m[1].bias : J.m[2].bias);
                v += bias ? bias[jr] : 0.f;
                float* py = y + static_cast<size_t>(b) * ldy + jr;
                *py = accumulate ? *py + v : v;
            }
        }
        if (tid == 0) {
            bulk::fence_proxy();
            issue(s);
        }
    }
}

// Rows per tile and stages for rows of rb bytes: the most rows (1, 2, 4, 8) that leave at least
// min_stages stages (else fewer, down to 2); 0 rows: a row does not fit two stages.
void tile_shape(size_t rb, int min_stages, int& rows, int& stages) {
    rows = 0;
    stages = 0;
    for (int want = min_stages; want >= 2; --want) {
        for (int r = kMaxRows; r >= 1; r /= 2) {
            const size_t s = kTileBytes / (static_cast<size_t>(r) * rb);
            if (s >= static_cast<size_t>(want)) {
                rows = r;
                stages = static_cast<int>(s < kMaxStages ? s : kMaxStages);
                return;
            }
        }
    }
}

// The grid (o.blocks, else o.blocks_per_sm or as many blocks as are resident per SM, times the
// SMs; at most one block per row) and the tiles: R rows by tile_shape, halved for the
// interleaved walk while the matrices have fewer than 8 tiles per block (so that the last round
// of tiles is a small part of a block's work).
template <int T, int NB>
void launch(StreamJobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
            const DmmvStreamOpts& o, cudaStream_t s) {
    constexpr auto kernel = dmmv_stream_kernel<T, NB>;
    const int rows = J.row_end[J.n_jobs - 1];
    int blocks = o.blocks;
    if (blocks <= 0) {
#if defined(ZINC_SIMT_EMULATION)
        blocks = 7;
#else
        static const int2 sm_res = [] {
            int dev = 0, sms = 0, per_sm = 0;
            cudaGetDevice(&dev);
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
            // the largest shared-memory carve-out, so that kBlocksPerSm blocks are resident
            cudaFuncSetAttribute(dmmv_stream_kernel<T, NB>,
                                 cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared);
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, dmmv_stream_kernel<T, NB>,
                                                          kThreads, 0);
            return int2{sms, per_sm > 0 ? per_sm : 1};
        }();
        const int per_sm = o.blocks_per_sm > 0 && o.blocks_per_sm < sm_res.y ? o.blocks_per_sm
                                                                             : sm_res.y;
        blocks = sm_res.x * per_sm;
#endif
    }
    if (blocks > rows) blocks = rows;
    const size_t rb = J.m[0].row_bytes;
    tile_shape(rb, o.min_stages, J.rows_per_tile, J.stages);
    J.interleave = o.interleave != 0;
    J.evict_first = o.evict_first;
    auto tiles = [&](int R) {
        int t = 0;
        for (int i = 0; i < J.n_jobs; ++i) {
            t += (J.m[i].n_out + R - 1) / R;
            J.tile_end[i] = t;
        }
        return t;
    };
    if (J.interleave)
        while (J.rows_per_tile > 1 && tiles(J.rows_per_tile) < 8 * blocks) J.rows_per_tile /= 2;
    tiles(J.rows_per_tile);
    const size_t st = kTileBytes / (static_cast<size_t>(J.rows_per_tile) * rb);
    J.stages = static_cast<int>(st < kMaxStages ? st : kMaxStages);
    J.stage_bytes = static_cast<uint32_t>(J.rows_per_tile * rb);
#if defined(ZINC_SIMT_EMULATION)
    (void)s;
    zinc_simt::launch(kernel, dim3(static_cast<unsigned>(blocks)), kThreads, J, k, aq, ad, n_act,
                      acc);
#else
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
    cfg.blockDim = dim3(kThreads);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = o.pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kernel, J, k, aq, ad, n_act, acc);
#endif
}

template <int T>
void by_batch(StreamJobs& J, int k, const int8_t* aq, const float4* ad, int n_act, bool acc,
              const DmmvStreamOpts& o, cudaStream_t s) {
    if (n_act == 1)
        launch<T, 1>(J, k, aq, ad, n_act, acc, o, s);
    else if (n_act == 2)
        launch<T, 2>(J, k, aq, ad, n_act, acc, o, s);
    else
        launch<T, 4>(J, k, aq, ad, n_act, acc, o, s);
}

bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace

bool dmmv_stream_covers(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                        int n_act) {
    if (n_act < 1 || n_act > kDmmvStreamMaxRows || n_jobs < 1 || n_jobs > 3 || k % 32 != 0 ||
        !aligned16(aq))
        return false;
    switch (type) {
        case kQ4_0:
        case kQ8_0:
        case kQ4_K:
        case kQ5_K:
        case kQ6_K:
        case kQ4_0R:
        case kQ8_0R:
        case kQ6_KR:
            break;
        default:
            return false;
    }
    const int qk = (type == kQ4_K || type == kQ5_K || type == kQ6_K || type == kQ6_KR) ? 256 : 32;
    if (k % qk != 0) return false;
    for (int i = 0; i < n_jobs; ++i)
        if (jobs[i].expert || !aligned16(jobs[i].w) || jobs[i].row_bytes != jobs[0].row_bytes ||
            jobs[i].row_bytes % 16 != 0)
            return false;
    int rows = 0, stages = 0;
    tile_shape(jobs[0].row_bytes, 2, rows, stages);
    return rows > 0;
}

bool dmmv_stream(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                 const float4* ad, int n_act, bool accumulate, cudaStream_t s,
                 const DmmvStreamOpts& o) {
    if (!dmmv_stream_covers(type, jobs, n_jobs, k, aq, n_act)) return false;
    StreamJobs J{};
    J.n_jobs = n_jobs;
    int total = 0;
    for (int i = 0; i < n_jobs; ++i) {
        J.m[i] = jobs[i];
        total += jobs[i].n_out;
        J.row_end[i] = total;
    }
    if (total == 0) return true;
    switch (type) {
        case kQ4_0:
            by_batch<kQ4_0>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        case kQ8_0:
            by_batch<kQ8_0>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        case kQ4_K:
            by_batch<kQ4_K>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        case kQ5_K:
            by_batch<kQ5_K>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        case kQ6_K:
            by_batch<kQ6_K>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        case kQ4_0R:
            by_batch<kQ4_0R>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        case kQ8_0R:
            by_batch<kQ8_0R>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        case kQ6_KR:
            by_batch<kQ6_KR>(J, k, aq, ad, n_act, accumulate, o, s);
            break;
        default:
            return false;
    }
    return true;
}

}  // namespace zinc::cuda
