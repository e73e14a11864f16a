// zinc/gguf/gguf.h — read-only, validated view of a GGUF file (versions 2 and 3), memory-mapped.
//
// Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
//   header: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv   (v1 used u32 counts: rejected)
//   n_kv metadata pairs: gguf string key, u32 value type, value
//   n_tensors infos: gguf string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
//   padding to general.alignment (default 32), then the tensor data section.
// Strings are u64 length + bytes (no NUL). Arrays are u32 element type + u64 count + elements
// (arrays of arrays allowed). All integers little-endian.
//
// Every malformed input becomes an Error naming the file, the byte offset and what was expected;
// open() never aborts or reads past the mapping. Strings in metadata are string_views into the
// mapping, so a File must outlive every Value and TensorInfo taken from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "quant/types.h"
#include "util/result.h"

namespace zinc::gguf {

enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

std::string_view value_type_name(ValueType t);

/// One metadata value. Scalars are widened (ints to i64/u64, floats to f64); the original type is
/// kept in `type`. Arrays hold their element type and elements (possibly nested arrays).
struct Value {
    ValueType type = ValueType::UINT8;
    ValueType elem_type = ValueType::UINT8;  // ARRAY
    uint64_t u = 0;        // UINT8/16/32/64, BOOL
    int64_t i = 0;         // INT8/16/32/64
    double f = 0;          // FLOAT32/64
    std::string_view str;  // STRING (points into the mapping)
    std::vector<Value> arr;                  // ARRAY

    bool is_integer() const;
    /// Integer value of any integer type (or BOOL) as i64; nullopt for other types or overflow.
    std::optional<int64_t> as_int() const;
    /// Numeric value of any integer or float type as double; nullopt otherwise.
    std::optional<double> as_float() const;
};

struct TensorInfo {
    std::string_view name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension, as in ggml
    quant::GgmlType type = quant::GgmlType::F32;
    uint64_t offset = 0;           // relative to the data section
    const uint8_t* data = nullptr; // into the mapping
    size_t n_bytes = 0;
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class File {
public:
    /// Map and validate `path`. Errors: missing/unreadable/directory, and every structural fault
    /// listed in the header comment, each naming path, byte offset and expectation.
    static Result<std::unique_ptr<File>> open(const std::string& path);
    /// Validate an in-memory buffer (used by the fuzzer and tests). `name` appears in errors.
    /// The buffer must outlive the File.
    static Result<std::unique_ptr<File>> from_buffer(const uint8_t* data, size_t size,
                                                     const std::string& name);
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    size_t file_size() const { return size_; }
    size_t alignment() const { return alignment_; }
    size_t data_offset() const { return data_offset_; }  // start of the tensor data section

    /// Metadata in file order.
    const std::vector<std::pair<std::string_view, Value>>& metadata() const;
    const Value* find(std::string_view key) const;

    /// Typed getters: nullopt when the key is absent; Error when present with the wrong type.
    Result<std::optional<std::string_view>> get_string(std::string_view key) const;
    Result<std::optional<int64_t>> get_int(std::string_view key) const;
    Result<std::optional<double>> get_float(std::string_view key) const;
    Result<std::optional<bool>> get_bool(std::string_view key) const;
    /// Array of the given element type (any integer type accepted for INT64 requests).
    Result<const Value*> get_array(std::string_view key) const;  // nullptr when absent

    /// Free the parsed metadata once the config and tokenizer have copied what they need; the
    /// tensors stay valid. Large vocabularies are costly as Values (Gemma 3's 262k tokens, scores
    /// and types take ~55 MiB), and the File usually lives as long as the weights. Calling
    /// metadata(), find() or a getter afterwards is a bug (ZINC_CHECK).
    void release_metadata();
    bool metadata_released() const { return released_; }

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;

private:
    File() = default;
    friend class Parser;
    std::string path_;
    uint32_t version_ = 0;
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;  // whether base_ must be munmap'ed
    size_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::vector<std::pair<std::string_view, Value>> kv_;
    std::unordered_map<std::string_view, size_t> kv_index_;
    bool released_ = false;
    std::vector<size_t> kv_offsets_;  // byte offset of each metadata pair (for getter errors)
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace zinc::gguf
