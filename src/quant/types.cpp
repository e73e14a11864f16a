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
constexpr std::array<TypeTraits, 15> type_table = {{
    {GgmlType::F32, "f32", 1, 4, false, GgmlType::F32},
    {GgmlType::F16, "f16", 1, 2, false, GgmlType::F32},
    {GgmlType::Q4_0, "q4_0", 32, 2 + 16, true, GgmlType::Q8_0},           // d, qs[16]
    {GgmlType::Q4_1, "q4_1", 32, 2 + 2 + 16, true, GgmlType::Q8_1},       // d, m, qs[16]
    {GgmlType::Q5_0, "q5_0", 32, 2 + 4 + 16, true, GgmlType::Q8_0},       // d, qh[4], qs[16]
    {GgmlType::Q5_1, "q5_1", 32, 2 + 2 + 4 + 16, true, GgmlType::Q8_1},   // d, m, qh[4], qs[16]
    {GgmlType::Q8_0, "q8_0", 32, 2 + 32, true, GgmlType::Q8_0},           // d, qs[32]
    {GgmlType::Q8_1, "q8_1", 32, 2 + 2 + 32, true, GgmlType::Q8_1},       // d, s, qs[32]
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
}};

}  // namespace

std::optional<TypeTraits> find_type_traits(uint32_t raw_type) {
    for (const TypeTraits& tt : type_table) {
        if (static_cast<uint32_t>(tt.type) == raw_type) return tt;
    }
    return std::nullopt;
}

const TypeTraits& type_traits(GgmlType t) {
    for (const TypeTraits& tt : type_table) {
        if (tt.type == t) return tt;
    }
    ZINC_CHECK(false && "unknown GgmlType");
    std::abort();
}

std::string_view type_name(GgmlType t) { return type_traits(t).name; }

size_t row_size(GgmlType t, int64_t n) {
    const TypeTraits& tt = type_traits(t);
    ZINC_CHECK(n >= 0 && n % tt.block_size == 0);
    return static_cast<size_t>(n / tt.block_size) * tt.type_size;
}

}  // namespace zinc::quant
