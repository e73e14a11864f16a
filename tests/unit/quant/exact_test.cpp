// tests/unit/quant/exact_test.cpp — the canonical dot order (quant/canon_dot.h) is the order of
// every CPU kernel: the scalar reference (dot_ref_*), the AVX2 and AVX-512 VNNI vec_dots (single
// and multi-row), and the tiled gemm kernels give the same bits (memcmp) for every weight type,
// on random payload bytes with extreme scales (normal, subnormal, large; both signs), odd and even
// block counts and float rows with tails. Also: the activation quantizers' SIMD forms give the
// scalar bytes on tie-heavy and extreme data. A change in any chain order, tree or lane split
// makes these fail (checked by the self-test at the end, which perturbs the order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/blocks.h"
#include "quant/canon_dot.h"
#include "quant/gemm_detail.h"
#include "quant/quant.h"
#include "quant/types.h"

namespace zinc::quant {
namespace {

using namespace detail;

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// A random finite half: mostly normal with any exponent, sometimes subnormal or zero.
uint16_t rand_half(std::mt19937& rng, int max_exp = 30) {
    const uint32_t r = rng();
    const uint16_t sign = (r & 1) ? 0x8000 : 0;
    const uint16_t mant = static_cast<uint16_t>((r >> 1) & 0x3FF);
    const int kind = static_cast<int>((r >> 11) % 16);
    if (kind == 0) return sign | mant;  // subnormal or zero
    const int e = 1 + static_cast<int>((r >> 15) % static_cast<uint32_t>(max_exp));
    return static_cast<uint16_t>(sign | (e << 10) | mant);
}
float rand_float(std::mt19937& rng, int lo_exp, int hi_exp) {
    const uint32_t r = rng();
    const int e = lo_exp + static_cast<int>(r % static_cast<uint32_t>(hi_exp - lo_exp + 1));
    return std::ldexp(1.0f + static_cast<float>((r >> 8) & 0xFFFF) / 65536.0f, e) *
           ((r >> 30) & 1 ? -1.0f : 1.0f);
}
int8_t rand_code(std::mt19937& rng) {
    return static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
}

// Random weight row of type t: every byte random, then the f16 scale fields made finite.
std::vector<uint8_t> rand_weights(GgmlType t, int64_t n, std::mt19937& rng) {
    std::vector<uint8_t> w(row_size(t, n));
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const int64_t bs = type_traits(t).block_size;
    auto set_h = [&](uint8_t* p) {
        const uint16_t h = rand_half(rng);
        std::memcpy(p, &h, 2);
    };
    if (bs == 1) {
        for (int64_t i = 0; i < n; ++i) {
            if (t == GgmlType::F32) {
                const float f = rand_float(rng, -20, 20);
                std::memcpy(w.data() + 4 * i, &f, 4);
            } else if (t == GgmlType::F16) {
                set_h(w.data() + 2 * i);
            } else {
                const float f = rand_float(rng, -20, 20);
                uint32_t u;
                std::memcpy(&u, &f, 4);
                const uint16_t h = static_cast<uint16_t>(u >> 16);
                std::memcpy(w.data() + 2 * i, &h, 2);
            }
        }
        return w;
    }
    const size_t blk = row_size(t, bs);
    for (int64_t b = 0; b < n / bs; ++b) {
        uint8_t* p = w.data() + b * blk;
        switch (t) {
            case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: set_h(p); break;
            case GgmlType::Q4_1: case GgmlType::Q5_1: set_h(p); set_h(p + 2); break;
            case GgmlType::Q8_1: {
                set_h(p);
                set_h(p + 2);
                for (int e = 0; e < 32; ++e) p[4 + e] = static_cast<uint8_t>(rand_code(rng));
                break;
            }
            case GgmlType::Q2_K: set_h(p + 80); set_h(p + 82); break;
            case GgmlType::Q3_K: set_h(p + 108); break;
            case GgmlType::Q4_K: case GgmlType::Q5_K: set_h(p); set_h(p + 2); break;
            case GgmlType::Q6_K: set_h(p + 208); break;
            case GgmlType::MXFP4: {  // any scale byte: 0/1 give subnormal scales, 254 near FLT_MAX
                const uint32_t r = rng() % 8;
                p[0] = r == 0 ? static_cast<uint8_t>(rng() % 3)
                              : static_cast<uint8_t>(90 + rng() % 70);
                break;
            }
            case GgmlType::Q8_K: {
                auto* q = reinterpret_cast<BlockQ8_K*>(p);
                q->d = rand_float(rng, -30, 10);
                for (auto& c : q->qs) c = rand_code(rng);
                for (int g = 0; g < 16; ++g) {
                    int s = 0;
                    for (int e = 0; e < 16; ++e) s += q->qs[16 * g + e];
                    q->bsums[g] = static_cast<int16_t>(s);
                }
                break;
            }
            default: break;
        }
    }
    return w;
}

// Random activation row packed as vdt: codes in [-127, 127], random finite scales; Q8_K bsums
// consistent with the codes; Q8_1's s random (the dots take it as given).
std::vector<uint8_t> rand_acts(GgmlType vdt, int64_t n, std::mt19937& rng) {
    std::vector<uint8_t> a(row_size(vdt, n));
    if (vdt == GgmlType::F32) {
        for (int64_t i = 0; i < n; ++i) {
            const float f = rand_float(rng, -20, 20);
            std::memcpy(a.data() + 4 * i, &f, 4);
        }
        return a;
    }
    if (vdt == GgmlType::Q8_0) {
        auto* b = reinterpret_cast<BlockQ8_0*>(a.data());
        for (int64_t i = 0; i < n / 32; ++i) {
            b[i].d = rand_half(rng);
            for (auto& c : b[i].qs) c = rand_code(rng);
        }
    } else if (vdt == GgmlType::Q8_1) {
        auto* b = reinterpret_cast<BlockQ8_1*>(a.data());
        for (int64_t i = 0; i < n / 32; ++i) {
            b[i].d = rand_half(rng);
            b[i].s = rand_half(rng);
            for (auto& c : b[i].qs) c = rand_code(rng);
        }
    } else {
        a = rand_weights(GgmlType::Q8_K, n, rng);
    }
    return a;
}

const GgmlType all_types[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
    GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q2_K,
    GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K,
    GgmlType::MXFP4,
};

std::vector<int64_t> lengths(GgmlType t) {
    const int64_t bs = type_traits(t).block_size;
    if (bs == 1) return {8, 16, 24, 32, 40, 64, 72, 100, 96, 131, 4096 + 40};
    std::vector<int64_t> v;
    for (int64_t nb : {1, 2, 3, 4, 5, 7, 16, 33}) v.push_back(nb * bs);
    return v;
}

#if defined(ZINC_QUANT_HAVE_AVX2)
DotFn avx2_dot(GgmlType t) {
    switch (t) {
        case GgmlType::F32: return dot_avx2_f32;
        case GgmlType::F16: return dot_avx2_f16;
        case GgmlType::BF16: return dot_avx2_bf16;
        case GgmlType::Q8_1: return dot_avx2_q8_1;
        case GgmlType::Q8_K: return dot_avx2_q8_k;
        case GgmlType::Q4_0: return dot_avx2_q4_0;
        case GgmlType::Q4_1: return dot_avx2_q4_1;
        case GgmlType::Q5_0: return dot_avx2_q5_0;
        case GgmlType::Q5_1: return dot_avx2_q5_1;
        case GgmlType::Q8_0: return dot_avx2_q8_0;
        case GgmlType::Q2_K: return dot_avx2_q2_k;
        case GgmlType::Q3_K: return dot_avx2_q3_k;
        case GgmlType::Q4_K: return dot_avx2_q4_k;
        case GgmlType::Q5_K: return dot_avx2_q5_k;
        case GgmlType::Q6_K: return dot_avx2_q6_k;
        case GgmlType::MXFP4: return dot_avx2_mxfp4;
        default: return nullptr;
    }
}
#define ZINC_MULTI(prefix)                                   \
    switch (t) {                                             \
        case GgmlType::Q4_0: return dot_multi_##prefix##_q4_0; \
        case GgmlType::Q4_1: return dot_multi_##prefix##_q4_1; \
        case GgmlType::Q5_0: return dot_multi_##prefix##_q5_0; \
        case GgmlType::Q5_1: return dot_multi_##prefix##_q5_1; \
        case GgmlType::Q8_0: return dot_multi_##prefix##_q8_0; \
        case GgmlType::Q2_K: return dot_multi_##prefix##_q2_k; \
        case GgmlType::Q3_K: return dot_multi_##prefix##_q3_k; \
        case GgmlType::Q4_K: return dot_multi_##prefix##_q4_k; \
        case GgmlType::Q5_K: return dot_multi_##prefix##_q5_k; \
        case GgmlType::Q6_K: return dot_multi_##prefix##_q6_k; \
        case GgmlType::MXFP4: return dot_multi_##prefix##_mxfp4; \
        default: return nullptr;                             \
    }
DotMultiFn avx2_multi(GgmlType t) { ZINC_MULTI(avx2) }
#if defined(ZINC_QUANT_HAVE_VNNI)
DotMultiFn vnni_multi(GgmlType t) { ZINC_MULTI(vnni) }
bool cpu_vnni() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}
#endif
#define ZINC_GEMM(prefix)                                 \
    switch (t) {                                          \
        case GgmlType::Q4_0: return gemm_##prefix##_q4_0; \
        case GgmlType::Q4_1: return gemm_##prefix##_q4_1; \
        case GgmlType::Q5_0: return gemm_##prefix##_q5_0; \
        case GgmlType::Q5_1: return gemm_##prefix##_q5_1; \
        case GgmlType::Q8_0: return gemm_##prefix##_q8_0; \
        default: return nullptr;                          \
    }
GemmFn avx2_gemm(GgmlType t) { ZINC_GEMM(avx2) }
#if defined(ZINC_QUANT_HAVE_VNNI)
GemmFn vnni_gemm(GgmlType t) { ZINC_GEMM(vnni) }
#endif
#endif

// Compares the reference (canon_dot) result of every (weight row, activation row) pair with
// every CPU kernel that exists for the type.
TEST(ExactDot, EveryKernelEqualsTheCanonicalOrder) {
#if !defined(ZINC_QUANT_HAVE_AVX2)
    GTEST_SKIP() << "portable build: only the reference exists";
#else
    if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
    std::mt19937 rng(2026);
    constexpr int kW = 5, kA = 6;  // odd tiles
    int checked = 0;
    for (GgmlType t : all_types) {
        const GgmlType vdt = type_traits(t).vec_dot_type;
        for (int64_t n : lengths(t)) {
            for (int rep = 0; rep < 2; ++rep) {
                const size_t ws = row_size(t, n), as = row_size(vdt, n);
                std::vector<uint8_t> w, a;
                for (int r = 0; r < kW; ++r) {
                    auto x = rand_weights(t, n, rng);
                    w.insert(w.end(), x.begin(), x.end());
                }
                for (int j = 0; j < kA; ++j) {
                    auto x = rand_acts(vdt, n, rng);
                    a.insert(a.end(), x.begin(), x.end());
                }
                std::vector<float> ref(kW * kA);
                for (int r = 0; r < kW; ++r)
                    for (int j = 0; j < kA; ++j)
                        ref[j * kW + r] = vec_dot_ref(t, n, w.data() + r * ws, a.data() + j * as);
                auto expect_eq = [&](const std::vector<float>& got, const char* what) {
                    ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * 4), 0)
                        << what << " " << type_name(t) << " n=" << n;
                    ++checked;
                };
                {
                    std::vector<float> got(kW * kA, NAN);
                    const DotFn f = avx2_dot(t);
                    ASSERT_NE(f, nullptr) << type_name(t);
                    for (int r = 0; r < kW; ++r)
                        for (int j = 0; j < kA; ++j)
                            got[j * kW + r] = f(n, w.data() + r * ws, a.data() + j * as);
                    expect_eq(got, "avx2 vec_dot");
                }
                auto check_multi = [&](DotMultiFn f, const char* what) {
                    if (!f) return;
                    std::vector<float> got(kW * kA, NAN);
                    float tmp[kA];
                    for (int r = 0; r < kW; ++r) {
                        f(n, w.data() + r * ws, a.data(), as, kA, tmp);
                        for (int j = 0; j < kA; ++j) got[j * kW + r] = tmp[j];
                    }
                    expect_eq(got, what);
                };
                auto check_gemm = [&](GemmFn f, const char* what) {
                    if (!f) return;
                    std::vector<float> got(kW * kA, NAN);
                    f(n, w.data(), ws, kW, a.data(), as, kA, got.data(), kW);
                    expect_eq(got, what);
                };
                check_multi(avx2_multi(t), "avx2 vec_dot_multi");
                check_gemm(avx2_gemm(t), "avx2 gemm_tile");
#if defined(ZINC_QUANT_HAVE_VNNI)
                if (cpu_vnni()) {
                    check_multi(vnni_multi(t), "vnni vec_dot_multi");
                    check_gemm(vnni_gemm(t), "vnni gemm_tile");
                }
#endif
                {  // the public entry points (whatever the process selected)
                    std::vector<float> got(kW * kA, NAN);
                    gemm_tile(t, n, w.data(), ws, kW, a.data(), as, kA, got.data(), kW);
                    expect_eq(got, "gemm_tile");
                }
            }
        }
    }
    EXPECT_GT(checked, 400);
#endif
}

// The reference is the canonical order itself (not merely close to the SIMD kernels): a dot with
// one chain order changed gives different bits on this data, so the comparisons above can fail.
TEST(ExactDot, PerturbedOrderIsDetected) {
    std::mt19937 rng(5);
    const int64_t n = 32 * 33;
    int differ = 0;
    for (int rep = 0; rep < 20; ++rep) {
        const auto w = rand_weights(GgmlType::Q8_0, n, rng);
        const auto a = rand_acts(GgmlType::Q8_0, n, rng);
        const auto* x = reinterpret_cast<const BlockQ8_0*>(w.data());
        const auto* y = reinterpret_cast<const BlockQ8_0*>(a.data());
        float c[8] = {};  // one chain for all blocks instead of even/odd
        for (int64_t i = 0; i < n / 32; ++i) {
            const float dd = canon_dot::half_to_float(x[i].d) * canon_dot::half_to_float(y[i].d);
            for (int l = 0; l < 8; ++l)
                c[l] = std::fma(dd, static_cast<float>(canon_dot::lane32(x[i], y[i].qs, l,
                                                                        canon_dot::CodeQ8_0{})),
                                c[l]);
        }
        const float one_chain = canon::tree8(c);
        if (bits(one_chain) != bits(vec_dot(GgmlType::Q8_0, n, w.data(), a.data()))) ++differ;
    }
    EXPECT_GE(differ, 10);
}

// half_to_float is exact for every finite half (against the library conversion).
TEST(ExactDot, HalfConversionMatches) {
    for (uint32_t h = 0; h < 65536; ++h) {
        if (((h >> 10) & 0x1F) == 0x1F) continue;  // inf / NaN
        ASSERT_EQ(bits(canon_dot::half_to_float(static_cast<uint16_t>(h))),
                  bits(fp16_to_fp32(static_cast<uint16_t>(h))))
            << h;
    }
}

// The activation quantizers: SIMD bytes == scalar bytes on extreme and tie-heavy rows.
TEST(ExactDot, QuantizersSimdEqualsScalar) {
#if !defined(ZINC_QUANT_HAVE_AVX2)
    GTEST_SKIP() << "portable build";
#else
    if (!cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
    std::mt19937 rng(9);
    const int64_t n = 256 * 6;
    for (int mode = 0; mode < 5; ++mode) {
        std::vector<float> x(n);
        for (int64_t i = 0; i < n; ++i) {
            switch (mode) {
                case 0: x[i] = rand_float(rng, -30, 30); break;            // wide magnitudes
                case 1: x[i] = static_cast<float>(rand_code(rng)) * 0.5f; break;  // ties
                case 2: x[i] = rand_float(rng, -118, -100); break;  // scales that underflow f16
                case 3: x[i] = (i % 7 == 0) ? 0.0f : -0.0f; break;         // zero blocks
                default: x[i] = rand_float(rng, 100, 120); break;          // huge
            }
        }
        struct Q {
            GgmlType t;
            QuantizeFn scalar, simd;
        };
        for (const Q& q : {Q{GgmlType::Q8_0, quantize_row_q8_0, quantize_row_q8_0_avx2},
                           Q{GgmlType::Q8_1, quantize_row_q8_1, quantize_row_q8_1_avx2},
                           Q{GgmlType::Q8_K, quantize_row_q8_k, quantize_row_q8_k_avx2}}) {
            std::vector<uint8_t> a(row_size(q.t, n), 0xAB), b(row_size(q.t, n), 0xCD);
            q.scalar(x.data(), a.data(), n);
            q.simd(x.data(), b.data(), n);
            ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0)
                << type_name(q.t) << " mode " << mode;
        }
    }
#endif
}

}  // namespace
}  // namespace zinc::quant
