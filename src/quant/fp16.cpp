// zinc/quant/fp16.cpp — IEEE binary16 and bfloat16 conversions, and the row kernels of the
// unquantized float types (F32, F16, BF16).
//
// fp16: binary16 (1 sign, 5 exponent, 10 mantissa bits), converted with round-to-nearest-even,
// overflow to inf, subnormals kept, NaN kept quiet (same results as numpy's astype(float16)).
// bf16: the top 16 bits of an f32, rounded to nearest even; NaN forced quiet — the rule of
// ggml's fp32->bf16 conversion and gguf/quants.py's BF16.quantize_blocks.
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace zinc::quant {
namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// Portable binary16 -> binary32 (exact).
float half_to_float_portable(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F) return float_of(sign | 0x7F800000u | (mant << 13));  // inf / nan
    if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return float_of(sign);  // signed zero
    // Subnormal: value = mant * 2^-24; normalise.
    int e = -1;
    do {
        ++e;
        mant <<= 1;
    } while ((mant & 0x400) == 0);
    mant &= 0x3FF;
    return float_of(sign | (static_cast<uint32_t>(112 - e) << 23) | (mant << 13));
}

// Portable binary32 -> binary16 with round-to-nearest-even.
uint16_t float_to_half_portable(float f) {
    const uint32_t u = bits_of(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
    const uint32_t exp = (u >> 23) & 0xFF;
    const uint32_t mant = u & 0x7FFFFF;
    if (exp == 0xFF) {  // inf or nan (nan: keep it quiet, keep top payload bits)
        if (mant == 0) return sign | 0x7C00;
        return static_cast<uint16_t>(sign | 0x7E00 | (mant >> 13));
    }
    const int e = static_cast<int>(exp) - 127 + 15;  // rebias
    if (e >= 0x1F) return sign | 0x7C00;             // overflow -> inf
    if (e <= 0) {
        // Result is subnormal (or zero): shift the full 24-bit significand into place.
        if (e < -10) return sign;  // below half of the smallest subnormal -> signed zero
        const uint32_t m = mant | 0x800000;
        const int shift = 14 - e;  // 24-bit significand -> 10-bit subnormal field
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) ++q;
        return static_cast<uint16_t>(sign | q);
    }
    uint32_t q = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) ++q;  // carry may roll into exp/inf
    return static_cast<uint16_t>(sign | q);
}

}  // namespace

float fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return half_to_float_portable(h);
#endif
}

uint16_t fp32_to_fp16(float f) {
#if defined(__F16C__)
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    return float_to_half_portable(f);
#endif
}

float bf16_to_fp32(uint16_t h) {
    return float_of(static_cast<uint32_t>(h) << 16);
}

uint16_t fp32_to_bf16(float f) {
    uint32_t u = bits_of(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) {  // nan: keep sign and top payload, force quiet bit
        return static_cast<uint16_t>((u >> 16) | 64);
    }
    u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even (overflow carries into inf)
    return static_cast<uint16_t>(u >> 16);
}

namespace detail {

// Exposed for the unit tests' cross-check of the F16C path against the portable one.
float fp16_to_fp32_portable(uint16_t h) {
    return half_to_float_portable(h);
}
uint16_t fp32_to_fp16_portable(float f) {
    return float_to_half_portable(f);
}

Fp16Table::Fp16Table() {
    for (uint32_t h = 0; h < 65536; ++h) v[h] = fp16_to_fp32(static_cast<uint16_t>(h));
}

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
}

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
}

void quantize_row_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_row_f16(const float* src, void* dst, int64_t n) {
    auto* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
}

void quantize_row_bf16(const float* src, void* dst, int64_t n) {
    auto* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
}

}  // namespace detail
}  // namespace zinc::quant
