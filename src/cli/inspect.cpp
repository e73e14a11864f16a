// zinc/cli/inspect.cpp — `zinc inspect FILE`: a GGUF file's header, metadata (long arrays and
// strings summarised unless --full) and tensor table (name, type, shape, bytes, offset).
// Reads only the file (no model load), so it works on any valid GGUF, even unsupported ones.
#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli/cli.h"
#include "cli/default_model.h"
#include "cli/host_info.h"
#include "gguf/gguf.h"
#include "quant/types.h"
#include "util/utf8.h"

namespace zinc::cli {

namespace {

struct InspectOptions {
    std::string path;
    bool full = false;        // print every array element and whole strings
    bool no_tensors = false;  // metadata only
};

constexpr size_t kMaxArrayItems = 8;
constexpr size_t kMaxStringChars = 96;

// Quoted and terminal-safe (util/utf8.h: control characters and invalid UTF-8 bytes escaped,
// never written raw); cut at kMaxStringChars characters unless full.
std::string quote(std::string_view s, bool full) {
    bool cut = false;
    std::string out =
        "\"" + utf8::escape_for_terminal(s, full ? std::string::npos : kMaxStringChars, &cut);
    if (cut) return out + "\"... (" + std::to_string(s.size()) + " bytes)";
    return out + "\"";
}

std::string scalar(const gguf::Value& v, bool full) {
    using gguf::ValueType;
    switch (v.type) {
        case ValueType::STRING:
            return quote(v.str, full);
        case ValueType::BOOL:
            return v.u ? "true" : "false";
        case ValueType::FLOAT32:
        case ValueType::FLOAT64: {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.9g", v.f);
            return buf;
        }
        default:
            if (auto i = v.as_int()) return std::to_string(*i);
            return std::to_string(v.u);
    }
}

std::string render(const gguf::Value& v, bool full) {
    if (v.type != gguf::ValueType::ARRAY) return scalar(v, full);
    std::string out = "[";
    const size_t n = v.arr.size();
    const size_t shown = full ? n : std::min(n, kMaxArrayItems);
    for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        out += render(v.arr[i], full);
    }
    if (shown < n) out += ", ... " + std::to_string(n - shown) + " more";
    return out + "]";
}

std::string type_label(const gguf::Value& v) {
    if (v.type != gguf::ValueType::ARRAY) return std::string(gguf::value_type_name(v.type));
    return std::string(gguf::value_type_name(v.elem_type)) + "[" + std::to_string(v.arr.size()) +
           "]";
}

std::string shape(const gguf::TensorInfo& t) {
    std::string s;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
        if (d) s += " x ";
        s += std::to_string(t.ne[d]);
    }
    return s.empty() ? "scalar" : s;
}

}  // namespace

int inspect_main(int argc, char** argv) {
    InspectOptions o;
    CLI::App app{"zinc inspect: print a GGUF file's metadata and tensor table", "zinc inspect"};
    app.add_option("file", o.path, "GGUF file, or a pulled model's name (zinc list)")->required();
    app.add_flag("--full", o.full, "print whole strings and every array element");
    app.add_flag("--no-tensors", o.no_tensors, "print the metadata only");
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;

    // A model name (zinc list) as -m takes it; never fetched.
    ModelArg how;
    auto resolved = resolve_model_path(o.path, &how, /*fetch=*/false);
    if (!resolved) return report_error(resolved.error().message);
    auto opened = gguf::File::open(resolved.value());
    if (!opened) return report_error(opened.error().message);
    const gguf::File& f = *opened.value();

    std::printf("file: %s\n", utf8::escape_for_terminal(f.path()).c_str());
    std::printf("size: %zu bytes (%s), GGUF v%u, alignment %zu, tensor data at offset %zu\n",
                f.file_size(), format_bytes(f.file_size()).c_str(), f.version(), f.alignment(),
                f.data_offset());
    std::printf("\nmetadata (%zu keys):\n", f.metadata().size());
    // Keys and tensor names come from the file: printed escaped (the reader refuses invalid
    // UTF-8 and control characters in them; the escaping keeps this true for any later reader).
    size_t key_w = 0;
    for (const auto& [k, v] : f.metadata())
        key_w = std::max(key_w, utf8::escape_for_terminal(k).size());
    for (const auto& [k, v] : f.metadata()) {
        std::printf("  %-*s  %-12s  %s\n", static_cast<int>(key_w),
                    utf8::escape_for_terminal(k).c_str(), type_label(v).c_str(),
                    render(v, o.full).c_str());
    }
    if (o.no_tensors) return kExitOk;

    std::printf("\ntensors (%zu):\n", f.tensors().size());
    size_t name_w = 4;
    for (const auto& t : f.tensors())
        name_w = std::max(name_w, utf8::escape_for_terminal(t.name).size());
    std::printf("  %-*s  %-6s  %-22s  %12s  %12s\n", static_cast<int>(name_w), "name", "type",
                "shape", "bytes", "offset");
    uint64_t total_bytes = 0;
    uint64_t total_params = 0;
    for (const auto& t : f.tensors()) {
        std::printf("  %-*s  %-6.*s  %-22s  %12zu  %12" PRIu64 "\n", static_cast<int>(name_w),
                    utf8::escape_for_terminal(t.name).c_str(),
                    static_cast<int>(quant::type_name(t.type).size()),
                    quant::type_name(t.type).data(), shape(t).c_str(), t.n_bytes, t.offset);
        total_bytes += t.n_bytes;
        total_params += static_cast<uint64_t>(t.n_elements());
    }
    std::printf("\ntotal: %zu tensors, %" PRIu64 " bytes (%s), %" PRIu64 " parameters\n",
                f.tensors().size(), total_bytes, format_bytes(total_bytes).c_str(), total_params);
    return kExitOk;
}

}  // namespace zinc::cli
