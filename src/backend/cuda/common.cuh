// zinc/backend/cuda/common.cuh — device-side helpers shared by the kernels: half/bfloat16 loads,
// warp reductions, and the decoding of every GGUF block format into 32-element chunks.
//
// A "chunk" is 32 consecutive elements of a weight row. decode_chunk<T>(row, c) returns their
// integer codes as 8 packed int32 (4 signed int8 each, element order) and, per half of 16
// elements, a scale d and an offset m such that w_i = d * q_i + m. With activations packed as
// a_i = ad * aq_i (int8 blocks of 32, pack.cu), a chunk's dot product is
//   ad * (d_lo * Σ_lo q·aq + d_hi * Σ_hi q·aq) + m_lo * s_lo + m_hi * s_hi,   s = ad * Σ aq,
// with the integer sums done by dp4a. Block layouts and element order follow ggml-common.h and
// ggml's dequantize_row_* (the same as src/quant/blocks.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace zinc::cuda::dev {

__device__ __forceinline__ float h2f(uint16_t h) {
    return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float bf2f(uint16_t h) {
    return __uint_as_float(static_cast<uint32_t>(h) << 16);
}
__device__ __forceinline__ uint16_t ld16(const uint8_t* p) {  // 2-byte aligned
    return *reinterpret_cast<const uint16_t*>(p);
}
// 4 bytes from a 2-byte aligned address.
__device__ __forceinline__ uint32_t ld32_a2(const uint8_t* p) {
    const uint16_t* q = reinterpret_cast<const uint16_t*>(p);
    return static_cast<uint32_t>(q[0]) | (static_cast<uint32_t>(q[1]) << 16);
}
__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {  // 4-byte aligned
    return *reinterpret_cast<const uint32_t*>(p);
}
// A matrix job's weights for activation row `row` (MatJob::matrix, from its fields: the kernels
// read the fields of their by-value job parameters rather than call a member on them).
__device__ __forceinline__ const uint8_t* job_matrix(const uint8_t* w, const int32_t* expert,
                                                     size_t stride, int row) {
    return expert ? w + static_cast<size_t>(expert[row]) * stride : w;
}
// 4 bytes from any address (MXFP4's 17-byte blocks), little-endian.
__device__ __forceinline__ uint32_t ld32_a1(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Programmatic dependent launch, the primary's side: lets the next kernel of the stream, when
// that one is launched with programmatic stream serialization (dmmv_fast under ZINC_DMMV_PDL=1),
// start on the free SMs now and stream its weights while this grid finishes; the next kernel's
// griddepcontrol.wait still waits for all of this grid's writes. A no-op for a plain launch after
// it, and on the host emulations.
__device__ __forceinline__ void launch_dependents() {
#if !defined(ZINC_SIMT_EMULATION) && !defined(ZINC_CUDA_EMU)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

struct Chunk {
    int q[8];  // 32 int8 codes, 4 per int, element order
    float d_lo, d_hi, m_lo, m_hi;
};

// Type ids (ggml numbering, as quant::GgmlType).
constexpr int kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8,
              kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30,
              kMXFP4 = 39;
// Row layouts repacked at upload (repack.h): the same bytes per row, split into aligned arrays
// so that chunks load 16 bytes at a time. nb = blocks per row.
constexpr int kQ4_0R = 102, kQ8_0R = 108, kQ6_KR = 114;

template <int T> struct Traits;
template <> struct Traits<kQ4_0> { static constexpr int qk = 32, bytes = 18; };
template <> struct Traits<kQ4_1> { static constexpr int qk = 32, bytes = 20; };
template <> struct Traits<kQ5_0> { static constexpr int qk = 32, bytes = 22; };
template <> struct Traits<kQ5_1> { static constexpr int qk = 32, bytes = 24; };
template <> struct Traits<kQ8_0> { static constexpr int qk = 32, bytes = 34; };
template <> struct Traits<kQ2_K> { static constexpr int qk = 256, bytes = 84; };
template <> struct Traits<kQ3_K> { static constexpr int qk = 256, bytes = 110; };
template <> struct Traits<kQ4_K> { static constexpr int qk = 256, bytes = 144; };
template <> struct Traits<kQ5_K> { static constexpr int qk = 256, bytes = 176; };
template <> struct Traits<kQ6_K> { static constexpr int qk = 256, bytes = 210; };
template <> struct Traits<kQ4_0R> { static constexpr int qk = 32, bytes = 18; };
template <> struct Traits<kQ8_0R> { static constexpr int qk = 32, bytes = 34; };
template <> struct Traits<kQ6_KR> { static constexpr int qk = 256, bytes = 210; };
template <> struct Traits<kMXFP4> { static constexpr int qk = 32, bytes = 17; };

// 4 nibbles (low or high, by shift) of 4 bytes -> 4 int8 lanes minus `bias`.
__device__ __forceinline__ int nib4(uint32_t v, int shift, int bias) {
    const uint32_t n = (v >> shift) & 0x0f0f0f0fu;
    return static_cast<int>(__vsubss4(n, static_cast<uint32_t>(bias) * 0x01010101u));
}
// The 4 bits j..j+3 of `bits` spread to bit 4 of each byte (for Q5 high bits).
__device__ __forceinline__ uint32_t hbits4(uint32_t bits, int j) {
    const uint32_t b = (bits >> j) & 0xfu;
    return ((b & 1u) << 4) | ((b & 2u) << 11) | ((b & 4u) << 18) | ((b & 8u) << 25);
}

template <int T>
__device__ __forceinline__ void decode_chunk(const uint8_t* row, int c, Chunk& k, int nb);

template <>
__device__ __forceinline__ void decode_chunk<kQ4_0>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + c * 18;
    const float d = h2f(ld16(b));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t v = ld32_a2(b + 2 + 4 * i);
        k.q[i] = nib4(v, 0, 8);
        k.q[4 + i] = nib4(v, 4, 8);
    }
    k.d_lo = k.d_hi = d;
    k.m_lo = k.m_hi = 0.f;
}
template <>
__device__ __forceinline__ void decode_chunk<kQ4_1>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + c * 20;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t v = ld32(b + 4 + 4 * i);
        k.q[i] = nib4(v, 0, 0);
        k.q[4 + i] = nib4(v, 4, 0);
    }
    k.d_lo = k.d_hi = d;
    k.m_lo = k.m_hi = m;
}
template <>
__device__ __forceinline__ void decode_chunk<kQ5_0>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + c * 22;
    const float d = h2f(ld16(b));
    const uint32_t qh = ld32_a2(b + 2);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t v = ld32_a2(b + 6 + 4 * i);
        const uint32_t lo = ((v >> 0) & 0x0f0f0f0fu) | hbits4(qh, 4 * i);
        const uint32_t hi = ((v >> 4) & 0x0f0f0f0fu) | hbits4(qh, 16 + 4 * i);
        k.q[i] = static_cast<int>(__vsubss4(lo, 0x10101010u));
        k.q[4 + i] = static_cast<int>(__vsubss4(hi, 0x10101010u));
    }
    k.d_lo = k.d_hi = d;
    k.m_lo = k.m_hi = 0.f;
}
template <>
__device__ __forceinline__ void decode_chunk<kQ5_1>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + c * 24;
    const float d = h2f(ld16(b)), m = h2f(ld16(b + 2));
    const uint32_t qh = ld32(b + 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t v = ld32(b + 8 + 4 * i);
        k.q[i] = static_cast<int>(((v >> 0) & 0x0f0f0f0fu) | hbits4(qh, 4 * i));
        k.q[4 + i] = static_cast<int>(((v >> 4) & 0x0f0f0f0fu) | hbits4(qh, 16 + 4 * i));
    }
    k.d_lo = k.d_hi = d;
    k.m_lo = k.m_hi = m;
}
template <>
__device__ __forceinline__ void decode_chunk<kQ8_0>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + c * 34;
    const float d = h2f(ld16(b));
#pragma unroll
    for (int i = 0; i < 8; ++i) k.q[i] = static_cast<int>(ld32_a2(b + 2 + 4 * i));
    k.d_lo = k.d_hi = d;
    k.m_lo = k.m_hi = 0.f;
}

// Q4_K/Q5_K 6-bit scale and min of sub-block j (ggml get_scale_min_k4).
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

template <>
__device__ __forceinline__ void decode_chunk<kQ4_K>(const uint8_t* row, int c, Chunk& k, int) {
    // (A version loading the 16-byte block head as one uint4 measured 40% slower on the H200:
    // docs/perf-notes.md. Byte loads of the two scales it needs are kept.)
    const uint8_t* b = row + (c >> 3) * 144;
    const int j = c & 7;
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    int sc, mn;
    scale_min_k4(j, b + 4, sc, mn);
    const uint8_t* qs = b + 16 + 32 * (j >> 1);
    const int shift = (j & 1) * 4;
    const uint4 v0 = *reinterpret_cast<const uint4*>(qs);
    const uint4 v1 = *reinterpret_cast<const uint4*>(qs + 16);
    k.q[0] = nib4(v0.x, shift, 0);
    k.q[1] = nib4(v0.y, shift, 0);
    k.q[2] = nib4(v0.z, shift, 0);
    k.q[3] = nib4(v0.w, shift, 0);
    k.q[4] = nib4(v1.x, shift, 0);
    k.q[5] = nib4(v1.y, shift, 0);
    k.q[6] = nib4(v1.z, shift, 0);
    k.q[7] = nib4(v1.w, shift, 0);
    k.d_lo = k.d_hi = d * static_cast<float>(sc);
    k.m_lo = k.m_hi = -dmin * static_cast<float>(mn);
}
template <>
__device__ __forceinline__ void decode_chunk<kQ5_K>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + (c >> 3) * 176;
    const int j = c & 7;
    const float d = h2f(ld16(b)), dmin = h2f(ld16(b + 2));
    int sc, mn;
    scale_min_k4(j, b + 4, sc, mn);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + 48 + 32 * (j >> 1);
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint32_t v = ld32(qs + 4 * i);
        const uint32_t h = ld32(qh + 4 * i);
        const uint32_t hb = ((h >> j) & 0x01010101u) << 4;
        k.q[i] = static_cast<int>(((v >> shift) & 0x0f0f0f0fu) | hb);
    }
    k.d_lo = k.d_hi = d * static_cast<float>(sc);
    k.m_lo = k.m_hi = -dmin * static_cast<float>(mn);
}
template <>
__device__ __forceinline__ void decode_chunk<kQ6_K>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + (c >> 3) * 210;
    const int cc = c & 7, n = cc >> 2, kk = cc & 3;
    const uint8_t* ql = b + 64 * n + ((kk & 1) ? 32 : 0);
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * n + 2 * kk;
    const float d = h2f(ld16(b + 208));
    const int lshift = (kk >> 1) * 4, hshift = 2 * kk;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint32_t v = ld32_a2(ql + 4 * i);
        const uint32_t h = ld32_a2(qh + 4 * i);
        const uint32_t q = ((v >> lshift) & 0x0f0f0f0fu) | (((h >> hshift) & 0x03030303u) << 4);
        k.q[i] = static_cast<int>(__vsubss4(q, 0x20202020u));
    }
    k.d_lo = d * static_cast<float>(sc[0]);
    k.d_hi = d * static_cast<float>(sc[1]);
    k.m_lo = k.m_hi = 0.f;
}
template <>
__device__ __forceinline__ void decode_chunk<kQ2_K>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + (c >> 3) * 84;
    const int cc = c & 7, n = cc >> 2, j = cc & 3;
    const uint8_t* sc = b + 8 * n + 2 * j;
    const uint8_t* q = b + 16 + 32 * n;
    const float d = h2f(ld16(b + 80)), dmin = h2f(ld16(b + 82));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint32_t v = ld32(q + 4 * i);
        k.q[i] = static_cast<int>((v >> (2 * j)) & 0x03030303u);
    }
    k.d_lo = d * static_cast<float>(sc[0] & 0xF);
    k.d_hi = d * static_cast<float>(sc[1] & 0xF);
    k.m_lo = -dmin * static_cast<float>(sc[0] >> 4);
    k.m_hi = -dmin * static_cast<float>(sc[1] >> 4);
}
// Q3_K signed 6-bit scale i (0..15), stored +32 in 12 packed bytes.
__device__ __forceinline__ int q3k_scale(const uint8_t* s, int i) {
    const int g = i >> 2, r = i & 3;
    int lo;
    if (g == 0) lo = s[r] & 0xF;
    else if (g == 1) lo = s[4 + r] & 0xF;
    else if (g == 2) lo = s[r] >> 4;
    else lo = s[4 + r] >> 4;
    const int hi = (s[8 + r] >> (2 * g)) & 3;
    return (lo | (hi << 4)) - 32;
}
template <>
__device__ __forceinline__ void decode_chunk<kQ3_K>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + (c >> 3) * 110;
    const int cc = c & 7, n = cc >> 2, j = cc & 3;
    const uint8_t* hm = b;
    const uint8_t* q = b + 32 + 32 * n;
    const uint8_t* s = b + 96;
    const float d = h2f(ld16(b + 108));
    const int mbit = 4 * n + j;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint32_t v = ld32_a2(q + 4 * i);
        const uint32_t h = ld32_a2(hm + 4 * i);
        const uint32_t lo = (v >> (2 * j)) & 0x03030303u;
        // subtract 4 where the hmask bit is clear
        const uint32_t clear = (~(h >> mbit)) & 0x01010101u;
        k.q[i] = static_cast<int>(__vsubss4(lo, clear * 4u));
    }
    k.d_lo = d * static_cast<float>(q3k_scale(s, 8 * n + 2 * j));
    k.d_hi = d * static_cast<float>(q3k_scale(s, 8 * n + 2 * j + 1));
    k.m_lo = k.m_hi = 0.f;
}

// Q4_0, repacked: row = [qs: nb x 16][d: nb x 2 (f16)].
template <>
__device__ __forceinline__ void decode_chunk<kQ4_0R>(const uint8_t* row, int c, Chunk& k, int nb) {
    const uint4 v = *reinterpret_cast<const uint4*>(row + 16 * c);
    const float d = h2f(ld16(row + 16 * nb + 2 * c));
    k.q[0] = nib4(v.x, 0, 8);
    k.q[1] = nib4(v.y, 0, 8);
    k.q[2] = nib4(v.z, 0, 8);
    k.q[3] = nib4(v.w, 0, 8);
    k.q[4] = nib4(v.x, 4, 8);
    k.q[5] = nib4(v.y, 4, 8);
    k.q[6] = nib4(v.z, 4, 8);
    k.q[7] = nib4(v.w, 4, 8);
    k.d_lo = k.d_hi = d;
    k.m_lo = k.m_hi = 0.f;
}
// Q8_0, repacked: row = [qs: nb x 32][d: nb x 2 (f16)].
template <>
__device__ __forceinline__ void decode_chunk<kQ8_0R>(const uint8_t* row, int c, Chunk& k, int nb) {
    const uint4 v0 = *reinterpret_cast<const uint4*>(row + 32 * c);
    const uint4 v1 = *reinterpret_cast<const uint4*>(row + 32 * c + 16);
    k.q[0] = static_cast<int>(v0.x);
    k.q[1] = static_cast<int>(v0.y);
    k.q[2] = static_cast<int>(v0.z);
    k.q[3] = static_cast<int>(v0.w);
    k.q[4] = static_cast<int>(v1.x);
    k.q[5] = static_cast<int>(v1.y);
    k.q[6] = static_cast<int>(v1.z);
    k.q[7] = static_cast<int>(v1.w);
    k.d_lo = k.d_hi = h2f(ld16(row + 32 * nb + 2 * c));
    k.m_lo = k.m_hi = 0.f;
}
// Q6_K, repacked: row = [ql: nb x 128][qh: nb x 64][scales: nb x 16][d: nb x 2 (f16)].
template <>
__device__ __forceinline__ void decode_chunk<kQ6_KR>(const uint8_t* row, int c, Chunk& k, int nb) {
    const int blk = c >> 3, cc = c & 7, n = cc >> 2, kk = cc & 3;
    const uint8_t* ql = row + 128 * blk + 64 * n + ((kk & 1) ? 32 : 0);
    const uint8_t* qh = row + 128 * nb + 64 * blk + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(row + 192 * nb + 16 * blk) + 8 * n + 2 * kk;
    const float d = h2f(ld16(row + 208 * nb + 2 * blk));
    const int lshift = (kk >> 1) * 4, hshift = 2 * kk;
    const uint4 l0 = *reinterpret_cast<const uint4*>(ql), l1 = *reinterpret_cast<const uint4*>(ql + 16);
    const uint4 h0 = *reinterpret_cast<const uint4*>(qh), h1 = *reinterpret_cast<const uint4*>(qh + 16);
    const uint32_t lv[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
    const uint32_t hv[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint32_t q = ((lv[i] >> lshift) & 0x0f0f0f0fu) | (((hv[i] >> hshift) & 0x03030303u) << 4);
        k.q[i] = static_cast<int>(__vsubss4(q, 0x20202020u));
    }
    k.d_lo = d * static_cast<float>(sc[0]);
    k.d_hi = d * static_cast<float>(sc[1]);
    k.m_lo = k.m_hi = 0.f;
}

// MXFP4 (quant/blocks.h): 4 codes (one per byte, 0..15) -> their doubled E2M1 values as 4
// int8 lanes: magnitudes {0, 1, 2, 3, 4, 6, 8, 12} by byte permute (selectors 0..7 only, bit 3
// of each code masked off), then the lanes with bit 3 set negated (x ^ 0xff) - 0xff = -x.
__device__ __forceinline__ int e2m1x4(uint32_t codes) {
    const uint32_t lo3 = codes & 0x07070707u;
    const uint32_t sel = (lo3 & 0x7u) | ((lo3 >> 4) & 0x70u) | ((lo3 >> 8) & 0x700u) |
                         ((lo3 >> 12) & 0x7000u);
    const uint32_t mag = __byte_perm(0x03020100u, 0x0C080604u, sel);
    const uint32_t neg = ((codes >> 3) & 0x01010101u) * 0xffu;
    return static_cast<int>(__vsub4(mag ^ neg, neg));
}
// The MXFP4 block scale 2^(e - 128) (canon_dot::e8m0_to_fp32_half).
__device__ __forceinline__ float e8m0_half(uint8_t e) {
    return __uint_as_float(e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23));
}
template <>
__device__ __forceinline__ void decode_chunk<kMXFP4>(const uint8_t* row, int c, Chunk& k, int) {
    const uint8_t* b = row + c * 17;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t v = ld32_a1(b + 1 + 4 * i);
        k.q[i] = e2m1x4(v & 0x0f0f0f0fu);
        k.q[4 + i] = e2m1x4((v >> 4) & 0x0f0f0f0fu);
    }
    k.d_lo = k.d_hi = e8m0_half(b[0]);
    k.m_lo = k.m_hi = 0.f;
}

// Element e (< 32) of a decoded chunk as a float.
__device__ __forceinline__ float chunk_value(const Chunk& k, int e) {
    const int8_t q = static_cast<int8_t>((k.q[e >> 2] >> (8 * (e & 3))) & 0xff);
    return e < 16 ? k.d_lo * q + k.m_lo : k.d_hi * q + k.m_hi;
}

}  // namespace zinc::cuda::dev
