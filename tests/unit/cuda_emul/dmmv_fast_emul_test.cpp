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
#include "../../cuda/dmmv_check.h"
#include "backend/cuda/repack.h"  // repack.cpp: compiled by repack_unit.cpp

namespace {

using zinc::quant::GgmlType;
namespace q = zinc::quant;
namespace cu = zinc::cuda;
namespace dc = zinc::dmmv_check;

// Three fused jobs of 13, 7 and 5 rows (the first with a bias) over n_act activation rows:
// plain, then accumulate (y = 2 (W x + b)).
void check(GgmlType t, bool repack, int k, int n_act, int lpr, uint64_t seed) {
    SCOPED_TRACE(std::string(q::type_name(t)) + (repack ? "R" : "") + " k " + std::to_string(k) +
                 " n_act " + std::to_string(n_act) + " lanes/row " + std::to_string(lpr));
    const int n_out[3] = {13, 7, 5}, total = 25;
    const size_t rb = q::row_size(t, k);
    std::vector<uint8_t> w(rb * total);
    dc::fill_weights(t, w.data(), rb, 0, total, k, seed);
    int dt = static_cast<int>(t);
    std::vector<uint8_t> wd(w);
    if (repack) {
        dt = cu::repacked_type(dt, k);
        ASSERT_NE(dt, static_cast<int>(t));
        cu::repack_rows(static_cast<int>(t), w.data(), wd.data(), total, k);
    }
    const auto x = dc::make_acts(n_act, k, seed + 1);
    const dc::Acts a = dc::pack_acts(t, x, n_act, k);
    std::vector<double> ref(static_cast<size_t>(n_act) * total);
    dc::reference(t, k, w.data(), rb, 0, total, a, n_act, total, ref.data());
    dc::Rng brng(seed + 2);
    std::vector<float> bias(n_out[0]);
    for (auto& b : bias) b = brng.normal();
    // outputs: (n_act, total) with the jobs' columns back to back, ldy = total
    std::vector<float> y(ref.size());
    std::memset(y.data(), 0xff, y.size() * 4);
    cu::MatJob jobs[3];
    for (int j = 0, col = 0; j < 3; col += n_out[j], ++j) {
        jobs[j].w = wd.data() + rb * col;
        jobs[j].row_bytes = rb;
        jobs[j].n_out = n_out[j];
        jobs[j].y = y.data() + col;
        jobs[j].ldy = total;
        jobs[j].bias = j == 0 ? bias.data() : nullptr;
    }
    std::vector<double> add(ref.size(), 0.0);
    for (int b = 0; b < n_act; ++b)
        for (int r = 0; r < n_out[0]; ++r) add[static_cast<size_t>(b) * total + r] = bias[r];
    for (int pass = 0; pass < 2; ++pass) {
        ASSERT_TRUE(
            cu::dmmv_fast(dt, jobs, 3, k, a.q(), a.d.data(), n_act, pass == 1, nullptr, lpr));
        std::vector<double> add2(add);
        for (auto& v : add2) v *= pass + 1.0;
        const dc::Err e = dc::compare(y.data(), ref.data(), y.size(), pass + 1.0, add2.data());
        EXPECT_TRUE(e.ok(1e-5, 1e-4))
            << (pass ? "accumulate" : "plain") << ": rel L2 " << e.rel_l2 << ", max/rms "
            << e.max_rel_rms << (e.finite ? "" : ", non-finite");
    }
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
