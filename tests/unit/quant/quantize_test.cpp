// tests/unit/quant/quantize_test.cpp — quantizer edge cases: zero and constant blocks, exact
// representable values, Q8 activation packings (sums, extremes), and per-element error bounds
// for the 32-element formats derived from their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace zinc::quant {
namespace {

const GgmlType quantized_types[] = {
    GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,  GgmlType::Q5_1, GgmlType::Q8_0,
    GgmlType::Q8_1, GgmlType::Q2_K, GgmlType::Q3_K,  GgmlType::Q4_K, GgmlType::Q5_K,
    GgmlType::Q6_K, GgmlType::Q8_K, GgmlType::MXFP4,
};

std::vector<float> roundtrip(GgmlType t, const std::vector<float>& x) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(row_size(t, n));
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> y(x.size());
    dequantize_row(t, q.data(), y.data(), n);
    return y;
}

TEST(Quantize, ZerosStayZeros) {
    for (GgmlType t : quantized_types) {
        std::vector<float> x(512, 0.0f);
        for (float v : roundtrip(t, x)) EXPECT_EQ(v, 0.0f) << type_name(t);
    }
}

TEST(Quantize, Q4_0RepresentsItsGridExactly) {
    // levels -8..7 times 0.25, with the signed max -2 in the block: d = -2 / -8 = 0.25 exactly
    std::vector<float> x(32);
    for (size_t i = 0; i < x.size(); ++i)
        x[i] = 0.25f * static_cast<float>(static_cast<int>(i % 16) - 8);
    const std::vector<float> y = roundtrip(GgmlType::Q4_0, x);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]) << i;
    // Q5_0 with levels -16..15 times 0.5 and signed max -8
    std::vector<float> x5(32);
    for (size_t i = 0; i < x5.size(); ++i)
        x5[i] = 0.5f * static_cast<float>(static_cast<int>(i) - 16);
    const std::vector<float> y5 = roundtrip(GgmlType::Q5_0, x5);
    for (size_t i = 0; i < x5.size(); ++i) EXPECT_EQ(y5[i], x5[i]) << i;
}

TEST(Quantize, Mxfp4RepresentsItsGridExactly) {
    // E2M1 values {0, 0.5, 1, 1.5, 2, 3, 4, 6} and negatives, times 2^k: amax = 6 * 2^k, so
    // e = floor(log2(6 * 2^k)) - 2 + 127 = k + 127 and the block scale 2^(e - 127) is 2^k.
    constexpr float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int k : {-20, -3, 0, 5, 40}) {
        std::vector<float> x(64);
        for (size_t i = 0; i < x.size(); ++i)
            x[i] = std::ldexp(e2m1[i % 8] * ((i / 8) % 2 ? -1.0f : 1.0f), k);
        std::vector<uint8_t> q(row_size(GgmlType::MXFP4, 64));
        quantize_row(GgmlType::MXFP4, x.data(), q.data(), 64);
        EXPECT_EQ(q[0], k + 127) << k;  // the scale byte of block 0
        std::vector<float> y(64);
        dequantize_row(GgmlType::MXFP4, q.data(), y.data(), 64);
        for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]) << k << " " << i;
    }
}

TEST(Quantize, Mxfp4ElementErrorBound) {
    // Within a block |x| <= amax < 16 * half(e) (e = floor(log2 amax) - 2 + 127). Inside the
    // doubled grid (|x| <= 12 half(e)) the largest gap is 4 (8 -> 12): error <= 2 half(e); above
    // it ggml's exponent choice clips to 12: error < 4 half(e). Both bounds are checked.
    std::mt19937 rng(9);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(32 * 400);
    for (auto& v : x) v = nd(rng) * 3.0f;
    std::vector<uint8_t> q(row_size(GgmlType::MXFP4, static_cast<int64_t>(x.size())));
    quantize_row(GgmlType::MXFP4, x.data(), q.data(), static_cast<int64_t>(x.size()));
    std::vector<float> y(x.size());
    dequantize_row(GgmlType::MXFP4, q.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t b = 0; b < x.size() / 32; ++b) {
        const float half_e = std::ldexp(1.0f, static_cast<int>(q[17 * b]) - 128);
        for (size_t j = 0; j < 32; ++j) {
            const float v = x[32 * b + j], err = std::fabs(v - y[32 * b + j]);
            EXPECT_LE(err, std::fabs(v) <= 12.0f * half_e ? 2.0f * half_e : 4.0f * half_e)
                << b << " " << j;
        }
    }
}

TEST(Quantize, LegacyElementErrorBounds) {
    // Q4_1/Q5_1: |x - x'| <= d/2 + fp16 rounding of d and m (relative 2^-11 each).
    // Q8_0: |x - x'| <= d/2 + 127 * |d - fp16(d)|.
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(32 * 500);
    for (auto& v : x) v = nd(rng) * 5.0f;
    struct Case {
        GgmlType t;
        float levels;
    };
    for (Case c :
         {Case{GgmlType::Q4_1, 15.0f}, Case{GgmlType::Q5_1, 31.0f}, Case{GgmlType::Q8_0, 0.0f}}) {
        const std::vector<float> y = roundtrip(c.t, x);
        for (size_t b = 0; b < x.size() / 32; ++b) {
            float mn = x[32 * b], mx = x[32 * b], amax = 0;
            for (size_t j = 0; j < 32; ++j) {
                mn = std::min(mn, x[32 * b + j]);
                mx = std::max(mx, x[32 * b + j]);
                amax = std::max(amax, std::fabs(x[32 * b + j]));
            }
            float bound;
            if (c.levels > 0) {
                const float d = (mx - mn) / c.levels;
                bound = d / 2 + (c.levels * d + std::fabs(mn)) * std::ldexp(1.0f, -11) * 1.01f;
            } else {
                const float d = amax / 127;
                bound = d / 2 + 127 * d * std::ldexp(1.0f, -11) * 1.01f;
            }
            for (size_t j = 0; j < 32; ++j) {
                ASSERT_LE(std::fabs(y[32 * b + j] - x[32 * b + j]), bound)
                    << type_name(c.t) << " block " << b << " elem " << j;
            }
        }
    }
}

TEST(Quantize, Q8KPacking) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(256 * 4);
    for (auto& v : x) v = nd(rng);
    // The element of largest magnitude always maps to -127; the sign goes into d.
    x[17] = -9.0f;   // block 0: d = 9 / 127
    x[300] = 11.0f;  // block 1: d = -11 / 127
    std::vector<detail::BlockQ8_K> q(4);
    quantize_row(GgmlType::Q8_K, x.data(), q.data(), 1024);
    EXPECT_EQ(q[0].qs[17], -127);
    EXPECT_EQ(q[1].qs[300 - 256], -127);
    EXPECT_FLOAT_EQ(q[0].d, 9.0f / 127.0f);
    EXPECT_FLOAT_EQ(q[1].d, -11.0f / 127.0f);
    for (const auto& b : q) {
        for (int g = 0; g < 16; ++g) {
            int s = 0;
            for (int j = 0; j < 16; ++j) {
                s += b.qs[16 * g + j];
                EXPECT_GE(b.qs[16 * g + j], -127);
            }
            EXPECT_EQ(b.bsums[g], s);
        }
    }
}

TEST(Quantize, Q8_1SumField) {
    std::mt19937 rng(6);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(32 * 8);
    for (auto& v : x) v = nd(rng);
    std::vector<detail::BlockQ8_1> q(8);
    quantize_row(GgmlType::Q8_1, x.data(), q.data(), 256);
    for (size_t i = 0; i < q.size(); ++i) {
        const auto& b = q[i];
        int s = 0;
        for (int8_t v : b.qs) s += v;
        float amax = 0;
        for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * i + j]));
        const float d = amax / 127.0f;  // s uses the unrounded f32 scale
        EXPECT_EQ(b.d, fp32_to_fp16(d));
        EXPECT_EQ(b.s, fp32_to_fp16(static_cast<float>(s) * d));
    }
}

TEST(Quantize, KQuantErrorIsSmallOnGaussianData) {
    std::mt19937 rng(8);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(256 * 64);
    for (auto& v : x) v = nd(rng);
    struct Case {
        GgmlType t;
        double max_rel_rms;  // measured with ggml's reference quantizer, times ~1.3
    };
    for (Case c :
         {Case{GgmlType::Q2_K, 0.45}, Case{GgmlType::Q3_K, 0.24}, Case{GgmlType::Q4_K, 0.11},
          Case{GgmlType::Q5_K, 0.056}, Case{GgmlType::Q6_K, 0.029}, Case{GgmlType::Q8_K, 0.014}}) {
        const std::vector<float> y = roundtrip(c.t, x);
        double se = 0, ss = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            se += (y[i] - x[i]) * (y[i] - x[i]);
            ss += x[i] * x[i];
        }
        EXPECT_LE(std::sqrt(se / ss), c.max_rel_rms) << type_name(c.t);
    }
}

}  // namespace
}  // namespace zinc::quant

namespace zinc::quant {
namespace {

// The SIMD activation quantizers must write exactly the reference bytes, including on ties
// (values whose scaled magnitude ends in .5), zeros, and repeated maxima of either sign.
TEST(QuantizeSimd, ActivationPackingsMatchReferenceBytes) {
    if (!simd_enabled()) GTEST_SKIP() << "SIMD path disabled or unsupported on this CPU";
    std::mt19937 rng(21);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> level(-254, 254);
    const int64_t n = 256 * 40;
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t b = 0; b < n / 32; ++b) {
        float* v = x.data() + 32 * b;
        switch (b % 6) {
            case 0:  // half-integer levels with amax 127: x * id hits exact ties
                for (int j = 0; j < 32; ++j) v[j] = 0.5f * static_cast<float>(level(rng));
                v[5] = 127.0f;
                break;
            case 1:
                for (int j = 0; j < 32; ++j) v[j] = 0.0f;
                break;
            case 2:  // repeated maxima of both signs
                for (int j = 0; j < 32; ++j) v[j] = nd(rng);
                v[3] = -4.0f;
                v[9] = 4.0f;
                v[30] = -4.0f;
                break;
            case 3:
                for (int j = 0; j < 32; ++j) v[j] = nd(rng) * 1e-30f;
                break;
            case 4:  // ties for Q8_K's scale: max -127 -> iscale 1
                for (int j = 0; j < 32; ++j) v[j] = 0.5f * static_cast<float>(level(rng));
                v[0] = -127.0f;
                break;
            default:
                for (int j = 0; j < 32; ++j) v[j] = nd(rng) * 1000.0f;
        }
    }
    struct Case {
        GgmlType t;
        detail::QuantizeFn reference;
    };
    for (Case c : {Case{GgmlType::Q8_0, detail::quantize_row_q8_0},
                   Case{GgmlType::Q8_1, detail::quantize_row_q8_1},
                   Case{GgmlType::Q8_K, detail::quantize_row_q8_k}}) {
        std::vector<uint8_t> want(row_size(c.t, n)), got(row_size(c.t, n));
        c.reference(x.data(), want.data(), n);
        quantize_row(c.t, x.data(), got.data(), n);  // SIMD path
        for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_EQ(got[i], want[i]) << type_name(c.t) << " byte " << i << " (block "
                                       << i / type_traits(c.t).type_size << ")";
        }
    }
}

}  // namespace
}  // namespace zinc::quant
