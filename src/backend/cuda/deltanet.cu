// zinc/backend/cuda/deltanet.cu — the gated delta rule of qwen35's Gated DeltaNet layers (the op
// list's DeltaNet; kernels.h DeltaNetJob has the formula), computed in its recurrent form: one
// step per token, sequential over each sequence's rows. It is the decode kernel, and for now also
// the prefill one (the chunked WY / UT-transform scan, which turns a chunk of tokens into matrix
// products, is not written yet; docs/cuda.md "Gated DeltaNet kernels").
//
// Why this mapping: the state rows are independent. With S^T stored as the CPU tier stores it
// (per v head, row j = value j, contiguous over the key index i), row j's update needs only
// itself, k, q, v_j and the two gates of the token:
//   S^T_j = exp(g) S^T_j;  d_j = b (v_j - S^T_j . k);  S^T_j += d_j k;  o_j = S^T_j . q / sqrt(d_v)
// so a warp owns kRowsPerWarp rows in registers for the whole call, lane l holding elements
// i = l + 32 m (m < NK) of each, and needs no shared memory and no block barrier. Every warp
// computes the token's L2 norms of q and k itself (its lanes already hold the elements the rows
// need); the redundancy is 2 d_k loads per warp per token against the 2 kRowsPerWarp d_k floats of
// state it reads and writes once per call.
//
// Decode (one row per sequence) is bandwidth-bound: the state is read and written once, 2 x 4 B x
// d_k x d_v per (sequence, v head) (Qwen3.5-9B: 32 heads x 128 x 128 -> 4 MiB per layer and
// sequence), each warp reading its rows as 32-lane coalesced loads; blocks of 16 value rows give
// 8 blocks per head (256 per sequence at 32 heads) to spread it over the SMs. Prefill is
// latency-bound per token (the dependent warp reductions of each step) and parallel over
// (sequence, head, 16 rows) only.
//
// Float order against the CPU tier (cpu::delta_net_head): the L2 sums of squares are exact f32
// squares summed in f64 (the CPU sequentially, here per lane then the xor butterfly), the dot
// products f32 (CPU sequential, here per lane then the butterfly), exp / log the device's expf /
// logf (the CPU's libm): not the same bits, a relative-error bound (the tests).
#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

#include <cmath>

namespace zinc::cuda {
namespace {

namespace cn = zinc::canon;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Constants the CPU tier computes in f32 on the host side of its kernel, computed once here the
// same way (host code), so both tiers use the same bits.
struct Consts {
    float eps_n;      // eps / d_k: llama.cpp's L2 norm is rms_norm with eps / n ...
    float inv_sqrt_k;  // ... then a scale by 1 / sqrt(d_k)
    float out_scale;   // 1 / sqrt(d_v)
};

// L2-normalise the NK elements a lane holds of one d_k vector (zeros past d_k), in place.
template <int NK>
__device__ __forceinline__ void l2_norm_lanes(float (&x)[NK], int dk, const Consts& c) {
    double sq = 0.0;
#pragma unroll
    for (int m = 0; m < NK; ++m) sq += static_cast<double>(x[m]) * static_cast<double>(x[m]);
    sq = warp_sum_d(sq);
    const float mean = static_cast<float>(sq / static_cast<double>(dk));
    const float scale = cn::div(1.0f, cn::sqrt(cn::add(mean, c.eps_n)));
#pragma unroll
    for (int m = 0; m < NK; ++m) x[m] = cn::mul(cn::mul(x[m], scale), c.inv_sqrt_k);
}

// grid (tiles * n_v_heads, n_seqs): blockIdx.x = h * tiles + tile; block tile covers value rows
// [tile * kRowsPerBlock, + kRowsPerBlock) of head h. Every warp runs the same number of shuffles
// whatever its rows' validity (rows past d_v compute on zeros and store nothing).
template <int NK>
__global__ void __launch_bounds__(kThreads) delta_net_kernel(DeltaNetJob j, Consts c) {
    const int dk = j.head_k_dim, dv = j.head_v_dim;
    const int tiles = (dv + kRowsPerBlock - 1) / kRowsPerBlock;
    const int h = static_cast<int>(blockIdx.x) / tiles;
    const int tile = static_cast<int>(blockIdx.x) % tiles;
    const int si = static_cast<int>(blockIdx.y);
    const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
    const int kh = h % j.n_k_heads;
    const int64_t key_dim = static_cast<int64_t>(j.n_k_heads) * dk;
    const int r0 = j.seqs.row0[si], r1 = j.seqs.row0[si + 1];
    const bool reset = j.seqs.row_pos && j.seqs.row_pos[r0] == 0;
    float* S = j.state + static_cast<int64_t>(j.seqs.slot[si]) * j.slot_floats +
               static_cast<int64_t>(h) * dv * dk;
    const int jrow0 = tile * kRowsPerBlock + warp * kRowsPerWarp;
    float st[kRowsPerWarp][NK];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int jr = jrow0 + r;
#pragma unroll
        for (int m = 0; m < NK; ++m) {
            const int i = lane + 32 * m;
            st[r][m] = (!reset && jr < dv && i < dk) ? S[static_cast<int64_t>(jr) * dk + i] : 0.0f;
        }
    }
    const float a = j.a[h], dt_bias = j.dt_bias[h];
    for (int t = r0; t < r1; ++t) {
        const float* row = j.qkv + static_cast<int64_t>(t) * j.qkv_ld;
        float q[NK], k[NK];
#pragma unroll
        for (int m = 0; m < NK; ++m) {
            const int i = lane + 32 * m;
            q[m] = i < dk ? row[static_cast<int64_t>(kh) * dk + i] : 0.0f;
            k[m] = i < dk ? row[key_dim + static_cast<int64_t>(kh) * dk + i] : 0.0f;
        }
        l2_norm_lanes<NK>(q, dk, c);
        l2_norm_lanes<NK>(k, dk, c);
        const int64_t gi = static_cast<int64_t>(t) * j.n_v_heads + h;
        const float b = cn::div(1.0f, cn::add(1.0f, expf(-j.beta[gi])));
        const float x = cn::add(j.alpha[gi], dt_bias);
        const float softplus = x > 20.0f ? x : logf(cn::add(1.0f, expf(x)));
        const float decay = expf(cn::mul(softplus, a));
        const float* v = row + 2 * key_dim + static_cast<int64_t>(h) * dv;
        float* o = j.out + static_cast<int64_t>(t) * j.out_ld + static_cast<int64_t>(h) * dv;
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const int jr = jrow0 + r;
            float sk = 0.0f;
#pragma unroll
            for (int m = 0; m < NK; ++m) {
                st[r][m] = cn::mul(st[r][m], decay);
                sk = cn::fma(st[r][m], k[m], sk);
            }
            sk = dev::warp_sum(sk);
            const float vj = jr < dv ? v[jr] : 0.0f;
            const float d = cn::mul(cn::sub(vj, sk), b);
            float sq = 0.0f;
#pragma unroll
            for (int m = 0; m < NK; ++m) {
                st[r][m] = cn::fma(d, k[m], st[r][m]);
                sq = cn::fma(st[r][m], q[m], sq);
            }
            sq = dev::warp_sum(sq);
            if (lane == 0 && jr < dv) o[jr] = cn::mul(sq, c.out_scale);
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
        const int jr = jrow0 + r;
        if (jr >= dv) continue;
#pragma unroll
        for (int m = 0; m < NK; ++m) {
            const int i = lane + 32 * m;
            if (i < dk) S[static_cast<int64_t>(jr) * dk + i] = st[r][m];
        }
    }
}

template <int NK>
void launch(const DeltaNetJob& j, const Consts& c, cudaStream_t s) {
    const int tiles = (j.head_v_dim + kRowsPerBlock - 1) / kRowsPerBlock;
    const dim3 grid(static_cast<unsigned>(tiles * j.n_v_heads), static_cast<unsigned>(j.seqs.n_seqs));
#if defined(ZINC_SIMT_EMULATION)  // tests/unit/cuda_emul: this file on the host over a SIMT shim
    (void)s;
    zinc_simt::launch(delta_net_kernel<NK>, grid, kThreads, j, c);
#else
    delta_net_kernel<NK><<<grid, kThreads, 0, s>>>(j, c);
#endif
}

}  // namespace

bool delta_net_recurrent(const DeltaNetJob& j, cudaStream_t s) {
    const int dk = j.head_k_dim;
    if (dk < 1 || dk > kDeltaNetMaxKeyDim || j.head_v_dim < 1 || j.n_k_heads < 1 ||
        j.n_v_heads < 1 || j.seqs.n_seqs < 1)
        return false;
    Consts c;
    c.eps_n = j.eps / static_cast<float>(dk);
    c.inv_sqrt_k = 1.0f / std::sqrt(static_cast<float>(dk));
    c.out_scale = 1.0f / std::sqrt(static_cast<float>(j.head_v_dim));
    if (dk <= 32)
        launch<1>(j, c, s);
    else if (dk <= 64)
        launch<2>(j, c, s);
    else if (dk <= 128)
        launch<4>(j, c, s);
    else
        launch<8>(j, c, s);
    return true;
}

}  // namespace zinc::cuda
