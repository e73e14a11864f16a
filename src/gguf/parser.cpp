// zinc/gguf/parser.cpp — the validating GGUF parser: header, metadata (every value type, nested
// arrays), general.alignment, tensor infos, and placement of tensor data inside the buffer.
//
// Nothing here trusts a length or count from the file: each is checked against the bytes left
// before it is used to read or allocate, and each fault is reported with the byte offset where
// the offending field starts.
#include "gguf/parser.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>

#include "gguf/format.h"
#include "util/utf8.h"

namespace zinc::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

/// Hard cap on the elements of one metadata array. Real vocabularies have ~260k entries; a
/// larger array would cost more memory as Values than the reader is willing to spend.
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 26;

std::string str(uint64_t v) { return std::to_string(v); }

std::string type_list() {
    std::string s;
    for (uint32_t t = 0; t < 64; ++t) {
        if (auto tr = quant::find_type_traits(t)) {
            if (!s.empty()) s += ", ";
            s += std::string(tr->name) + " (" + str(t) + ")";
        }
    }
    return s;
}

// A key or tensor name must be UTF-8 without control characters (the spec asks for ASCII
// lower_snake_case; we accept any UTF-8 but never bytes a terminal or a JSON writer would choke
// on). Returns the offset of the first bad byte in `s` and what is wrong there, or npos.
size_t bad_name_byte(std::string_view s, std::string& why) {
    for (size_t i = 0; i < s.size();) {
        char32_t c = 0;
        const size_t n = utf8::sequence_at(s, i, &c);
        if (n == 0) {
            why = "is not valid UTF-8";
            return i;
        }
        if (utf8::is_control(c)) {
            why = "contains a control character";
            return i;
        }
        i += n;
    }
    return std::string_view::npos;
}

}  // namespace

std::string quote_for_message(std::string_view s) {
    constexpr size_t kMax = 80;
    std::string out = "'";
    for (size_t i = 0; i < s.size() && i < kMax; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
            out += static_cast<char>(c);
        } else {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    if (s.size() > kMax) out += "...";
    out += "'";
    return out;
}

Error Parser::fail(size_t offset, const std::string& what) const {
    return make_error(f_.path_ + ": byte " + str(offset) + ": " + what);
}

std::string Parser::context() const {
    std::string c;
    switch (section_) {
        case Section::Header: return "header";
        case Section::Metadata: c = "metadata key #" + str(item_); break;
        case Section::TensorInfo: c = "tensor info #" + str(item_); break;
        case Section::TensorData: c = "tensor #" + str(item_); break;
    }
    if (has_item_name_) c += " " + quote_for_message(item_name_);
    if (!elem_path_.empty()) {
        c += " element ";
        for (uint64_t e : elem_path_) c += "[" + str(e) + "]";
    }
    return c;
}

Result<void> Parser::need(size_t n, std::string_view field, std::string_view suffix) {
    if (left() < n) {
        return fail(pos_, "truncated: " + context() + " " + std::string(field) + std::string(suffix) +
                              " needs " + str(n) + " bytes but only " + str(left()) +
                              " are left in the file (" + str(size_) + " bytes)");
    }
    return {};
}

Result<uint32_t> Parser::read_u32(std::string_view field) {
    ZINC_TRY(need(4, field));
    uint32_t v;
    std::memcpy(&v, base_ + pos_, 4);
    pos_ += 4;
    return v;
}

Result<uint64_t> Parser::read_u64(std::string_view field) {
    ZINC_TRY(need(8, field));
    uint64_t v;
    std::memcpy(&v, base_ + pos_, 8);
    pos_ += 8;
    return v;
}

Result<std::string_view> Parser::read_string(std::string_view field) {
    const size_t at = pos_;
    ZINC_TRY(need(8, field, " length"));
    auto len = read_u64(field);
    if (!len) return len.error();
    if (*len > left()) {
        return fail(at, context() + " " + std::string(field) + " length " + str(*len) +
                            " exceeds the " + str(left()) + " bytes left in the file");
    }
    std::string_view s(reinterpret_cast<const char*>(base_ + pos_), *len);
    pos_ += *len;
    return s;
}

Result<void> Parser::parse() {
    uint64_t n_tensors = 0, n_kv = 0;
    ZINC_TRY(parse_header(n_tensors, n_kv));
    ZINC_TRY(parse_metadata(n_kv));
    ZINC_TRY(apply_alignment());
    ZINC_TRY(parse_tensor_infos(n_tensors));
    ZINC_TRY(place_tensors());
    return {};
}

Result<void> Parser::parse_header(uint64_t& n_tensors, uint64_t& n_kv) {
    section_ = Section::Header;
    if (size_ < format::kHeaderSize) {
        // Still say what is wrong with the magic if we can see it: a text file is not "truncated".
        if (size_ >= 4 && std::memcmp(base_, format::kMagic, 4) != 0) {
            return fail(0, "bad magic " + quote_for_message({reinterpret_cast<const char*>(base_), 4}) +
                               "; expected 'GGUF'");
        }
        return fail(0, "truncated: file is " + str(size_) + " bytes; a GGUF header needs " +
                           str(format::kHeaderSize));
    }
    if (std::memcmp(base_, format::kMagic, 4) != 0) {
        return fail(0, "bad magic " + quote_for_message({reinterpret_cast<const char*>(base_), 4}) +
                           "; expected 'GGUF'");
    }
    pos_ = 4;
    auto version = read_u32("version");
    if (!version) return version.error();
    if (*version < format::kMinVersion || *version > format::kMaxVersion) {
        const uint32_t swapped = __builtin_bswap32(*version);
        std::string what = "unsupported GGUF version " + str(*version);
        if (swapped >= format::kMinVersion && swapped <= format::kMaxVersion) {
            what += " (a big-endian v" + str(swapped) + " file; only little-endian is supported)";
        } else if (*version == 1) {
            what += " (v1 used 32-bit counts and is obsolete)";
        }
        return fail(4, what + "; expected 2 or 3");
    }
    f_.version_ = *version;
    auto nt = read_u64("tensor count");
    if (!nt) return nt.error();
    auto nk = read_u64("metadata count");
    if (!nk) return nk.error();
    n_tensors = *nt;
    n_kv = *nk;
    // Reject a metadata count that cannot fit before allocating anything for it. The tensor count
    // is checked the same way once the metadata has been read (parse_tensor_infos).
    return check_count(n_kv, format::kMinKvSize, 16, "metadata count", "metadata pairs");
}

Result<void> Parser::check_count(uint64_t count, size_t min_item_size, size_t field_at,
                                 std::string_view field, std::string_view items) {
    if (count <= left() / min_item_size) return {};
    const std::string need = count > std::numeric_limits<uint64_t>::max() / min_item_size
                                 ? std::string("2^64")
                                 : str(count * min_item_size);
    return fail(field_at, std::string(field) + " " + str(count) + " needs at least " + need +
                              " bytes of " + std::string(items) + " but only " + str(left()) +
                              " bytes are left at byte " + str(pos_) +
                              "; expected a count that fits the file (truncated or corrupt?)");
}

Result<void> Parser::parse_metadata(uint64_t n_kv) {
    section_ = Section::Metadata;
    f_.kv_.reserve(n_kv);
    f_.kv_offsets_.reserve(n_kv);
    f_.kv_index_.reserve(n_kv);
    for (uint64_t k = 0; k < n_kv; ++k) {
        item_ = k;
        has_item_name_ = false;
        const size_t kv_at = pos_;
        auto key = read_string("key");
        if (!key) return key.error();
        if (key->empty())
            return fail(kv_at, context() + " has an empty key; expected a non-empty name");
        std::string why;
        if (const size_t bad = bad_name_byte(*key, why); bad != std::string_view::npos) {
            return fail(kv_at + 8 + bad, context() + " key " + quote_for_message(*key) + " " + why +
                                             " (byte " + str(bad) + " of the key is " +
                                             quote_for_message(key->substr(bad, 1)) +
                                             "); expected a UTF-8 name without control characters");
        }
        if (key->size() > 65535) {
            return fail(kv_at, context() + " key length " + str(key->size()) +
                                   " exceeds the format's limit of 65535 bytes");
        }
        item_name_ = *key;
        has_item_name_ = true;
        if (f_.kv_index_.count(*key)) {
            return fail(kv_at, context() + " duplicates key #" + str(f_.kv_index_[*key]) +
                                   "; expected unique keys");
        }
        const size_t type_at = pos_;
        auto raw_type = read_u32("value type");
        if (!raw_type) return raw_type.error();
        if (*raw_type > format::kMaxValueType) {
            return fail(type_at, context() + " has invalid value type " + str(*raw_type) +
                                     "; expected 0..12");
        }
        Value v;
        ZINC_TRY(parse_value(static_cast<ValueType>(*raw_type), v, 0));
        f_.kv_index_.emplace(*key, f_.kv_.size());
        f_.kv_offsets_.push_back(kv_at);
        f_.kv_.emplace_back(*key, std::move(v));
    }
    has_item_name_ = false;
    return {};
}

Result<void> Parser::parse_value(ValueType t, Value& out, int depth) {
    out.type = t;
    switch (t) {
        case ValueType::STRING: {
            auto s = read_string("string");
            if (!s) return s.error();
            out.str = *s;
            return {};
        }
        case ValueType::ARRAY: return parse_array(out, depth + 1);
        default: break;
    }
    const size_t n = format::scalar_size(t);
    ZINC_TRY(need(n, value_type_name(t), " value"));
    const uint8_t* p = base_ + pos_;
    switch (t) {
        case ValueType::UINT8: out.u = p[0]; break;
        case ValueType::INT8: out.i = static_cast<int8_t>(p[0]); break;
        case ValueType::BOOL:
            if (p[0] > 1) {
                return fail(pos_, context() + " bool value " + str(p[0]) + "; expected 0 or 1");
            }
            out.u = p[0];
            break;
        case ValueType::UINT16: { uint16_t v; std::memcpy(&v, p, 2); out.u = v; break; }
        case ValueType::INT16: { int16_t v; std::memcpy(&v, p, 2); out.i = v; break; }
        case ValueType::UINT32: { uint32_t v; std::memcpy(&v, p, 4); out.u = v; break; }
        case ValueType::INT32: { int32_t v; std::memcpy(&v, p, 4); out.i = v; break; }
        case ValueType::UINT64: { uint64_t v; std::memcpy(&v, p, 8); out.u = v; break; }
        case ValueType::INT64: { int64_t v; std::memcpy(&v, p, 8); out.i = v; break; }
        case ValueType::FLOAT32: { float v; std::memcpy(&v, p, 4); out.f = v; break; }
        case ValueType::FLOAT64: { double v; std::memcpy(&v, p, 8); out.f = v; break; }
        case ValueType::STRING:
        case ValueType::ARRAY: break;  // handled above
    }
    pos_ += n;
    return {};
}

Result<void> Parser::parse_array(Value& out, int depth) {
    if (depth > format::kMaxArrayDepth) {
        return fail(pos_, context() + " nests arrays " + str(depth) + " deep; expected at most " +
                              str(format::kMaxArrayDepth));
    }
    const size_t type_at = pos_;
    auto raw_type = read_u32("array element type");
    if (!raw_type) return raw_type.error();
    if (*raw_type > format::kMaxValueType) {
        return fail(type_at, context() + " has invalid array element type " + str(*raw_type) +
                                 "; expected 0..12");
    }
    const auto elem_type = static_cast<ValueType>(*raw_type);
    const size_t count_at = pos_;
    auto count = read_u64("array length");
    if (!count) return count.error();
    const size_t min_size = format::min_encoded_size(elem_type);
    if (*count > left() / min_size) {
        return fail(count_at, context() + " array length " + str(*count) + " of " +
                                  std::string(value_type_name(elem_type)) + " needs at least " +
                                  (*count > std::numeric_limits<uint64_t>::max() / min_size
                                       ? std::string("2^64")
                                       : str(*count * min_size)) +
                                  " bytes but only " + str(left()) + " are left in the file");
    }
    if (*count > kMaxArrayElements) {
        return fail(count_at, context() + " array length " + str(*count) +
                                  " exceeds the reader's limit of " + str(kMaxArrayElements) +
                                  " elements");
    }
    out.elem_type = elem_type;
    out.arr.resize(*count);
    elem_path_.push_back(0);
    for (uint64_t e = 0; e < *count; ++e) {
        elem_path_.back() = e;
        ZINC_TRY(parse_value(elem_type, out.arr[e], depth));
    }
    elem_path_.pop_back();
    return {};
}

Result<void> Parser::apply_alignment() {
    auto it = f_.kv_index_.find("general.alignment");
    if (it == f_.kv_index_.end()) return {};
    const Value& v = f_.kv_[it->second].second;
    const size_t at = f_.kv_offsets_[it->second];
    if (v.type != ValueType::UINT32) {
        return fail(at, "general.alignment has type " + std::string(value_type_name(v.type)) +
                            "; expected u32");
    }
    if (!format::is_power_of_two(v.u)) {
        return fail(at, "general.alignment is " + str(v.u) + "; expected a power of two");
    }
    f_.alignment_ = v.u;
    return {};
}

Result<void> Parser::parse_tensor_infos(uint64_t n_tensors) {
    ZINC_TRY(check_count(n_tensors, format::kMinTensorInfoSize, 8, "tensor count", "tensor infos"));
    section_ = Section::TensorInfo;
    f_.tensors_.reserve(n_tensors);
    f_.tensor_index_.reserve(n_tensors);
    tensor_info_offsets_.reserve(n_tensors);
    for (uint64_t t = 0; t < n_tensors; ++t) {
        item_ = t;
        has_item_name_ = false;
        const size_t info_at = pos_;
        auto name = read_string("name");
        if (!name) return name.error();
        if (name->empty())
            return fail(info_at, context() + " has an empty name; expected a non-empty name");
        std::string why;
        if (const size_t bad = bad_name_byte(*name, why); bad != std::string_view::npos) {
            return fail(info_at + 8 + bad,
                        context() + " name " + quote_for_message(*name) + " " + why + " (byte " +
                            str(bad) + " of the name is " +
                            quote_for_message(name->substr(bad, 1)) +
                            "); expected a UTF-8 name without control characters");
        }
        item_name_ = *name;
        has_item_name_ = true;
        if (f_.tensor_index_.count(*name)) {
            return fail(info_at, context() + " duplicates the name of tensor #" +
                                     str(f_.tensor_index_[*name]) + "; expected unique names");
        }
        TensorInfo ti;
        ti.name = *name;
        const size_t dims_at = pos_;
        auto n_dims = read_u32("n_dims");
        if (!n_dims) return n_dims.error();
        if (*n_dims == 0 || *n_dims > format::kMaxDims) {
            return fail(dims_at, context() + " has n_dims " + str(*n_dims) + "; expected 1 to " +
                                     str(format::kMaxDims));
        }
        ti.n_dims = *n_dims;
        int64_t n_elements = 1;
        for (uint32_t d = 0; d < *n_dims; ++d) {
            const size_t ne_at = pos_;
            ZINC_TRY(need(8, "ne[" + str(d) + "]"));
            auto ne = read_u64("ne");
            if (!ne) return ne.error();
            if (*ne == 0 || *ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                return fail(ne_at, context() + " has ne[" + str(d) + "] = " +
                                       (*ne == 0 ? std::string("0")
                                                 : std::to_string(static_cast<int64_t>(*ne))) +
                                       "; expected a dimension >= 1");
            }
            ti.ne[d] = static_cast<int64_t>(*ne);
            if (__builtin_mul_overflow(n_elements, ti.ne[d], &n_elements)) {
                return fail(ne_at, context() + " element count overflows 64 bits at ne[" + str(d) +
                                       "] = " + str(*ne) + "; expected a product below 2^63");
            }
        }
        const size_t type_at = pos_;
        auto raw_type = read_u32("type");
        if (!raw_type) return raw_type.error();
        auto traits = quant::find_type_traits(*raw_type);
        if (!traits) {
            return fail(type_at, context() + " has unknown or unsupported ggml type " +
                                     str(*raw_type) + "; expected one of " + type_list());
        }
        ti.type = traits->type;
        if (ti.ne[0] % traits->block_size != 0) {
            return fail(dims_at + 4, context() + " row length ne[0] = " + str(ti.ne[0]) +
                                         " is not a multiple of the " + std::string(traits->name) +
                                         " block size " + str(traits->block_size));
        }
        // n_bytes = (ne0 / block) * type_size * (ne1 * ne2 * ne3), overflow-checked.
        uint64_t row_bytes = 0, n_bytes = 0;
        const uint64_t rows = static_cast<uint64_t>(n_elements / ti.ne[0]);
        if (__builtin_mul_overflow(static_cast<uint64_t>(ti.ne[0] / traits->block_size),
                                   static_cast<uint64_t>(traits->type_size), &row_bytes) ||
            __builtin_mul_overflow(row_bytes, rows, &n_bytes) ||
            n_bytes > std::numeric_limits<size_t>::max()) {
            return fail(dims_at, context() + " byte size overflows 64 bits; expected a tensor that fits in memory");
        }
        ti.n_bytes = static_cast<size_t>(n_bytes);
        const size_t off_at = pos_;
        auto offset = read_u64("offset");
        if (!offset) return offset.error();
        if (*offset % f_.alignment_ != 0) {
            return fail(off_at, context() + " data offset " + str(*offset) +
                                    " is misaligned; expected a multiple of the alignment " +
                                    str(f_.alignment_));
        }
        ti.offset = *offset;
        f_.tensor_index_.emplace(*name, f_.tensors_.size());
        f_.tensors_.push_back(ti);
        tensor_info_offsets_.push_back(off_at);
    }
    has_item_name_ = false;
    return {};
}

Result<void> Parser::place_tensors() {
    section_ = Section::TensorData;
    const size_t infos_end = pos_;
    const size_t a = f_.alignment_;
    // Align up without overflow: infos_end <= size_ and a is a power of two.
    size_t data_offset = infos_end;
    if (infos_end % a != 0) {
        const size_t pad = a - infos_end % a;
        data_offset = pad > std::numeric_limits<size_t>::max() - infos_end
                          ? std::numeric_limits<size_t>::max()
                          : infos_end + pad;
    }
    if (f_.tensors_.empty()) {
        // No data section is needed; a file may end right after its metadata.
        f_.data_offset_ = std::min(data_offset, size_);
        return {};
    }
    if (data_offset > size_) {
        return fail(infos_end, "truncated: the tensor data section starts at byte " +
                                   str(data_offset) + " (aligned to " + str(a) +
                                   ") but the file is " + str(size_) + " bytes");
    }
    f_.data_offset_ = data_offset;
    const size_t data_size = size_ - data_offset;
    for (size_t t = 0; t < f_.tensors_.size(); ++t) {
        TensorInfo& ti = f_.tensors_[t];
        item_ = t;
        item_name_ = ti.name;
        has_item_name_ = true;
        if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset) {
            std::string where = "data offset " + str(ti.offset);
            if (ti.offset <= std::numeric_limits<uint64_t>::max() - data_offset) {
                where = "file byte " + str(data_offset + ti.offset) + " (" + where + ")";
            }
            return fail(tensor_info_offsets_[t], "truncated: " + context() + " data needs " +
                                                     str(ti.n_bytes) + " bytes at " + where +
                                                     " but the file is " + str(size_) + " bytes");
        }
        ti.data = base_ + data_offset + ti.offset;
    }
    // Overlap: sort by offset and compare neighbours.
    std::vector<size_t> order(f_.tensors_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return f_.tensors_[x].offset < f_.tensors_[y].offset;
    });
    for (size_t k = 1; k < order.size(); ++k) {
        const TensorInfo& prev = f_.tensors_[order[k - 1]];
        const TensorInfo& cur = f_.tensors_[order[k]];
        if (cur.offset < prev.offset + prev.n_bytes) {
            item_ = order[k];
            item_name_ = cur.name;
            return fail(tensor_info_offsets_[order[k]],
                        context() + " data [" + str(cur.offset) + ", " +
                            str(cur.offset + cur.n_bytes) + ") overlaps tensor #" +
                            str(order[k - 1]) + " " + quote_for_message(prev.name) + " [" +
                            str(prev.offset) + ", " + str(prev.offset + prev.n_bytes) +
                            "); expected disjoint tensors");
        }
    }
    has_item_name_ = false;
    return {};
}

}  // namespace zinc::gguf
