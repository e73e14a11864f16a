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
    DotFn dot_simd;             // null when the build has no SIMD kernel for the type
    QuantizeFn quantize_simd;   // same bytes as `quantize`, faster; null for most types
    DotMultiFn dot_multi_simd;  // one weight row x several activations; null: loop dot_simd
};

#if defined(ZINC_QUANT_HAVE_AVX2)
#define ZINC_SIMD_FN(f) f
#else
#define ZINC_SIMD_FN(f) nullptr
#endif

constexpr Kernels kernel_table[] = {
    {GgmlType::F32, dequantize_row_f32, quantize_row_f32, dot_ref_f32, ZINC_SIMD_FN(dot_avx2_f32),
     nullptr, nullptr},
    {GgmlType::F16, dequantize_row_f16, quantize_row_f16, dot_ref_f16, ZINC_SIMD_FN(dot_avx2_f16),
     nullptr, nullptr},
    {GgmlType::BF16, dequantize_row_bf16, quantize_row_bf16, dot_ref_bf16,
     ZINC_SIMD_FN(dot_avx2_bf16), nullptr, nullptr},
    {GgmlType::Q4_0, dequantize_row_q4_0, quantize_row_q4_0, dot_ref_q4_0,
     ZINC_SIMD_FN(dot_avx2_q4_0), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q4_0)},
    {GgmlType::Q4_1, dequantize_row_q4_1, quantize_row_q4_1, dot_ref_q4_1,
     ZINC_SIMD_FN(dot_avx2_q4_1), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q4_1)},
    {GgmlType::Q5_0, dequantize_row_q5_0, quantize_row_q5_0, dot_ref_q5_0,
     ZINC_SIMD_FN(dot_avx2_q5_0), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q5_0)},
    {GgmlType::Q5_1, dequantize_row_q5_1, quantize_row_q5_1, dot_ref_q5_1,
     ZINC_SIMD_FN(dot_avx2_q5_1), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q5_1)},
    {GgmlType::Q8_0, dequantize_row_q8_0, quantize_row_q8_0, dot_ref_q8_0,
     ZINC_SIMD_FN(dot_avx2_q8_0), ZINC_SIMD_FN(quantize_row_q8_0_avx2),
     ZINC_SIMD_FN(dot_multi_avx2_q8_0)},
    {GgmlType::Q8_1, dequantize_row_q8_1, quantize_row_q8_1, dot_ref_q8_1,
     ZINC_SIMD_FN(dot_avx2_q8_1), ZINC_SIMD_FN(quantize_row_q8_1_avx2), nullptr},
    {GgmlType::Q2_K, dequantize_row_q2_k, quantize_row_q2_k, dot_ref_q2_k,
     ZINC_SIMD_FN(dot_avx2_q2_k), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q2_k)},
    {GgmlType::Q3_K, dequantize_row_q3_k, quantize_row_q3_k, dot_ref_q3_k,
     ZINC_SIMD_FN(dot_avx2_q3_k), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q3_k)},
    {GgmlType::Q4_K, dequantize_row_q4_k, quantize_row_q4_k, dot_ref_q4_k,
     ZINC_SIMD_FN(dot_avx2_q4_k), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q4_k)},
    {GgmlType::Q5_K, dequantize_row_q5_k, quantize_row_q5_k, dot_ref_q5_k,
     ZINC_SIMD_FN(dot_avx2_q5_k), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q5_k)},
    {GgmlType::Q6_K, dequantize_row_q6_k, quantize_row_q6_k, dot_ref_q6_k,
     ZINC_SIMD_FN(dot_avx2_q6_k), nullptr, ZINC_SIMD_FN(dot_multi_avx2_q6_k)},
    {GgmlType::Q8_K, dequantize_row_q8_k, quantize_row_q8_k, dot_ref_q8_k,
     ZINC_SIMD_FN(dot_avx2_q8_k), ZINC_SIMD_FN(quantize_row_q8_k_avx2), nullptr},
};

// Raw type id -> index into kernel_table (-1: none), so a lookup per row costs one load.
constexpr int max_type_id = 31;
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

bool read_simd_setting() {
    if (!cpu_has_avx2()) return false;
    const char* env = std::getenv("ZINC_SIMD");
    return !(env != nullptr && std::strcmp(env, "0") == 0);
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
    static const bool enabled = read_simd_setting();
    return enabled;
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
    check_row(t, n);
    kernels(t).dequantize(src, dst, n);
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
    check_row(t, n);
    const Kernels& k = kernels(t);
    if (k.quantize_simd != nullptr && simd_enabled()) {
        k.quantize_simd(src, dst, n);
        return;
    }
    k.quantize(src, dst, n);
}

float vec_dot(GgmlType t, int64_t n, const void* w, const void* a) {
    check_row(t, n);
    const Kernels& k = kernels(t);
    if (k.dot_simd != nullptr && simd_enabled()) return k.dot_simd(n, w, a);
    return k.dot_ref(n, w, a);
}

void vec_dot_multi(GgmlType t, int64_t n, const void* w, const void* a, size_t a_stride, int n_a,
                   float* out) {
    check_row(t, n);
    ZINC_CHECK(n_a >= 0);
    const Kernels& k = kernels(t);
    const auto* pa = static_cast<const uint8_t*>(a);
    if (k.dot_simd != nullptr && simd_enabled()) {
        if (k.dot_multi_simd != nullptr) {
            k.dot_multi_simd(n, w, a, a_stride, n_a, out);
            return;
        }
        for (int j = 0; j < n_a; ++j)
            out[j] = k.dot_simd(n, w, pa + static_cast<size_t>(j) * a_stride);
        return;
    }
    for (int j = 0; j < n_a; ++j) out[j] = k.dot_ref(n, w, pa + static_cast<size_t>(j) * a_stride);
}

float vec_dot_ref(GgmlType t, int64_t n, const void* w, const void* a) {
    check_row(t, n);
    return kernels(t).dot_ref(n, w, a);
}

}  // namespace zinc::quant
