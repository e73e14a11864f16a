// zinc/backend/cuda/gemm.cu — weight dequantization for the prefill path (whole matrices to f16,
// fed to cuBLAS by the runner: gemm_cublas.cpp) and embedding row lookup (get_rows). get_rows of
// the GGUF layouts performs quant::dequantize_row's float operations element for element (then
// `* scale` when scale != 1, as cpu::get_rows), so embedding rows equal the CPU tier's bits.
#include <type_traits>

#include "backend/canon.h"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "quant/canon_dot.h"

namespace zinc::cuda {
namespace {

using namespace dev;

// One thread per 32-element chunk: decode and write 32 values (f32 output: get_rows of the
// repacked layouts, a few rows).
template <int T>
__global__ void dequant_q_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int n_out,
                                 int n_chunks, float scale, const int32_t* rows,
                                 float* __restrict__ f) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= static_cast<int64_t>(n_out) * n_chunks) return;
    const int r = static_cast<int>(t / n_chunks), c = static_cast<int>(t % n_chunks);
    const int src = rows ? rows[r] : r;
    Chunk ch;
    decode_chunk<T>(w + static_cast<size_t>(src) * row_bytes, c, ch, n_chunks / (Traits<T>::qk / 32));
    const size_t o = static_cast<size_t>(r) * n_chunks * 32 + c * 32;
#pragma unroll
    for (int e = 0; e < 32; ++e) f[o + e] = chunk_value(ch, e) * scale;
}

// Whole matrices to f16 for cuBLAS (the prefill path): bandwidth-bound, so the stores must be
// coalesced. Thread t decodes chunk t (output elements [32 t, 32 t + 32): the output is the
// matrix row-major, so chunk t of the whole matrix lands at 32 t), stages its 64 bytes in shared
// memory (80-byte stride: the 16-byte stores of a quarter warp hit distinct banks), and the warp
// then writes its 2 KiB as 16-byte stores of consecutive addresses. (The earlier kernel stored
// 2 bytes at a time with a 64-byte stride between lanes: ~230 GB/s on the H200, 0.19 ms for a
// 4096 x 4096 matrix against cuBLAS's 0.034 ms for the 512-row product that follows.)
constexpr int kDqThreads = 256;
constexpr int kDqStride = 80;  // bytes per staged chunk (64 used)
template <int T>
__global__ void __launch_bounds__(kDqThreads)
    dequant_h_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int n_chunks, int64_t total,
                     float scale, const int32_t* rows, uint16_t* __restrict__ h) {
    __shared__ __align__(16) uint8_t stage[kDqThreads / 32][32 * kDqStride];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t warp0 = static_cast<int64_t>(blockIdx.x) * kDqThreads + warp * 32;
    const int64_t t = warp0 + lane;
    uint8_t* mine = stage[warp] + lane * kDqStride;
    if (t < total) {
        const int r = static_cast<int>(t / n_chunks), c = static_cast<int>(t % n_chunks);
        const int src = rows ? rows[r] : r;
        Chunk ch;
        decode_chunk<T>(w + static_cast<size_t>(src) * row_bytes, c, ch,
                        n_chunks / (Traits<T>::qk / 32));
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            uint32_t p[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = g * 8 + e * 2;
                const uint32_t lo = __half_as_ushort(__float2half_rn(chunk_value(ch, i) * scale));
                const uint32_t hi = __half_as_ushort(__float2half_rn(chunk_value(ch, i + 1) * scale));
                p[e] = lo | (hi << 16);
            }
            uint4 v;
            v.x = p[0], v.y = p[1], v.z = p[2], v.w = p[3];
            *reinterpret_cast<uint4*>(mine + g * 16) = v;
        }
    }
    __syncwarp();
    // The warp's 32 chunks are 128 pieces of 16 bytes; lane L stores pieces L, L + 32, ...
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int piece = k * 32 + lane, chunk = piece >> 2, part = piece & 3;
        if (warp0 + chunk < total) {
            const uint4 v = *reinterpret_cast<const uint4*>(stage[warp] + chunk * kDqStride + part * 16);
            reinterpret_cast<uint4*>(h)[(warp0 + chunk) * 4 + part] = v;
        }
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

namespace cn = zinc::canon;
namespace cd = zinc::quant::canon_dot;
namespace qd = zinc::quant::detail;

// Element e of a row, as dequantize_row_<type> computes it (src/quant/q_legacy.cpp,
// k_quants.cpp, fp16.cpp): the same products and sums, each rounded.
template <int T>
__device__ __forceinline__ float dequant_exact(const uint8_t* row, int e) {
    if constexpr (T == kF32) {
        return reinterpret_cast<const float*>(row)[e];
    } else if constexpr (T == kF16) {
        return h2f(ld16(row + 2 * e));
    } else if constexpr (T == kBF16) {
        return bf2f(ld16(row + 2 * e));
    } else if constexpr (T == kMXFP4) {  // mxfp4.cpp: kvalue * half(e), one rounded product
        const auto& b = reinterpret_cast<const qd::BlockMXFP4*>(row)[e >> 5];
        return cn::mul(static_cast<float>(cd::code_mxfp4(b, e & 31)), cd::e8m0_to_fp32_half(b.e));
    } else if constexpr (T == kQ4_0 || T == kQ5_0 || T == kQ8_0 || T == kQ4_1 || T == kQ5_1) {
        const int u = e & 31;
        if constexpr (T == kQ4_0) {
            const auto& b = reinterpret_cast<const qd::BlockQ4_0*>(row)[e >> 5];
            return cn::mul(h2f(b.d), static_cast<float>(cd::code_q4_0(b, u)));
        } else if constexpr (T == kQ5_0) {
            const auto& b = reinterpret_cast<const qd::BlockQ5_0*>(row)[e >> 5];
            return cn::mul(h2f(b.d), static_cast<float>(cd::code_q5_0(b, u)));
        } else if constexpr (T == kQ8_0) {
            const auto& b = reinterpret_cast<const qd::BlockQ8_0*>(row)[e >> 5];
            return cn::mul(static_cast<float>(b.qs[u]), h2f(b.d));
        } else if constexpr (T == kQ4_1) {
            const auto& b = reinterpret_cast<const qd::BlockQ4_1*>(row)[e >> 5];
            return cn::add(cn::mul(h2f(b.d), static_cast<float>(cd::code_q4_1(b, u))), h2f(b.m));
        } else {
            const auto& b = reinterpret_cast<const qd::BlockQ5_1*>(row)[e >> 5];
            return cn::add(cn::mul(h2f(b.d), static_cast<float>(cd::code_q5_1(b, u))), h2f(b.m));
        }
    } else {
        const int u = e & 255;
        if constexpr (T == kQ2_K) {
            const auto& b = reinterpret_cast<const qd::BlockQ2_K*>(row)[e >> 8];
            const int sc = b.scales[u / 16];
            const float dl = cn::mul(h2f(b.d), static_cast<float>(sc & 0x0F));
            const float ml = cn::mul(h2f(b.dmin), static_cast<float>(sc >> 4));
            return cn::sub(cn::mul(dl, static_cast<float>(cd::code_q2_k(b, u))), ml);
        } else if constexpr (T == kQ3_K) {
            const auto& b = reinterpret_cast<const qd::BlockQ3_K*>(row)[e >> 8];
            const float dl = cn::mul(h2f(b.d), static_cast<float>(cd::scale_q3_k(b, u / 16)));
            return cn::mul(dl, static_cast<float>(cd::code_q3_k(b, u)));
        } else if constexpr (T == kQ4_K || T == kQ5_K) {
            using B = std::conditional_t<T == kQ4_K, qd::BlockQ4_K, qd::BlockQ5_K>;
            const auto& b = reinterpret_cast<const B*>(row)[e >> 8];
            const int j = u / 32;
            const float d1 = cn::mul(h2f(b.d), static_cast<float>(cd::scale_min_k4(b.scales, j, false)));
            const float m1 = cn::mul(h2f(b.dmin), static_cast<float>(cd::scale_min_k4(b.scales, j, true)));
            int q;
            if constexpr (T == kQ4_K) q = cd::code_q4_k(b, u);
            else q = cd::code_q5_k(b, u);
            return cn::sub(cn::mul(d1, static_cast<float>(q)), m1);
        } else {
            static_assert(T == kQ6_K);
            const auto& b = reinterpret_cast<const qd::BlockQ6_K*>(row)[e >> 8];
            return cn::mul(cn::mul(h2f(b.d), static_cast<float>(b.scales[u / 16])),
                           static_cast<float>(cd::code_q6_k(b, u) - 32));
        }
    }
}

// One thread per element of the n rows.
template <int T>
__global__ void get_rows_exact_kernel(const uint8_t* __restrict__ w, size_t row_bytes,
                                      const int32_t* __restrict__ rows, int n, int k, float scale,
                                      float* __restrict__ out) {
    const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= static_cast<int64_t>(n) * k) return;
    const int r = static_cast<int>(t / k), e = static_cast<int>(t % k);
    float v = dequant_exact<T>(w + static_cast<size_t>(rows[r]) * row_bytes, e);
    if (scale != 1.0f) v = cn::mul(v, scale);
    out[t] = v;
}

template <int T>
void launch_rows_exact(const uint8_t* w, size_t rb, const int32_t* rows, int n, int k, float scale,
                       float* out, cudaStream_t s) {
    const int64_t total = static_cast<int64_t>(n) * k;
    get_rows_exact_kernel<T><<<static_cast<unsigned>((total + 255) / 256), 256, 0, s>>>(
        w, rb, rows, n, k, scale, out);
}

template <int T>
void launch_q(const uint8_t* w, size_t rb, int n, int k, float scale, const int32_t* rows,
              uint16_t* h, float* f, cudaStream_t s) {
    const int64_t total = static_cast<int64_t>(n) * (k / 32);
    const auto blocks = static_cast<unsigned>((total + kDqThreads - 1) / kDqThreads);
    if (h)
        dequant_h_kernel<T><<<blocks, kDqThreads, 0, s>>>(w, rb, k / 32, total, scale, rows, h);
    else
        dequant_q_kernel<T><<<blocks, kDqThreads, 0, s>>>(w, rb, n, k / 32, scale, rows, f);
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
        case kMXFP4: launch_q<kMXFP4>(w, rb, n, k, scale, rows, h, f, s); break;
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
    switch (type) {
        case kQ4_0: launch_rows_exact<kQ4_0>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ4_1: launch_rows_exact<kQ4_1>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ5_0: launch_rows_exact<kQ5_0>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ5_1: launch_rows_exact<kQ5_1>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ8_0: launch_rows_exact<kQ8_0>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ2_K: launch_rows_exact<kQ2_K>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ3_K: launch_rows_exact<kQ3_K>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ4_K: launch_rows_exact<kQ4_K>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ5_K: launch_rows_exact<kQ5_K>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kQ6_K: launch_rows_exact<kQ6_K>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kF32: launch_rows_exact<kF32>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kF16: launch_rows_exact<kF16>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kBF16: launch_rows_exact<kBF16>(w, row_bytes, rows, n, k, scale, out, s); break;
        case kMXFP4: launch_rows_exact<kMXFP4>(w, row_bytes, rows, n, k, scale, out, s); break;
        default:  // the repacked layouts (ZINC_REPACK=1): decoded chunks, not bit-exact
            dequant_any(type, w, row_bytes, n, k, scale, rows, nullptr, out, s);
    }
}

}  // namespace zinc::cuda
