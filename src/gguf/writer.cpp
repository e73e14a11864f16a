// zinc/gguf/writer.cpp — serialize metadata and tensors into the GGUF layout described in gguf.h:
// header, metadata pairs, tensor infos, zero padding to the alignment, then each tensor's data
// at an aligned offset. Used by tests, fuzz seeds and synthetic models.
#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf/format.h"
#include "util/check.h"

namespace zinc::gguf {

OwnedValue OwnedValue::u32(uint32_t v) { OwnedValue o; o.type = ValueType::UINT32; o.u = v; return o; }
OwnedValue OwnedValue::i32(int32_t v) { OwnedValue o; o.type = ValueType::INT32; o.i = v; return o; }
OwnedValue OwnedValue::u64(uint64_t v) { OwnedValue o; o.type = ValueType::UINT64; o.u = v; return o; }
OwnedValue OwnedValue::f32(float v) { OwnedValue o; o.type = ValueType::FLOAT32; o.f = v; return o; }
OwnedValue OwnedValue::boolean(bool v) { OwnedValue o; o.type = ValueType::BOOL; o.u = v ? 1 : 0; return o; }

OwnedValue OwnedValue::string(std::string v) {
    OwnedValue o;
    o.type = ValueType::STRING;
    o.str = std::move(v);
    return o;
}

OwnedValue OwnedValue::array(ValueType elem_type, std::vector<OwnedValue> items) {
    OwnedValue o;
    o.type = ValueType::ARRAY;
    o.elem_type = elem_type;
    o.arr = std::move(items);
    return o;
}

OwnedValue OwnedValue::string_array(const std::vector<std::string>& items) {
    std::vector<OwnedValue> v;
    v.reserve(items.size());
    for (const auto& s : items) v.push_back(string(s));
    return array(ValueType::STRING, std::move(v));
}

OwnedValue OwnedValue::f32_array(const std::vector<float>& items) {
    std::vector<OwnedValue> v;
    v.reserve(items.size());
    for (float x : items) v.push_back(f32(x));
    return array(ValueType::FLOAT32, std::move(v));
}

OwnedValue OwnedValue::i32_array(const std::vector<int32_t>& items) {
    std::vector<OwnedValue> v;
    v.reserve(items.size());
    for (int32_t x : items) v.push_back(i32(x));
    return array(ValueType::INT32, std::move(v));
}

Writer::Writer(uint32_t version, uint32_t alignment) : version_(version), alignment_(alignment) {
    ZINC_CHECK(format::is_power_of_two(alignment));
}

void Writer::add_kv(std::string key, OwnedValue v) { kv_.emplace_back(std::move(key), std::move(v)); }

void Writer::add_tensor(std::string name, std::vector<int64_t> ne, quant::GgmlType type,
                        std::vector<uint8_t> data) {
    ZINC_CHECK(!ne.empty() && ne.size() <= format::kMaxDims);
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    ZINC_CHECK(data.size() == quant::row_size(type, ne[0]) * static_cast<size_t>(rows));
    const uint64_t n = data.size();
    tensors_.push_back(T{std::move(name), std::move(ne), type, std::move(data), n, false});
}

void Writer::add_tensor_info(std::string name, std::vector<int64_t> ne, quant::GgmlType type) {
    ZINC_CHECK(!ne.empty() && ne.size() <= format::kMaxDims);
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    const uint64_t n = quant::row_size(type, ne[0]) * static_cast<uint64_t>(rows);
    tensors_.push_back(T{std::move(name), std::move(ne), type, {}, n, true});
}

namespace {

class Out {
public:
    void bytes(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        buf.insert(buf.end(), b, b + n);
    }
    template <class I>
    void num(I v) { bytes(&v, sizeof v); }
    void string(std::string_view s) {
        num<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
    void pad_to(size_t alignment) {
        while (buf.size() % alignment != 0) buf.push_back(0);
    }
    std::vector<uint8_t> buf;
};

void write_value(Out& o, ValueType t, const OwnedValue& v) {
    switch (t) {
        case ValueType::UINT8: o.num<uint8_t>(static_cast<uint8_t>(v.u)); break;
        case ValueType::INT8: o.num<int8_t>(static_cast<int8_t>(v.i)); break;
        case ValueType::BOOL: o.num<uint8_t>(v.u ? 1 : 0); break;
        case ValueType::UINT16: o.num<uint16_t>(static_cast<uint16_t>(v.u)); break;
        case ValueType::INT16: o.num<int16_t>(static_cast<int16_t>(v.i)); break;
        case ValueType::UINT32: o.num<uint32_t>(static_cast<uint32_t>(v.u)); break;
        case ValueType::INT32: o.num<int32_t>(static_cast<int32_t>(v.i)); break;
        case ValueType::UINT64: o.num<uint64_t>(v.u); break;
        case ValueType::INT64: o.num<int64_t>(v.i); break;
        case ValueType::FLOAT32: o.num<float>(static_cast<float>(v.f)); break;
        case ValueType::FLOAT64: o.num<double>(v.f); break;
        case ValueType::STRING: o.string(v.str); break;
        case ValueType::ARRAY:
            o.num<uint32_t>(static_cast<uint32_t>(v.elem_type));
            o.num<uint64_t>(v.arr.size());
            for (const OwnedValue& e : v.arr) write_value(o, v.elem_type, e);
            break;
    }
}

}  // namespace

std::vector<uint8_t> Writer::serialize_header() const {
    // general.alignment is written automatically when it differs from the default and the caller
    // did not add it, so that the file reads back with the layout we produce.
    bool has_alignment_key = false;
    for (const auto& [k, v] : kv_) has_alignment_key |= (k == "general.alignment");
    const bool add_alignment_key = !has_alignment_key && alignment_ != format::kDefaultAlignment;

    Out o;
    o.bytes(format::kMagic, 4);
    o.num<uint32_t>(version_);
    o.num<uint64_t>(tensors_.size());
    o.num<uint64_t>(kv_.size() + (add_alignment_key ? 1 : 0));
    if (add_alignment_key) {
        o.string("general.alignment");
        o.num<uint32_t>(static_cast<uint32_t>(ValueType::UINT32));
        o.num<uint32_t>(alignment_);
    }
    for (const auto& [k, v] : kv_) {
        o.string(k);
        o.num<uint32_t>(static_cast<uint32_t>(v.type));
        write_value(o, v.type, v);
    }
    uint64_t offset = 0;
    for (const T& t : tensors_) {
        o.string(t.name);
        o.num<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t n : t.ne) o.num<uint64_t>(static_cast<uint64_t>(n));
        o.num<uint32_t>(static_cast<uint32_t>(t.type));
        o.num<uint64_t>(offset);
        offset += t.n_bytes;
        offset = (offset + alignment_ - 1) / alignment_ * alignment_;
    }
    o.pad_to(alignment_);
    return std::move(o.buf);
}

std::vector<uint8_t> Writer::serialize() const {
    Out o;
    o.buf = serialize_header();
    for (const T& t : tensors_) {
        ZINC_CHECK(!t.deferred);  // streamed tensors: serialize_header() and the caller's bytes
        o.bytes(t.data.data(), t.data.size());
        o.pad_to(alignment_);
    }
    return std::move(o.buf);
}

Result<void> Writer::write_file(const std::string& path) const {
    const std::vector<uint8_t> bytes = serialize();
    std::FILE* fp = std::fopen(path.c_str(), "wb");
    if (!fp) return make_error(path + ": cannot create: " + std::strerror(errno));
    const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), fp);
    const bool close_ok = std::fclose(fp) == 0;
    if (n != bytes.size() || !close_ok) {
        return make_error(path + ": write failed after " + std::to_string(n) + " of " +
                          std::to_string(bytes.size()) + " bytes");
    }
    return {};
}

}  // namespace zinc::gguf
