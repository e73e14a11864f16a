// zinc/tests/unit/cuda_emul/exact_gemm_emul_test.cpp — the exact prefill GEMM's CUDA source
// (src/backend/cuda/dmmv_exact_gemm.cu), compiled for the host over the SIMT shim in shim/, run
// through its real entry point dmmv_exact_gemm() on host memory, must equal the CPU tier's
// quant::gemm_tile bit for bit. This checks the kernels' thread mapping, staging, chain order and
// closing butterflies in CI without a GPU; tests/cuda/test_exact_gemm.cpp checks the same on the
// device (where nvcc's code generation is the remaining difference).
//
// Activations are the CPU's quantize_row packing converted to the device layout of pack.cu
// (int8 codes; per 32 elements a float4 with x = the scale as the CPU holds it, y = Q8_1's s,
// w = the two 16-element code sums as int16 bits); weights mix quantized Gaussians with random
// payload bytes and random finite f16 scales; outputs are poisoned with NaN first.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/dmmv_exact_gemm.cu"
#pragma GCC diagnostic pop

#include "quant/quant.h"
#include "quant/types.h"

namespace {

using zinc::quant::GgmlType;
namespace q = zinc::quant;
namespace cu = zinc::cuda;

uint16_t rand_half(std::mt19937& rng) {
    const uint32_t r = rng();
    const uint16_t sign = (r & 1) ? 0x8000 : 0;
    const uint16_t mant = static_cast<uint16_t>((r >> 1) & 0x3FF);
    if ((r >> 11) % 16 == 0) return sign | mant;  // subnormal or zero
    const int e = 1 + static_cast<int>((r >> 15) % 22);
    return static_cast<uint16_t>(sign | (e << 10) | mant);
}

std::vector<uint8_t> make_weights(GgmlType t, int n_out, int k, std::mt19937& rng) {
    const size_t rb = q::row_size(t, k);
    std::vector<uint8_t> w(rb * n_out);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> row(k);
    for (int r = 0; r < n_out; ++r) {
        uint8_t* p = w.data() + rb * r;
        if (r % 2 == 0) {
            const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 12) - 8);
            const float off = (r % 3 == 0) ? 0.3f * sc : 0.f;
            for (auto& v : row) v = nd(rng) * sc + off;
            q::quantize_row(t, row.data(), p, k);
            continue;
        }
        for (size_t i = 0; i < rb; ++i) p[i] = static_cast<uint8_t>(rng());
        const int64_t bs = q::type_traits(t).block_size;
        const size_t blk = q::row_size(t, bs);
        auto set_h = [&](uint8_t* d) {
            const uint16_t h = rand_half(rng);
            std::memcpy(d, &h, 2);
        };
        for (int64_t b = 0; b < k / bs; ++b) {
            uint8_t* d = p + b * blk;
            switch (t) {
                case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: set_h(d); break;
                case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
                    set_h(d);
                    set_h(d + 2);
                    break;
                case GgmlType::Q6_K: set_h(d + 208); break;
                case GgmlType::Q2_K: set_h(d + 80); set_h(d + 82); break;
                case GgmlType::Q3_K: set_h(d + 108); break;
                default: break;
            }
        }
    }
    return w;
}

std::vector<float> make_acts(int n_act, int k, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n_act) * k);
    for (int j = 0; j < n_act; ++j) {
        float* r = x.data() + static_cast<size_t>(j) * k;
        const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
        for (int i = 0; i < k; ++i) r[i] = nd(rng) * sc;
        for (int i = static_cast<int>(rng() % 97); i < k; i += 97) r[i] *= 50.f;
        if (j % 4 == 1 && k >= 512) std::fill(r + 256, r + 512, 0.f);
    }
    return x;
}

// The CPU packing in pack.cu's device layout.
struct Acts {
    std::vector<uint4> q_store;  // 16-byte aligned int8 codes
    std::vector<float4> d;
    const int8_t* q() const { return reinterpret_cast<const int8_t*>(q_store.data()); }
};
Acts device_layout(GgmlType vt, const std::vector<uint8_t>& packed, int n_act, int k) {
    Acts a;
    a.q_store.resize(static_cast<size_t>(n_act) * k / 16);
    a.d.resize(static_cast<size_t>(n_act) * k / 32);
    int8_t* codes = reinterpret_cast<int8_t*>(a.q_store.data());
    const size_t prb = q::row_size(vt, k);
    for (int j = 0; j < n_act; ++j) {
        const uint8_t* row = packed.data() + prb * j;
        for (int c = 0; c < k / 32; ++c) {
            const int8_t* cq;
            float4 f{0.f, 0.f, 0.f, 0.f};
            int lo = 0, hi = 0;
            if (vt == GgmlType::Q8_K) {
                const uint8_t* b = row + 292 * (c / 8);
                std::memcpy(&f.x, b, 4);
                cq = reinterpret_cast<const int8_t*>(b + 4) + 32 * (c % 8);
                int16_t bs[2];
                std::memcpy(bs, b + 4 + 256 + 4 * (c % 8), 4);
                lo = bs[0];
                hi = bs[1];
            } else {
                const size_t bsz = vt == GgmlType::Q8_0 ? 34 : 36;
                const uint8_t* b = row + bsz * c;
                uint16_t dh, sh;
                std::memcpy(&dh, b, 2);
                f.x = q::fp16_to_fp32(dh);
                if (vt == GgmlType::Q8_1) {
                    std::memcpy(&sh, b + 2, 2);
                    f.y = q::fp16_to_fp32(sh);
                }
                cq = reinterpret_cast<const int8_t*>(b + bsz - 32);
                for (int i = 0; i < 16; ++i) lo += cq[i], hi += cq[16 + i];
            }
            const uint32_t bits = (static_cast<uint32_t>(lo) & 0xffffu) | (static_cast<uint32_t>(hi) << 16);
            std::memcpy(&f.w, &bits, 4);
            a.d[static_cast<size_t>(j) * (k / 32) + c] = f;
            std::memcpy(codes + static_cast<size_t>(j) * k + 32 * c, cq, 32);
        }
    }
    return a;
}

size_t n_differ(const std::vector<float>& got, const std::vector<float>& want) {
    size_t n = 0;
    for (size_t i = 0; i < got.size(); ++i) n += std::memcmp(&got[i], &want[i], 4) != 0;
    return n;
}

// n_out rows in two jobs (rows [0, n0) and the rest with a bias, its weights right after job 0's:
// as aligned as n0 * row_bytes), n_act activation rows; plain, then accumulate over random y.
void check(GgmlType t, int k, int n_out, int n0, int n_act, uint32_t seed, int variant = 0) {
    SCOPED_TRACE("variant " + std::to_string(variant) + " " + std::string(q::type_name(t)) + " k " + std::to_string(k) + " rows " +
                 std::to_string(n_out) + " act " + std::to_string(n_act));
    std::mt19937 rng(seed);
    const size_t rb = q::row_size(t, k);
    const auto w = make_weights(t, n_out, k, rng);
    const auto x = make_acts(n_act, k, rng);
    const int n1 = n_out - n0;
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> bias(n1), init(static_cast<size_t>(n_act) * n_out);
    for (auto& b : bias) b = nd(rng);
    for (auto& v : init) v = nd(rng);
    const GgmlType vt = q::type_traits(t).vec_dot_type;
    const size_t prb = q::row_size(vt, k);
    std::vector<uint8_t> packed(prb * n_act);
    for (int j = 0; j < n_act; ++j)
        q::quantize_row(vt, x.data() + static_cast<size_t>(j) * k, packed.data() + prb * j, k);
    std::vector<float> want(static_cast<size_t>(n_act) * n_out);
    q::gemm_tile(t, k, w.data(), rb, n_out, packed.data(), prb, n_act, want.data(), n_out);
    for (int j = 0; j < n_act; ++j)
        for (int r = n0; r < n_out; ++r) want[static_cast<size_t>(j) * n_out + r] += bias[r - n0];
    const Acts a = device_layout(vt, packed, n_act, k);

    // One output buffer (n_act, n_out): job 0 writes columns [0, n0), job 1 the rest (ldy n_out).
    std::vector<float> y(want.size());
    std::memset(y.data(), 0xff, y.size() * 4);
    cu::MatJob jobs[2];
    jobs[0].w = w.data();
    jobs[0].row_bytes = rb;
    jobs[0].n_out = n0;
    jobs[0].y = y.data();
    jobs[0].ldy = n_out;
    jobs[1].w = w.data() + rb * n0;
    jobs[1].row_bytes = rb;
    jobs[1].n_out = n1;
    jobs[1].y = y.data() + n0;
    jobs[1].ldy = n_out;
    jobs[1].bias = bias.data();
    ASSERT_TRUE(cu::dmmv_exact_gemm_variant(variant, static_cast<int>(t), jobs, 2, k, a.q(), a.d.data(), n_act,
                                            false, nullptr));
    EXPECT_EQ(n_differ(y, want), 0u) << "of " << y.size() << " outputs differ from gemm_tile";

    y = init;
    ASSERT_TRUE(cu::dmmv_exact_gemm_variant(variant, static_cast<int>(t), jobs, 2, k, a.q(), a.d.data(), n_act,
                                            true, nullptr));
    std::vector<float> want_acc(want.size());
    for (size_t i = 0; i < want.size(); ++i) want_acc[i] = init[i] + want[i];
    EXPECT_EQ(n_differ(y, want_acc), 0u) << "of " << y.size() << " accumulated outputs differ";
}

// Tiles are 32 x 32 (variant 0): 45 rows and 17 activation rows leave partial tiles in both
// directions; k = 2080 (65 blocks) and 2304 (9 super-blocks) leave a
// partial last stage with an odd count.
TEST(ExactGemmEmul, LegacyFormats) {
    uint32_t seed = 1;
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0}) {
        check(t, 2080, 45, 13, 17, seed++);
        check(t, 256, 33, 32, 17, seed++);
    }
}

TEST(ExactGemmEmul, KQuants) {
    uint32_t seed = 100;
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::Q3_K}) {
        check(t, 2304, 45, 13, 17, seed++);
        check(t, 512, 33, 32, 17, seed++);
    }
}

// Shapes at the edges: one output and one activation row, an empty first or second job, rows and
// activation rows that are exact tile multiples.
TEST(ExactGemmEmul, EdgeShapes) {
    check(GgmlType::Q4_0, 256, 1, 0, 1, 300);
    check(GgmlType::Q4_K, 256, 1, 0, 1, 301);
    check(GgmlType::Q4_K, 512, 64, 32, 64, 302);
    check(GgmlType::Q8_0, 512, 64, 64, 32, 303);
    check(GgmlType::Q6_K, 256, 32, 0, 33, 304);
}

// The other tile variants (kept for measuring on the device) give the same bits.
TEST(ExactGemmEmul, TileVariants) {
    ASSERT_EQ(cu::dmmv_exact_gemm_variants(), 5);
    uint32_t seed = 200;
    for (int v = 1; v < cu::dmmv_exact_gemm_variants(); ++v) {
        for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q8_0}) check(t, 2080, 45, 13, 19, seed++, v);
        if (v <= 2)  // variants 3 and 4 share variant 0's K-quant tiles
            for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q2_K}) check(t, 2304, 45, 13, 17, seed++, v);
    }
    EXPECT_FALSE(cu::dmmv_exact_gemm_variant(5, 2, nullptr, 1, 256, nullptr, nullptr, 20, false, nullptr));
}

TEST(ExactGemmEmul, RefusesUncoveredTypes) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
        cu::MatJob j;
        j.n_out = 1;
        EXPECT_FALSE(cu::dmmv_exact_gemm(static_cast<int>(t), &j, 1, 256, nullptr, nullptr, 20, false, nullptr));
        EXPECT_FALSE(cu::dmmv_exact_gemm_supports(static_cast<int>(t)));
    }
}

}  // namespace
