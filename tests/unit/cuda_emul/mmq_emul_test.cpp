// zinc/tests/unit/cuda_emul/mmq_emul_test.cpp — the int8 tensor-core GEMM's CUDA source
// (src/backend/cuda/mmq.cu), compiled for the host over the SIMT shim in shim/ (whose ldmatrix
// and mma.sync models follow the PTX fragment layouts), run through its real entry points on host
// memory, against a float64 reference: dequantized weights times the dequantized packed
// activations (+ bias; + the initial y with accumulate). This checks the kernel's tiling, staging,
// fragment addressing, scale application and stores in CI without a GPU;
// tests/cuda/test_mmq.cpp checks the same on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/mmq.cu"
#include "backend/cuda/moe.cu"  // moe_group / moe_combine for the expert-grouped launches
#pragma GCC diagnostic pop

#include "backend/cuda/repack.h"  // compiled into test_cuda_emul by repack_unit.cpp
#include "quant/quant.h"
#include "quant/types.h"

namespace {

using zinc::quant::GgmlType;
namespace q = zinc::quant;
namespace cu = zinc::cuda;

// Quantized Gaussians (per-row scale and offset) and, every third row, random payload bytes
// with a quantized row's scale fields kept (every code pattern, sane scales).
std::vector<uint8_t> make_weights(GgmlType t, int n_out, int k, std::mt19937& rng) {
    const size_t rb = q::row_size(t, k);
    std::vector<uint8_t> w(rb * n_out);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> row(k);
    const int64_t bs = q::type_traits(t).block_size;
    const size_t blk = q::row_size(t, bs);
    for (int r = 0; r < n_out; ++r) {
        uint8_t* p = w.data() + rb * r;
        const float sc = std::ldexp(1.0f, static_cast<int>(rng() % 12) - 8);
        const float off = (r % 2 == 0) ? 0.3f * sc : 0.f;
        for (auto& v : row) v = nd(rng) * sc + off;
        q::quantize_row(t, row.data(), p, k);
        if (r % 3 != 2) continue;
        for (int64_t b = 0; b < k / bs; ++b) {  // random codes, scale fields kept
            uint8_t* d = p + b * blk;
            std::vector<uint8_t> keep(d, d + blk);
            for (size_t i = 0; i < blk; ++i) d[i] = static_cast<uint8_t>(rng());
            auto restore = [&](size_t o, size_t n) { std::memcpy(d + o, keep.data() + o, n); };
            switch (t) {
                case GgmlType::Q4_0:
                case GgmlType::Q5_0:
                case GgmlType::Q8_0:
                    restore(0, 2);
                    break;
                case GgmlType::Q4_1:
                case GgmlType::Q5_1:
                    restore(0, 4);
                    break;
                case GgmlType::Q4_K:
                case GgmlType::Q5_K:
                    restore(0, 4);
                    break;
                case GgmlType::Q6_K:
                    restore(208, 2);
                    break;
                case GgmlType::Q2_K:
                    restore(80, 4);
                    break;
                case GgmlType::Q3_K:
                    restore(108, 2);
                    break;
                case GgmlType::MXFP4:
                    restore(0, 1);
                    break;
                default:
                    break;
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
    }
    return x;
}

// The CPU packing (quantize_row to the weight's vec_dot type) in pack.cu's device layout: int8
// codes and per 32 elements (d, s_lo, s_hi, code sums) as pack.cu writes them.
struct Acts {
    std::vector<uint4> q_store;  // 16-byte aligned codes
    std::vector<float4> d;
    const int8_t* q() const { return reinterpret_cast<const int8_t*>(q_store.data()); }
};
Acts pack(GgmlType t, const std::vector<float>& x, int n_act, int k) {
    const GgmlType vt = q::type_traits(t).vec_dot_type;
    const size_t prb = q::row_size(vt, k);
    std::vector<uint8_t> packed(prb * n_act);
    for (int j = 0; j < n_act; ++j)
        q::quantize_row(vt, x.data() + static_cast<size_t>(j) * k, packed.data() + prb * j, k);
    Acts a;
    a.q_store.resize(static_cast<size_t>(n_act) * k / 16);
    a.d.resize(static_cast<size_t>(n_act) * k / 32);
    int8_t* codes = reinterpret_cast<int8_t*>(a.q_store.data());
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
            }
            for (int i = 0; i < 16; ++i) lo += cq[i], hi += cq[16 + i];
            if (vt != GgmlType::Q8_1) {
                f.y = f.x * static_cast<float>(lo);
                f.z = f.x * static_cast<float>(hi);
            }
            const uint32_t bits =
                (static_cast<uint32_t>(lo) & 0xffffu) | (static_cast<uint32_t>(hi) << 16);
            std::memcpy(&f.w, &bits, 4);
            a.d[static_cast<size_t>(j) * (k / 32) + c] = f;
            std::memcpy(codes + static_cast<size_t>(j) * k + 32 * c, cq, 32);
        }
    }
    return a;
}

// A split-K scratch on the host, large enough for the tests' shapes.
struct Scratch {
    std::vector<float> partial = std::vector<float>(1 << 20, NAN);
    std::vector<unsigned> counters = std::vector<unsigned>(4096, 0u);
    cu::MmqScratch s{partial.data(), partial.size(), counters.data(),
                     static_cast<int>(counters.size())};
    bool counters_zero() const {
        for (unsigned c : counters)
            if (c != 0) return false;
        return true;
    }
};

// f32 accumulation of per-chunk products; Q4_1 / Q5_1's offsets multiply Q8_1's stored sum s
// (the f16 of d * the codes' sum), so their reference is sum (w - m) a + sum_blocks m s.
constexpr double kTolerance = 2e-5;

// n_out rows in two jobs (rows [0, n0), then the rest with a bias and row stride n1 + 3),
// n_act activation rows, tile variant `variant`; plain, then accumulate over random y.
// ksplit > 1: split-K into that many k slices through a scratch of the right size (whose counters
// must be back at zero after every launch).
void check(GgmlType t, int k, int n_out, int n0, int n_act, uint32_t seed, int variant,
           bool repack = false, int ksplit = 1) {
    SCOPED_TRACE("variant " + std::to_string(variant) + " split " + std::to_string(ksplit) + " " +
                 std::string(q::type_name(t)) + " k " + std::to_string(k) + " rows " +
                 std::to_string(n_out) + " act " + std::to_string(n_act));
    std::mt19937 rng(seed);
    const size_t rb = q::row_size(t, k);
    const auto w = make_weights(t, n_out, k, rng);
    const auto x = make_acts(n_act, k, rng);
    const Acts a = pack(t, x, n_act, k);
    std::vector<uint8_t> wk = w;  // what the kernel reads: repack.h's layout when asked
    int tk = static_cast<int>(t);
    if (repack) {
        tk = cu::repacked_type(tk, k);
        ASSERT_NE(tk, static_cast<int>(t));
        cu::repack_rows(static_cast<int>(t), w.data(), wk.data(), n_out, k);
    }
    const int n1 = n_out - n0, ld1 = n1 + 3;
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> bias(n1);
    for (auto& b : bias) b = nd(rng);
    // reference (n_act, n_out)
    std::vector<double> wd(static_cast<size_t>(n_out) * k);
    std::vector<float> row(k);
    for (int r = 0; r < n_out; ++r) {
        q::dequantize_row(t, w.data() + rb * r, row.data(), k);
        for (int i = 0; i < k; ++i) wd[static_cast<size_t>(r) * k + i] = row[i];
    }
    std::vector<double> ref(static_cast<size_t>(n_act) * n_out);
    const int8_t* codes = a.q();
    for (int j = 0; j < n_act; ++j)
        for (int r = 0; r < n_out; ++r) {
            double s = 0;
            const bool q81 = t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
            for (int i = 0; i < k; ++i) {
                const size_t e = static_cast<size_t>(j) * k + i;
                double m = 0;  // the block's offset (f16 at bytes 2..3)
                if (q81) {
                    uint16_t h;
                    std::memcpy(
                        &h, w.data() + rb * r + (t == GgmlType::Q4_1 ? 20 : 24) * (i / 32) + 2, 2);
                    m = q::fp16_to_fp32(h);
                    if (i % 32 == 0) s += m * a.d[e / 32].y;
                }
                s += (wd[static_cast<size_t>(r) * k + i] - m) *
                     (static_cast<double>(a.d[e / 32].x) * codes[e]);
            }
            ref[static_cast<size_t>(j) * n_out + r] = s + (r >= n0 ? bias[r - n0] : 0.0);
        }
    std::vector<float> y0(static_cast<size_t>(n_act) * std::max(n0, 1)),
        y1(static_cast<size_t>(n_act) * ld1);
    cu::MatJob jobs[2];
    jobs[0].w = wk.data();
    jobs[0].row_bytes = rb;
    jobs[0].n_out = n0;
    jobs[0].y = y0.data();
    jobs[0].ldy = n0;
    jobs[1].w = wk.data() + rb * n0;
    jobs[1].row_bytes = rb;
    jobs[1].n_out = n1;
    jobs[1].y = y1.data();
    jobs[1].ldy = ld1;
    jobs[1].bias = bias.data();
    for (int pass = 0; pass < 2; ++pass) {
        const bool acc = pass == 1;
        std::vector<float> i0(y0.size()), i1(y1.size());
        for (auto& v : i0) v = acc ? nd(rng) : NAN;
        for (auto& v : i1) v = acc ? nd(rng) : NAN;
        y0 = i0;
        y1 = i1;
        Scratch sc;
        ASSERT_TRUE(cu::mmq_variant(variant, tk, jobs, 2, k, a.q(), a.d.data(), n_act, acc, nullptr,
                                    ksplit > 1 ? &sc.s : nullptr, ksplit));
        EXPECT_TRUE(sc.counters_zero());
        double num = 0, den = 0;
        size_t bad = 0;
        for (int j = 0; j < n_act; ++j)
            for (int r = 0; r < n_out; ++r) {
                const size_t o = r < n0 ? static_cast<size_t>(j) * n0 + r
                                        : static_cast<size_t>(j) * ld1 + r - n0;
                const float got = r < n0 ? y0[o] : y1[o];
                const double want = ref[static_cast<size_t>(j) * n_out + r] +
                                    (acc ? (r < n0 ? i0[o] : i1[o]) : 0.f);
                bad += !std::isfinite(got);
                num += (got - want) * (got - want);
                den += want * want;
            }
        EXPECT_EQ(bad, 0u) << "non-finite outputs" << (acc ? " (accumulate)" : "");
        EXPECT_LE(std::sqrt(num / den), kTolerance) << (acc ? "accumulate" : "plain");
    }
}

// Variant 0 picks the decode tile (32 x 64) for these small shapes; 45 rows and 17 activation
// rows leave partial tiles in both directions, k = 2080 (65 blocks) a partial stage.
TEST(MmqEmul, LegacyFormats) {
    uint32_t seed = 1;
    for (GgmlType t :
         {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0})
        check(t, 2080, 45, 13, 17, seed++, 0);
}

// MXFP4 (17-byte blocks: odd row sizes, byte-aligned windows in the pipelined kernel): the
// automatic tile, a plain tile and two pipelined ones.
TEST(MmqEmul, Mxfp4) {
    uint32_t seed = 50;
    for (int v : {0, 1, 5, 7}) check(GgmlType::MXFP4, 2080, 45, 13, 17, seed++, v);
}

TEST(MmqEmul, KQuants) {
    uint32_t seed = 100;
    for (GgmlType t :
         {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::Q3_K})
        check(t, 512, 45, 13, 17, seed++, 0);
}

// The other tiles: 128 x 64 and 64 x 64 (stages of 4 chunks), 128 x 128, and the pipelined
// kernel (5-7: raw weight windows staged in shared memory; Q6_K's 210-byte stages and Q4_1's
// 5-block partial stage are misaligned windows); one output row, one activation row; an empty
// first job.
TEST(MmqEmul, TileVariants) {
    ASSERT_EQ(cu::mmq_variants(), 11);
    uint32_t seed = 200;
    for (int v = 1; v < cu::mmq_variants(); ++v) {
        check(GgmlType::Q4_K, 256, 150, 37, 70, seed++, v);
        check(GgmlType::Q6_K, 256, 40, 20, 9, seed++, v);
        check(GgmlType::Q4_1, 160, 40, 20, 9, seed++, v);
    }
    check(GgmlType::Q8_0, 96, 1, 0, 1, seed++, 0);
    check(GgmlType::Q4_1, 256, 1, 0, 1, seed++, 0);  // 3e-3 off an exact-sum reference (H200 run 1)
    check(GgmlType::Q4_K, 256, 33, 0, 65, seed++, 1);
    check(GgmlType::Q2_K, 512, 40, 7, 9, seed++, 7);
    check(GgmlType::Q5_0, 2080, 40, 7, 9, seed++, 7);
}

// Split-K: k cut into 2-5 slices (whole super-blocks; Q4_0's 65 chunks asked for 5 slices get 3
// of 24, 24 and 17), every tile kind, both kernels, accumulate and bias (check runs plain then
// accumulate), partial tiles in both directions.
TEST(MmqEmul, SplitK) {
    uint32_t seed = 700;
    for (int v : {8, 9, 10, 2, 5}) {
        check(GgmlType::Q4_K, 1024, 70, 37, 30, seed++, v, false, 2);
        check(GgmlType::Q6_K, 1536, 40, 20, 9, seed++, v, false, 3);
    }
    for (int v : {8, 10}) check(GgmlType::Q4_0, 2080, 45, 13, 17, seed++, v, false, 5);
    check(GgmlType::Q8_0, 4096, 64, 0, 32, seed++, 8, true, 4);  // repacked
    check(GgmlType::MXFP4, 2048, 64, 16, 32, seed++, 10, false, 4);
}

// A split's sum is fixed by the shape whichever block finishes last (the shim runs the slices
// last to first): two runs agree bitwise; variant 0 with a scratch splits a 32-row decode batch
// (within the tolerance of the unsplit result); a k too short for two slices of 16 chunks, or a
// scratch too small for the partials, runs unsplit (bitwise equal to no scratch).
TEST(MmqEmul, SplitKDeterministicAndBounded) {
    std::mt19937 rng(800);
    const GgmlType t = GgmlType::Q4_K;
    const int k = 4096, rows = 256, n_act = 32;
    const auto w = make_weights(t, rows, k, rng);
    const Acts a = pack(t, make_acts(n_act, k, rng), n_act, k);
    cu::MatJob j;
    j.w = w.data();
    j.row_bytes = q::row_size(t, k);
    j.n_out = rows;
    j.ldy = rows;
    auto run = [&](int v, const cu::MmqScratch* sc, int ks, int kk = 4096) {
        std::vector<float> y(static_cast<size_t>(rows) * n_act, NAN);
        j.y = y.data();
        EXPECT_TRUE(cu::mmq_variant(v, static_cast<int>(t), &j, 1, kk, a.q(), a.d.data(), n_act,
                                    false, nullptr, sc, ks));
        return y;
    };
    Scratch sc;
    const auto s1 = run(8, &sc.s, 4), s2 = run(8, &sc.s, 4), plain = run(8, nullptr, 1);
    EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0);
    EXPECT_NE(std::memcmp(s1.data(), plain.data(), s1.size() * 4), 0) << "no split happened";
    EXPECT_TRUE(sc.counters_zero());
    const auto a0 = run(0, &sc.s, 0);  // 4 tiles of 64 x 32 on 264 slots: mmq's choice splits
    EXPECT_NE(std::memcmp(a0.data(), plain.data(), a0.size() * 4), 0) << "variant 0 did not split";
    double num = 0, den = 0;
    for (size_t i = 0; i < a0.size(); ++i) {
        num += (a0[i] - plain[i]) * (a0[i] - static_cast<double>(plain[i]));
        den += static_cast<double>(plain[i]) * plain[i];
    }
    EXPECT_LE(std::sqrt(num / den), 1e-5);
    // k = 256: 8 chunks, below two slices of 16: unsplit
    const auto short_k = run(8, &sc.s, 4, 256), short_plain = run(8, nullptr, 1, 256);
    EXPECT_EQ(std::memcmp(short_k.data(), short_plain.data(), short_k.size() * 4), 0);
    // partials for 2 tiles x 2 slices of 128 x 32 do not fit 8192 floats: unsplit
    std::vector<float> tiny(8192);
    std::vector<unsigned> cnt(16, 0u);
    const cu::MmqScratch small{tiny.data(), tiny.size(), cnt.data(), 16};
    const auto no_room = run(8, &small, 2);
    EXPECT_EQ(std::memcmp(no_room.data(), plain.data(), no_room.size() * 4), 0);
}

// Batch invariance: every variant runs each output's chunks in the same order with the same
// operations, so all give the same bits, and a batch's first rows equal those rows run alone.
TEST(MmqEmul, VariantsAgreeBitwise) {
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q4_0}) {
        SCOPED_TRACE(q::type_name(t));
        std::mt19937 rng(400 + static_cast<int>(t));
        const int k = 256, rows = 40, n_act = 12;
        const auto w = make_weights(t, rows, k, rng);
        const Acts a = pack(t, make_acts(n_act, k, rng), n_act, k);
        std::vector<float> first, y(static_cast<size_t>(rows) * n_act);
        cu::MatJob j;
        j.w = w.data();
        j.row_bytes = q::row_size(t, k);
        j.n_out = rows;
        j.y = y.data();
        j.ldy = rows;
        for (int v = 1; v < cu::mmq_variants(); ++v)
            for (int na : {n_act, 5}) {
                std::fill(y.begin(), y.end(), NAN);
                ASSERT_TRUE(cu::mmq_variant(v, static_cast<int>(t), &j, 1, k, a.q(), a.d.data(), na,
                                            false, nullptr));
                if (first.empty()) first = y;
                EXPECT_EQ(std::memcmp(y.data(), first.data(), static_cast<size_t>(na) * rows * 4),
                          0)
                    << "variant " << v << ", " << na << " act rows";
            }
    }
}

// The expert-grouped launch (MoE): moe_group sorts 2 x 41 slots over 5 experts (expert 0 takes
// 40 of them: two tiles, one partial) into mmq_grouped's tile table; gate and up as one fused
// two-job launch over 3-D expert tensors, every tile variant it takes. Each slot's outputs must
// equal, bitwise, the ungrouped kernel of the same variant run on that expert's rows alone with
// its matrices (an output's sum never depends on the other rows of its tile), and the
// combine over the sorted rows must equal the combine of the rows in slot order.
TEST(MmqEmul, ExpertGrouped) {
    const GgmlType t = GgmlType::Q4_K;
    const int n_expert = 5, k_used = 2, n_rows = 41, nv = n_rows * k_used, k = 512, F = 45;
    std::mt19937 rng(900);
    std::vector<int32_t> ids(nv);
    for (int r = 0; r < n_rows; ++r) {
        ids[r * 2] = r < 40 ? 0 : 1 + static_cast<int>(rng() % 4);
        ids[r * 2 + 1] = 1 + static_cast<int>(rng() % 4);
    }
    const size_t rb = q::row_size(t, k);
    const auto gate = make_weights(t, n_expert * F, k, rng);
    const auto up = make_weights(t, n_expert * F, k, rng);
    const auto x = make_acts(n_rows, k, rng);
    std::vector<int32_t> src(nv), slot_pos(nv), expert(nv), te(64), t0(64), t1(64), n_tiles(1);
    cu::MoeGroupBufs b{src.data(), slot_pos.data(), expert.data(), te.data(),
                       t0.data(),  t1.data(),       n_tiles.data()};
    const cu::MmqGroups g = cu::moe_group(ids.data(), n_rows, k_used, n_expert, b, nullptr);
    ASSERT_EQ(g.max_tiles, cu::mmq_group_max_tiles(nv, n_expert));
    ASSERT_LE(n_tiles[0], g.max_tiles);
    std::vector<int> seen(nv, 0);
    for (int i = 0; i < nv; ++i) {
        ASSERT_GE(slot_pos[i], 0);
        ASSERT_LT(slot_pos[i], nv);
        ++seen[slot_pos[i]];
        EXPECT_EQ(src[slot_pos[i]], i / k_used);
        EXPECT_EQ(expert[slot_pos[i]], ids[i]);
    }
    for (int v : seen) EXPECT_EQ(v, 1) << "sorted positions are not a permutation";
    int covered = 0;
    for (int ti = 0; ti < n_tiles[0]; ++ti) {
        EXPECT_GT(t1[ti], t0[ti]);
        EXPECT_LE(t1[ti] - t0[ti], cu::kMmqGroupCols);
        EXPECT_EQ(t0[ti], covered) << "tiles are not contiguous";
        for (int p = t0[ti]; p < t1[ti]; ++p) EXPECT_EQ(expert[p], te[ti]);
        covered = t1[ti];
    }
    EXPECT_EQ(covered, nv);
    EXPECT_EQ(n_tiles[0], 2 + 4) << "expert 0: 40 rows in 2 tiles; experts 1-4 one each";

    std::vector<float> xs(static_cast<size_t>(nv) * k);  // rows in sorted order
    for (int p = 0; p < nv; ++p)
        std::memcpy(xs.data() + static_cast<size_t>(p) * k,
                    x.data() + static_cast<size_t>(src[p]) * k, 4 * k);
    const Acts a = pack(t, xs, nv, k);
    auto job = [&](const std::vector<uint8_t>& w, float* y) {
        cu::MatJob j;
        j.w = w.data();
        j.row_bytes = rb;
        j.n_out = F;
        j.y = y;
        j.ldy = F;
        j.expert_stride = rb * F;
        return j;
    };
    for (int v : {0, 8, 9, 10}) {
        SCOPED_TRACE("variant " + std::to_string(v));
        std::vector<float> yg(static_cast<size_t>(nv) * F, NAN), yu(yg.size(), NAN);
        const cu::MatJob jobs[2] = {job(gate, yg.data()), job(up, yu.data())};
        ASSERT_TRUE(
            cu::mmq_grouped(static_cast<int>(t), jobs, 2, k, a.q(), a.d.data(), nv, g, nullptr, v));
        const int rv = v == 0 ? 9 : v;        // variant 0 takes 64-row tiles for this small shape
        for (int e = 0; e < n_expert; ++e) {  // an expert's sorted rows are contiguous
            int p0 = 0, n = 0;
            for (int p = 0; p < nv; ++p)
                if (expert[p] == e) p0 = n++ == 0 ? p : p0;
            std::vector<float> rg(static_cast<size_t>(n) * F, NAN), ru(rg.size(), NAN);
            cu::MatJob one[2] = {job(gate, rg.data()), job(up, ru.data())};
            for (auto& j : one) j.w += static_cast<size_t>(e) * j.expert_stride;
            ASSERT_TRUE(cu::mmq_variant(
                rv, static_cast<int>(t), one, 2, k, a.q() + static_cast<size_t>(p0) * k,
                a.d.data() + static_cast<size_t>(p0) * (k / 32), n, false, nullptr, nullptr, 1));
            const size_t off = static_cast<size_t>(p0) * F, len = 4 * rg.size();
            EXPECT_EQ(std::memcmp(rg.data(), yg.data() + off, len), 0) << "gate, expert " << e;
            EXPECT_EQ(std::memcmp(ru.data(), yu.data() + off, len), 0) << "up, expert " << e;
        }
        if (v != 0) continue;
        // combine: sorted rows through slot_pos == the same rows in slot order
        std::vector<float> w(nv), slot_rows(yg.size()), out1(static_cast<size_t>(n_rows) * F),
            out2(out1.size());
        for (auto& wv : w) wv = std::uniform_real_distribution<float>(0.f, 1.f)(rng);
        for (int i = 0; i < nv; ++i)
            std::memcpy(slot_rows.data() + static_cast<size_t>(i) * F,
                        yg.data() + static_cast<size_t>(slot_pos[i]) * F, 4 * F);
        cu::moe_combine(yg.data(), w.data(), n_rows, k_used, F, out1.data(), nullptr,
                        slot_pos.data());
        cu::moe_combine(slot_rows.data(), w.data(), n_rows, k_used, F, out2.data(), nullptr);
        EXPECT_EQ(std::memcmp(out1.data(), out2.data(), 4 * out1.size()), 0);
    }
    // refusals: a gathered job, no tile table, a tile variant of 64 activation rows
    std::vector<float> y(static_cast<size_t>(nv) * F);
    cu::MatJob j = job(gate, y.data());
    j.expert = expert.data();
    EXPECT_FALSE(cu::mmq_grouped(static_cast<int>(t), &j, 1, k, a.q(), a.d.data(), nv, g, nullptr));
    j.expert = nullptr;
    EXPECT_FALSE(cu::mmq_grouped(static_cast<int>(t), &j, 1, k, a.q(), a.d.data(), nv,
                                 cu::MmqGroups{}, nullptr));
    EXPECT_FALSE(
        cu::mmq_grouped(static_cast<int>(t), &j, 1, k, a.q(), a.d.data(), nv, g, nullptr, 1));
}

// The repacked layouts of repack.h (fast mode's default upload of Q4_0 / Q8_0 / Q6_K): tile
// variants 1-4 (variant 0 picks among them); the pipelined 5-7 refuse them. n0 = 16 rows keeps
// the second job 16-byte aligned.
// The route kernels (moe.cu: block-per-row exact, warp-per-row fast) against moe::route_row (the
// CPU tier's routine): ids,
// weights bit for bit, the gather list and the load counters, for both gating orders, with and
// without norm_w / w_scale, over rows with ties, -inf, a NaN and +inf (the serial fallback).
TEST(MoeRouteEmul, MatchesTheCpuRoutine) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 2.f);
    for (int n_expert : {8, 128, 256}) {
        for (int k : {1, 4, 8}) {
            for (int mode = 0; mode < 4; ++mode) {
                const bool softmax_first = mode < 2, norm_w = mode % 2 == 1;
                const float w_scale = mode == 3 ? 2.5f : 0.f;
                SCOPED_TRACE("n_expert " + std::to_string(n_expert) + " k " + std::to_string(k) +
                             " mode " + std::to_string(mode));
                const int n_rows = 6;
                std::vector<float> l(static_cast<size_t>(n_rows) * n_expert);
                for (auto& x : l) x = nd(rng);
                for (int i = 0; i < n_expert; i += 3) l[n_expert + i] = 1.25f;  // row 1: ties
                l[2 * n_expert + 1] = -INFINITY;                                // row 2: -inf
                l[3 * n_expert + n_expert / 2] = NAN;                           // row 3: NaN
                l[4 * n_expert + 2] = INFINITY;                                 // row 4: +inf
                std::vector<int32_t> ids(n_rows * k, -1), src(n_rows * k, -1), ref_ids(n_rows * k);
                std::vector<float> w(n_rows * k), ref_w(n_rows * k);
                std::vector<uint32_t> load(n_expert, 0), ref_load(n_expert, 0);
                cu::moe_route(l.data(), n_rows, n_expert, k, softmax_first, norm_w, w_scale,
                              ids.data(), w.data(), src.data(), true, nullptr, load.data());
                for (int t = 0; t < n_rows; ++t) {
                    zinc::moe::route_row(l.data() + t * n_expert, n_expert, k, softmax_first,
                                         norm_w, w_scale, ref_ids.data() + t * k,
                                         ref_w.data() + t * k);
                    for (int s = 0; s < k; ++s) {
                        EXPECT_EQ(src[t * k + s], t);
                        ++ref_load[ref_ids[t * k + s]];
                    }
                }
                EXPECT_EQ(ids, ref_ids);
                EXPECT_EQ(0, std::memcmp(w.data(), ref_w.data(), w.size() * sizeof(float)));
                EXPECT_EQ(load, ref_load);
                // The fast path (route_fast_kernel: a warp a row, butterflies for the maximum,
                // the sum and the selection): the same experts, weights within a few ulp (these
                // rows have no two probabilities within an ulp), the same gather list and loads.
                std::vector<int32_t> fids(n_rows * k, -1), fsrc(n_rows * k, -1);
                std::vector<float> fw(n_rows * k, NAN);
                std::vector<uint32_t> fload(n_expert, 0);
                cu::moe_route(l.data(), n_rows, n_expert, k, softmax_first, norm_w, w_scale,
                              fids.data(), fw.data(), fsrc.data(), false, nullptr, fload.data());
                EXPECT_EQ(fids, ref_ids);
                EXPECT_EQ(fsrc, src);
                EXPECT_EQ(fload, ref_load);
                for (size_t i = 0; i < fw.size(); ++i)
                    EXPECT_NEAR(fw[i], ref_w[i], 1e-5f * std::fabs(ref_w[i]) + 1e-30f) << i;
            }
        }
    }
}

// The router's product fused with the fast routing (moe_route_router: one launch, the last block
// of a row routes it): the logits bit for bit dmmv's F32 order (lane-strided pairs, each rounded,
// the xor butterfly, + 0.f), the routing the same as moe_route's fast path on those logits, over
// rows of several experts' counts and a row count that needs several blocks a row.
TEST(MoeRouteEmul, RouterFusedEqualsRouterThenRoute) {
    std::mt19937 rng(9);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int dim = 256, n_rows = 3, k = 4;
    for (int n_expert : {8, 30, 128}) {
        SCOPED_TRACE("n_expert " + std::to_string(n_expert));
        std::vector<float> x(static_cast<size_t>(n_rows) * dim), wr(static_cast<size_t>(n_expert) * dim);
        for (auto& v : x) v = nd(rng);
        for (auto& v : wr) v = 0.1f * nd(rng);
        std::vector<float> ref_l(static_cast<size_t>(n_rows) * n_expert);
        for (int t = 0; t < n_rows; ++t) {
            for (int e = 0; e < n_expert; ++e) {
                float lane[32];
                for (int l = 0; l < 32; ++l) {
                    float acc = 0.f;
                    for (int i = 2 * l; i < dim; i += 64) {
                        const float* w = wr.data() + static_cast<size_t>(e) * dim;
                        const float* xr = x.data() + static_cast<size_t>(t) * dim;
                        acc = acc + (w[i] * xr[i] + w[i + 1] * xr[i + 1]);
                    }
                    lane[l] = acc;
                }
                for (int o = 16; o > 0; o >>= 1) {
                    float nx[32];
                    for (int l = 0; l < 32; ++l) nx[l] = lane[l] + lane[l ^ o];
                    std::memcpy(lane, nx, sizeof lane);
                }
                ref_l[static_cast<size_t>(t) * n_expert + e] = lane[0] + 0.f;
            }
        }
        std::vector<int32_t> rids(n_rows * k, -1), rsrc(n_rows * k, -1);
        std::vector<float> rw(n_rows * k, NAN);
        std::vector<uint32_t> rload(n_expert, 0);
        cu::moe_route(ref_l.data(), n_rows, n_expert, k, true, true, 0.f, rids.data(), rw.data(),
                      rsrc.data(), false, nullptr, rload.data());

        std::vector<float> l(ref_l.size(), NAN);
        std::vector<unsigned> tickets(n_rows, 0);
        std::vector<int32_t> ids(n_rows * k, -1), src(n_rows * k, -1);
        std::vector<float> w(n_rows * k, NAN);
        std::vector<uint32_t> load(n_expert, 0);
        ASSERT_TRUE(cu::moe_route_router(x.data(), dim, wr.data(), n_rows, n_expert, l.data(),
                                         tickets.data(), k, true, true, 0.f, ids.data(), w.data(),
                                         src.data(), nullptr, load.data()));
        EXPECT_EQ(0, std::memcmp(l.data(), ref_l.data(), l.size() * sizeof(float)));
        EXPECT_EQ(ids, rids);
        EXPECT_EQ(src, rsrc);
        EXPECT_EQ(load, rload);
        EXPECT_EQ(0, std::memcmp(w.data(), rw.data(), w.size() * sizeof(float)));
        EXPECT_EQ(tickets, std::vector<unsigned>(n_rows, 0));  // left zeroed for the next step
    }
    // Shapes the fused kernel refuses (the caller then runs dmmv + moe_route): an odd row length.
    std::vector<float> x(3), wr(3), l(1);
    unsigned tk = 0;
    int32_t id = 0, sr = 0;
    float ww = 0.f;
    EXPECT_FALSE(cu::moe_route_router(x.data(), 3, wr.data(), 1, 1, l.data(), &tk, 1, true, false,
                                      0.f, &id, &ww, &sr, nullptr));
}

TEST(MmqEmul, Repacked) {
    uint32_t seed = 500;
    check(GgmlType::Q4_0, 256, 40, 16, 9, seed++, 0, true);
    check(GgmlType::Q8_0, 512, 40, 16, 9, seed++, 1, true);
    check(GgmlType::Q6_K, 2048, 40, 16, 9, seed++, 4, true);
    cu::MatJob j;
    j.n_out = 1;
    alignas(16) static int8_t aq[64];
    EXPECT_FALSE(cu::mmq_variant(5, 102, &j, 1, 256, aq, nullptr, 1, false, nullptr));
}

TEST(MmqEmul, Refuses) {
    cu::MatJob j;
    j.n_out = 1;
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
        EXPECT_FALSE(
            cu::mmq(static_cast<int>(t), &j, 1, 256, nullptr, nullptr, 20, false, nullptr));
        EXPECT_FALSE(cu::mmq_supports(static_cast<int>(t)));
    }
    alignas(16) static int8_t aq[64];
    EXPECT_FALSE(
        cu::mmq(static_cast<int>(GgmlType::Q4_K), &j, 1, 256, aq + 4, nullptr, 1, false, nullptr));
    EXPECT_FALSE(
        cu::mmq(static_cast<int>(GgmlType::Q4_K), &j, 1, 288, aq, nullptr, 1, false, nullptr));
    EXPECT_FALSE(
        cu::mmq(static_cast<int>(GgmlType::Q4_0), &j, 4, 256, aq, nullptr, 1, false, nullptr));
}

}  // namespace
