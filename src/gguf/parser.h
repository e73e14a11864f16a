// zinc/gguf/parser.h — internal: the validating GGUF parser that fills a File from its bytes.
// Every read is bounds-checked against the buffer; every fault becomes an Error of the form
// "<name>: byte <offset>: <what was found>; <what was expected>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "util/result.h"

namespace zinc::gguf {

class Parser {
public:
    /// `file` already has path_, base_ and size_ set; parse() fills everything else.
    explicit Parser(File& file) : f_(file), base_(file.base_), size_(file.size_) {}
    Result<void> parse();

private:
    Result<void> parse_header(uint64_t& n_tensors, uint64_t& n_kv);
    /// Error unless `count` items of at least `min_item_size` bytes fit in the bytes left.
    Result<void> check_count(uint64_t count, size_t min_item_size, size_t field_at,
                             std::string_view field, std::string_view items);
    Result<void> parse_metadata(uint64_t n_kv);
    Result<void> parse_value(ValueType t, Value& out, int depth);
    Result<void> parse_array(Value& out, int depth);
    Result<void> apply_alignment();
    Result<void> parse_tensor_infos(uint64_t n_tensors);
    Result<void> place_tensors();

    // Bounded little-endian reads at pos_; `field` names the item for error messages.
    /// Error unless n bytes are left; the message names `field` + `suffix` (joined only on error).
    Result<void> need(size_t n, std::string_view field, std::string_view suffix = {});
    Result<uint32_t> read_u32(std::string_view field);
    Result<uint64_t> read_u64(std::string_view field);
    Result<std::string_view> read_string(std::string_view field);

    size_t left() const { return size_ - pos_; }
    /// The current item ("metadata key #3 'general.name' element [5]") for messages.
    std::string context() const;
    Error fail(size_t offset, const std::string& what) const;

    File& f_;
    const uint8_t* base_;
    size_t size_;
    size_t pos_ = 0;

    // Error context: which section and item we are in, and the index path inside arrays.
    enum class Section { Header, Metadata, TensorInfo, TensorData } section_ = Section::Header;
    uint64_t item_ = 0;
    std::string_view item_name_;
    bool has_item_name_ = false;
    std::vector<uint64_t> elem_path_;

    std::vector<size_t> tensor_info_offsets_;  // byte offset of each tensor info's offset field
};

/// Quote a name read from the file for an error message: printable ASCII kept, everything else
/// escaped as \xNN, long names shortened.
std::string quote_for_message(std::string_view s);

}  // namespace zinc::gguf
