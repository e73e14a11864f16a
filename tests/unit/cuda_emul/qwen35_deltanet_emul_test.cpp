// zinc/tests/unit/cuda_emul/qwen35_deltanet_emul_test.cpp — the gated delta rule's CUDA source
// (src/backend/cuda/deltanet.cu) compiled for the host over the SIMT shim in shim/, run through
// its entry point delta_net_recurrent() on host memory, against the CPU tier's
// cpu::delta_net_head (tests/cuda/qwen35_ref.h): several head shapes (key and value dims that
// are and are not multiples of the warp and of the kernel's 16-row tiles, one to three key lanes'
// worth of elements, q/k heads tiled over more v heads), several sequences in one step (starting
// at position 0 over a NaN slot, or continuing a random state, on shuffled slots), and the
// recurrence run as decode steps (one kernel call per token) against the CPU's one call over the
// whole sequence, Qwen3.5-9B's head shape decoding one row (the device bench's case) and
// sequences without rows, and the checkpoints of speculative decoding (the state after each
// kept row, bit for bit the kernel's state after running the rows up to it alone; nothing
// written for sequences without keep). Outputs are poisoned (NaN) first; output and state pool
// lie between guard bands (qt::Guarded) that a store out of bounds would change. Bound:
// max |gpu - cpu| / max |cpu| <= 2e-6 for the outputs and the states (the orders of the dot
// products and L2 sums differ; on the host the exp / log are the same libm calls).
// tests/cuda/test_deltanet.cpp checks the same on the device.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/deltanet.cu"
#pragma GCC diagnostic pop

#include "../../cuda/qwen35_ref.h"

namespace {

namespace cu = zinc::cuda;
namespace qt = zinc::qwen35_test;

constexpr double kTol = 2e-6;

cu::DeltaNetJob job(const qt::DeltaNetData& d, const float* qkv, const float* beta,
                    const float* alpha, float* out, float* state, const qt::SeqTable& t) {
    cu::DeltaNetJob j;
    j.qkv = qkv;
    j.qkv_ld = d.qkv_ld;
    j.beta = beta;
    j.alpha = alpha;
    j.dt_bias = d.dt_bias.data();
    j.a = d.a.data();
    j.out = out;
    j.out_ld = d.out_ld;
    j.state = state;
    j.slot_floats = d.slot_floats;
    j.n_k_heads = d.c.n_k;
    j.n_v_heads = d.c.n_v;
    j.head_k_dim = d.c.dk;
    j.head_v_dim = d.c.dv;
    j.eps = d.eps;
    j.seqs.row0 = t.row0.data();
    j.seqs.slot = t.slot.data();
    j.seqs.row_pos = t.row_pos.data();
    j.seqs.n_seqs = static_cast<int>(t.slot.size());
    return j;
}

// The whole step in one call, the output and the state pool each between two guard bands of a
// row / a slot (an out-of-bounds store, which does not fault on the host, fails the test).
void check_step(const qt::DeltaNetCase& c, uint32_t seed) {
    const qt::DeltaNetData d = qt::make_delta_net(c, seed);
    qt::Guarded out(d.out_floats(), static_cast<size_t>(d.out_ld));
    qt::Guarded state(d.state0.size(), static_cast<size_t>(d.slot_floats), d.state0);
    ASSERT_TRUE(cu::delta_net_recurrent(
        job(d, d.qkv.data(), d.beta.data(), d.alpha.data(), out.data(), state.data(), d.t),
        nullptr));
    EXPECT_TRUE(out.intact()) << c.name << ": a store outside the output";
    EXPECT_TRUE(state.intact()) << c.name << ": a store outside the state pool";
    const double eo = qt::rel_err(out.inner(), d.out), es = qt::rel_err(state.inner(), d.state);
    EXPECT_LE(eo, kTol) << c.name << ": outputs";
    EXPECT_LE(es, kTol) << c.name << ": states";
    std::printf("[deltanet %s] rel err out %.2e state %.2e\n", c.name.c_str(), eo, es);
}

// The same sequences as decode steps: step s holds row s of every sequence (all of equal length),
// one kernel call each, the state carried in the slots between calls.
void check_decode_steps(const qt::DeltaNetCase& c, uint32_t seed) {
    const qt::DeltaNetData d = qt::make_delta_net(c, seed);
    const int n_seq = static_cast<int>(c.step.seqs.size());
    const int n_t = c.step.seqs[0].second;
    std::vector<float> out(d.out_floats(), std::numeric_limits<float>::quiet_NaN());
    std::vector<float> state = d.state0;
    for (int s = 0; s < n_t; ++s) {
        qt::SeqTable t;
        std::vector<float> qkv, beta, alpha;
        for (int i = 0; i < n_seq; ++i) {
            ASSERT_EQ(c.step.seqs[static_cast<size_t>(i)].second, n_t);
            const int row = d.t.row0[static_cast<size_t>(i)] + s;
            t.row0.push_back(i);
            t.slot.push_back(d.t.slot[static_cast<size_t>(i)]);
            t.row_pos.push_back(d.t.row_pos[static_cast<size_t>(row)]);
            auto take = [&](const std::vector<float>& src, int w, std::vector<float>& dst) {
                dst.insert(dst.end(), src.begin() + int64_t{row} * w,
                           src.begin() + int64_t{row + 1} * w);
            };
            take(d.qkv, d.qkv_ld, qkv);
            take(d.beta, c.n_v, beta);
            take(d.alpha, c.n_v, alpha);
        }
        t.row0.push_back(n_seq);
        qt::Guarded og(static_cast<size_t>(n_seq) * d.out_ld, static_cast<size_t>(d.out_ld));
        ASSERT_TRUE(cu::delta_net_recurrent(
            job(d, qkv.data(), beta.data(), alpha.data(), og.data(), state.data(), t), nullptr));
        ASSERT_TRUE(og.intact()) << c.name << ", step " << s << ": a store outside the output";
        const std::vector<float> o = og.inner();
        for (int i = 0; i < n_seq; ++i) {
            const int row = d.t.row0[static_cast<size_t>(i)] + s;
            std::copy_n(o.begin() + int64_t{i} * d.out_ld, d.out_ld,
                        out.begin() + int64_t{row} * d.out_ld);
        }
    }
    const double eo = qt::rel_err(out, d.out), es = qt::rel_err(state, d.state);
    EXPECT_LE(eo, kTol) << c.name << ": outputs (decode steps)";
    EXPECT_LE(es, kTol) << c.name << ": states (decode steps)";
    std::printf("[deltanet %s, %d decode steps] rel err out %.2e state %.2e\n", c.name.c_str(), n_t,
                eo, es);
}

}  // namespace

TEST(CudaEmulDeltaNet, QwenHeadDimsMixedStep) {
    // d_k = d_v = 128 (Qwen 3.5's): 8 row tiles, 4 key elements per lane; the q/k head tiled over
    // two v heads; a prefill from 0 and a decode row continuing a state. (Small: the shim runs a
    // host thread per CUDA thread, and every shuffle is a barrier of the block.)
    check_step({"dk128 dv128 nk1 nv2", 1, 2, 128, 128, {{{0, 3}, {5, 1}}}}, 1);
}

TEST(CudaEmulDeltaNet, OddDimsMixedStep) {
    // d_k = 40 (two lanes' elements, the second partial), d_v = 24 (a partial second tile),
    // 2 q/k heads over 4 v heads; a continuation of several rows, a fresh decode row.
    check_step({"dk40 dv24 nk2 nv4", 2, 4, 40, 24, {{{0, 5}, {12, 3}, {0, 1}}}}, 2);
    // d_k = 20 < 32 (lanes past d_k hold zeros), d_v = 5 (one partial tile, most warps idle)
    check_step({"dk20 dv5 nk1 nv2", 1, 2, 20, 5, {{{7, 5}, {0, 2}}}}, 3);
    // d_k = 200: seven lanes' elements of eight (the widest instantiation)
    check_step({"dk200 dv17 nk1 nv1", 1, 1, 200, 17, {{{0, 3}}}}, 4);
}

TEST(CudaEmulDeltaNet, DecodeStepsMatchTheSequence) {
    // 16 tokens of two sequences (one from 0, one continuing), one call per token, against the
    // CPU tier's single call per sequence.
    check_decode_steps({"dk36 dv16 nk1 nv2", 1, 2, 36, 16, {{{0, 16}, {9, 16}}}}, 5);
}

TEST(CudaEmulDeltaNet, NineBShapeDecodeStoresOnlyItsOutput) {
    // tests/cuda/test_deltanet.cpp's bench shape, the one that faulted on the H200 (an illegal
    // address at the output store of blocks 44 and 172, out of 256): Qwen3.5-9B's heads (16 q/k,
    // 32 v, 128 x 128), one sequence decoding one row at position 100. The bench had sized the
    // output from a reference-less DeltaNetData's empty out (a 4-byte allocation); the buffer
    // here is out_floats() between guard bands, so a store past it fails, not only a wrong value.
    const qt::DeltaNetCase c{"9B decode: dk128 dv128 nk16 nv32", 16, 32, 128, 128, {{{100, 1}}}};
    // the size a bench allocates (no reference) is the size the reference fills
    EXPECT_EQ(qt::make_delta_net(c, 99, false).out_floats(), qt::make_delta_net(c, 99).out.size());
    check_step(c, 99);
}

TEST(CudaEmulDeltaNet, SequencesWithoutRows) {
    // A sequence of no rows (first, between, last) reads no row and leaves its slot's state as it
    // was (the reference: unchanged, compared with every slot's).
    check_step(
        {"dk40 dv24 nk2 nv4, empty seqs", 2, 4, 40, 24, {{{3, 0}, {0, 2}, {7, 0}, {5, 1}, {9, 0}}}},
        6);
}

TEST(CudaEmulDeltaNet, CheckpointsAreThePrefixStates) {
    // Speculative decoding's kept rows, on odd head dims (a partial key lane, a partial row
    // tile): a continuing 4-row draft, a fresh prefill without keep, a fresh 2-row sequence and
    // a decode row with keep, 4 checkpoint rows per slot. Each kept row must hold the state the
    // kernel leaves after running the sequence's rows up to it alone, bit for bit.
    const int n_ckpt = 4;
    const qt::DeltaNetCase c{"dk40 dv24 nk2 nv4, kept rows",    2, 4, 40, 24,
                             {{{5, 4}, {0, 3}, {0, 2}, {9, 1}}}};
    const qt::DeltaNetData d = qt::make_delta_net(c, 8);
    const std::vector<int32_t> keep = {1, 0, 1, 1};
    const size_t sf = static_cast<size_t>(d.slot_floats);
    // the same step without checkpoints: the outputs and states must not change
    std::vector<float> out0(d.out_floats()), state0 = d.state0;
    ASSERT_TRUE(cu::delta_net_recurrent(
        job(d, d.qkv.data(), d.beta.data(), d.alpha.data(), out0.data(), state0.data(), d.t),
        nullptr));
    qt::Guarded og(d.out_floats(), static_cast<size_t>(d.out_ld));
    qt::Guarded sg(d.state0.size(), sf, d.state0);
    qt::Guarded cg(static_cast<size_t>(d.t.n_slots) * n_ckpt * sf, sf);
    cu::DeltaNetJob j =
        job(d, d.qkv.data(), d.beta.data(), d.alpha.data(), og.data(), sg.data(), d.t);
    j.ckpt = cg.data();
    j.seqs.keep = keep.data();
    j.seqs.n_ckpt = n_ckpt;
    ASSERT_TRUE(cu::delta_net_recurrent(j, nullptr));
    EXPECT_TRUE(og.intact() && sg.intact() && cg.intact()) << "a store outside a buffer";
    EXPECT_TRUE(qt::same_bits(og.inner(), out0));
    EXPECT_TRUE(qt::same_bits(sg.inner(), state0));
    EXPECT_LE(qt::rel_err(sg.inner(), d.state), kTol);  // and the CPU tier's, as check_step
    const std::string err =
        qt::check_checkpoints(cg.inner(), d.t, keep, n_ckpt, d.slot_floats, [&](size_t si, int n) {
            std::vector<float> state = d.state0, out(static_cast<size_t>(n) * d.out_ld);
            const int64_t r0 = d.t.row0[si];
            EXPECT_TRUE(
                cu::delta_net_recurrent(job(d, d.qkv.data() + r0 * d.qkv_ld,
                                            d.beta.data() + r0 * c.n_v, d.alpha.data() + r0 * c.n_v,
                                            out.data(), state.data(), qt::prefix_table(d.t, si, n)),
                                        nullptr));
            return state;
        });
    EXPECT_EQ(err, "");
}

TEST(CudaEmulDeltaNet, RefusesUncoveredShapes) {
    cu::DeltaNetJob j;
    j.n_k_heads = j.n_v_heads = 1;
    j.head_v_dim = 8;
    j.seqs.n_seqs = 1;
    j.head_k_dim = cu::kDeltaNetMaxKeyDim + 1;
    EXPECT_FALSE(cu::delta_net_recurrent(j, nullptr));
    j.head_k_dim = 0;
    EXPECT_FALSE(cu::delta_net_recurrent(j, nullptr));
}
