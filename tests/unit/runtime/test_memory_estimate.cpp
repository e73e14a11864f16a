// The CUDA tier's device-memory estimate (cuda::device_bytes_needed, memory_estimate.cpp; plain
// C++, no device): the KV cache grows with the positions of the attention layers only, and the
// recurrent state of a hybrid model is counted per slot with its checkpoint copies
// (RunnerOptions::n_state_checkpoints), so the tier choice (checked_runner.cpp) and the
// runner's load-time check see the state checkpoint pools.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/model.h"
#include "tiny_qwen35.h"

namespace zm = zinc::model;
namespace cu = zinc::cuda;
namespace tq = zinc_test::tiny_qwen35;

namespace {

struct Tiny {
    std::vector<uint8_t> bytes;
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<zm::Model> model;
};

std::unique_ptr<Tiny> load_tiny() {
    auto t = std::make_unique<Tiny>();
    t->bytes = tq::build_qwen35();
    auto f = zinc::gguf::File::from_buffer(t->bytes.data(), t->bytes.size(), "qwen35.gguf");
    EXPECT_TRUE(f.ok()) << (f.ok() ? "" : f.error().message);
    if (!f.ok()) return t;
    t->file = std::move(f.value());
    auto m = zm::Model::load(*t->file, {});
    EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
    if (m.ok()) t->model = std::move(m.value());
    return t;
}

TEST(MemoryEstimate, KvCacheCountsTheAttentionLayersOnly) {
    auto t = load_tiny();
    ASSERT_TRUE(t->model);
    // One attention layer of the four: K and V rows of one KV head of 32, f16.
    const size_t per_pos = 1 * (tq::kHeadKv * tq::kHd) * 2 * 2;
    EXPECT_EQ(cu::device_bytes_needed(*t->model, 272) - cu::device_bytes_needed(*t->model, 256),
              16 * per_pos);
}

TEST(MemoryEstimate, RecurrentStateCountsSlotsAndCheckpoints) {
    auto t = load_tiny();
    ASSERT_TRUE(t->model);
    const zm::Model& m = *t->model;
    const size_t rsb = m.recurrent_state_bytes();
    ASSERT_GT(rsb, 0u);
    const size_t one = cu::device_bytes_needed(m, 256);
    EXPECT_EQ(cu::device_bytes_needed(m, 256, 1, 0), one);
    EXPECT_EQ(cu::device_bytes_needed(m, 256, 4, 0) - one, 3 * rsb);
    // n_state_slots x n_state_checkpoints x recurrent_state_bytes beside the states themselves
    EXPECT_EQ(cu::device_bytes_needed(m, 256, 4, 5) - cu::device_bytes_needed(m, 256, 4, 0),
              4 * 5 * rsb);
}

TEST(MemoryEstimate, RunnerOptionsGiveTheRunnersPools) {
    auto t = load_tiny();
    ASSERT_TRUE(t->model);
    const zm::Model& m = *t->model;
    zm::RunnerOptions ro;
    ro.n_blocks = 16;
    ro.block_size = 16;
    ro.max_seqs = 3;
    ro.n_state_checkpoints = 5;
    // n_state_slots 0: max_seqs slots, as the Runner allocates them
    EXPECT_EQ(cu::device_bytes_needed(m, ro), cu::device_bytes_needed(m, 256, 3, 5));
    ro.n_state_slots = 7;
    EXPECT_EQ(cu::device_bytes_needed(m, ro), cu::device_bytes_needed(m, 256, 7, 5));
    ro.n_state_checkpoints = 0;
    EXPECT_EQ(cu::device_bytes_needed(m, ro), cu::device_bytes_needed(m, 256, 7, 0));
}

}  // namespace
