// zinc/quant/canon_dot.h — the canonical float order of every weight type's dot product with its
// packed activation row (vec_dot), written once as scalar code that compiles for the host (the
// scalar reference path, dot_ref.cpp) and for CUDA devices (the exact matrix-vector kernels,
// backend/cuda/dmmv_exact.cu). docs/exactness.md, "Matrix products".
//
// The order is the one the CPU tier's SIMD kernels perform (dot_avx2_kernels.h, its AVX-512 VNNI
// build, gemm_kernels.h, dot_avx2.cpp), so ref == AVX2 == VNNI == gemm_tile == CUDA bit for bit:
//
//  * An integer "lane" is the exact sum of the products of 4 consecutive elements (elements
//    4l..4l+3 of a 32-element group go to lane l, l = 0..7), times the sub-block scale where the
//    format has integer sub-block scales (K-quants). Integer sums are exact whatever the order or
//    the instructions (vpmaddubsw/vpmaddwd, vpdpbusd, __dp4a), so only the lane split matters.
//  * Lanes are converted to float (round to nearest even) and enter float chains by fused
//    multiply-add with the block's scale product (one IEEE multiply of the two scales):
//      - 32-element formats (Q4_0, Q5_0, Q8_0 x Q8_0; Q4_1, Q5_1 x Q8_1): two chains of 8 lanes,
//        even blocks in chain 0 and odd blocks in chain 1 (in increasing block order), the result
//        tree8(chain0 + chain1, lane-wise); Q4_1/Q5_1 add a min-term chain am: per block pair
//        am += (m_w0 s_a0 + m_w1 s_a1), a lone last block am += m_w s_a; result + am.
//      - MXFP4 x Q8_0: Q4_0's order, the codes from the doubled E2M1 table, d_w = 2^(e - 128).
//      - K-quants x Q8_K: one chain of 8 lanes over the super-blocks; tree8 at the end. Q2_K's
//        min term is one more chain (st -= (d_a dmin_w) * summ per super-block; result + st),
//        Q4_K/Q5_K's four chains am[k] = fma(-d_a * dmin_w, mins_k, am[k]) with mins_k =
//        m[2k] (b[4k] + b[4k+1]) + m[2k+1] (b[4k+2] + b[4k+3]) (b: the activation's 16-element
//        sums), result tree8 + ((am0 + am2) + (am1 + am3)). Q6_K's -32 offset is an integer
//        per lane: lane l starts at -32 (sc[2l] b[2l] + sc[2l+1] b[2l+1]).
//      - F32/F16/BF16 x F32: four chains of 8 lanes over groups of 32 elements (element i of a
//        group of 32 into chain (i / 8), lane i % 8), then groups of 8 left over into chain 0,
//        then tree8((c0 + c1) + (c2 + c3)), then the last n % 8 elements one by one as
//        sum + w * a (a rounded product, then a rounded add).
//  * tree8 is canon::tree8, the AVX2 horizontal sum ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
//
// Activations: Q8_0/Q8_1 scales are f16 (d_a, s_a as stored), Q8_K's is f32; int8 codes are in
// [-127, 127] (the packings never produce -128; the SIMD sign trick relies on it).
#pragma once

#include <cstdint>

#include "backend/canon.h"
#include "quant/blocks.h"

namespace zinc::quant::canon_dot {

/// IEEE binary16 -> binary32, exact (NaN payloads kept; the same value as F16C and __half2float
/// for every non-NaN input).
ZINC_HD float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0x1Fu) return canon::from_bits(sign | 0x7F800000u | (mant << 13));
    if (exp != 0) return canon::from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0) return canon::from_bits(sign);
    uint32_t e = 113;  // subnormal: normalise
    while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --e;
    }
    return canon::from_bits(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}
ZINC_HD float bf16_to_float(uint16_t h) {
    return canon::from_bits(static_cast<uint32_t>(h) << 16);
}
/// int -> float, round to nearest even (cvtdq2ps / __int2float_rn).
ZINC_HD float i2f(int v) {
    return static_cast<float>(v);
}
/// E8M0 scale byte -> 2^(x - 128) as f32: half the E8M0 value, because ggml's MXFP4 codes are
/// the E2M1 values doubled (ggml_e8m0_to_fp32_half; x < 2 gives the f32 subnormals 2^-128,
/// 2^-127). Exact.
ZINC_HD float e8m0_to_fp32_half(uint8_t x) {
    return canon::from_bits(x < 2 ? (0x00200000u << x) : (static_cast<uint32_t>(x - 1) << 23));
}
/// Doubled E2M1 value of a 4-bit code (kvalues_mxfp4 in blocks.h, written as arithmetic so that
/// device code needs no table): 0..7 -> 0, 1, 2, 3, 4, 6, 8, 12; bit 3 is the sign.
ZINC_HD int e2m1_doubled(int code) {
    const int m = code & 7;
    const int mag = m < 2 ? m : (2 + (m & 1)) << ((m >> 1) - 1);
    return (code & 8) ? -mag : mag;
}
ZINC_HD uint32_t load_u32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// ---- weight codes of element e (0..31) of a 32-element block ----------------------------------

ZINC_HD int code_q4_0(const detail::BlockQ4_0& b, int e) {
    return (e < 16 ? (b.qs[e] & 0x0F) : (b.qs[e - 16] >> 4)) - 8;
}
ZINC_HD int code_q4_1(const detail::BlockQ4_1& b, int e) {
    return e < 16 ? (b.qs[e] & 0x0F) : (b.qs[e - 16] >> 4);
}
ZINC_HD int code_q5_0(const detail::BlockQ5_0& b, int e) {
    const int hb = static_cast<int>((load_u32(b.qh) >> e) & 1u) << 4;
    return ((e < 16 ? (b.qs[e] & 0x0F) : (b.qs[e - 16] >> 4)) | hb) - 16;
}
ZINC_HD int code_q5_1(const detail::BlockQ5_1& b, int e) {
    const int hb = static_cast<int>((load_u32(b.qh) >> e) & 1u) << 4;
    return (e < 16 ? (b.qs[e] & 0x0F) : (b.qs[e - 16] >> 4)) | hb;
}
ZINC_HD int code_q8_0(const detail::BlockQ8_0& b, int e) {
    return b.qs[e];
}
ZINC_HD int code_q8_1(const detail::BlockQ8_1& b, int e) {
    return b.qs[e];
}
ZINC_HD int code_mxfp4(const detail::BlockMXFP4& b, int e) {
    return e2m1_doubled(e < 16 ? (b.qs[e] & 0x0F) : (b.qs[e - 16] >> 4));
}

/// The weight scale of a symmetric 32-element block: the f16 d, or MXFP4's E8M0 (halved).
template <typename Block>
ZINC_HD float block_scale(const Block& b) {
    return half_to_float(b.d);
}
ZINC_HD float block_scale(const detail::BlockMXFP4& b) {
    return e8m0_to_fp32_half(b.e);
}

/// Lane l of a 32-element block: sum of code(e) * a[e] over e = 4l..4l+3.
template <typename Block, typename Code>
ZINC_HD int lane32(const Block& b, const int8_t* a, int l, Code code) {
    int s = 0;
    for (int e = 4 * l; e < 4 * l + 4; ++e) s += code(b, e) * a[e];
    return s;
}

// ---- K-quant codes of element e (0..255) of a super-block ------------------------------------

ZINC_HD int code_q2_k(const detail::BlockQ2_K& b, int e) {  // 0..3
    return (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
ZINC_HD int scale_q2_k(const detail::BlockQ2_K& b, int e) {  // 4-bit scale of e's sub-block
    return b.scales[e / 16] & 0x0F;
}
ZINC_HD int code_q3_k(const detail::BlockQ3_K& b, int e) {  // -4..3
    const int l2 = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    const int hi = (b.hmask[e % 32] >> (e / 32)) & 1;
    return l2 - (hi ? 0 : 4);
}
/// Q3_K signed scale i (0..15), as unpack_scales_q3_k.
ZINC_HD int scale_q3_k(const detail::BlockQ3_K& b, int i) {
    const uint8_t* q = b.scales;
    const int lo = (i < 8) ? (q[i] & 0x0F) : (q[i - 8] >> 4);
    const int hi = (q[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}
/// Q4_K/Q5_K 6-bit scale (min = false) or min (min = true) of 32-element sub-block j.
ZINC_HD int scale_min_k4(const uint8_t* q, int j, bool min) {
    if (j < 4) return min ? (q[j + 4] & 63) : (q[j] & 63);
    return min ? ((q[j + 4] >> 4) | ((q[j] >> 6) << 4)) : ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
}
ZINC_HD int code_q4_k(const detail::BlockQ4_K& b, int e) {  // 0..15
    const int j = e / 32, u = e % 32;
    return (b.qs[32 * (j / 2) + u] >> (4 * (j & 1))) & 0x0F;
}
ZINC_HD int code_q5_k(const detail::BlockQ5_K& b, int e) {  // 0..31
    const int j = e / 32, u = e % 32;
    return ((b.qs[32 * (j / 2) + u] >> (4 * (j & 1))) & 0x0F) | (((b.qh[u] >> j) & 1) << 4);
}
ZINC_HD int code_q6_k(const detail::BlockQ6_K& b, int e) {  // 0..63 (the -32 is separate)
    const int h = e / 128, k = (e % 128) / 32, u = e % 32;
    const int lo = (b.ql[64 * h + 32 * (k & 1) + u] >> (4 * (k >> 1))) & 0x0F;
    const int hi = (b.qh[32 * h + u] >> (2 * k)) & 3;
    return lo | (hi << 4);
}

// Lane l (0..7) of a K-quant super-block: the integer the SIMD kernels hold in lane l.
ZINC_HD int lane_q2_k(const detail::BlockQ2_K& x, const detail::BlockQ8_K& y, int l) {
    int s = 0;
    for (int c = 0; c < 8; ++c)
        for (int e = 32 * c + 4 * l; e < 32 * c + 4 * l + 4; ++e)
            s += scale_q2_k(x, e) * (code_q2_k(x, e) * y.qs[e]);
    return s;
}
ZINC_HD int lane_q3_k(const detail::BlockQ3_K& x, const detail::BlockQ8_K& y, int l) {
    int s = 0;
    for (int c = 0; c < 8; ++c)
        for (int e = 32 * c + 4 * l; e < 32 * c + 4 * l + 4; ++e)
            s += scale_q3_k(x, e / 16) * (code_q3_k(x, e) * y.qs[e]);
    return s;
}
template <typename Block, typename Code>
ZINC_HD int lane_q45_k(const Block& x, const detail::BlockQ8_K& y, int l, Code code) {
    int s = 0;
    for (int j = 0; j < 8; ++j) {
        int p = 0;
        for (int e = 32 * j + 4 * l; e < 32 * j + 4 * l + 4; ++e) p += code(x, e) * y.qs[e];
        s += scale_min_k4(x.scales, j, false) * p;
    }
    return s;
}
/// Q4_K/Q5_K min lane k (0..3): m[2k] (b[4k] + b[4k+1]) + m[2k+1] (b[4k+2] + b[4k+3]).
ZINC_HD int mins_k4(const uint8_t* scales, const int16_t* bsums, int k) {
    return scale_min_k4(scales, 2 * k, true) * (bsums[4 * k] + bsums[4 * k + 1]) +
           scale_min_k4(scales, 2 * k + 1, true) * (bsums[4 * k + 2] + bsums[4 * k + 3]);
}
ZINC_HD int lane_q6_k(const detail::BlockQ6_K& x, const detail::BlockQ8_K& y, int l) {
    int s = -32 * (x.scales[2 * l] * y.bsums[2 * l] + x.scales[2 * l + 1] * y.bsums[2 * l + 1]);
    for (int c = 0; c < 8; ++c)
        for (int e = 32 * c + 4 * l; e < 32 * c + 4 * l + 4; ++e)
            s += x.scales[e / 16] * (code_q6_k(x, e) * y.qs[e]);
    return s;
}
ZINC_HD int lane_q8_k(const detail::BlockQ8_K& x, const detail::BlockQ8_K& y, int l) {
    int s = 0;
    for (int c = 0; c < 8; ++c)
        for (int e = 32 * c + 4 * l; e < 32 * c + 4 * l + 4; ++e) s += x.qs[e] * y.qs[e];
    return s;
}

// ---- the float chains ------------------------------------------------------------------------

/// Two chains of 8 lanes (even / odd blocks): the closing sum tree8(c0 + c1).
ZINC_HD float close_two_chains(const float* c0, const float* c1) {
    float v[8];
    for (int l = 0; l < 8; ++l) v[l] = canon::add(c0[l], c1[l]);
    return canon::tree8(v);
}
/// Four min chains of Q4_K/Q5_K: (am0 + am2) + (am1 + am3).
ZINC_HD float close_four(const float* a) {
    return canon::add(canon::add(a[0], a[2]), canon::add(a[1], a[3]));
}

/// 32-element symmetric formats x Q8_0: Block has .d (f16) and the code function.
template <typename Block, typename Code>
ZINC_HD float dot_sym32(int64_t n, const Block* x, const detail::BlockQ8_0* y, Code code) {
    float c[2][8] = {};
    for (int64_t i = 0; i < n / 32; ++i) {
        const float dd = canon::mul(block_scale(x[i]), half_to_float(y[i].d));
        float* acc = c[i & 1];
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(dd, i2f(lane32(x[i], y[i].qs, l, code)), acc[l]);
    }
    return close_two_chains(c[0], c[1]);
}

/// 32-element asymmetric formats x Q8_1 (.d, .m f16): the chains plus the min-term chain.
template <typename Block, typename Code>
ZINC_HD float dot_asym32(int64_t n, const Block* x, const detail::BlockQ8_1* y, Code code) {
    float c[2][8] = {};
    const int64_t nb = n / 32;
    for (int64_t i = 0; i < nb; ++i) {
        const float dd = canon::mul(half_to_float(x[i].d), half_to_float(y[i].d));
        float* acc = c[i & 1];
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(dd, i2f(lane32(x[i], y[i].qs, l, code)), acc[l]);
    }
    float am = 0.0f;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const float p0 = canon::mul(half_to_float(x[i].m), half_to_float(y[i].s));
        const float p1 = canon::mul(half_to_float(x[i + 1].m), half_to_float(y[i + 1].s));
        am = canon::add(am, canon::add(p0, p1));
    }
    if (i < nb) am = canon::add(am, canon::mul(half_to_float(x[i].m), half_to_float(y[i].s)));
    return canon::add(close_two_chains(c[0], c[1]), am);
}

// Code functors (templates take them by value; plain functions are not usable on the device
// through pointers).
struct CodeQ4_0 {
    ZINC_HD int operator()(const detail::BlockQ4_0& b, int e) const { return code_q4_0(b, e); }
};
struct CodeQ4_1 {
    ZINC_HD int operator()(const detail::BlockQ4_1& b, int e) const { return code_q4_1(b, e); }
};
struct CodeQ5_0 {
    ZINC_HD int operator()(const detail::BlockQ5_0& b, int e) const { return code_q5_0(b, e); }
};
struct CodeQ5_1 {
    ZINC_HD int operator()(const detail::BlockQ5_1& b, int e) const { return code_q5_1(b, e); }
};
struct CodeQ8_0 {
    ZINC_HD int operator()(const detail::BlockQ8_0& b, int e) const { return code_q8_0(b, e); }
};
struct CodeQ8_1 {
    ZINC_HD int operator()(const detail::BlockQ8_1& b, int e) const { return code_q8_1(b, e); }
};
struct CodeMXFP4 {
    ZINC_HD int operator()(const detail::BlockMXFP4& b, int e) const { return code_mxfp4(b, e); }
};
struct CodeQ4_K {
    ZINC_HD int operator()(const detail::BlockQ4_K& b, int e) const { return code_q4_k(b, e); }
};
struct CodeQ5_K {
    ZINC_HD int operator()(const detail::BlockQ5_K& b, int e) const { return code_q5_k(b, e); }
};

ZINC_HD float dot_q4_0(int64_t n, const void* w, const void* a) {
    return dot_sym32(n, static_cast<const detail::BlockQ4_0*>(w),
                     static_cast<const detail::BlockQ8_0*>(a), CodeQ4_0{});
}
ZINC_HD float dot_q5_0(int64_t n, const void* w, const void* a) {
    return dot_sym32(n, static_cast<const detail::BlockQ5_0*>(w),
                     static_cast<const detail::BlockQ8_0*>(a), CodeQ5_0{});
}
ZINC_HD float dot_q8_0(int64_t n, const void* w, const void* a) {
    return dot_sym32(n, static_cast<const detail::BlockQ8_0*>(w),
                     static_cast<const detail::BlockQ8_0*>(a), CodeQ8_0{});
}
/// MXFP4 x Q8_0: the Q4_0 order with dd = e8m0_half(e) * d_a (both exact powers of two times
/// the f16 value, so dd is exact unless it underflows).
ZINC_HD float dot_mxfp4(int64_t n, const void* w, const void* a) {
    return dot_sym32(n, static_cast<const detail::BlockMXFP4*>(w),
                     static_cast<const detail::BlockQ8_0*>(a), CodeMXFP4{});
}
ZINC_HD float dot_q4_1(int64_t n, const void* w, const void* a) {
    return dot_asym32(n, static_cast<const detail::BlockQ4_1*>(w),
                      static_cast<const detail::BlockQ8_1*>(a), CodeQ4_1{});
}
ZINC_HD float dot_q5_1(int64_t n, const void* w, const void* a) {
    return dot_asym32(n, static_cast<const detail::BlockQ5_1*>(w),
                      static_cast<const detail::BlockQ8_1*>(a), CodeQ5_1{});
}
/// Q8_1 x Q8_1 (an activation format only): one chain of 8 lanes, tree8.
ZINC_HD float dot_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const detail::BlockQ8_1*>(w);
    const auto* y = static_cast<const detail::BlockQ8_1*>(a);
    float acc[8] = {};
    for (int64_t i = 0; i < n / 32; ++i) {
        const float dd = canon::mul(half_to_float(x[i].d), half_to_float(y[i].d));
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(dd, i2f(lane32(x[i], y[i].qs, l, CodeQ8_1{})), acc[l]);
    }
    return canon::tree8(acc);
}

ZINC_HD float dot_q2_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const detail::BlockQ2_K*>(w);
    const auto* y = static_cast<const detail::BlockQ8_K*>(a);
    float acc[8] = {};
    float st = 0.0f;
    for (int64_t i = 0; i < n / 256; ++i) {
        int summ = 0;
        for (int k = 0; k < 16; ++k) summ += (x[i].scales[k] >> 4) * y[i].bsums[k];
        const float dmin = canon::mul(y[i].d, half_to_float(x[i].dmin));
        st = canon::sub(st, canon::mul(dmin, i2f(summ)));
        const float d = canon::mul(y[i].d, half_to_float(x[i].d));
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(d, i2f(lane_q2_k(x[i], y[i], l)), acc[l]);
    }
    return canon::add(canon::tree8(acc), st);
}
ZINC_HD float dot_q3_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const detail::BlockQ3_K*>(w);
    const auto* y = static_cast<const detail::BlockQ8_K*>(a);
    float acc[8] = {};
    for (int64_t i = 0; i < n / 256; ++i) {
        const float d = canon::mul(y[i].d, half_to_float(x[i].d));
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(d, i2f(lane_q3_k(x[i], y[i], l)), acc[l]);
    }
    return canon::tree8(acc);
}
template <typename Block, typename Code>
ZINC_HD float dot_q45_k(int64_t n, const Block* x, const detail::BlockQ8_K* y, Code code) {
    float acc[8] = {}, am[4] = {};
    for (int64_t i = 0; i < n / 256; ++i) {
        const float dmin = canon::mul(-y[i].d, half_to_float(x[i].dmin));
        for (int k = 0; k < 4; ++k) am[k] = canon::fma(dmin, i2f(mins_k4(x[i].scales, y[i].bsums, k)), am[k]);
        const float d = canon::mul(y[i].d, half_to_float(x[i].d));
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(d, i2f(lane_q45_k(x[i], y[i], l, code)), acc[l]);
    }
    return canon::add(canon::tree8(acc), close_four(am));
}
ZINC_HD float dot_q4_k(int64_t n, const void* w, const void* a) {
    return dot_q45_k(n, static_cast<const detail::BlockQ4_K*>(w),
                     static_cast<const detail::BlockQ8_K*>(a), CodeQ4_K{});
}
ZINC_HD float dot_q5_k(int64_t n, const void* w, const void* a) {
    return dot_q45_k(n, static_cast<const detail::BlockQ5_K*>(w),
                     static_cast<const detail::BlockQ8_K*>(a), CodeQ5_K{});
}
ZINC_HD float dot_q6_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const detail::BlockQ6_K*>(w);
    const auto* y = static_cast<const detail::BlockQ8_K*>(a);
    float acc[8] = {};
    for (int64_t i = 0; i < n / 256; ++i) {
        const float d = canon::mul(y[i].d, half_to_float(x[i].d));
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(d, i2f(lane_q6_k(x[i], y[i], l)), acc[l]);
    }
    return canon::tree8(acc);
}
ZINC_HD float dot_q8_k(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const detail::BlockQ8_K*>(w);
    const auto* y = static_cast<const detail::BlockQ8_K*>(a);
    float acc[8] = {};
    for (int64_t i = 0; i < n / 256; ++i) {
        const float d = canon::mul(x[i].d, y[i].d);
        for (int l = 0; l < 8; ++l) acc[l] = canon::fma(d, i2f(lane_q8_k(x[i], y[i], l)), acc[l]);
    }
    return canon::tree8(acc);
}

/// Float weights (Load(i) -> element i as f32) x f32 activations, in the order of the header.
template <typename Load>
ZINC_HD float dot_float(int64_t n, Load w, const float* a) {
    float c[4][8] = {};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int g = 0; g < 4; ++g)
            for (int l = 0; l < 8; ++l) c[g][l] = canon::fma(w(i + 8 * g + l), a[i + 8 * g + l], c[g][l]);
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) c[0][l] = canon::fma(w(i + l), a[i + l], c[0][l]);
    float v[8];
    for (int l = 0; l < 8; ++l) v[l] = canon::add(canon::add(c[0][l], c[1][l]), canon::add(c[2][l], c[3][l]));
    float sum = canon::tree8(v);
    for (; i < n; ++i) sum = canon::add(sum, canon::mul(w(i), a[i]));
    return sum;
}
struct LoadF32 {
    const float* p;
    ZINC_HD float operator()(int64_t i) const { return p[i]; }
};
struct LoadF16 {
    const uint16_t* p;
    ZINC_HD float operator()(int64_t i) const { return half_to_float(p[i]); }
};
struct LoadBF16 {
    const uint16_t* p;
    ZINC_HD float operator()(int64_t i) const { return bf16_to_float(p[i]); }
};
ZINC_HD float dot_f32(int64_t n, const void* w, const void* a) {
    return dot_float(n, LoadF32{static_cast<const float*>(w)}, static_cast<const float*>(a));
}
ZINC_HD float dot_f16(int64_t n, const void* w, const void* a) {
    return dot_float(n, LoadF16{static_cast<const uint16_t*>(w)}, static_cast<const float*>(a));
}
ZINC_HD float dot_bf16(int64_t n, const void* w, const void* a) {
    return dot_float(n, LoadBF16{static_cast<const uint16_t*>(w)}, static_cast<const float*>(a));
}

}  // namespace zinc::quant::canon_dot
