// tests/fuzz/fuzz_gguf.cpp — libFuzzer target for the GGUF reader (built with -DZINC_FUZZ=ON and
// clang; run by scripts/run-fuzz). Each input is parsed with File::from_buffer. A rejected input
// must produce one line "<name>: byte N: ..." with N inside the input; an accepted one is walked
// completely (every metadata value, every getter, every tensor's first and last data byte), so
// ASan/UBSan see any read that escapes the buffer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gguf/gguf.h"

namespace {

using zinc::gguf::File;
using zinc::gguf::Value;
using zinc::gguf::ValueType;

[[noreturn]] void fail(const char* why, const std::string& detail) {
    std::fprintf(stderr, "fuzz_gguf: %s: %s\n", why, detail.c_str());
    std::abort();
}

/// Touch every byte a Value refers to; returns a checksum so the work is not optimised away.
uint64_t walk(const Value& v, const uint8_t* lo, const uint8_t* hi, int depth) {
    if (depth > 64) fail("nesting deeper than the reader allows", std::to_string(depth));
    uint64_t h = static_cast<uint64_t>(v.type) * 31 + v.u + static_cast<uint64_t>(v.i);
    h += static_cast<uint64_t>(v.as_int().value_or(0));
    h += static_cast<uint64_t>(v.as_float().value_or(0.0) != 0.0);
    if (v.type == ValueType::STRING && !v.str.empty()) {
        const auto* p = reinterpret_cast<const uint8_t*>(v.str.data());
        if (p < lo || p + v.str.size() > hi) fail("string outside the buffer", "");
        for (char c : v.str) h = h * 131 + static_cast<uint8_t>(c);
    }
    if (v.type != ValueType::ARRAY && !v.arr.empty()) fail("non-array with elements", "");
    for (const Value& e : v.arr) {
        if (e.type != v.elem_type) fail("element type differs from the array's", "");
        h += walk(e, lo, hi, depth + 1);
    }
    return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string name = "fuzz.gguf";
    auto r = File::from_buffer(data, size, name);
    if (!r.ok()) {
        const std::string& m = r.error().message;
        const std::string prefix = name + ": byte ";
        if (m.rfind(prefix, 0) != 0) fail("error without file name and byte offset", m);
        if (m.find('\n') != std::string::npos) fail("error spans lines", m);
        const unsigned long long off = std::strtoull(m.c_str() + prefix.size(), nullptr, 10);
        if (off > size) fail("error offset past the end of the input", m);
        return 0;
    }
    const File& f = **r;
    const uint8_t* lo = data;
    const uint8_t* hi = data + size;
    if (f.version() < 2 || f.version() > 3) fail("accepted version", std::to_string(f.version()));
    if (f.alignment() == 0 || (f.alignment() & (f.alignment() - 1)) != 0) fail("bad alignment", "");
    uint64_t h = 0;
    for (const auto& [key, v] : f.metadata()) {
        if (key.empty()) fail("empty key accepted", "");
        if (f.find(key) != &v) fail("find() disagrees with metadata()", std::string(key));
        h += walk(v, lo, hi, 0);
        // Getters must return a value or an Error, never crash, whatever the type.
        h += f.get_string(key).ok() + f.get_int(key).ok() + f.get_float(key).ok() +
             f.get_bool(key).ok() + f.get_array(key).ok();
    }
    for (const auto& t : f.tensors()) {
        if (t.n_dims < 1 || t.n_dims > 4) fail("n_dims accepted", std::to_string(t.n_dims));
        if (t.n_elements() <= 0) fail("non-positive element count", std::string(t.name));
        if (t.n_bytes == 0 || t.data < lo || t.n_bytes > static_cast<size_t>(hi - t.data)) {
            fail("tensor data outside the buffer", std::string(t.name));
        }
        if (f.find_tensor(t.name) != &t) fail("find_tensor() disagrees", std::string(t.name));
        h += t.data[0] + t.data[t.n_bytes - 1];
    }
    volatile uint64_t sink = h;
    (void)sink;
    return 0;
}
