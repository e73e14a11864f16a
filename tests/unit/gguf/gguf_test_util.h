// tests/unit/gguf/gguf_test_util.h — helpers for the GGUF tests: a small sample file built with the
// Writer, byte-level patching at offsets found by searching for names, and error expectations.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "quant/types.h"

namespace zinc::gguf::testing {

using Bytes = std::vector<uint8_t>;

/// Deterministic filler bytes for tensor data.
inline Bytes filler(size_t n, uint8_t seed) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 31);
    return b;
}

/// A small valid model-like file: a few metadata pairs and three tensors (f32, q4_0, q8_0).
inline Writer sample_writer(uint32_t version = 3, uint32_t alignment = 32) {
    Writer w(version, alignment);
    w.add_kv("general.architecture", OwnedValue::string("llama"));
    w.add_kv("llama.block_count", OwnedValue::u32(1));
    w.add_kv("tokenizer.ggml.tokens", OwnedValue::string_array({"<s>", "a", "b"}));
    w.add_kv("tokenizer.ggml.scores", OwnedValue::f32_array({0.f, -1.f, -2.f}));
    w.add_tensor("norm.weight", {8}, quant::GgmlType::F32, filler(8 * 4, 1));
    w.add_tensor("blk.0.q4", {64, 2}, quant::GgmlType::Q4_0, filler(2 * 2 * 18, 2));
    w.add_tensor("blk.0.q8", {32, 3}, quant::GgmlType::Q8_0, filler(3 * 34, 3));
    return w;
}

/// Offset of the first occurrence of `needle` in `b` (fails the test when absent).
inline size_t find_bytes(const Bytes& b, std::string_view needle) {
    for (size_t i = 0; i + needle.size() <= b.size(); ++i) {
        if (std::memcmp(b.data() + i, needle.data(), needle.size()) == 0) return i;
    }
    ADD_FAILURE() << "needle '" << needle << "' not found";
    return 0;
}

/// Offset just past the string `s` as written (its u64 length sits 8 bytes before it).
inline size_t after_string(const Bytes& b, std::string_view s) { return find_bytes(b, s) + s.size(); }
/// Offset of the u64 length that prefixes the string `s`.
inline size_t string_length_at(const Bytes& b, std::string_view s) { return find_bytes(b, s) - 8; }

/// Where the fields of a tensor info named `name` start.
struct InfoFields {
    size_t name_len, n_dims, ne0, type, offset;
};
inline InfoFields tensor_info_fields(const Bytes& b, std::string_view name) {
    InfoFields f{};
    f.name_len = string_length_at(b, name);
    f.n_dims = after_string(b, name);
    uint32_t n_dims;
    std::memcpy(&n_dims, b.data() + f.n_dims, 4);
    f.ne0 = f.n_dims + 4;
    f.type = f.ne0 + 8 * n_dims;
    f.offset = f.type + 4;
    return f;
}

template <class I>
void put(Bytes& b, size_t at, I v) {
    ASSERT_LE(at + sizeof v, b.size());
    std::memcpy(b.data() + at, &v, sizeof v);
}

inline Result<std::unique_ptr<File>> parse(const Bytes& b, const std::string& name = "test.gguf") {
    return File::from_buffer(b.data(), b.size(), name);
}

/// Expect parsing to fail with "<name>: byte <offset>: ..." containing every phrase.
inline void expect_error(const Bytes& b, size_t offset, std::vector<std::string> phrases) {
    auto r = parse(b, "models/x.gguf");
    ASSERT_FALSE(r.ok()) << "parsed a malformed file";
    const std::string& m = r.error().message;
    const std::string prefix = "models/x.gguf: byte " + std::to_string(offset) + ": ";
    EXPECT_EQ(m.substr(0, prefix.size()), prefix) << m;
    for (const auto& p : phrases) EXPECT_NE(m.find(p), std::string::npos) << "missing '" << p << "' in: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

}  // namespace zinc::gguf::testing
