// tests/unit/quant/types_test.cpp — the type table: ids, names, block geometry, row sizes and
// the activation packing each weight type's dot product expects. Byte sizes are spelled out
// from the field lists in docs/quant.md (and checked against libggml by the Python tests).
#include "quant/types.h"

#include <gtest/gtest.h>

namespace zinc::quant {
namespace {

struct Expect {
    uint32_t id;
    const char* name;
    int64_t block;
    size_t bytes;
    GgmlType vdt;
};

constexpr Expect expected[] = {
    {0, "f32", 1, 4, GgmlType::F32},        {1, "f16", 1, 2, GgmlType::F32},
    {2, "q4_0", 32, 18, GgmlType::Q8_0},    {3, "q4_1", 32, 20, GgmlType::Q8_1},
    {6, "q5_0", 32, 22, GgmlType::Q8_0},    {7, "q5_1", 32, 24, GgmlType::Q8_1},
    {8, "q8_0", 32, 34, GgmlType::Q8_0},    {9, "q8_1", 32, 36, GgmlType::Q8_1},
    {10, "q2_K", 256, 84, GgmlType::Q8_K},  {11, "q3_K", 256, 110, GgmlType::Q8_K},
    {12, "q4_K", 256, 144, GgmlType::Q8_K}, {13, "q5_K", 256, 176, GgmlType::Q8_K},
    {14, "q6_K", 256, 210, GgmlType::Q8_K}, {15, "q8_K", 256, 292, GgmlType::Q8_K},
    {30, "bf16", 1, 2, GgmlType::F32},      {39, "mxfp4", 32, 17, GgmlType::Q8_0},
};

TEST(Types, TableMatchesGgml) {
    for (const Expect& e : expected) {
        auto tt = find_type_traits(e.id);
        ASSERT_TRUE(tt.has_value()) << e.name;
        EXPECT_EQ(static_cast<uint32_t>(tt->type), e.id);
        EXPECT_EQ(tt->name, e.name);
        EXPECT_EQ(tt->block_size, e.block) << e.name;
        EXPECT_EQ(tt->type_size, e.bytes) << e.name;
        EXPECT_EQ(tt->is_quantized, e.block > 1) << e.name;
        EXPECT_EQ(tt->vec_dot_type, e.vdt) << e.name;
        EXPECT_EQ(type_name(tt->type), e.name);
        EXPECT_EQ(&type_traits(tt->type), &type_traits(tt->type));  // stable reference
    }
}

TEST(Types, UnknownIdsAreRejected) {
    for (uint32_t id : {4u, 5u, 16u, 17u, 29u, 31u, 38u, 40u, 1000u, 0xFFFFFFFFu}) {
        EXPECT_FALSE(find_type_traits(id).has_value()) << id;
    }
}

TEST(Types, RowSize) {
    EXPECT_EQ(row_size(GgmlType::F32, 576), 2304u);
    EXPECT_EQ(row_size(GgmlType::F16, 3), 6u);
    EXPECT_EQ(row_size(GgmlType::BF16, 640), 1280u);
    EXPECT_EQ(row_size(GgmlType::Q4_0, 64), 36u);
    EXPECT_EQ(row_size(GgmlType::Q4_1, 576), 18u * 20u);
    EXPECT_EQ(row_size(GgmlType::Q8_0, 640), 20u * 34u);  // gemma token_embd row: 680 bytes
    EXPECT_EQ(row_size(GgmlType::Q4_K, 2048), 8u * 144u);
    EXPECT_EQ(row_size(GgmlType::Q6_K, 256), 210u);
    EXPECT_EQ(row_size(GgmlType::MXFP4, 2880), 90u * 17u);  // gpt-oss-20b expert row
    EXPECT_EQ(row_size(GgmlType::Q8_K, 0), 0u);
}

TEST(TypesDeathTest, RowSizeOfPartialBlockAborts) {
    EXPECT_DEATH(row_size(GgmlType::Q4_K, 100), "internal check failed");
    EXPECT_DEATH(row_size(GgmlType::Q8_0, 33), "internal check failed");
}

}  // namespace
}  // namespace zinc::quant
