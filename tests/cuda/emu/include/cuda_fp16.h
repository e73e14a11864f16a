// tests/cuda/emu/include/cuda_fp16.h — host emulation (see cuda_runtime.h): halves through the
// CPU tier's exact conversions (round to nearest even, as __float2half_rn).
#pragma once
#include <cstdint>
namespace zinc::quant {
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
}  // namespace zinc::quant
struct __half {
    uint16_t b;
};
inline __half __ushort_as_half(uint16_t h) { return {h}; }
inline uint16_t __half_as_ushort(__half h) { return h.b; }
inline float __half2float(__half h) { return zinc::quant::fp16_to_fp32(h.b); }
inline __half __float2half_rn(float f) { return {zinc::quant::fp32_to_fp16(f)}; }
