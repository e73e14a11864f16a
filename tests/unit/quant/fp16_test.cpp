// tests/unit/quant/fp16_test.cpp — IEEE half and bfloat16 conversions: exhaustive over all
// 65536 halves, hand-checked rounding cases (ties to even, overflow, subnormals, inf, nan).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace zinc::quant {
namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Independent value of a half from its fields (sign * 2^(e-15) * 1.m, or subnormal).
double half_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const double sign = s ? -1.0 : 1.0;
    if (e == 0) return sign * std::ldexp(m, -24);
    if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
    return sign * std::ldexp(1024 + m, e - 25);
}

TEST(Fp16, EveryHalfConvertsExactly) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto hh = static_cast<uint16_t>(h);
        const double want = half_value(hh);
        const float got = fp16_to_fp32(hh);
        const float got_portable = detail::fp16_to_fp32_portable(hh);
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << h;
            EXPECT_TRUE(std::isnan(got_portable)) << h;
            continue;
        }
        EXPECT_EQ(static_cast<double>(got), want) << h;
        EXPECT_EQ(bits(got), bits(got_portable)) << h;
        // and back: every non-NaN half survives the round trip, signed zeros included
        EXPECT_EQ(fp32_to_fp16(got), hh) << h;
        EXPECT_EQ(detail::fp32_to_fp16_portable(got), hh) << h;
    }
}

TEST(Fp16, RoundingCases) {
    const float one = 1.0f;
    const float ulp = std::ldexp(1.0f, -10);             // half ulp at 1.0 is 2^-10
    EXPECT_EQ(fp32_to_fp16(one + ulp / 2), 0x3C00);      // tie -> even (1.0)
    EXPECT_EQ(fp32_to_fp16(one + 3 * ulp / 2), 0x3C02);  // tie -> even (1 + 2ulp)
    EXPECT_EQ(fp32_to_fp16(std::nextafter(one + ulp / 2, 2.0f)), 0x3C01);
    EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);   // max finite
    EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);  // below the rounding boundary
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);   // rounds to inf
    EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
    EXPECT_EQ(fp32_to_fp16(-1e10f), 0xFC00);
    EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7C00);
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 subnormal ulps: tie -> 2
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into the normals
    EXPECT_EQ(fp32_to_fp16(1e-10f), 0x0000);
    const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(nan & 0x7C00, 0x7C00);
    EXPECT_NE(nan & 0x03FF, 0);
}

TEST(Fp16, PortableMatchesF16cOnRandomFloats) {
    std::mt19937 rng(42);
    for (int i = 0; i < 2000000; ++i) {
        const float f = from_bits(static_cast<uint32_t>(rng()));
        if (std::isnan(f)) continue;
        ASSERT_EQ(fp32_to_fp16(f), detail::fp32_to_fp16_portable(f)) << f;
    }
}

TEST(Bf16, ConversionsAndRounding) {
    EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
    EXPECT_EQ(bf16_to_fp32(0xC000), -2.0f);
    EXPECT_EQ(bf16_to_fp32(0x7F80), INFINITY);
    EXPECT_TRUE(std::isnan(bf16_to_fp32(0x7FC1)));
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
    EXPECT_EQ(fp32_to_bf16(from_bits(0x3F808000)), 0x3F80);  // tie -> even
    EXPECT_EQ(fp32_to_bf16(from_bits(0x3F818000)), 0x3F82);  // tie -> even (up)
    EXPECT_EQ(fp32_to_bf16(from_bits(0x3F808001)), 0x3F81);
    EXPECT_EQ(fp32_to_bf16(from_bits(0x7F7FFFFF)), 0x7F80);  // max float rounds to inf
    EXPECT_EQ(fp32_to_bf16(from_bits(0x00000001)), 0x0000);  // subnormal, rounds to zero
    EXPECT_EQ(fp32_to_bf16(from_bits(0x00018000)), 0x0002);  // subnormal kept (no flush)
    EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
    // NaN stays NaN (quiet) even when rounding would carry into the exponent or clear it
    EXPECT_EQ(fp32_to_bf16(from_bits(0x7F800001)), 0x7FC0);
    EXPECT_EQ(fp32_to_bf16(from_bits(0xFFFFFFFF)), 0xFFFF);
    // every bf16 survives the round trip
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = bf16_to_fp32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        ASSERT_EQ(fp32_to_bf16(f), h);
    }
}

}  // namespace
}  // namespace zinc::quant
