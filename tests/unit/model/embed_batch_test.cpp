// model::check_embed_batch (model/embed_batch.h): the embedding-forward rules both tiers'
// Runner::forward_embed apply, each error message whole.
#include "model/embed_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/batch.h"
#include "model/ir.h"

namespace zm = zinc::model;

namespace {

std::string check(const zm::Program& p, int32_t pos0, const float* hidden) {
    const std::vector<int32_t> toks = {1, 2};
    const int32_t tbl[1] = {0};
    const zm::BatchSeq s[2] = {{0, 1, 0, tbl, false, false, -1},
                               {1, 1, pos0, tbl, false, false, -1}};
    const auto r = zm::check_embed_batch(p, "arch", {toks, s}, hidden);
    return r.ok() ? "ok" : r.error().message;
}

TEST(EmbedBatch, AcceptsACausalChunkAndAWholeBidirectionalSequence) {
    zm::Program p;
    p.embd_op = 3;
    float out[4] = {};
    EXPECT_EQ(check(p, 5, out), "ok");  // causal: a chunk may continue at any position
    p.bidirectional = true;
    EXPECT_EQ(check(p, 0, out), "ok");
}

TEST(EmbedBatch, RefusesEachRuleWithItsMessage) {
    zm::Program p;
    float out[4] = {};
    EXPECT_EQ(check(p, 0, out), "embeddings: arch marks no embeddings value");
    p.embd_op = 3;
    EXPECT_EQ(check(p, 0, nullptr), "embeddings: hidden-state buffer is null");
    p.bidirectional = true;
    EXPECT_EQ(check(p, 2, out),
              "embeddings: sequence 1 starts at position 2, but arch attends in both directions: "
              "a sequence must be computed whole, from position 0, in one forward");
}

}  // namespace
