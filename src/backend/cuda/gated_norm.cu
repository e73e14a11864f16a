// zinc/backend/cuda/gated_norm.cu — the gating ops of qwen35 (kernels.h): the Gated DeltaNet
// output's per-head gated RMS norm (GatedRmsNorm), and the attention output gate's split of the
// joint Q / gate projection (SplitGate) and sigmoid multiply (SigmoidMul, also qwen35moe's
// shared-expert gate with one gate per row). The CPU tier's kernels (backend/cpu/delta_net.cpp)
// are followed operation for operation: the norm and the split give its bits; the sigmoid uses
// the device's expf where the CPU uses libm's (both within 2 ulp; a relative-error bound).
#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

namespace cn = zinc::canon;

constexpr int kWarps = 4;
constexpr int kNormThreads = kWarps * 32;
constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;  // the elementwise kernels loop over the rest (grid stride)

// One warp per (row, head) unit: canon::rms_scale with lane l owning chain l (elements l, l + 32,
// ... squared in f32, summed in f64 in increasing order; tree32 is the xor butterfly), then
// x = (x scale) w silu(z). Warps past the last unit run the same shuffles on the last unit and
// store nothing (every warp of a block reaches every shuffle).
__global__ void __launch_bounds__(kNormThreads)
    gated_rms_norm_kernel(float* x, const float* z, const float* w, int n_units, int n_heads,
                          int width, int hd, float eps) {
    const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
    const int u0 = static_cast<int>(blockIdx.x) * kWarps + warp;
    const bool valid = u0 < n_units;
    const int u = valid ? u0 : n_units - 1;
    const int64_t off =
        static_cast<int64_t>(u / n_heads) * width + static_cast<int64_t>(u % n_heads) * hd;
    float* xr = x + off;
    const float* zr = z + off;
    double ch = 0.0;
    for (int i = lane; i < hd; i += 32)
        ch = cn::dadd(ch, static_cast<double>(cn::mul(xr[i], xr[i])));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ch = cn::dadd(ch, __shfl_xor_sync(0xffffffffu, ch, o));
    const float mean = static_cast<float>(cn::ddiv(ch, static_cast<double>(hd)));
    const float scale = cn::div(1.0f, cn::sqrt(cn::add(mean, eps)));
    if (!valid) return;
    for (int i = lane; i < hd; i += 32)
        xr[i] = cn::mul(cn::rms_apply(xr[i], scale, w[i]), cn::silu(zr[i]));
}

__global__ void __launch_bounds__(kThreads)
    split_gate_kernel(const float* in, float* q, float* gate, int64_t n, int n_head, int hd) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < n;
         e += stride) {
        const int64_t row = e / (static_cast<int64_t>(n_head) * hd);
        const int64_t rem = e % (static_cast<int64_t>(n_head) * hd);
        const int64_t h = rem / hd, d = rem % hd;
        const float* src = in + (row * n_head + h) * 2 * hd;
        q[e] = src[d];
        gate[e] = src[hd + d];
    }
}

// x *= 1 / (1 + exp(-g)) as cpu::sigmoid_mul (and the executor's per-row broadcast): the
// reciprocal first, then one rounded multiply.
__global__ void __launch_bounds__(kThreads)
    sigmoid_mul_kernel(float* x, const float* gate, int64_t n, int width, int gate_width) {
    const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
    for (int64_t e = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; e < n;
         e += stride) {
        const float g = gate_width == 1 ? gate[e / width] : gate[e];
        x[e] = cn::mul(x[e], cn::div(1.0f, cn::add(1.0f, expf(-g))));
    }
}

unsigned elementwise_blocks(int64_t n) {
    const int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

}  // namespace

void gated_rms_norm(float* x, const float* z, const float* w, int n_rows, int width, int head_dim,
                    float eps, cudaStream_t s) {
    if (n_rows < 1 || head_dim < 1 || width < head_dim) return;
    const int n_heads = width / head_dim;
    const int n_units = n_rows * n_heads;
    const dim3 grid(static_cast<unsigned>((n_units + kWarps - 1) / kWarps));
#if defined(ZINC_SIMT_EMULATION)  // tests/unit/cuda_emul: this file on the host over a SIMT shim
    (void)s;
    zinc_simt::launch(gated_rms_norm_kernel, grid, kNormThreads, x, z, w, n_units, n_heads, width,
                      head_dim, eps);
#else
    gated_rms_norm_kernel<<<grid, kNormThreads, 0, s>>>(x, z, w, n_units, n_heads, width,
                                                          head_dim, eps);
#endif
}

void split_gate(const float* in, float* q, float* gate, int n_rows, int n_head, int head_dim,
                cudaStream_t s) {
    const int64_t n = static_cast<int64_t>(n_rows) * n_head * head_dim;
    if (n <= 0) return;
    const dim3 grid(elementwise_blocks(n));
#if defined(ZINC_SIMT_EMULATION)
    (void)s;
    zinc_simt::launch(split_gate_kernel, grid, kThreads, in, q, gate, n, n_head, head_dim);
#else
    split_gate_kernel<<<grid, kThreads, 0, s>>>(in, q, gate, n, n_head, head_dim);
#endif
}

void sigmoid_mul(float* x, const float* gate, int n_rows, int width, int gate_width,
                 cudaStream_t s) {
    const int64_t n = static_cast<int64_t>(n_rows) * width;
    if (n <= 0) return;
    const dim3 grid(elementwise_blocks(n));
#if defined(ZINC_SIMT_EMULATION)
    (void)s;
    zinc_simt::launch(sigmoid_mul_kernel, grid, kThreads, x, gate, n, width, gate_width);
#else
    sigmoid_mul_kernel<<<grid, kThreads, 0, s>>>(x, gate, n, width, gate_width);
#endif
}

}  // namespace zinc::cuda
