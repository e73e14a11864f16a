// zinc/tests/unit/model/moe_route_test.cpp — backend/moe_route.h, the routing both tiers run: the
// chosen experts and their weights against direct computations of the two conventions.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/moe_route.h"

namespace {

// gpt-oss (top-k, then the softmax over the k selected logits): the weights are that softmax,
// largest first, whatever order the selection wrote them in.
TEST(MoeRoute, TopKThenSoftmax) {
    const float logits[6] = {0.5f, 2.0f, -1.0f, 1.5f, 2.0f, 0.25f};
    int32_t ids[3];
    float w[3];
    zinc::moe::route_row(logits, 6, 3, /*softmax_first=*/false, false, 0.0f, ids, w);
    EXPECT_EQ(ids[0], 1);  // the tie 2.0 / 2.0: lower id first
    EXPECT_EQ(ids[1], 4);
    EXPECT_EQ(ids[2], 3);
    const double e0 = 1.0, e1 = 1.0, e2 = std::exp(-0.5), sum = e0 + e1 + e2;
    EXPECT_NEAR(w[0], e0 / sum, 1e-6);
    EXPECT_NEAR(w[1], e1 / sum, 1e-6);
    EXPECT_NEAR(w[2], e2 / sum, 1e-6);
    EXPECT_NEAR(w[0] + w[1] + w[2], 1.0, 1e-6);
}

// qwen3moe (softmax over all experts, top-k, renormalised).
TEST(MoeRoute, SoftmaxThenTopKNormalised) {
    const float logits[4] = {1.0f, 3.0f, 2.0f, 0.0f};
    int32_t ids[2];
    float w[2];
    zinc::moe::route_row(logits, 4, 2, /*softmax_first=*/true, /*norm_w=*/true, 0.0f, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 2);
    const double a = std::exp(1.0), b = 1.0;  // exp(3 - 2), exp(2 - 2) relative
    EXPECT_NEAR(w[0], a / (a + b), 1e-6);
    EXPECT_NEAR(w[1], b / (a + b), 1e-6);
}

}  // namespace
