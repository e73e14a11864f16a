// tests/unit/quant/simd_test.cpp — the AVX2 dot products against the scalar reference for
// every weight type, on random data and on adversarial blocks (all-max levels, extreme
// activations), for row lengths with odd block counts so the two-blocks-per-iteration loops
// run their tails. Also checks vec_dot_ref against a dot of the dequantized rows.
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

const GgmlType weight_types[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
    GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q2_K,
    GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K,
};

struct Row {
    std::vector<uint8_t> w, a;
    std::vector<float> wd, ad;  // dequantized
};

Row make_row(GgmlType t, int64_t n, std::mt19937& rng, int mode) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> w(static_cast<size_t>(n)), a(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        w[static_cast<size_t>(i)] = nd(rng);
        a[static_cast<size_t>(i)] = nd(rng) * 3.0f;
    }
    if (mode == 1) {  // extremes: saturating levels in every block, one huge activation
        for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = (i % 2) ? 1.0f : -1.0f;
        a[0] = 1e4f;
    }
    const GgmlType vdt = type_traits(t).vec_dot_type;
    Row r;
    r.w.resize(row_size(t, n));
    r.a.resize(row_size(vdt, n));
    quantize_row(t, w.data(), r.w.data(), n);
    quantize_row(vdt, a.data(), r.a.data(), n);
    r.wd.resize(static_cast<size_t>(n));
    r.ad.resize(static_cast<size_t>(n));
    dequantize_row(t, r.w.data(), r.wd.data(), n);
    dequantize_row(vdt, r.a.data(), r.ad.data(), n);
    return r;
}

TEST(Simd, MatchesReferenceForEveryType) {
    if (!simd_enabled()) GTEST_SKIP() << "SIMD path disabled or unsupported on this CPU";
    std::mt19937 rng(7);
    for (GgmlType t : weight_types) {
        const int64_t bs = type_traits(t).block_size;
        const int64_t unit = bs == 1 ? 1 : (bs == 32 ? 32 : 256);
        for (int64_t nblk : {1, 2, 3, 7, 16, 33}) {
            const int64_t n = (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16)
                                  ? nblk * 37  // odd lengths exercise the scalar tails
                                  : nblk * unit;
            for (int mode = 0; mode < 2; ++mode) {
                const Row r = make_row(t, n, rng, mode);
                const float simd = vec_dot(t, n, r.w.data(), r.a.data());
                const float ref = vec_dot_ref(t, n, r.w.data(), r.a.data());
                double abs_sum = 0;
                for (int64_t i = 0; i < n; ++i) {
                    abs_sum += std::fabs(static_cast<double>(r.wd[static_cast<size_t>(i)]) *
                                         r.ad[static_cast<size_t>(i)]);
                }
                // both are float32 sums of exact integer block dots: differences are rounding
                // only, bounded by a few ulps of the absolute sum per block.
                const double tol = 1e-6 * static_cast<double>(nblk + 8) * abs_sum + 1e-30;
                EXPECT_NEAR(simd, ref, tol) << type_name(t) << " n=" << n << " mode=" << mode;
            }
        }
    }
}

TEST(Simd, ReferenceEqualsDequantizedDot) {
    std::mt19937 rng(9);
    for (GgmlType t : weight_types) {
        if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) continue;  // min term uses Q8_1's s
        const int64_t n = 1024;
        const Row r = make_row(t, n, rng, 0);
        double exact = 0, abs_sum = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double p =
                static_cast<double>(r.wd[static_cast<size_t>(i)]) * r.ad[static_cast<size_t>(i)];
            exact += p;
            abs_sum += std::fabs(p);
        }
        EXPECT_NEAR(vec_dot_ref(t, n, r.w.data(), r.a.data()), exact, 2e-5 * abs_sum)
            << type_name(t);
    }
}

}  // namespace
}  // namespace zinc::quant

namespace zinc::quant {
namespace {

// vec_dot_multi must give exactly vec_dot's result for every activation row, whatever the
// number of rows (chunking into kernels of 1..4 rows) and the stride between them.
TEST(VecDotMulti, BitIdenticalToVecDot) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (GgmlType t : weight_types) {
        const int64_t bs = type_traits(t).block_size;
        const int64_t n = bs == 1 ? 100 : (bs == 32 ? 32 * 9 : 256 * 3);
        const GgmlType vdt = type_traits(t).vec_dot_type;
        std::vector<float> x(static_cast<size_t>(n));
        for (auto& v : x) v = nd(rng);
        std::vector<uint8_t> w(row_size(t, n));
        quantize_row(t, x.data(), w.data(), n);
        const size_t arow = row_size(vdt, n);
        const size_t stride = arow + 64;  // rows need not be contiguous
        for (int n_a : {1, 2, 3, 4, 5, 7, 8, 9}) {
            std::vector<uint8_t> a(stride * static_cast<size_t>(n_a));
            for (int j = 0; j < n_a; ++j) {
                for (auto& v : x) v = nd(rng) * static_cast<float>(j + 1);
                quantize_row(vdt, x.data(), a.data() + static_cast<size_t>(j) * stride, n);
            }
            std::vector<float> got(static_cast<size_t>(n_a), -1.0f);
            vec_dot_multi(t, n, w.data(), a.data(), stride, n_a, got.data());
            for (int j = 0; j < n_a; ++j) {
                const float want =
                    vec_dot(t, n, w.data(), a.data() + static_cast<size_t>(j) * stride);
                uint32_t gb, wb;
                std::memcpy(&gb, &got[static_cast<size_t>(j)], 4);
                std::memcpy(&wb, &want, 4);
                EXPECT_EQ(gb, wb) << type_name(t) << " n_a=" << n_a << " row " << j << ": "
                                  << got[static_cast<size_t>(j)] << " vs " << want;
            }
        }
    }
}

}  // namespace
}  // namespace zinc::quant

namespace zinc::quant {
namespace {

#if defined(ZINC_QUANT_HAVE_VNNI)
// The AVX-512 VNNI build of the quantized kernels must equal the AVX2 build bit for bit (the
// integer block sums are exact in both), single-row and multi-row, so that ZINC_AVX512=0 is a
// pure speed switch.
TEST(Vnni, BitIdenticalToAvx2) {
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))) {
        GTEST_SKIP() << "CPU has no AVX-512 VNNI";
    }
    struct Pair {
        GgmlType t;
        detail::DotFn avx2, vnni;
        detail::DotMultiFn avx2_multi, vnni_multi;
    };
    const Pair pairs[] = {
        {GgmlType::Q4_0, detail::dot_avx2_q4_0, detail::dot_vnni_q4_0, detail::dot_multi_avx2_q4_0,
         detail::dot_multi_vnni_q4_0},
        {GgmlType::Q4_1, detail::dot_avx2_q4_1, detail::dot_vnni_q4_1, detail::dot_multi_avx2_q4_1,
         detail::dot_multi_vnni_q4_1},
        {GgmlType::Q5_0, detail::dot_avx2_q5_0, detail::dot_vnni_q5_0, detail::dot_multi_avx2_q5_0,
         detail::dot_multi_vnni_q5_0},
        {GgmlType::Q5_1, detail::dot_avx2_q5_1, detail::dot_vnni_q5_1, detail::dot_multi_avx2_q5_1,
         detail::dot_multi_vnni_q5_1},
        {GgmlType::Q8_0, detail::dot_avx2_q8_0, detail::dot_vnni_q8_0, detail::dot_multi_avx2_q8_0,
         detail::dot_multi_vnni_q8_0},
        {GgmlType::Q2_K, detail::dot_avx2_q2_k, detail::dot_vnni_q2_k, detail::dot_multi_avx2_q2_k,
         detail::dot_multi_vnni_q2_k},
        {GgmlType::Q3_K, detail::dot_avx2_q3_k, detail::dot_vnni_q3_k, detail::dot_multi_avx2_q3_k,
         detail::dot_multi_vnni_q3_k},
        {GgmlType::Q4_K, detail::dot_avx2_q4_k, detail::dot_vnni_q4_k, detail::dot_multi_avx2_q4_k,
         detail::dot_multi_vnni_q4_k},
        {GgmlType::Q5_K, detail::dot_avx2_q5_k, detail::dot_vnni_q5_k, detail::dot_multi_avx2_q5_k,
         detail::dot_multi_vnni_q5_k},
        {GgmlType::Q6_K, detail::dot_avx2_q6_k, detail::dot_vnni_q6_k, detail::dot_multi_avx2_q6_k,
         detail::dot_multi_vnni_q6_k},
    };
    std::mt19937 rng(17);
    for (const Pair& p : pairs) {
        for (int mode = 0; mode < 2; ++mode) {
            const int64_t n = type_traits(p.t).block_size == 32 ? 32 * 13 : 256 * 5;
            const Row r = make_row(p.t, n, rng, mode);
            const float a2 = p.avx2(n, r.w.data(), r.a.data());
            const float vn = p.vnni(n, r.w.data(), r.a.data());
            EXPECT_EQ(std::memcmp(&a2, &vn, 4), 0) << type_name(p.t) << ": " << a2 << " vs " << vn;
            // three activation rows: the same row repeated at a stride
            const size_t stride = r.a.size();
            std::vector<uint8_t> a3(stride * 3);
            for (int j = 0; j < 3; ++j) std::memcpy(a3.data() + j * stride, r.a.data(), stride);
            float o2[3], ov[3];
            p.avx2_multi(n, r.w.data(), a3.data(), stride, 3, o2);
            p.vnni_multi(n, r.w.data(), a3.data(), stride, 3, ov);
            for (int j = 0; j < 3; ++j) {
                EXPECT_EQ(std::memcmp(&o2[j], &a2, 4), 0) << type_name(p.t);
                EXPECT_EQ(std::memcmp(&ov[j], &a2, 4), 0) << type_name(p.t);
            }
        }
    }
}
#endif

}  // namespace
}  // namespace zinc::quant
