// zinc/quant/types.h — the tensor element types a GGUF file can hold, and their block geometry.
//
// Numbering follows ggml's `enum ggml_type` (the values stored in GGUF tensor infos); the block
// layouts are those of ggml-common.h / the GGUF spec. A row of n elements of a quantized type is
// n / block_size blocks of type_size bytes each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace zinc::quant {

enum class GgmlType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    BF16 = 30,
    MXFP4 = 39,  // OCP microscaling FP4: E8M0 scale + 32 x E2M1 (gpt-oss experts)
};

struct TypeTraits {
    GgmlType type;
    std::string_view name;  // "q4_k" style, as llama.cpp prints it
    int64_t block_size;     // elements per block (1 for F32/F16/BF16)
    size_t type_size;       // bytes per block
    bool is_quantized;
    GgmlType vec_dot_type;  // the activation packing vec_dot() expects for this weight type
};

/// Traits for a supported type; nullopt for a value that is not one of the enum's types
/// (used by the GGUF reader to reject unknown tensor types with a clear error).
std::optional<TypeTraits> find_type_traits(uint32_t raw_type);

/// Traits for a known type (ZINC_CHECKs that it is known).
const TypeTraits& type_traits(GgmlType t);

std::string_view type_name(GgmlType t);

/// Bytes for a row of n elements; n must be a multiple of block_size (ZINC_CHECK).
size_t row_size(GgmlType t, int64_t n);

}  // namespace zinc::quant
