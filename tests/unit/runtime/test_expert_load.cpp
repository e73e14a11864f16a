// zinc/tests/unit/runtime/test_expert_load.cpp — runtime/expert_load.h: the spread summary
// of per-layer expert slot counts, dense layers skipped, and its errors.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/expert_load.h"

namespace zinc::runtime {
namespace {

TEST(ExpertLoad, EvenSpreadIsOne) {
    const std::vector<uint64_t> c(3 * 4, 5);
    auto s = summarize_expert_load(c, 4);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s.value().n_layers, 3);
    EXPECT_EQ(s.value().slots, 60u);
    EXPECT_DOUBLE_EQ(s.value().max_over_mean, 1.0);
    EXPECT_DOUBLE_EQ(s.value().min_over_mean, 1.0);
    EXPECT_DOUBLE_EQ(s.value().cv, 0.0);
    EXPECT_EQ(s.value().unused, 0);
}

TEST(ExpertLoad, SkewDenseLayersAndUnused) {
    // layer 0 dense (zeros); layer 1: {8, 0, 0, 0} (mean 2: max/mean 4, min 0, CV sqrt(3));
    // layer 2: {3, 1, 2, 2} (mean 2: max/mean 1.5, min/mean 0.5)
    const std::vector<uint64_t> c = {0, 0, 0, 0, 8, 0, 0, 0, 3, 1, 2, 2};
    auto s = summarize_expert_load(c, 4);
    ASSERT_TRUE(s.ok());
    const ExpertLoadSummary& v = s.value();
    EXPECT_EQ(v.n_layers, 2);
    EXPECT_EQ(v.slots, 16u);
    EXPECT_DOUBLE_EQ(v.max_over_mean, (4.0 + 1.5) / 2);
    EXPECT_DOUBLE_EQ(v.worst_max_over_mean, 4.0);
    EXPECT_DOUBLE_EQ(v.min_over_mean, 0.25);
    EXPECT_EQ(v.unused, 3);
    const std::string line = format_expert_load(v);
    EXPECT_NE(line.find("2 MoE layers x 4 experts"), std::string::npos) << line;
    EXPECT_NE(line.find("3 of 8"), std::string::npos) << line;
}

TEST(ExpertLoad, Errors) {
    const std::vector<uint64_t> c(7, 1);
    auto a = summarize_expert_load(c, 4);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("7 counts"), std::string::npos) << a.error().message;
    auto b = summarize_expert_load(c, 0);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.error().message.find("n_expert is 0"), std::string::npos) << b.error().message;
}

}  // namespace
}  // namespace zinc::runtime
