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
// need), in the same round of butterflies as its rows' dot products (the kernel's comment); the
// redundancy is 2 d_k loads per warp per token against the 2 kRowsPerWarp d_k floats of state it
// reads and writes once per call. The next token's inputs are loaded before this one's math.
//
// Decode (one row per sequence) is bandwidth-bound: the state is read and written once, 2 x 4 B x
// d_k x d_v per (sequence, v head) (Qwen3.5-9B: 32 heads x 128 x 128 -> 4 MiB per layer and
// sequence), each warp reading its rows as 32-lane coalesced loads; blocks of 16 value rows give
// 8 blocks per head (256 per sequence at 32 heads) to spread it over the SMs. Prefill is
// latency-bound per token (one round of 5 shuffle levels per step, the state update between) and
// parallel over (sequence, head, 16 rows) only.
//
// Float order against the CPU tier (cpu::delta_net_head): the L2 sums of squares are exact f32
// squares summed in f64 (the CPU sequentially, here per lane then the xor butterfly), the dot
// products f32 over the raw q / k with the scales applied to the sums, the output from the old
// state (the CPU: sequential dots of the normalised vectors with the new state), exp / log the
// device's expf / logf (the CPU's libm): not the same bits, a relative-error bound (the tests).
//
// Checkpoints (speculative decoding, DeltaNetJob::ckpt): a kept sequence's warps also store their
// rows after each token into the slot's checkpoint row, the very registers the next token
// continues from (bit for bit the state of the tokens up to it run alone); without a pool nothing
// more is read or written.
#include <cmath>

#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

namespace cn = zinc::canon;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;

// Constants the CPU tier computes in f32 on the host side of its kernel, computed once here the
// same way (host code), so both tiers use the same bits.
struct Consts {
    float eps_n;       // eps / d_k: llama.cpp's L2 norm is rms_norm with eps / n ...
    float inv_sqrt_k;  // ... then a scale by 1 / sqrt(d_k)
    float out_scale;   // 1 / sqrt(d_v)
};

// One token's inputs as a warp holds them: the q and k elements of its lanes (zeros past d_k, not
// yet normalised), the value of each of the warp's rows, the two raw gates. Loaded one token ahead.
template <int NK>
struct TokenIn {
    float q[NK], k[NK], v[kRowsPerWarp];
    float beta, alpha;
};
template <int NK>
__device__ __forceinline__ void load_token(const DeltaNetJob& j, int t, int kh, int h, int jrow0,
                                           int lane, TokenIn<NK>& in) {
    const int dk = j.head_k_dim, dv = j.head_v_dim;
    const int64_t key_dim = static_cast<int64_t>(j.n_k_heads) * dk;
    const float* row = j.qkv + static_cast<int64_t>(t) * j.qkv_ld;
#pragma unroll
    for (int m = 0; m < NK; ++m) {
        const int i = lane + 32 * m;
        in.q[m] = i < dk ? row[static_cast<int64_t>(kh) * dk + i] : 0.0f;
        in.k[m] = i < dk ? row[key_dim + static_cast<int64_t>(kh) * dk + i] : 0.0f;
    }
    const float* v = row + 2 * key_dim + static_cast<int64_t>(h) * dv;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) in.v[r] = jrow0 + r < dv ? v[jrow0 + r] : 0.0f;
    const int64_t gi = static_cast<int64_t>(t) * j.n_v_heads + h;
    in.beta = j.beta[gi];
    in.alpha = j.alpha[gi];
}

// L2 scale of a vector from its sum of squares: 1 / sqrt(mean + eps / d_k) (then times
// 1 / sqrt(d_k), applied where the scale is used, as the CPU tier's two roundings).
__device__ __forceinline__ float l2_scale(double sumsq, int dk, const Consts& c) {
    const float mean = static_cast<float>(sumsq / static_cast<double>(dk));
    return cn::div(1.0f, cn::sqrt(cn::add(mean, c.eps_n)));
}

// A warp's rows S^T_j (j = jrow0 + r) into a head's state laid out (d_v, d_k) at S: lane l
// stores elements l + 32 m (the live state at the end of a call, a checkpoint row after a token).
template <int NK>
__device__ __forceinline__ void store_rows(const float (&st)[kRowsPerWarp][NK], float* S,
                                           int jrow0, int lane, int dk, int dv) {
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

// grid (tiles * n_v_heads, n_seqs): blockIdx.x = h * tiles + tile; block tile covers value rows
// [tile * kRowsPerBlock, + kRowsPerBlock) of head h. Every warp runs the same number of shuffles
// whatever its rows' validity (rows past d_v compute on zeros and store nothing).
//
// Per token, every reduction the step needs is independent of the others, so they run as one
// round of interleaved butterflies: the sums of squares of q and k (f64), k . q, and for each row
// S^T_j . k and S^T_j . q, all over the raw (unnormalised) q and k with the L2 scales applied to
// the sums afterwards, and the output taken from the old state:
//   S^T_j . k (after the decay) = decay (S_old^T_j . k);  d_j = b (v_j - that)
//   o_j = S_new^T_j . q = decay (S_old^T_j . q) + d_j (k . q)
// so a token costs one dependent chain of 5 shuffle levels (the CPU tier computes the same values
// in another order: the relative-error bound).
template <int NK>
__global__ void __launch_bounds__(kThreads) delta_net_kernel(DeltaNetJob j, Consts c) {
    const int dk = j.head_k_dim, dv = j.head_v_dim;
    const int tiles = (dv + kRowsPerBlock - 1) / kRowsPerBlock;
    const int h = static_cast<int>(blockIdx.x) / tiles;
    const int tile = static_cast<int>(blockIdx.x) % tiles;
    const int si = static_cast<int>(blockIdx.y);
    const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
    const int kh = h % j.n_k_heads;
    const int r0 = j.seqs.row0[si], r1 = j.seqs.row0[si + 1];
    if (r0 >= r1) return;  // a sequence without rows: nothing to read (row r0 is not its), no
                           // state change (the whole block returns, before any shuffle)
    const bool reset = j.seqs.row_pos && j.seqs.row_pos[r0] == 0;
    const int64_t slot = j.seqs.slot[si];
    float* S = j.state + slot * j.slot_floats + static_cast<int64_t>(h) * dv * dk;
    // checkpoint row 0 of the slot's head h (kept sequences only): S^T after each row
    float* ck = j.ckpt && j.seqs.keep[si] ? j.ckpt + slot * j.seqs.n_ckpt * j.slot_floats +
                                                static_cast<int64_t>(h) * dv * dk
                                          : nullptr;
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
    TokenIn<NK> cur;
    load_token<NK>(j, r0, kh, h, jrow0, lane, cur);
    TokenIn<NK> nxt = cur;
    for (int t = r0; t < r1; ++t) {
        if (t + 1 < r1) load_token<NK>(j, t + 1, kh, h, jrow0, lane, nxt);
        double ssq = 0.0, ssk = 0.0;
        float kq = 0.0f, sk[kRowsPerWarp], sq[kRowsPerWarp];
#pragma unroll
        for (int m = 0; m < NK; ++m) {
            ssq += static_cast<double>(cur.q[m]) * static_cast<double>(cur.q[m]);
            ssk += static_cast<double>(cur.k[m]) * static_cast<double>(cur.k[m]);
            kq = cn::fma(cur.k[m], cur.q[m], kq);
        }
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            sk[r] = sq[r] = 0.0f;
#pragma unroll
            for (int m = 0; m < NK; ++m) {
                sk[r] = cn::fma(st[r][m], cur.k[m], sk[r]);
                sq[r] = cn::fma(st[r][m], cur.q[m], sq[r]);
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
            ssk += __shfl_xor_sync(0xffffffffu, ssk, o);
            kq += __shfl_xor_sync(0xffffffffu, kq, o);
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) {
                sk[r] += __shfl_xor_sync(0xffffffffu, sk[r], o);
                sq[r] += __shfl_xor_sync(0xffffffffu, sq[r], o);
            }
        }
        // the CPU tier's normalised elements are (x * scale) * (1 / sqrt(d_k))
        const float fq = l2_scale(ssq, dk, c), fk = l2_scale(ssk, dk, c);
        float kn[NK];
#pragma unroll
        for (int m = 0; m < NK; ++m) kn[m] = cn::mul(cn::mul(cur.k[m], fk), c.inv_sqrt_k);
        const float kqn =
            cn::mul(cn::mul(cn::mul(kq, fq), c.inv_sqrt_k), cn::mul(fk, c.inv_sqrt_k));
        const float b = cn::div(1.0f, cn::add(1.0f, expf(-cur.beta)));
        const float x = cn::add(cur.alpha, dt_bias);
        const float softplus = x > 20.0f ? x : logf(cn::add(1.0f, expf(x)));
        const float decay = expf(cn::mul(softplus, a));
        float* o = j.out + static_cast<int64_t>(t) * j.out_ld + static_cast<int64_t>(h) * dv;
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
            const float skn = cn::mul(cn::mul(cn::mul(sk[r], fk), c.inv_sqrt_k), decay);
            const float d = cn::mul(cn::sub(cur.v[r], skn), b);
            const float sqn = cn::mul(cn::mul(sq[r], fq), c.inv_sqrt_k);
            const float out = cn::fma(d, kqn, cn::mul(decay, sqn));
            if (lane == 0 && jrow0 + r < dv) o[jrow0 + r] = cn::mul(out, c.out_scale);
#pragma unroll
            for (int m = 0; m < NK; ++m) st[r][m] = cn::fma(d, kn[m], cn::mul(st[r][m], decay));
        }
        if (ck && t - r0 < j.seqs.n_ckpt)
            store_rows<NK>(st, ck + static_cast<int64_t>(t - r0) * j.slot_floats, jrow0, lane, dk,
                           dv);
        cur = nxt;
    }
    store_rows<NK>(st, S, jrow0, lane, dk, dv);
}

template <int NK>
void launch(const DeltaNetJob& j, const Consts& c, cudaStream_t s) {
    const int tiles = (j.head_v_dim + kRowsPerBlock - 1) / kRowsPerBlock;
    const dim3 grid(static_cast<unsigned>(tiles * j.n_v_heads),
                    static_cast<unsigned>(j.seqs.n_seqs));
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
