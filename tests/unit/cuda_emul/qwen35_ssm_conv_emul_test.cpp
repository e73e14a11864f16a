// zinc/tests/unit/cuda_emul/qwen35_ssm_conv_emul_test.cpp — the causal depthwise conv's CUDA
// source (src/backend/cuda/ssm_conv.cu) compiled for the host over the SIMT shim in shim/, run
// through its entry point ssm_conv() on host memory against the CPU tier's cpu::ssm_conv
// (tests/cuda/qwen35_ref.h), bit for bit (outputs and every slot's conv state): channel counts
// below, at and past one block of 256, d_conv 2, 4 (Qwen 3.5's) and 7, sequences from position 0
// over NaN slots and continuing random states, and a sequence split over two calls (the rolling
// state carried) against one call, sequences without rows (their states untouched), and the
// checkpoints of speculative decoding (the state after each kept row, bit for bit the state
// after running the sequence's rows up to it alone; nothing written for the others). Outputs
// are poisoned (NaN) first; output and state pool lie between guard bands (qt::Guarded) that a
// store out of bounds would change.
// tests/cuda/test_deltanet.cpp checks the same on the device.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/ssm_conv.cu"
#pragma GCC diagnostic pop

#include "../../cuda/qwen35_ref.h"

namespace {

namespace cu = zinc::cuda;
namespace qt = zinc::qwen35_test;

cu::SsmConvJob job(const qt::SsmConvData& d, const float* x, float* y, float* state,
                   const qt::SeqTable& t) {
    cu::SsmConvJob j;
    j.x = x;
    j.w = d.w.data();
    j.y = y;
    j.state = state;
    j.slot_floats = d.slot_floats;
    j.ch = d.c.ch;
    j.d_conv = d.c.d_conv;
    j.seqs.row0 = t.row0.data();
    j.seqs.slot = t.slot.data();
    j.seqs.row_pos = t.row_pos.data();
    j.seqs.n_seqs = static_cast<int>(t.slot.size());
    return j;
}

void check(const qt::SsmConvCase& c, uint32_t seed) {
    const qt::SsmConvData d = qt::make_ssm_conv(c, seed);
    // output and state pool between guard bands of a row / a slot: a store outside fails
    qt::Guarded yg(d.y_floats(), static_cast<size_t>(c.ch));
    qt::Guarded sg(d.state0.size(), static_cast<size_t>(d.slot_floats), d.state0);
    ASSERT_TRUE(cu::ssm_conv(job(d, d.x.data(), yg.data(), sg.data(), d.t), nullptr));
    EXPECT_TRUE(yg.intact()) << c.name << ": a store outside the output";
    EXPECT_TRUE(sg.intact()) << c.name << ": a store outside the state pool";
    const std::vector<float> y = yg.inner(), state = sg.inner();
    EXPECT_TRUE(qt::same_bits(y, d.y)) << c.name << ": outputs, rel err " << qt::rel_err(y, d.y);
    EXPECT_TRUE(qt::same_bits(state, d.state)) << c.name << ": states";
}

}  // namespace

TEST(CudaEmulSsmConv, BitIdenticalToTheCpuTier) {
    check({"ch13 k4", 13, 4, {{{0, 5}, {6, 1}, {2, 3}}}}, 1);
    check({"ch300 k4", 300, 4, {{{0, 1}, {17, 2}}}}, 2);  // two blocks, the second partial
    check({"ch40 k2", 40, 2, {{{0, 7}, {1, 1}}}}, 3);
    check({"ch9 k7", 9, 7, {{{3, 2}, {0, 12}}}}, 4);  // fewer rows than taps in one sequence
    // sequences without rows (first, between, last): their states stay as they were
    check({"ch13 k4, empty seqs", 13, 4, {{{3, 0}, {0, 2}, {7, 0}, {5, 1}, {9, 0}}}}, 5);
}

TEST(CudaEmulSsmConv, SplitCallsCarryTheState) {
    // one sequence of 11 rows from position 5: rows 0-3 in one call, 4-10 in the next
    const qt::SsmConvData d = qt::make_ssm_conv({"ch37 k4", 37, 4, {{{5, 11}}}}, 5);
    std::vector<float> y(d.y.size(), std::numeric_limits<float>::quiet_NaN());
    std::vector<float> state = d.state0;
    for (auto [r0, n] : {std::pair{0, 4}, std::pair{4, 7}}) {
        qt::SeqTable t;
        t.row0 = {0, n};
        t.slot = d.t.slot;
        t.row_pos.assign(d.t.row_pos.begin() + r0, d.t.row_pos.begin() + r0 + n);
        ASSERT_TRUE(cu::ssm_conv(
            job(d, d.x.data() + int64_t{r0} * 37, y.data() + int64_t{r0} * 37, state.data(), t),
            nullptr));
    }
    EXPECT_TRUE(qt::same_bits(y, d.y));
    EXPECT_TRUE(qt::same_bits(state, d.state));
}

TEST(CudaEmulSsmConv, CheckpointsAreThePrefixStates) {
    // Speculative decoding's kept rows: a continuing 4-row draft, a fresh prefill without keep,
    // a fresh 2-row sequence and a decode row with keep, 4 checkpoint rows per slot.
    const int n_ckpt = 4, ch = 37;
    const qt::SsmConvData d =
        qt::make_ssm_conv({"ch37 k4, kept rows", ch, 4, {{{5, 4}, {0, 3}, {0, 2}, {9, 1}}}}, 7);
    const std::vector<int32_t> keep = {1, 0, 1, 1};
    const size_t sf = static_cast<size_t>(d.slot_floats);
    qt::Guarded yg(d.y_floats(), static_cast<size_t>(ch));
    qt::Guarded sg(d.state0.size(), sf, d.state0);
    qt::Guarded cg(static_cast<size_t>(d.t.n_slots) * n_ckpt * sf, sf);
    cu::SsmConvJob j = job(d, d.x.data(), yg.data(), sg.data(), d.t);
    j.ckpt = cg.data();
    j.seqs.keep = keep.data();
    j.seqs.n_ckpt = n_ckpt;
    ASSERT_TRUE(cu::ssm_conv(j, nullptr));
    EXPECT_TRUE(yg.intact() && sg.intact() && cg.intact()) << "a store outside a buffer";
    // the outputs and states are the call's without checkpoints (the CPU tier's bits)
    EXPECT_TRUE(qt::same_bits(yg.inner(), d.y));
    EXPECT_TRUE(qt::same_bits(sg.inner(), d.state));
    const std::string err =
        qt::check_checkpoints(cg.inner(), d.t, keep, n_ckpt, d.slot_floats, [&](size_t si, int n) {
            std::vector<float> state = d.state0, y(static_cast<size_t>(n) * ch);
            const int64_t r0 = d.t.row0[si];
            EXPECT_TRUE(cu::ssm_conv(
                job(d, d.x.data() + r0 * ch, y.data(), state.data(), qt::prefix_table(d.t, si, n)),
                nullptr));
            return state;
        });
    EXPECT_EQ(err, "");
}

TEST(CudaEmulSsmConv, RefusesUncoveredTaps) {
    cu::SsmConvJob j;
    j.ch = 4;
    j.seqs.n_seqs = 1;
    for (int k : {1, 17}) {
        j.d_conv = k;
        EXPECT_FALSE(cu::ssm_conv(j, nullptr)) << k;
    }
}
