// zinc/quant/blocks.h — internal: the byte layout of every block format, and the per-type kernel
// entry points that dispatch.cpp routes to. Not a public header (only src/quant/*.cpp include it).
//
// Layouts follow ggml-common.h; the static_asserts pin each struct to the byte size listed in
// types.cpp and docs/quant.md. Halves are stored as raw IEEE binary16 bits (uint16_t).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zinc::quant::detail {

constexpr int qk4_0 = 32;
constexpr int qk4_1 = 32;
constexpr int qk5_0 = 32;
constexpr int qk5_1 = 32;
constexpr int qk8_0 = 32;
constexpr int qk8_1 = 32;
constexpr int qk_k = 256;
constexpr int k_scale_size = 12;  // packed 6-bit scales+mins of Q4_K/Q5_K

// Q4_0: x = d * (q - 8), q in [0,15]. Element j is the low nibble of qs[j], element j+16 the
// high nibble of qs[j].
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[qk4_0 / 2];
};
// Q4_1: x = d * q + m, q in [0,15], nibble order as Q4_0.
struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[qk4_1 / 2];
};
// Q5_0: x = d * (q - 16), q = nibble | (bit j of qh) << 4, q in [0,31]; qh is little-endian.
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[qk5_0 / 2];
};
// Q5_1: x = d * q + m, q as Q5_0.
struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[qk5_1 / 2];
};
// Q8_0: x = d * q, q in [-127,127].
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[qk8_0];
};
// Q8_1: x = d * q; s = d * sum(q) (used by the Q4_1/Q5_1 dots for the min term).
struct BlockQ8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[qk8_1];
};

// MXFP4 (OCP Microscaling v1.0, 32-element blocks): e is the shared E8M0 scale 2^(e - 127),
// qs the 4-bit E2M1 codes (element j low nibble of qs[j], element j + 16 its high nibble, as
// Q4_0). ggml stores the E2M1 values doubled as int8 (kvalues_mxfp4) and halves the scale
// (e8m0_to_fp32_half = 2^(e - 128)), so x = e8m0_to_fp32_half(e) * kvalues_mxfp4[code], the
// same value as 2^(e - 127) * E2M1(code).
constexpr int qk_mxfp4 = 32;
struct BlockMXFP4 {
    uint8_t e;
    uint8_t qs[qk_mxfp4 / 2];
};
// E2M1 code -> doubled value: codes 0..7 are +{0, 0.5, 1, 1.5, 2, 3, 4, 6}, 8..15 their negatives.
inline constexpr int8_t kvalues_mxfp4[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                             0, -1, -2, -3, -4, -6, -8, -12};

// Q2_K: 16 sub-blocks of 16; scales[i] = (4-bit min << 4) | 4-bit scale;
// x = d * (scales & 15) * q - dmin * (scales >> 4), q in [0,3].
struct BlockQ2_K {
    uint8_t scales[qk_k / 16];
    uint8_t qs[qk_k / 4];
    uint16_t d;
    uint16_t dmin;
};
// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (stored +32) packed in 12 bytes;
// q = (2 low bits from qs) - (hmask bit clear ? 4 : 0), x = d * (scale - 32) * q.
struct BlockQ3_K {
    uint8_t hmask[qk_k / 8];
    uint8_t qs[qk_k / 4];
    uint8_t scales[12];
    uint16_t d;
};
// Q4_K: 8 sub-blocks of 32 with 6-bit scale and min packed in 12 bytes;
// x = d * sc * q - dmin * m, q in [0,15].
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[k_scale_size];
    uint8_t qs[qk_k / 2];
};
// Q5_K: as Q4_K with a fifth bit per element in qh, q in [0,31].
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[k_scale_size];
    uint8_t qh[qk_k / 8];
    uint8_t qs[qk_k / 2];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales; q = 4 low bits (ql) | 2 high bits (qh) << 4,
// x = d * scale * (q - 32).
struct BlockQ6_K {
    uint8_t ql[qk_k / 2];
    uint8_t qh[qk_k / 4];
    int8_t scales[qk_k / 16];
    uint16_t d;
};
// Q8_K: activation packing for the K-quant dots. d is f32; bsums[i] = sum of qs[16i..16i+15].
struct BlockQ8_K {
    float d;
    int8_t qs[qk_k];
    int16_t bsums[qk_k / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockMXFP4) == 17);

// Unpack the 12-byte scale field of Q4_K/Q5_K into 8 six-bit scales and 8 six-bit mins.
// Bytes 0-3 hold scale 0-3 (low 6 bits) and the top 2 bits of scale 4-7; bytes 4-7 the same
// for the mins; bytes 8-11 hold the low 4 bits of scale 4-7 (low nibble) and min 4-7 (high).
inline void unpack_scale_min_k4(const uint8_t* q, uint8_t* sc, uint8_t* m) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
        sc[j + 4] = static_cast<uint8_t>((q[j + 8] & 0x0F) | ((q[j] >> 6) << 4));
        m[j + 4] = static_cast<uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

// Unpack the 12-byte scale field of Q3_K into 16 signed scales (already minus 32).
// Bytes 0-7: low nibbles hold the low 4 bits of scale 0-7, high nibbles of scale 8-15;
// bytes 8-11: 2-bit pairs hold the top bits (scale i: byte 8 + i%4, bits 2*(i/4)).
inline void unpack_scales_q3_k(const uint8_t* q, int8_t* sc) {
    for (int i = 0; i < 16; ++i) {
        const int lo = (i < 8) ? (q[i] & 0x0F) : (q[i - 8] >> 4);
        const int hi = (q[8 + (i % 4)] >> (2 * (i / 4))) & 3;
        sc[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
    }
}

// fp16.cpp: the portable (no F16C) conversions, exposed so tests can cross-check the F16C path.
float fp16_to_fp32_portable(uint16_t h);
uint16_t fp32_to_fp16_portable(float f);
// fp16 bits -> f32 lookup table (65536 entries, 256 KiB, filled on first use and immutable
// after): one load instead of a conversion in the per-block scale products of the SIMD dots
// (ggml's CPU backend does the same). Inline so the per-row cost is a guard check, not a call.
struct Fp16Table {
    float v[65536];
    Fp16Table();  // fp16.cpp
};
inline const float* fp16_table() {
    static const Fp16Table table;
    return table.v;
}

// Per-type kernels. Rows are n elements (n % block_size == 0, checked by dispatch.cpp).
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
using DotFn = float (*)(int64_t n, const void* w, const void* a);
// out[j] = dot(w, a + j * stride) for j < n_a (see vec_dot_multi in quant.h).
using DotMultiFn = void (*)(int64_t n, const void* w, const void* a, size_t stride, int n_a,
                            float* out);

// fp16.cpp
void dequantize_row_f32(const void* src, float* dst, int64_t n);
void dequantize_row_f16(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const void* src, float* dst, int64_t n);
void quantize_row_f32(const float* src, void* dst, int64_t n);
void quantize_row_f16(const float* src, void* dst, int64_t n);
void quantize_row_bf16(const float* src, void* dst, int64_t n);

// q_legacy.cpp
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_1(const void* src, float* dst, int64_t n);
void dequantize_row_q5_0(const void* src, float* dst, int64_t n);
void dequantize_row_q5_1(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void dequantize_row_q8_1(const void* src, float* dst, int64_t n);
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_1(const float* src, void* dst, int64_t n);
void quantize_row_q5_0(const float* src, void* dst, int64_t n);
void quantize_row_q5_1(const float* src, void* dst, int64_t n);
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q8_1(const float* src, void* dst, int64_t n);

// mxfp4.cpp
void dequantize_row_mxfp4(const void* src, float* dst, int64_t n);
void quantize_row_mxfp4(const float* src, void* dst, int64_t n);

// k_quants.cpp (dequantize, Q8_K) and k_quantize.cpp (scale search for the weight types)
void dequantize_row_q2_k(const void* src, float* dst, int64_t n);
void dequantize_row_q3_k(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k(const void* src, float* dst, int64_t n);
void dequantize_row_q5_k(const void* src, float* dst, int64_t n);
void dequantize_row_q6_k(const void* src, float* dst, int64_t n);
void dequantize_row_q8_k(const void* src, float* dst, int64_t n);
void quantize_row_q2_k(const float* src, void* dst, int64_t n);
void quantize_row_q3_k(const float* src, void* dst, int64_t n);
void quantize_row_q4_k(const float* src, void* dst, int64_t n);
void quantize_row_q5_k(const float* src, void* dst, int64_t n);
void quantize_row_q6_k(const float* src, void* dst, int64_t n);
void quantize_row_q8_k(const float* src, void* dst, int64_t n);

// dot_ref.cpp: scalar references, weight type x its vec_dot_type.
float dot_ref_f32(int64_t n, const void* w, const void* a);
float dot_ref_f16(int64_t n, const void* w, const void* a);
float dot_ref_bf16(int64_t n, const void* w, const void* a);
float dot_ref_q4_0(int64_t n, const void* w, const void* a);
float dot_ref_q4_1(int64_t n, const void* w, const void* a);
float dot_ref_q5_0(int64_t n, const void* w, const void* a);
float dot_ref_q5_1(int64_t n, const void* w, const void* a);
float dot_ref_q8_0(int64_t n, const void* w, const void* a);
float dot_ref_q8_1(int64_t n, const void* w, const void* a);
float dot_ref_q2_k(int64_t n, const void* w, const void* a);
float dot_ref_q3_k(int64_t n, const void* w, const void* a);
float dot_ref_q4_k(int64_t n, const void* w, const void* a);
float dot_ref_q5_k(int64_t n, const void* w, const void* a);
float dot_ref_q6_k(int64_t n, const void* w, const void* a);
float dot_ref_q8_k(int64_t n, const void* w, const void* a);
float dot_ref_mxfp4(int64_t n, const void* w, const void* a);

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define ZINC_QUANT_HAVE_AVX2 1
// dot_avx2.cpp: the same contracts with AVX2/FMA/F16C (compiled only when the target has
// them), and multi-activation versions for the quantized weight formats.
float dot_avx2_f32(int64_t n, const void* w, const void* a);
float dot_avx2_f16(int64_t n, const void* w, const void* a);
float dot_avx2_bf16(int64_t n, const void* w, const void* a);
float dot_avx2_q8_1(int64_t n, const void* w, const void* a);
float dot_avx2_q8_k(int64_t n, const void* w, const void* a);
#define ZINC_QUANT_DECLARE_DOTS(prefix)                                                     \
    float dot_##prefix##_q4_0(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q4_1(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q5_0(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q5_1(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q8_0(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q2_k(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q3_k(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q4_k(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q5_k(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_q6_k(int64_t n, const void* w, const void* a);                     \
    float dot_##prefix##_mxfp4(int64_t n, const void* w, const void* a);                    \
    void dot_multi_##prefix##_q4_0(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q4_1(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q5_0(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q5_1(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q8_0(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q2_k(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q3_k(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q4_k(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q5_k(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_q6_k(int64_t n, const void* w, const void* a, size_t stride,  \
                                   int n_a, float* out);                                    \
    void dot_multi_##prefix##_mxfp4(int64_t n, const void* w, const void* a, size_t stride, \
                                    int n_a, float* out);
// dot_avx2.cpp (via dot_avx2_kernels.h): the quantized weight formats.
ZINC_QUANT_DECLARE_DOTS(avx2)
// quantize_avx2.cpp: activation packings, byte-identical to the scalar reference quantizers.
void quantize_row_q8_0_avx2(const float* src, void* dst, int64_t n);
void quantize_row_q8_1_avx2(const float* src, void* dst, int64_t n);
void quantize_row_q8_k_avx2(const float* src, void* dst, int64_t n);

// dot_avx512vnni.cpp: the same quantized kernels compiled for AVX-512 VNNI (bit-identical
// results; used when the CPU has avx512f/bw/vl/vnni).
#if defined(__GNUC__)
#define ZINC_QUANT_HAVE_VNNI 1
ZINC_QUANT_DECLARE_DOTS(vnni)
#endif
#endif

}  // namespace zinc::quant::detail
