// zinc/tests/unit/cuda_emul/dmmv_stream_emul_test.cpp — the bulk-copy matrix-vector kernels'
// CUDA source (src/backend/cuda/dmmv_stream.cu), compiled for the host over the SIMT shim in
// shim/ (bulk copies as memcpy + barrier phases, bulk_copy.cuh) and run through dmmv_stream() on
// host memory, against quant::vec_dot on the same packed activations. Covers every layout's
// decoding from shared memory, every tile shape (8 rows with two rows per warp, 4, 2 and 1 rows
// with 2 and 4 warps per row), tiles cut at job ends and block ends, grids of 1 block to one row
// per block, 1-4 activation rows, bias and accumulate; tests/cuda/bench_dmmv.cpp checks the same
// on the device at the 8B shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/dmmv_stream.cu"
#pragma GCC diagnostic pop
#include "dmmv_emul_check.h"

namespace {

using zinc::quant::GgmlType;
namespace cu = zinc::cuda;

// Both walks (interleaved tiles, contiguous row ranges), and the tile shapes of min_stages 4
// and 2.
void check(GgmlType t, bool repack, int k, int n_act, int blocks, uint64_t seed,
           const int (&n_out)[3] = {13, 7, 5}) {
    for (int il : {1, 0})
        for (int ms : {4, 2}) {
            cu::DmmvStreamOpts o;
            o.blocks = blocks;
            o.interleave = il;
            o.min_stages = ms;
            zinc::dmmv_emul::check(
                t, repack, k, n_act, seed, n_out,
                "blocks " + std::to_string(blocks) + " interleave " + std::to_string(il) +
                    " min stages " + std::to_string(ms),
                [&](int dt, const cu::MatJob* jobs, int kk, const int8_t* aq, const float4* ad,
                    int na, bool acc) {
                    return cu::dmmv_stream(dt, jobs, 3, kk, aq, ad, na, acc, nullptr, o);
                });
        }
}

struct Layout {
    GgmlType t;
    bool repack;
    int k;
};
// Row sizes 144 B to 8.7 KB: 8-row tiles (small rows), 4 (Q4_K k 4096), 2 (Q4_K k 8192) and 1
// (Q8_0 k 8192).
const Layout kLayouts[] = {
    {GgmlType::Q4_K, false, 512},  {GgmlType::Q5_K, false, 512},  {GgmlType::Q6_K, false, 2048},
    {GgmlType::Q6_K, true, 2048},  {GgmlType::Q4_0, false, 256},  {GgmlType::Q4_0, true, 512},
    {GgmlType::Q8_0, false, 256},  {GgmlType::Q8_0, true, 512},   {GgmlType::Q4_K, false, 4096},
    {GgmlType::Q4_K, false, 8192}, {GgmlType::Q8_0, false, 8192},
};

TEST(DmmvStreamEmul, EveryLayoutOneRow) {
    uint64_t seed = 1;
    for (const Layout& l : kLayouts)
        for (int blocks : {1, 3, 0}) check(l.t, l.repack, l.k, 1, blocks, seed += 3);
}

TEST(DmmvStreamEmul, Batches) {
    uint64_t seed = 1000;
    for (const Layout& l : kLayouts)
        for (int n_act : {2, 3, 4}) check(l.t, l.repack, l.k, n_act, 0, seed += 3);
}

// One row per block, and jobs of one row: every tile is cut by a block's or a job's end.
TEST(DmmvStreamEmul, TilesCutAtEnds) {
    uint64_t seed = 2000;
    check(GgmlType::Q4_K, false, 512, 1, 25, seed += 3);
    check(GgmlType::Q4_K, false, 512, 2, 2, seed += 3, {1, 1, 17});
    check(GgmlType::Q8_0, false, 8192, 1, 2, seed += 3, {3, 1, 2});
    check(GgmlType::Q4_K, false, 8192, 4, 4, seed += 3, {9, 2, 1});
}

// Not covered: other types, misaligned weights or activations, rows that are not a multiple of
// 16 bytes, more than kDmmvStreamMaxRows activation rows, jobs of different row sizes, expert
// gathering, rows too long for two stages.
TEST(DmmvStreamEmul, Coverage) {
    alignas(16) static uint8_t buf[4096];
    alignas(16) static int8_t act[4096];
    cu::MatJob j;
    j.w = buf;
    j.row_bytes = 144 * 2;
    j.n_out = 1;
    EXPECT_TRUE(cu::dmmv_stream_covers(12, &j, 1, 512, act, 1));
    EXPECT_TRUE(cu::dmmv_stream_covers(12, &j, 1, 512, act, cu::kDmmvStreamMaxRows));
    EXPECT_FALSE(cu::dmmv_stream_covers(12, &j, 1, 512, act, cu::kDmmvStreamMaxRows + 1));
    EXPECT_FALSE(cu::dmmv_stream_covers(12, &j, 1, 512, act, 0));
    EXPECT_FALSE(cu::dmmv_stream_covers(12, &j, 1, 512, act + 4, 1));
    EXPECT_FALSE(cu::dmmv_stream_covers(12, &j, 1, 480, act, 1));
    EXPECT_FALSE(cu::dmmv_stream_covers(12, &j, 4, 512, act, 1));
    for (int ft : {0, 1, 3, 11, 30, 39}) EXPECT_FALSE(cu::dmmv_stream_covers(ft, &j, 1, 512, act, 1));
    j.w = buf + 2;
    EXPECT_FALSE(cu::dmmv_stream_covers(12, &j, 1, 512, act, 1));
    j.w = buf;
    j.row_bytes = 210 * 2 + 2;
    EXPECT_FALSE(cu::dmmv_stream_covers(14, &j, 1, 512, act, 1));
    cu::MatJob two[2] = {j, j};
    two[0].row_bytes = two[1].row_bytes = 288;
    EXPECT_TRUE(cu::dmmv_stream_covers(12, two, 2, 512, act, 1));
    two[1].row_bytes = 576;
    EXPECT_FALSE(cu::dmmv_stream_covers(12, two, 2, 512, act, 1));
    int32_t ex[1] = {0};
    j.row_bytes = 288;
    j.expert = ex;
    EXPECT_FALSE(cu::dmmv_stream_covers(12, &j, 1, 512, act, 1));
    j.expert = nullptr;
    j.row_bytes = 34 * 1024;  // Q8_0 k 32768: one row is 34 KB, two stages do not fit
    EXPECT_FALSE(cu::dmmv_stream_covers(8, &j, 1, 32768, act, 1));
    EXPECT_FALSE(cu::dmmv_stream(12, &j, 1, 32768, act, nullptr, 1, false, nullptr));
}

}  // namespace
