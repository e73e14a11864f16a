// zinc/tests/unit/cuda_emul/dmmv_fast_emul_test.cpp — the fast matrix-vector kernels' CUDA
// source (src/backend/cuda/dmmv_fast.cu), compiled for the host over the SIMT shim in shim/ and
// run through their entry point dmmv_fast() on host memory, against quant::vec_dot on the same
// packed activations (tests/cuda/dmmv_check.h). This checks every layout's unit decoding, the
// lane mapping, the partial last warp, fused jobs, bias and accumulate in CI without a GPU;
// tests/cuda/bench_dmmv.cpp checks the same on the device at the 8B shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/dmmv_fast.cu"
#pragma GCC diagnostic pop
#include "dmmv_emul_check.h"

namespace {

using zinc::quant::GgmlType;
namespace q = zinc::quant;
namespace cu = zinc::cuda;

// Three fused jobs of 13, 7 and 5 rows (the first with a bias) over n_act activation rows.
void check(GgmlType t, bool repack, int k, int n_act, int lpr, uint64_t seed) {
    const int n_out[3] = {13, 7, 5};
    zinc::dmmv_emul::check(
        t, repack, k, n_act, seed, n_out, "lanes/row " + std::to_string(lpr),
        [&](int dt, const cu::MatJob* jobs, int kk, const int8_t* aq, const float4* ad, int na,
            bool acc) { return cu::dmmv_fast(dt, jobs, 3, kk, aq, ad, na, acc, nullptr, lpr); });
}

struct Layout {
    GgmlType t;
    bool repack;
    int k;
};
const Layout kLayouts[] = {
    {GgmlType::Q4_K, false, 512}, {GgmlType::Q5_K, false, 512},  {GgmlType::Q6_K, true, 2048},
    {GgmlType::Q4_0, true, 512},  {GgmlType::Q8_0, true, 512},   {GgmlType::Q6_K, false, 512},
    {GgmlType::Q4_0, false, 256}, {GgmlType::Q8_0, false, 256},  {GgmlType::Q4_1, false, 256},
    {GgmlType::Q5_0, false, 256}, {GgmlType::Q5_1, false, 256},  {GgmlType::Q2_K, false, 512},
    {GgmlType::Q3_K, false, 512}, {GgmlType::MXFP4, false, 256},
};

TEST(DmmvFastEmul, EveryLayoutOneRow) {
    uint64_t seed = 1;
    for (const Layout& l : kLayouts)
        for (int lpr : {8, 32}) check(l.t, l.repack, l.k, 1, lpr, seed += 3);
}

TEST(DmmvFastEmul, Batches) {
    uint64_t seed = 1000;
    for (const Layout& l : kLayouts)
        for (int n_act : {3, 16}) check(l.t, l.repack, l.k, n_act, n_act == 3 ? 32 : 8, seed += 3);
}

// Expert gathering (MoE decode): activation row b is multiplied by expert ids[b]'s matrices of
// two fused jobs (gate + up); every output row is bitwise the ungathered one-row call on that
// expert's matrices (the same kernel instance), for more rows than kDmmvFastMaxRows too.
TEST(DmmvFastEmul, ExpertGathered) {
    namespace dc = zinc::dmmv_check;
    const int k = 512, n_exp = 3, n_act = 19, n_out[2] = {13, 7};
    const std::vector<int32_t> ids = {2, 0, 2, 1, 0, 0, 1, 2, 2, 1, 0, 1, 2, 0, 0, 2, 1, 1, 2};
    ASSERT_EQ(static_cast<int>(ids.size()), n_act);
    for (const Layout& l : {kLayouts[0], kLayouts[3], kLayouts[6], kLayouts[8]}) {
        SCOPED_TRACE(std::string(q::type_name(l.t)) + (l.repack ? "R" : ""));
        const size_t rb = q::row_size(l.t, k);
        int dt = static_cast<int>(l.t);
        std::vector<std::vector<uint8_t>> w(2);
        std::vector<uint8_t*> wp(2);
        for (int j = 0; j < 2; ++j) {
            const int rows = n_exp * n_out[j];
            std::vector<uint8_t> raw(rb * rows);
            dc::fill_weights(l.t, raw.data(), rb, 0, rows, k, 40 + j);
            w[j].resize(raw.size() + 16);
            wp[j] = w[j].data() + ((16 - (reinterpret_cast<uintptr_t>(w[j].data()) & 15u)) & 15u);
            if (l.repack) {
                dt = cu::repacked_type(static_cast<int>(l.t), k);
                cu::repack_rows(static_cast<int>(l.t), raw.data(), wp[j], rows, k);
            } else {
                std::memcpy(wp[j], raw.data(), raw.size());
            }
        }
        const dc::Acts a = dc::pack_acts(l.t, dc::make_acts(n_act, k, 7), n_act, k);
        for (int lpr : {8, 32}) {
            SCOPED_TRACE("lanes/row " + std::to_string(lpr));
            std::vector<float> y[2], ref[2];
            cu::MatJob jobs[2];
            for (int j = 0; j < 2; ++j) {
                y[j].assign(static_cast<size_t>(n_act) * n_out[j], -1.f);
                ref[j].assign(y[j].size(), -2.f);
                jobs[j].w = wp[j];
                jobs[j].row_bytes = rb;
                jobs[j].n_out = n_out[j];
                jobs[j].y = y[j].data();
                jobs[j].ldy = n_out[j];
                jobs[j].expert = ids.data();
                jobs[j].expert_stride = rb * n_out[j];
            }
            ASSERT_TRUE(cu::dmmv_fast_covers(dt, jobs, 2, k, a.q(), n_act));
            ASSERT_TRUE(
                cu::dmmv_fast(dt, jobs, 2, k, a.q(), a.d.data(), n_act, false, nullptr, lpr));
            for (int b = 0; b < n_act; ++b) {
                cu::MatJob one[2];
                for (int j = 0; j < 2; ++j) {
                    one[j].w = wp[j] + static_cast<size_t>(ids[b]) * rb * n_out[j];
                    one[j].row_bytes = rb;
                    one[j].n_out = n_out[j];
                    one[j].y = ref[j].data() + static_cast<size_t>(b) * n_out[j];
                    one[j].ldy = n_out[j];
                }
                ASSERT_TRUE(cu::dmmv_fast(dt, one, 2, k, a.q() + static_cast<size_t>(b) * k,
                                          a.d.data() + static_cast<size_t>(b) * (k / 32), 1, false,
                                          nullptr, lpr));
            }
            for (int j = 0; j < 2; ++j)
                EXPECT_EQ(0, std::memcmp(y[j].data(), ref[j].data(), y[j].size() * 4))
                    << "job " << j;
        }
    }
    // mixing gathered and plain jobs in one call is refused
    alignas(16) static uint8_t buf[4096];
    alignas(16) static int8_t act[4096];
    cu::MatJob mix[2];
    for (auto& m : mix) {
        m.w = buf;
        m.row_bytes = 144 * 2;
        m.n_out = 1;
    }
    mix[0].expert = ids.data();
    mix[0].expert_stride = 288;
    EXPECT_FALSE(cu::dmmv_fast_covers(12, mix, 2, 512, act, 1));
    mix[1].expert = ids.data();
    mix[1].expert_stride = 8;  // not a multiple of 16: the 16-byte loads would be misaligned
    EXPECT_FALSE(cu::dmmv_fast_covers(12, mix, 2, 512, act, 1));
    mix[1].expert_stride = 288;
    EXPECT_TRUE(cu::dmmv_fast_covers(12, mix, 2, 512, act, cu::kDmmvFastMaxRows + 1));
}

// The 16-byte-load kernels refuse misaligned weights and odd row sizes (dmmv() then takes v2);
// more rows than kDmmvFastMaxRows, zero rows and the float types are not covered either.
TEST(DmmvFastEmul, Coverage) {
    alignas(16) static uint8_t buf[4096];
    alignas(16) static int8_t act[4096];
    cu::MatJob j;
    j.w = buf;
    j.row_bytes = 144 * 2;
    j.n_out = 1;
    EXPECT_TRUE(cu::dmmv_fast_covers(12, &j, 1, 512, act, 1));
    j.w = buf + 2;
    EXPECT_FALSE(cu::dmmv_fast_covers(12, &j, 1, 512, act, 1));
    j.w = buf;
    EXPECT_FALSE(cu::dmmv_fast_covers(12, &j, 1, 512, act + 4, 1));
    EXPECT_FALSE(cu::dmmv_fast_covers(12, &j, 1, 512, act, cu::kDmmvFastMaxRows + 1));
    EXPECT_FALSE(cu::dmmv_fast_covers(12, &j, 1, 512, act, 0));
    EXPECT_FALSE(cu::dmmv_fast_covers(12, &j, 1, 480, act, 1));  // not a multiple of 256
    EXPECT_FALSE(cu::dmmv_fast_covers(12, &j, 4, 512, act, 1));
    for (int ft : {0, 1, 30}) EXPECT_FALSE(cu::dmmv_fast_covers(ft, &j, 1, 512, act, 1));
    j.row_bytes = 210 * 2 + 2;
    EXPECT_FALSE(cu::dmmv_fast_covers(114, &j, 1, 512, act, 1));
    EXPECT_TRUE(cu::dmmv_fast_covers(14, &j, 1, 512, act, 1));  // GGUF Q6_K: narrow loads
    EXPECT_FALSE(cu::dmmv_fast(12, &j, 1, 512, act, nullptr, 1, false, nullptr, 16));
}

}  // namespace
