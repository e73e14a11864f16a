// tests/tools/gguf_dump.cpp — print everything zinc's GGUF reader sees in a file as JSON, for the
// Python oracle test (tests/py/test_gguf_reader.py) to compare with the gguf pip package's
// GGUFReader. Strings are printed as hex of their raw bytes so that any byte survives JSON.
// Usage: gguf_dump FILE   (exit 2 with the reader's one-line error on a bad file)
#include <cmath>
#include <cstdio>
#include <string>

#include "gguf/gguf.h"

namespace {

using zinc::gguf::Value;
using zinc::gguf::ValueType;

void print_hex(std::string_view s) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(s.size() * 2 + 2);
    out += '"';
    for (unsigned char c : s) {
        out += hex[c >> 4];
        out += hex[c & 15];
    }
    out += '"';
    std::fputs(out.c_str(), stdout);
}

void print_value(const Value& v) {
    switch (v.type) {
        case ValueType::STRING: print_hex(v.str); return;
        case ValueType::ARRAY:
            std::fputc('[', stdout);
            for (size_t i = 0; i < v.arr.size(); ++i) {
                if (i) std::fputc(',', stdout);
                print_value(v.arr[i]);
            }
            std::fputc(']', stdout);
            return;
        case ValueType::FLOAT32:
        case ValueType::FLOAT64:
            if (std::isnan(v.f)) std::fputs("NaN", stdout);
            else if (std::isinf(v.f)) std::fputs(v.f > 0 ? "Infinity" : "-Infinity", stdout);
            else std::printf("%.17g", v.f);
            return;
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
            std::printf("%lld", static_cast<long long>(v.i));
            return;
        default: std::printf("%llu", static_cast<unsigned long long>(v.u)); return;
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: gguf_dump FILE\n");
        return 2;
    }
    auto f = zinc::gguf::File::open(argv[1]);
    if (!f) {
        std::fprintf(stderr, "%s\n", f.error().message.c_str());
        return 2;
    }
    const auto& file = **f;
    std::printf("{\"version\":%u,\"alignment\":%zu,\"data_offset\":%zu,\"metadata\":[", file.version(),
                file.alignment(), file.data_offset());
    bool first = true;
    for (const auto& [key, v] : file.metadata()) {
        std::printf("%s{\"key\":", first ? "" : ",");
        first = false;
        print_hex(key);
        std::printf(",\"type\":%u,\"elem_type\":%u,\"value\":", static_cast<unsigned>(v.type),
                    static_cast<unsigned>(v.elem_type));
        print_value(v);
        std::fputc('}', stdout);
    }
    std::fputs("],\"tensors\":[", stdout);
    first = true;
    for (const auto& t : file.tensors()) {
        std::printf("%s{\"name\":", first ? "" : ",");
        first = false;
        print_hex(t.name);
        std::printf(",\"type\":%u,\"ne\":[", static_cast<unsigned>(t.type));
        for (uint32_t d = 0; d < t.n_dims; ++d) std::printf("%s%lld", d ? "," : "", static_cast<long long>(t.ne[d]));
        std::printf("],\"offset\":%llu,\"n_bytes\":%zu,\"head\":",
                    static_cast<unsigned long long>(t.offset), t.n_bytes);
        // First and last 8 data bytes: checks both where data points and how long it is.
        const size_t k = t.n_bytes < 8 ? t.n_bytes : 8;
        print_hex({reinterpret_cast<const char*>(t.data), k});
        std::fputs(",\"tail\":", stdout);
        print_hex({reinterpret_cast<const char*>(t.data + t.n_bytes - k), k});
        std::fputc('}', stdout);
    }
    std::fputs("]}\n", stdout);
    return 0;
}
