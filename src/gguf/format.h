// zinc/gguf/format.h — internal: GGUF on-disk constants and per-type encoded sizes, shared by the
// parser and the writer. Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"

namespace zinc::gguf::format {

inline constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kMinVersion = 2;
inline constexpr uint32_t kMaxVersion = 3;
inline constexpr size_t kHeaderSize = 4 + 4 + 8 + 8;  // magic, version, n_tensors, n_kv
inline constexpr size_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxValueType = static_cast<uint32_t>(ValueType::FLOAT64);
/// Arrays may nest; deeper nesting than this is rejected (real files use depth 1).
inline constexpr int kMaxArrayDepth = 8;
/// Tensors have 1..4 dimensions (GGML_MAX_DIMS).
inline constexpr uint32_t kMaxDims = 4;

/// Encoded size of a scalar value type; 0 for STRING and ARRAY (variable length).
constexpr size_t scalar_size(ValueType t) {
    switch (t) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
        case ValueType::UINT16: case ValueType::INT16: return 2;
        case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
        case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
        case ValueType::STRING: case ValueType::ARRAY: return 0;
    }
    return 0;
}

/// Smallest number of bytes one value of type t can occupy (used to reject absurd counts before
/// allocating): a string is at least its u64 length, an array its u32 type + u64 count.
constexpr size_t min_encoded_size(ValueType t) {
    if (t == ValueType::STRING) return 8;
    if (t == ValueType::ARRAY) return 4 + 8;
    return scalar_size(t);
}

/// Smallest metadata pair: key length + u32 type + 1-byte value. An empty key is encodable (and
/// refused by name when it is read), so it counts as 0 bytes here: the count check must not
/// preempt that more precise error.
inline constexpr size_t kMinKvSize = 8 + 0 + 4 + 1;
/// Smallest tensor info: name length + 1-byte name + u32 n_dims + one u64 dim + u32 type + u64
/// offset.
inline constexpr size_t kMinTensorInfoSize = 8 + 1 + 4 + 8 + 4 + 8;

constexpr bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace zinc::gguf::format
