// tests/unit/quant/gemm_test.cpp — quant::gemm_tile against vec_dot, bit for bit, for every
// weight type: tile remainders in both directions (row and activation counts that are not
// multiples of the tile), strides with padding, odd block counts (the parity passes), saturating
// data, and the tiled kernels of both kernel sets (AVX2 and AVX-512 VNNI) called directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/gemm_detail.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace zinc::quant {
namespace {

const GgmlType weight_types[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
    GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
};

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

struct Problem {
    int64_t n;
    int n_w, n_a;
    size_t ws, as, os;
    std::vector<uint8_t> w, a;
};

// mode 0: Gaussian; mode 1: saturating (+-max levels, huge first activation); mode 2: random
// bytes in the weight payloads (scales kept finite by quantizing first, then scrambling qs).
Problem make_problem(GgmlType t, int64_t nblk, int n_w, int n_a, int mode, std::mt19937& rng) {
    const int64_t bs = type_traits(t).block_size;
    const int64_t n = bs == 1 ? nblk * 32 : nblk * bs;
    const GgmlType vdt = type_traits(t).vec_dot_type;
    Problem p{n, n_w, n_a, row_size(t, n) + 24, row_size(vdt, n) + 40,
              static_cast<size_t>(n_w) + 3, {}, {}};
    p.w.assign(p.ws * static_cast<size_t>(n_w), 0);
    p.a.assign(p.as * static_cast<size_t>(n_a), 0);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (int r = 0; r < n_w; ++r) {
        for (int64_t i = 0; i < n; ++i) {
            x[static_cast<size_t>(i)] = mode == 1 ? ((i % 2) ? 1.0f : -1.0f) : nd(rng);
        }
        uint8_t* row = p.w.data() + static_cast<size_t>(r) * p.ws;
        quantize_row(t, x.data(), row, n);
        if (mode == 2 && (t == GgmlType::Q4_0 || t == GgmlType::Q5_0 || t == GgmlType::Q8_0 ||
                          t == GgmlType::Q4_1 || t == GgmlType::Q5_1)) {
            // every payload byte random (the 2- or 4-byte scales at the block start kept)
            const size_t blk = row_size(t, 32);
            const size_t hdr = (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) ? 4 : 2;
            for (int64_t b = 0; b < nblk; ++b) {
                for (size_t k = hdr; k < blk; ++k) row[b * blk + k] = static_cast<uint8_t>(rng());
            }
        }
    }
    for (int j = 0; j < n_a; ++j) {
        for (int64_t i = 0; i < n; ++i) {
            x[static_cast<size_t>(i)] = nd(rng) * static_cast<float>(j + 1);
        }
        if (mode == 1) x[0] = 1e4f;
        quantize_row(vdt, x.data(), p.a.data() + static_cast<size_t>(j) * p.as, n);
    }
    return p;
}

void expect_matches_vec_dot(GgmlType t, const Problem& p, const std::vector<float>& out,
                            const char* what) {
    for (int j = 0; j < p.n_a; ++j) {
        for (int r = 0; r < p.n_w; ++r) {
            const float want = vec_dot(t, p.n, p.w.data() + static_cast<size_t>(r) * p.ws,
                                       p.a.data() + static_cast<size_t>(j) * p.as);
            const float got = out[static_cast<size_t>(j) * p.os + static_cast<size_t>(r)];
            ASSERT_EQ(bits(got), bits(want))
                << what << " " << type_name(t) << " n=" << p.n << " n_w=" << p.n_w
                << " n_a=" << p.n_a << " at (" << r << ", " << j << "): " << got << " vs " << want;
        }
    }
}

TEST(GemmTile, BitIdenticalToVecDotForEveryType) {
    std::mt19937 rng(21);
    for (GgmlType t : weight_types) {
        const bool legacy = type_traits(t).block_size == 32;
        for (int64_t nblk : legacy ? std::vector<int64_t>{1, 2, 3, 9, 20} : std::vector<int64_t>{1, 3}) {
            for (int n_w : {1, 2, 3, 4, 5, 7, 9}) {
                for (int n_a : {1, 2, 3, 4, 5, 6, 8, 11}) {
                    for (int mode = 0; mode < 3; ++mode) {
                        if (!legacy && mode == 2) continue;
                        const Problem p = make_problem(t, nblk, n_w, n_a, mode, rng);
                        std::vector<float> out(p.os * static_cast<size_t>(n_a), -7.0f);
                        gemm_tile(t, p.n, p.w.data(), p.ws, n_w, p.a.data(), p.as, n_a,
                                  out.data(), p.os);
                        expect_matches_vec_dot(t, p, out, "gemm_tile");
                        // the padding between output rows is untouched
                        for (int j = 0; j < n_a; ++j) {
                            for (size_t r = static_cast<size_t>(n_w); r < p.os; ++r) {
                                ASSERT_EQ(out[static_cast<size_t>(j) * p.os + r], -7.0f);
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST(GemmTile, TiledKernelsWhereExpected) {
    if (!simd_enabled()) GTEST_SKIP() << "scalar reference selected: every type falls back";
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_1,
                       GgmlType::Q5_1}) {
        EXPECT_TRUE(gemm_tile_is_tiled(t)) << type_name(t);
    }
    EXPECT_FALSE(gemm_tile_is_tiled(GgmlType::F32));
}

TEST(GemmTile, EmptyIsANoOp) {
    float out[4] = {1, 2, 3, 4};
    gemm_tile(GgmlType::Q8_0, 32, nullptr, 34, 0, nullptr, 34, 3, out, 4);
    gemm_tile(GgmlType::Q8_0, 32, nullptr, 34, 3, nullptr, 34, 0, out, 4);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[3], 4.0f);
}

#if defined(ZINC_QUANT_HAVE_AVX2)
// Both builds of the tiled kernels, called directly (the dispatch uses only one of them), against
// the AVX2 vec_dot kernel of the same type.
TEST(GemmTile, BothKernelSetsBitIdentical) {
    if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2";
    struct Case {
        GgmlType t;
        detail::DotFn dot;
        detail::GemmFn avx2;
#if defined(ZINC_QUANT_HAVE_VNNI)
        detail::GemmFn vnni;
#endif
    };
#if defined(ZINC_QUANT_HAVE_VNNI)
#define ZINC_CASE(T, t) {GgmlType::T, detail::dot_avx2_##t, detail::gemm_avx2_##t, detail::gemm_vnni_##t}
#else
#define ZINC_CASE(T, t) {GgmlType::T, detail::dot_avx2_##t, detail::gemm_avx2_##t}
#endif
    const Case cases[] = {ZINC_CASE(Q4_0, q4_0), ZINC_CASE(Q5_0, q5_0), ZINC_CASE(Q8_0, q8_0),
                          ZINC_CASE(Q4_1, q4_1), ZINC_CASE(Q5_1, q5_1)};
#undef ZINC_CASE
    const bool vnni = std::strcmp(simd_level(), "avx512vnni") == 0;
    std::mt19937 rng(5);
    for (const Case& c : cases) {
        for (int mode = 0; mode < 3; ++mode) {
            const Problem p = make_problem(c.t, 7, 6, 7, mode, rng);
            std::vector<detail::GemmFn> fns{c.avx2};
#if defined(ZINC_QUANT_HAVE_VNNI)
            if (vnni) fns.push_back(c.vnni);
#endif
            for (detail::GemmFn f : fns) {
                std::vector<float> out(p.os * static_cast<size_t>(p.n_a), 0.0f);
                f(p.n, p.w.data(), p.ws, p.n_w, p.a.data(), p.as, p.n_a, out.data(), p.os);
                for (int j = 0; j < p.n_a; ++j) {
                    for (int r = 0; r < p.n_w; ++r) {
                        const float want = c.dot(p.n, p.w.data() + static_cast<size_t>(r) * p.ws,
                                                 p.a.data() + static_cast<size_t>(j) * p.as);
                        ASSERT_EQ(bits(out[static_cast<size_t>(j) * p.os + r]), bits(want))
                            << type_name(c.t) << " mode " << mode << " (" << r << ", " << j << ")";
                    }
                }
            }
        }
    }
    (void)vnni;
}
#endif

}  // namespace
}  // namespace zinc::quant
