// zinc/gguf/writer.h — build a GGUF (v3) file in memory: for tests, synthetic models and fuzz
// seeds. Writes exactly the layout gguf.h describes; tensor data is aligned to `alignment`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "util/result.h"

namespace zinc::gguf {

/// An owned metadata value for writing (mirrors Value but owns strings).
struct OwnedValue {
    ValueType type = ValueType::UINT32;
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    std::string str;
    ValueType elem_type = ValueType::UINT32;
    std::vector<OwnedValue> arr;

    static OwnedValue u32(uint32_t v);
    static OwnedValue i32(int32_t v);
    static OwnedValue u64(uint64_t v);
    static OwnedValue f32(float v);
    static OwnedValue boolean(bool v);
    static OwnedValue string(std::string v);
    static OwnedValue array(ValueType elem_type, std::vector<OwnedValue> items);
    static OwnedValue string_array(const std::vector<std::string>& items);
    static OwnedValue f32_array(const std::vector<float>& items);
    static OwnedValue i32_array(const std::vector<int32_t>& items);
};

class Writer {
public:
    explicit Writer(uint32_t version = 3, uint32_t alignment = 32);
    void add_kv(std::string key, OwnedValue v);
    /// ne[0] is the row length. `data` must hold exactly row_size(type, ne[0]) * rows bytes.
    void add_tensor(std::string name, std::vector<int64_t> ne, quant::GgmlType type,
                    std::vector<uint8_t> data);
    /// Streaming: a tensor of row_size(type, ne[0]) * rows bytes that the caller writes itself,
    /// after serialize_header(), in add order, each followed by padding_after(its size) zeros.
    /// A writer with such tensors cannot serialize() or write_file().
    void add_tensor_info(std::string name, std::vector<int64_t> ne, quant::GgmlType type);
    /// Everything before the first tensor's data (magic, metadata, tensor infos, padding).
    std::vector<uint8_t> serialize_header() const;
    /// Zero bytes that follow a tensor of n bytes so the next one starts aligned.
    size_t padding_after(uint64_t n) const { return (alignment_ - n % alignment_) % alignment_; }
    std::vector<uint8_t> serialize() const;
    Result<void> write_file(const std::string& path) const;

private:
    uint32_t version_;
    uint32_t alignment_;
    std::vector<std::pair<std::string, OwnedValue>> kv_;
    struct T { std::string name; std::vector<int64_t> ne; quant::GgmlType type; std::vector<uint8_t> data; uint64_t n_bytes = 0; bool deferred = false; };
    std::vector<T> tensors_;
};

}  // namespace zinc::gguf
