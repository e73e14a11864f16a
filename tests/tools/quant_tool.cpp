// tests/tools/quant_tool.cpp — a small CLI over zinc's quant library for the Python oracle tests
// (tests/py/test_quant_oracle.py). Binary in, binary out, little-endian, no headers:
//
//   quant_tool dequant TYPE        stdin: raw blocks of TYPE          stdout: f32 values
//   quant_tool quant TYPE          stdin: f32 values                  stdout: raw blocks of TYPE
//   quant_tool dot TYPE N R        stdin: R weight rows of TYPE (N elements each), then R*N f32
//                                  activations. stdout: the R activation rows packed to
//                                  vec_dot_type(TYPE), then R f32 vec_dot results, then R f32
//                                  vec_dot_ref results.
//   quant_tool info                prints "simd=<0|1> avx2=<0|1>"
//   quant_tool traits              prints "<raw id> <name> <block_size> <type_size>" per type
//   quant_tool bench TYPE N ROWS ITERS [LIBGGML_CPU]
//                                  times vec_dot over a ROWS x N weight matrix (one activation
//                                  row), ITERS passes; with a path to llama.cpp's
//                                  libggml-cpu.so also times its ggml_vec_dot_<w>_<a> kernel on
//                                  the same bytes and prints both results for comparison.
//
// TYPE is a name as in type_name() ("q4_K", "f16", ...). Exit code 2 on a usage error.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant/types.h"

namespace {

using zinc::quant::GgmlType;

std::optional<GgmlType> parse_type(const std::string& name) {
    for (uint32_t raw = 0; raw < 64; ++raw) {
        auto tt = zinc::quant::find_type_traits(raw);
        if (tt && tt->name == name) return tt->type;
    }
    return std::nullopt;
}

std::vector<char> read_stdin() {
    std::vector<char> buf;
    char tmp[1 << 16];
    size_t got;
    while ((got = std::fread(tmp, 1, sizeof tmp, stdin)) > 0) buf.insert(buf.end(), tmp, tmp + got);
    return buf;
}

void write_out(const void* p, size_t n) {
    std::fwrite(p, 1, n, stdout);
}

int usage(const char* msg) {
    std::fprintf(stderr, "quant_tool: %s\n", msg);
    return 2;
}

// ggml's CPU dot kernel signature: (n, out, out_stride, x, x_stride, y, y_stride, nrc).
using GgmlDot = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);

int run_bench(GgmlType t, int64_t n, int64_t rows, int64_t iters, const char* ggml_path) {
    const auto& tt = zinc::quant::type_traits(t);
    const GgmlType vdt = tt.vec_dot_type;
    if (n <= 0 || rows <= 0 || iters <= 0 || n % tt.block_size != 0)
        return usage("bad N/ROWS/ITERS");
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    const size_t wrow = zinc::quant::row_size(t, n);
    std::vector<char> w(static_cast<size_t>(rows) * wrow);
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : x) v = nd(rng);
        zinc::quant::quantize_row(t, x.data(), w.data() + static_cast<size_t>(r) * wrow, n);
    }
    for (auto& v : x) v = nd(rng);
    std::vector<char> a(zinc::quant::row_size(vdt, n));
    zinc::quant::quantize_row(vdt, x.data(), a.data(), n);
    std::vector<float> out(static_cast<size_t>(rows));

    auto time_it = [&](auto&& dot_row) {
        double best = 1e30;
        for (int64_t it = 0; it < iters; ++it) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int64_t r = 0; r < rows; ++r) out[static_cast<size_t>(r)] = dot_row(r);
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            best = std::min(best, s);
        }
        return best;
    };
    const double t_simd = time_it([&](int64_t r) {
        return zinc::quant::vec_dot(t, n, w.data() + static_cast<size_t>(r) * wrow, a.data());
    });
    const float r0 = out[0];
    const double t_ref = time_it([&](int64_t r) {
        return zinc::quant::vec_dot_ref(t, n, w.data() + static_cast<size_t>(r) * wrow, a.data());
    });
    // four activation rows through vec_dot_multi (the prefill shape), per activation row
    constexpr int n_multi = 4;
    std::vector<char> a4(a.size() * n_multi);
    for (int j = 0; j < n_multi; ++j) {
        for (auto& v : x) v = nd(rng);
        zinc::quant::quantize_row(vdt, x.data(), a4.data() + j * a.size(), n);
    }
    float multi_out[n_multi];
    const double t_multi =
        time_it([&](int64_t r) {
            zinc::quant::vec_dot_multi(t, n, w.data() + static_cast<size_t>(r) * wrow, a4.data(),
                                       a.size(), n_multi, multi_out);
            return multi_out[0];
        }) /
        n_multi;
    const double gb = static_cast<double>(w.size()) / 1e9;
    std::printf(
        "%s n=%lld rows=%lld: zinc simd %.1f us (%.2f GB/s), zinc ref %.1f us, "
        "vec_dot_multi x4 %.1f us per activation row\n",
        std::string(tt.name).c_str(), static_cast<long long>(n), static_cast<long long>(rows),
        t_simd * 1e6, gb / t_simd, t_ref * 1e6, t_multi * 1e6);
    if (ggml_path != nullptr) {
        void* lib = dlopen(ggml_path, RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) return usage(dlerror());
        if (auto init = reinterpret_cast<void (*)()>(dlsym(lib, "ggml_cpu_init"))) init();
        std::string sym = "ggml_vec_dot_" + std::string(tt.name);
        if (tt.is_quantized) sym += "_" + std::string(zinc::quant::type_name(vdt));
        auto fn = reinterpret_cast<GgmlDot>(dlsym(lib, sym.c_str()));
        if (fn == nullptr) return usage(("no symbol " + sym).c_str());
        const double t_ggml = time_it([&](int64_t r) {
            float s = 0;
            fn(static_cast<int>(n), &s, 0, w.data() + static_cast<size_t>(r) * wrow, 0, a.data(), 0,
               1);
            return s;
        });
        std::printf(
            "  ggml %s %.1f us (%.2f GB/s); zinc/ggml time ratio %.3f; row0 zinc %.6g ggml %.6g\n",
            sym.c_str(), t_ggml * 1e6, gb / t_ggml, t_simd / t_ggml, r0, out[0]);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage("usage: quant_tool dequant|quant|dot|info ...");
    const std::string cmd = argv[1];
    if (cmd == "info") {
        std::printf("simd=%d avx2=%d level=%s\n", zinc::quant::simd_enabled() ? 1 : 0,
                    zinc::quant::cpu_has_avx2() ? 1 : 0, zinc::quant::simd_level());
        return 0;
    }
    if (cmd == "traits") {
        for (uint32_t raw = 0; raw < 64; ++raw) {
            if (auto tt = zinc::quant::find_type_traits(raw)) {
                std::printf("%u %.*s %lld %zu\n", raw, static_cast<int>(tt->name.size()),
                            tt->name.data(), static_cast<long long>(tt->block_size), tt->type_size);
            }
        }
        return 0;
    }
    if (argc < 3) return usage("missing TYPE");
    const auto type = parse_type(argv[2]);
    if (!type) return usage("unknown TYPE");
    const auto& tt = zinc::quant::type_traits(*type);

    if (cmd == "dequant") {
        const std::vector<char> in = read_stdin();
        if (in.size() % tt.type_size != 0) return usage("input is not a whole number of blocks");
        const int64_t n = static_cast<int64_t>(in.size() / tt.type_size) * tt.block_size;
        std::vector<float> out(static_cast<size_t>(n));
        zinc::quant::dequantize_row(*type, in.data(), out.data(), n);
        write_out(out.data(), out.size() * sizeof(float));
        return 0;
    }
    if (cmd == "quant") {
        const std::vector<char> in = read_stdin();
        const int64_t n = static_cast<int64_t>(in.size() / sizeof(float));
        if (in.size() % sizeof(float) != 0 || n % tt.block_size != 0) {
            return usage("input is not a whole number of blocks of f32");
        }
        std::vector<float> x(static_cast<size_t>(n));
        std::memcpy(x.data(), in.data(), in.size());
        std::vector<char> out(zinc::quant::row_size(*type, n));
        zinc::quant::quantize_row(*type, x.data(), out.data(), n);
        write_out(out.data(), out.size());
        return 0;
    }
    if (cmd == "dot") {
        if (argc < 5) return usage("dot needs TYPE N R");
        const int64_t n = std::stoll(argv[3]);
        const int64_t r = std::stoll(argv[4]);
        if (n <= 0 || r <= 0 || n % tt.block_size != 0) return usage("bad N or R");
        const GgmlType vdt = tt.vec_dot_type;
        if (n % zinc::quant::type_traits(vdt).block_size != 0)
            return usage("N not a multiple of the activation block");
        const size_t wrow = zinc::quant::row_size(*type, n);
        const size_t arow = zinc::quant::row_size(vdt, n);
        const std::vector<char> in = read_stdin();
        const size_t need =
            static_cast<size_t>(r) * (wrow + static_cast<size_t>(n) * sizeof(float));
        if (in.size() != need) return usage("dot: input size does not match TYPE N R");
        std::vector<float> act(static_cast<size_t>(n));
        std::vector<char> packed(static_cast<size_t>(r) * arow);
        std::vector<float> simd(static_cast<size_t>(r)), ref(static_cast<size_t>(r));
        for (int64_t i = 0; i < r; ++i) {
            std::memcpy(act.data(),
                        in.data() + static_cast<size_t>(r) * wrow +
                            static_cast<size_t>(i * n) * sizeof(float),
                        static_cast<size_t>(n) * sizeof(float));
            char* a = packed.data() + static_cast<size_t>(i) * arow;
            zinc::quant::quantize_row(vdt, act.data(), a, n);
            const char* w = in.data() + static_cast<size_t>(i) * wrow;
            simd[static_cast<size_t>(i)] = zinc::quant::vec_dot(*type, n, w, a);
            ref[static_cast<size_t>(i)] = zinc::quant::vec_dot_ref(*type, n, w, a);
        }
        write_out(packed.data(), packed.size());
        write_out(simd.data(), simd.size() * sizeof(float));
        write_out(ref.data(), ref.size() * sizeof(float));
        return 0;
    }
    if (cmd == "bench") {
        if (argc < 6) return usage("bench needs TYPE N ROWS ITERS [LIBGGML_CPU]");
        return run_bench(*type, std::stoll(argv[3]), std::stoll(argv[4]), std::stoll(argv[5]),
                         argc > 6 ? argv[6] : nullptr);
    }
    return usage("unknown command");
}
