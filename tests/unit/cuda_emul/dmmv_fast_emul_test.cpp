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
    zinc::dmmv_emul::check(t, repack, k, n_act, seed, n_out, "lanes/row " + std::to_string(lpr),
                           [&](int dt, const cu::MatJob* jobs, int kk, const int8_t* aq,
                               const float4* ad, int na, bool acc) {
                               return cu::dmmv_fast(dt, jobs, 3, kk, aq, ad, na, acc, nullptr, lpr);
                           });
}

struct Layout {
    GgmlType t;
    bool repack;
    int k;
};
const Layout kLayouts[] = {
    {GgmlType::Q4_K, false, 512}, {GgmlType::Q5_K, false, 512}, {GgmlType::Q6_K, true, 2048},
    {GgmlType::Q4_0, true, 512},  {GgmlType::Q8_0, true, 512},  {GgmlType::Q6_K, false, 512},
    {GgmlType::Q4_0, false, 256}, {GgmlType::Q8_0, false, 256}, {GgmlType::Q4_1, false, 256},
    {GgmlType::Q5_0, false, 256}, {GgmlType::Q5_1, false, 256}, {GgmlType::Q2_K, false, 512},
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
