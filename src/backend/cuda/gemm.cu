// zinc/backend/cuda/gemm.cu — weight dequantization for the prefill path (whole matrices to f16,
// fed to cuBLAS by the runner: gemm_cublas.cpp) and embedding row lookup (get_rows).
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace zinc::cuda {
namespace {

using namespace dev;

// One thread per 32-element chunk: decode and write 32 values.
template <int T>
__global__ void dequant_q_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int n_out,
                                 int n_chunks, float scale, const int32_t* rows,
                                 uint16_t* __restrict__ h, float* __restrict__ f) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= static_cast<int64_t>(n_out) * n_chunks) return;
    const int r = static_cast<int>(t / n_chunks), c = static_cast<int>(t % n_chunks);
    const int src = rows ? rows[r] : r;
    Chunk ch;
    decode_chunk<T>(w + static_cast<size_t>(src) * row_bytes, c, ch, n_chunks / (Traits<T>::qk / 32));
    const size_t o = static_cast<size_t>(r) * n_chunks * 32 + c * 32;
#pragma unroll
    for (int e = 0; e < 32; ++e) {
        const float v = chunk_value(ch, e) * scale;
        if (h) h[o + e] = __half_as_ushort(__float2half_rn(v));
        else f[o + e] = v;
    }
}

template <int T>
__global__ void dequant_f_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int n_out, int k,
                                 float scale, const int32_t* rows, uint16_t* __restrict__ h,
                                 float* __restrict__ f) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= static_cast<int64_t>(n_out) * k) return;
    const int r = static_cast<int>(t / k), i = static_cast<int>(t % k);
    const int src = rows ? rows[r] : r;
    const uint8_t* p = w + static_cast<size_t>(src) * row_bytes;
    float v;
    if constexpr (T == kF32) v = reinterpret_cast<const float*>(p)[i];
    else if constexpr (T == kF16) v = h2f(reinterpret_cast<const uint16_t*>(p)[i]);
    else v = bf2f(reinterpret_cast<const uint16_t*>(p)[i]);
    v *= scale;
    if (h) h[t] = __half_as_ushort(__float2half_rn(v));
    else f[t] = v;
}

template <int T>
void launch_q(const uint8_t* w, size_t rb, int n, int k, float scale, const int32_t* rows,
              uint16_t* h, float* f, cudaStream_t s) {
    const int64_t total = static_cast<int64_t>(n) * (k / 32);
    dequant_q_kernel<T><<<static_cast<unsigned>((total + 255) / 256), 256, 0, s>>>(
        w, rb, n, k / 32, scale, rows, h, f);
}
template <int T>
void launch_f(const uint8_t* w, size_t rb, int n, int k, float scale, const int32_t* rows,
              uint16_t* h, float* f, cudaStream_t s) {
    const int64_t total = static_cast<int64_t>(n) * k;
    dequant_f_kernel<T><<<static_cast<unsigned>((total + 255) / 256), 256, 0, s>>>(
        w, rb, n, k, scale, rows, h, f);
}

void dequant_any(int type, const uint8_t* w, size_t rb, int n, int k, float scale,
                 const int32_t* rows, uint16_t* h, float* f, cudaStream_t s) {
    switch (type) {
        case kQ4_0: launch_q<kQ4_0>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ4_1: launch_q<kQ4_1>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ5_0: launch_q<kQ5_0>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ5_1: launch_q<kQ5_1>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ8_0: launch_q<kQ8_0>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ2_K: launch_q<kQ2_K>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ3_K: launch_q<kQ3_K>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ4_K: launch_q<kQ4_K>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ5_K: launch_q<kQ5_K>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ6_K: launch_q<kQ6_K>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ4_0R: launch_q<kQ4_0R>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ8_0R: launch_q<kQ8_0R>(w, rb, n, k, scale, rows, h, f, s); break;
        case kQ6_KR: launch_q<kQ6_KR>(w, rb, n, k, scale, rows, h, f, s); break;
        case kF32: launch_f<kF32>(w, rb, n, k, scale, rows, h, f, s); break;
        case kF16: launch_f<kF16>(w, rb, n, k, scale, rows, h, f, s); break;
        case kBF16: launch_f<kBF16>(w, rb, n, k, scale, rows, h, f, s); break;
        default: break;
    }
}

}  // namespace

void dequant_f16(int type, const uint8_t* w, size_t row_bytes, int n_out, int k, uint16_t* dst,
                 cudaStream_t s) {
    dequant_any(type, w, row_bytes, n_out, k, 1.f, nullptr, dst, nullptr, s);
}

void get_rows(int type, const uint8_t* w, size_t row_bytes, const int32_t* rows, int n, int k,
              float scale, float* out, cudaStream_t s) {
    dequant_any(type, w, row_bytes, n, k, scale, rows, nullptr, out, s);
}

}  // namespace zinc::cuda
