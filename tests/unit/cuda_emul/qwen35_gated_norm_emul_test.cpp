// zinc/tests/unit/cuda_emul/qwen35_gated_norm_emul_test.cpp — qwen35's gating kernels' CUDA source
// (src/backend/cuda/gated_norm.cu) compiled for the host over the SIMT shim in shim/, run through
// gated_rms_norm(), split_gate() and sigmoid_mul() on host memory against the CPU tier's
// cpu::gated_rms_norm_row, cpu::split_gate_row and cpu::sigmoid_mul (tests/cuda/qwen35_ref.h):
// head dims below, at and past the warp width (a partial last warp of the block, rows at scales
// 2^-3 .. 2^3), the split over several heads, the sigmoid gate elementwise and broadcast per row
// (qwen35moe's shared-expert gate). The norm and the split are bit-identical; the sigmoid too on
// the host (same libm expf; on the device a relative-error bound). The grid-stride loop past 2^20
// elements is checked on the device only (tests/cuda/test_deltanet.cpp): the shim runs a host
// thread per CUDA thread.
#include <gtest/gtest.h>

#include <limits>
#include <tuple>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/gated_norm.cu"
#pragma GCC diagnostic pop

#include "../../cuda/qwen35_ref.h"

namespace {

namespace cu = zinc::cuda;
namespace qt = zinc::qwen35_test;

}  // namespace

TEST(CudaEmulGatedNorm, GatedRmsNormBitIdentical) {
    // (rows, heads, head_dim): 128 (Qwen 3.5's), 20 (< a warp), 45 (a partial second pass);
    // 3 x 3 = 9 units leave 3 warps of the third block idle.
    for (auto [rows, heads, hd] :
         {std::tuple{2, 4, 128}, std::tuple{3, 3, 20}, std::tuple{7, 2, 45}}) {
        const qt::GatedNormData d = qt::make_gated_norm(rows, heads, hd, 10 + hd);
        std::vector<float> x = d.x;
        cu::gated_rms_norm(x.data(), d.z.data(), d.w.data(), rows, d.width, hd, d.eps, nullptr);
        EXPECT_TRUE(qt::same_bits(x, d.y))
            << rows << "x" << heads << "x" << hd << ": rel err " << qt::rel_err(x, d.y);
    }
}

TEST(CudaEmulGatedNorm, SplitGateBitIdentical) {
    for (auto [rows, heads, hd] : {std::tuple{3, 4, 16}, std::tuple{2, 3, 33}}) {
        const qt::SplitGateData d = qt::make_split_gate(rows, heads, hd, 20 + hd);
        std::vector<float> q(d.q.size(), std::numeric_limits<float>::quiet_NaN()), g = q;
        cu::split_gate(d.in.data(), q.data(), g.data(), rows, heads, hd, nullptr);
        EXPECT_TRUE(qt::same_bits(q, d.q)) << hd;
        EXPECT_TRUE(qt::same_bits(g, d.gate)) << hd;
    }
}

TEST(CudaEmulGatedNorm, SigmoidMulElementwiseAndPerRow) {
    for (auto [rows, width, gw] : {std::tuple{3, 100, 100}, std::tuple{5, 37, 1}}) {
        const qt::SigmoidMulData d = qt::make_sigmoid_mul(rows, width, gw, 30 + gw);
        std::vector<float> x = d.x;
        cu::sigmoid_mul(x.data(), d.gate.data(), rows, width, gw, nullptr);
        EXPECT_TRUE(qt::same_bits(x, d.y))
            << width << "/" << gw << ": rel err " << qt::rel_err(x, d.y);
    }
}
