// zinc/quant/dispatch.cpp — the public entry points of quant.h: argument checks, the per-type
// kernel table, and the run-time choice between the scalar reference and the AVX2 kernels.
#include <array>
#include <cstdlib>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant.h"
#include "util/check.h"

namespace zinc::quant {
namespace {

using namespace detail;

struct Kernels {
    GgmlType type;
    DequantizeFn dequantize;
    QuantizeFn quantize;
    DotFn dot_ref;
    QuantizeFn quantize_simd;   // same bytes as `quantize`, faster; null for most types
    DotFn dot_avx2;             // null when the build or the type has no AVX2 kernel
    DotMultiFn dot_multi_avx2;  // one weight row x several activations; null: loop dot_avx2
    DotFn dot_vnni;             // AVX-512 VNNI build of the quantized kernels (bit-identical)
    DotMultiFn dot_multi_vnni;
};

#if defined(ZINC_QUANT_HAVE_AVX2)
#define ZINC_AVX2(f) f
#else
#define ZINC_AVX2(f) nullptr
#endif
#if defined(ZINC_QUANT_HAVE_VNNI)
#define ZINC_VNNI(f) f
#else
#define ZINC_VNNI(f) nullptr
#endif

// Rows for the float and activation-only types, and for the quantized weight types.
#define ZINC_PLAIN(T, t, q8)                                                \
    {                                                                       \
        GgmlType::T, dequantize_row_##t, quantize_row_##t, dot_ref_##t, q8, \
            ZINC_AVX2(dot_avx2_##t), nullptr, nullptr, nullptr              \
    }
#define ZINC_QUANTIZED(T, t)                                                                 \
    {                                                                                        \
        GgmlType::T, dequantize_row_##t, quantize_row_##t, dot_ref_##t, nullptr,             \
            ZINC_AVX2(dot_avx2_##t), ZINC_AVX2(dot_multi_avx2_##t), ZINC_VNNI(dot_vnni_##t), \
            ZINC_VNNI(dot_multi_vnni_##t)                                                    \
    }

constexpr Kernels kernel_table[] = {
    ZINC_PLAIN(F32, f32, nullptr),
    ZINC_PLAIN(F16, f16, nullptr),
    ZINC_PLAIN(BF16, bf16, nullptr),
    ZINC_QUANTIZED(Q4_0, q4_0),
    ZINC_QUANTIZED(Q4_1, q4_1),
    ZINC_QUANTIZED(Q5_0, q5_0),
    ZINC_QUANTIZED(Q5_1, q5_1),
    {GgmlType::Q8_0, dequantize_row_q8_0, quantize_row_q8_0, dot_ref_q8_0,
     ZINC_AVX2(quantize_row_q8_0_avx2), ZINC_AVX2(dot_avx2_q8_0), ZINC_AVX2(dot_multi_avx2_q8_0),
     ZINC_VNNI(dot_vnni_q8_0), ZINC_VNNI(dot_multi_vnni_q8_0)},
    ZINC_PLAIN(Q8_1, q8_1, ZINC_AVX2(quantize_row_q8_1_avx2)),
    ZINC_QUANTIZED(Q2_K, q2_k),
    ZINC_QUANTIZED(Q3_K, q3_k),
    ZINC_QUANTIZED(Q4_K, q4_k),
    ZINC_QUANTIZED(Q5_K, q5_k),
    ZINC_QUANTIZED(Q6_K, q6_k),
    ZINC_PLAIN(Q8_K, q8_k, ZINC_AVX2(quantize_row_q8_k_avx2)),
    ZINC_QUANTIZED(MXFP4, mxfp4),
};

// Raw type id -> index into kernel_table (-1: none), so a lookup per row costs one load.
constexpr int max_type_id = 40;
constexpr std::array<int8_t, max_type_id> kernel_index = [] {
    std::array<int8_t, max_type_id> idx{};
    idx.fill(-1);
    for (size_t i = 0; i < std::size(kernel_table); ++i) {
        idx[static_cast<uint32_t>(kernel_table[i].type)] = static_cast<int8_t>(i);
    }
    return idx;
}();

const Kernels& kernels(GgmlType t) {
    const auto raw = static_cast<uint32_t>(t);
    ZINC_CHECK(raw < static_cast<uint32_t>(max_type_id) && kernel_index[raw] >= 0);
    return kernel_table[kernel_index[raw]];
}

// n must be a whole number of blocks; block sizes are powers of two (static_assert in
// types.cpp), so this is a mask test rather than a 64-bit division on every row.
void check_row(GgmlType t, int64_t n) {
    const int64_t bs = type_traits(t).block_size;
    ZINC_CHECK(n >= 0 && (n & (bs - 1)) == 0);
}

bool env_is_zero(const char* name) {
    const char* env = std::getenv(name);
    return env != nullptr && std::strcmp(env, "0") == 0;
}

bool cpu_has_avx512_vnni() {
#if defined(ZINC_QUANT_HAVE_VNNI) && (defined(__x86_64__) || defined(__i386__))
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

enum class Level { Ref, Avx2, Vnni };

// Read once per process: ZINC_SIMD=0 forces the scalar reference, ZINC_AVX512=0 keeps AVX2.
Level read_level() {
#if !defined(ZINC_QUANT_HAVE_AVX2)
    return Level::Ref;  // portable build: no SIMD kernels compiled in
#endif
    if (!cpu_has_avx2() || env_is_zero("ZINC_SIMD")) return Level::Ref;
    if (!cpu_has_avx512_vnni() || env_is_zero("ZINC_AVX512")) return Level::Avx2;
    return Level::Vnni;
}

Level level() {
    static const Level l = read_level();
    return l;
}

}  // namespace

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                            __builtin_cpu_supports("f16c");
    return has;
#else
    return false;
#endif
}

bool simd_enabled() {
    return level() != Level::Ref;
}

const char* simd_level() {
    switch (level()) {
        case Level::Vnni:
            return "avx512vnni";
        case Level::Avx2:
            return "avx2";
        case Level::Ref:
            break;
    }
    return "ref";
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
    check_row(t, n);
    kernels(t).dequantize(src, dst, n);
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
    check_row(t, n);
    const Kernels& k = kernels(t);
    if (k.quantize_simd != nullptr && level() != Level::Ref) {
        k.quantize_simd(src, dst, n);
        return;
    }
    k.quantize(src, dst, n);
}

float vec_dot(GgmlType t, int64_t n, const void* w, const void* a) {
    check_row(t, n);
    const Kernels& k = kernels(t);
    const Level l = level();
    if (l == Level::Vnni && k.dot_vnni != nullptr) return k.dot_vnni(n, w, a);
    if (l != Level::Ref && k.dot_avx2 != nullptr) return k.dot_avx2(n, w, a);
    return k.dot_ref(n, w, a);
}

void vec_dot_multi(GgmlType t, int64_t n, const void* w, const void* a, size_t a_stride, int n_a,
                   float* out) {
    check_row(t, n);
    ZINC_CHECK(n_a >= 0);
    const Kernels& k = kernels(t);
    const Level l = level();
    if (l == Level::Vnni && k.dot_multi_vnni != nullptr) {
        k.dot_multi_vnni(n, w, a, a_stride, n_a, out);
        return;
    }
    if (l != Level::Ref && k.dot_multi_avx2 != nullptr) {
        k.dot_multi_avx2(n, w, a, a_stride, n_a, out);
        return;
    }
    const auto* pa = static_cast<const uint8_t*>(a);
    for (int j = 0; j < n_a; ++j) {
        out[j] = vec_dot(t, n, w, pa + static_cast<size_t>(j) * a_stride);
    }
}

float vec_dot_ref(GgmlType t, int64_t n, const void* w, const void* a) {
    check_row(t, n);
    return kernels(t).dot_ref(n, w, a);
}

}  // namespace zinc::quant
