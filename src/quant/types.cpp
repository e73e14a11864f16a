// zinc/quant/types.cpp — the table of supported tensor element types and their block geometry.
//
// Block sizes and byte sizes follow ggml-common.h (QK_K = 256 for the K-quants); the byte counts
// are spelled out per field here so they can be checked against docs/quant.md.
#include "quant/types.h"

#include <array>

#include "util/check.h"

namespace zinc::quant {
namespace {

constexpr int64_t qk_k = 256;  // super-block size of the K-quants

// One row per supported type. vec_dot_type is the activation packing vec_dot() expects.
constexpr std::array<TypeTraits, 16> type_table = {{
    {GgmlType::F32, "f32", 1, 4, false, GgmlType::F32},
    {GgmlType::F16, "f16", 1, 2, false, GgmlType::F32},
    {GgmlType::Q4_0, "q4_0", 32, 2 + 16, true, GgmlType::Q8_0},          // d, qs[16]
    {GgmlType::Q4_1, "q4_1", 32, 2 + 2 + 16, true, GgmlType::Q8_1},      // d, m, qs[16]
    {GgmlType::Q5_0, "q5_0", 32, 2 + 4 + 16, true, GgmlType::Q8_0},      // d, qh[4], qs[16]
    {GgmlType::Q5_1, "q5_1", 32, 2 + 2 + 4 + 16, true, GgmlType::Q8_1},  // d, m, qh[4], qs[16]
    {GgmlType::Q8_0, "q8_0", 32, 2 + 32, true, GgmlType::Q8_0},          // d, qs[32]
    {GgmlType::Q8_1, "q8_1", 32, 2 + 2 + 32, true, GgmlType::Q8_1},      // d, s, qs[32]
    // scales[16], qs[64], d, dmin
    {GgmlType::Q2_K, "q2_K", qk_k, 16 + 64 + 2 + 2, true, GgmlType::Q8_K},
    // hmask[32], qs[64], scales[12], d
    {GgmlType::Q3_K, "q3_K", qk_k, 32 + 64 + 12 + 2, true, GgmlType::Q8_K},
    // d, dmin, scales[12], qs[128]
    {GgmlType::Q4_K, "q4_K", qk_k, 2 + 2 + 12 + 128, true, GgmlType::Q8_K},
    // d, dmin, scales[12], qh[32], qs[128]
    {GgmlType::Q5_K, "q5_K", qk_k, 2 + 2 + 12 + 32 + 128, true, GgmlType::Q8_K},
    // ql[128], qh[64], scales[16], d
    {GgmlType::Q6_K, "q6_K", qk_k, 128 + 64 + 16 + 2, true, GgmlType::Q8_K},
    // d (f32), qs[256], bsums[16] (int16)
    {GgmlType::Q8_K, "q8_K", qk_k, 4 + 256 + 32, true, GgmlType::Q8_K},
    {GgmlType::BF16, "bf16", 1, 2, false, GgmlType::F32},
    {GgmlType::MXFP4, "mxfp4", 32, 1 + 16, true, GgmlType::Q8_0},  // e (E8M0), qs[16]
}};

// Raw type id -> index into type_table (-1: not a supported type); type_traits() is called
// once per row by the dot products, so the lookup is a single load.
constexpr uint32_t max_type_id = 40;
constexpr std::array<int8_t, max_type_id> type_index = [] {
    std::array<int8_t, max_type_id> idx{};
    idx.fill(-1);
    for (size_t i = 0; i < type_table.size(); ++i) {
        idx[static_cast<uint32_t>(type_table[i].type)] = static_cast<int8_t>(i);
    }
    return idx;
}();

// Block sizes are powers of two (dispatch.cpp checks row lengths with a mask).
constexpr bool block_sizes_are_powers_of_two = [] {
    for (const TypeTraits& tt : type_table) {
        if ((tt.block_size & (tt.block_size - 1)) != 0) return false;
    }
    return true;
}();
static_assert(block_sizes_are_powers_of_two);

}  // namespace

std::optional<TypeTraits> find_type_traits(uint32_t raw_type) {
    if (raw_type >= max_type_id || type_index[raw_type] < 0) return std::nullopt;
    return type_table[static_cast<size_t>(type_index[raw_type])];
}

const TypeTraits& type_traits(GgmlType t) {
    const auto raw = static_cast<uint32_t>(t);
    ZINC_CHECK(raw < max_type_id && type_index[raw] >= 0);
    return type_table[static_cast<size_t>(type_index[raw])];
}

std::string_view type_name(GgmlType t) {
    return type_traits(t).name;
}

size_t row_size(GgmlType t, int64_t n) {
    const TypeTraits& tt = type_traits(t);
    ZINC_CHECK(n >= 0 && n % tt.block_size == 0);
    return static_cast<size_t>(n / tt.block_size) * tt.type_size;
}

}  // namespace zinc::quant
