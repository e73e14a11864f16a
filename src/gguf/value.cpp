// zinc/gguf/value.cpp — metadata value helpers: type names and numeric conversions of Value.
#include <limits>

#include "gguf/gguf.h"

namespace zinc::gguf {

std::string_view value_type_name(ValueType t) {
    switch (t) {
        case ValueType::UINT8: return "u8";
        case ValueType::INT8: return "i8";
        case ValueType::UINT16: return "u16";
        case ValueType::INT16: return "i16";
        case ValueType::UINT32: return "u32";
        case ValueType::INT32: return "i32";
        case ValueType::FLOAT32: return "f32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::UINT64: return "u64";
        case ValueType::INT64: return "i64";
        case ValueType::FLOAT64: return "f64";
    }
    return "invalid";
}

namespace {

bool is_unsigned(ValueType t) {
    return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
           t == ValueType::UINT64;
}

bool is_signed(ValueType t) {
    return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
           t == ValueType::INT64;
}

}  // namespace

bool Value::is_integer() const { return is_unsigned(type) || is_signed(type); }

std::optional<int64_t> Value::as_int() const {
    if (is_signed(type)) return i;
    if (is_unsigned(type) || type == ValueType::BOOL) {
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
        return static_cast<int64_t>(u);
    }
    return std::nullopt;
}

std::optional<double> Value::as_float() const {
    if (type == ValueType::FLOAT32 || type == ValueType::FLOAT64) return f;
    if (is_signed(type)) return static_cast<double>(i);
    if (is_unsigned(type)) return static_cast<double>(u);
    return std::nullopt;
}

}  // namespace zinc::gguf
