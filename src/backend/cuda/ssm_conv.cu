// zinc/backend/cuda/ssm_conv.cu — qwen35's short causal depthwise convolution with its rolling
// state (the op list's SsmConv; kernels.h SsmConvJob): each channel is convolved with its own
// d_conv taps over the sequence's last d_conv inputs, then SiLU (ggml_ssm_conv + ggml_silu, as
// cpu::ssm_conv).
//
// One thread per (channel, sequence) walks the sequence's rows in order with the window in
// registers (d_conv is a template parameter), reading row t's channel c (coalesced over the
// block's channels) and writing y; the window starts from the slot's conv state (zeros when the
// sequence starts at position 0) and its last d_conv - 1 inputs are written back. The arithmetic
// is the CPU tier's, operation for operation: s = 0, s = s + w_i x_i (one rounded multiply, one
// rounded add) in tap order, y = canon::silu(s); so both tiers give the same bits. Checkpoints
// (speculative decoding, SsmConvJob::ckpt): a kept sequence's thread also stores its window
// after each row into the slot's checkpoint row; without a pool nothing more is read or written.
#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

namespace cn = zinc::canon;

constexpr int kThreads = 256;

template <int K>
__global__ void __launch_bounds__(kThreads) ssm_conv_kernel(SsmConvJob j) {
    const int c = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
    if (c >= j.ch) return;
    const int si = static_cast<int>(blockIdx.y);
    const int r0 = j.seqs.row0[si], r1 = j.seqs.row0[si + 1];
    if (r0 >= r1) return;  // a sequence without rows: row_pos[r0] is another's, the state stays
    const bool reset = j.seqs.row_pos && j.seqs.row_pos[r0] == 0;
    const int64_t slot = j.seqs.slot[si];
    float* st = j.state + slot * j.slot_floats + static_cast<int64_t>(c) * (K - 1);
    // checkpoint row 0 of the slot (kept sequences only): the window after each row
    float* ck = j.ckpt && j.seqs.keep[si] ? j.ckpt + slot * j.seqs.n_ckpt * j.slot_floats +
                                                static_cast<int64_t>(c) * (K - 1)
                                          : nullptr;
    float w[K], win[K];
#pragma unroll
    for (int i = 0; i < K; ++i) w[i] = j.w[static_cast<int64_t>(c) * K + i];
#pragma unroll
    for (int i = 0; i < K - 1; ++i) win[i] = reset ? 0.0f : st[i];
    for (int t = r0; t < r1; ++t) {
        const int64_t at = static_cast<int64_t>(t) * j.ch + c;
        win[K - 1] = j.x[at];
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < K; ++i) s = cn::add(s, cn::mul(win[i], w[i]));
        j.y[at] = cn::silu(s);
#pragma unroll
        for (int i = 0; i < K - 1; ++i) win[i] = win[i + 1];
        if (ck && t - r0 < j.seqs.n_ckpt) {
            float* row = ck + static_cast<int64_t>(t - r0) * j.slot_floats;
#pragma unroll
            for (int i = 0; i < K - 1; ++i) row[i] = win[i];
        }
    }
#pragma unroll
    for (int i = 0; i < K - 1; ++i) st[i] = win[i];
}

template <int K>
void launch(const SsmConvJob& j, cudaStream_t s) {
    const dim3 grid(static_cast<unsigned>((j.ch + kThreads - 1) / kThreads),
                    static_cast<unsigned>(j.seqs.n_seqs));
#if defined(ZINC_SIMT_EMULATION)  // tests/unit/cuda_emul: this file on the host over a SIMT shim
    (void)s;
    zinc_simt::launch(ssm_conv_kernel<K>, grid, kThreads, j);
#else
    ssm_conv_kernel<K><<<grid, kThreads, 0, s>>>(j);
#endif
}

// launch<K> for the runtime d_conv in [2, 16].
template <int K>
bool dispatch(const SsmConvJob& j, cudaStream_t s) {
    if constexpr (K > 16) {
        return false;
    } else {
        if (j.d_conv != K) return dispatch<K + 1>(j, s);
        launch<K>(j, s);
        return true;
    }
}

}  // namespace

bool ssm_conv(const SsmConvJob& j, cudaStream_t s) {
    if (j.ch < 1 || j.seqs.n_seqs < 1 || j.d_conv < 2 || j.d_conv > 16) return false;
    return dispatch<2>(j, s);
}

}  // namespace zinc::cuda
