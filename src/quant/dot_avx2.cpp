// zinc/quant/dot_avx2.cpp — AVX2/FMA/F16C dot products for the float types and the 32-element
// block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1). Same contracts as dot_ref.cpp; results
// differ from it only by float summation order. Building blocks and the multi-activation
// scheme are described in simd_avx2.h; K-quants are in dot_avx2_k.cpp.
//
// Two 32-element blocks per iteration, with one accumulator for even and one for odd blocks
// (independent FMA chains); a trailing odd block goes to the even accumulator.
#include "quant/blocks.h"

#if defined(ZINC_QUANT_HAVE_AVX2)

// Keep the scalar float expressions exactly as written (no implicit FMA), so that a kernel's
// result is the same for every NA instantiation.
#pragma GCC optimize("fp-contract=off")

#include "quant/quant.h"
#include "quant/simd_avx2.h"

namespace zinc::quant::detail {
namespace {

using namespace avx2;

// ---- float types x F32 -------------------------------------------------------------------------

// Load: static __m256 load8(const T*) and static float one(T) for the weight element type T.
template <typename T, typename Load>
float dot_float_f32(int64_t n, const T* x, const float* y) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {  // four independent FMA chains
        acc0 = _mm256_fmadd_ps(Load::load8(x + i), _mm256_loadu_ps(y + i), acc0);
        acc1 = _mm256_fmadd_ps(Load::load8(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(Load::load8(x + i + 16), _mm256_loadu_ps(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(Load::load8(x + i + 24), _mm256_loadu_ps(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(Load::load8(x + i), _mm256_loadu_ps(y + i), acc0);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) sum += Load::one(x[i]) * y[i];
    return sum;
}

struct LoadF32 {
    static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
    static float one(float v) { return v; }
};

struct LoadF16 {
    static __m256 load8(const uint16_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
    static float one(uint16_t h) { return _cvtsh_ss(h); }
};

struct LoadBf16 {
    static __m256 load8(const uint16_t* p) {
        const __m256i v =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
    static float one(uint16_t h) { return bf16_to_fp32(h); }
};

// ---- symmetric 32-element formats x Q8_0: sum_b d_w d_a * sum(q_w * q_a) ----------------------

struct WeightQ4_0 {
    using Block = BlockQ4_0;
    static __m256i load(const Block& b) {
        return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8));
    }
};

struct WeightQ5_0 {
    using Block = BlockQ5_0;
    // q - 16 as a signed byte: nibble | 0xF0 when the fifth bit is clear (nibble - 16), the bare
    // nibble when it is set (nibble + 16 - 16).
    static __m256i load(const Block& b) {
        const __m256i f0 = _mm256_set1_epi8(static_cast<char>(0xF0));
        return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_andnot_si256(expand_bits(b.qh), f0));
    }
};

struct WeightQ8_0 {
    using Block = BlockQ8_0;
    static __m256i load(const Block& b) { return load256(b.qs); }
};

template <typename W>
struct SymmetricQ8_0 {
    static constexpr int max_na = 4;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const typename W::Block*>(w);
        const Rows<BlockQ8_0, NA> y(a, stride);
        const float* tab = fp16_table();
        const int64_t nb = n / 32;
        __m256 acc0[NA], acc1[NA];
        for (int j = 0; j < NA; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 2 <= nb; i += 2) {
            const __m256i qx0 = W::load(x[i]), qx1 = W::load(x[i + 1]);
            const __m256i ax0 = _mm256_sign_epi8(qx0, qx0), ax1 = _mm256_sign_epi8(qx1, qx1);
            const float dx0 = tab[x[i].d], dx1 = tab[x[i + 1].d];
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_0* yb = y.p[j] + i;
                const __m256i p0 = dot_us8(ax0, _mm256_sign_epi8(load256(yb[0].qs), qx0));
                const __m256i p1 = dot_us8(ax1, _mm256_sign_epi8(load256(yb[1].qs), qx1));
                acc0[j] = _mm256_fmadd_ps(_mm256_set1_ps(dx0 * tab[yb[0].d]),
                                          _mm256_cvtepi32_ps(p0), acc0[j]);
                acc1[j] = _mm256_fmadd_ps(_mm256_set1_ps(dx1 * tab[yb[1].d]),
                                          _mm256_cvtepi32_ps(p1), acc1[j]);
            }
        }
        for (; i < nb; ++i) {
            const __m256i qx = W::load(x[i]);
            const __m256i ax = _mm256_sign_epi8(qx, qx);
            const float dx = tab[x[i].d];
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_0& yb = y.p[j][i];
                const __m256i p = dot_us8(ax, _mm256_sign_epi8(load256(yb.qs), qx));
                acc0[j] =
                    _mm256_fmadd_ps(_mm256_set1_ps(dx * tab[yb.d]), _mm256_cvtepi32_ps(p), acc0[j]);
            }
        }
        for (int j = 0; j < NA; ++j) out[j] = hsum_ps(_mm256_add_ps(acc0[j], acc1[j]));
    }
};

// ---- asymmetric 32-element formats x Q8_1: sum_b d_w d_a * sum(q_w * q_a) + m_w * s_a ---------

struct WeightQ4_1 {
    using Block = BlockQ4_1;
    static __m256i load(const Block& b) { return unpack_nibbles(b.qs); }
};

struct WeightQ5_1 {
    using Block = BlockQ5_1;
    static __m256i load(const Block& b) {
        return _mm256_or_si256(unpack_nibbles(b.qs),
                               _mm256_and_si256(expand_bits(b.qh), _mm256_set1_epi8(0x10)));
    }
};

template <typename W>
struct AsymmetricQ8_1 {
    static constexpr int max_na = 3;
    template <int NA>
    [[gnu::always_inline]] static inline void run(int64_t n, const void* w, const void* a,
                                                  size_t stride, float* out) {
        const auto* x = static_cast<const typename W::Block*>(w);
        const Rows<BlockQ8_1, NA> y(a, stride);
        const int64_t nb = n / 32;
        // Block scale products: [d_w, m_w] x [d_a, s_a] -> lane 0 d_w d_a, lane 1 m_w s_a; lane 1
        // of acc_m sums the min terms.
        __m256 acc0[NA], acc1[NA];
        __m128 acc_m[NA];
        for (int j = 0; j < NA; ++j) {
            acc0[j] = acc1[j] = _mm256_setzero_ps();
            acc_m[j] = _mm_setzero_ps();
        }
        int64_t i = 0;
        for (; i + 2 <= nb; i += 2) {
            const __m256i qx0 = W::load(x[i]), qx1 = W::load(x[i + 1]);
            const __m128 sx0 = two_halves(&x[i]), sx1 = two_halves(&x[i + 1]);
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_1* yb = y.p[j] + i;
                const __m128 p0 = _mm_mul_ps(sx0, two_halves(&yb[0]));
                const __m128 p1 = _mm_mul_ps(sx1, two_halves(&yb[1]));
                acc_m[j] = _mm_add_ps(acc_m[j], _mm_add_ps(p0, p1));
                acc0[j] =
                    _mm256_fmadd_ps(_mm256_broadcastss_ps(p0),
                                    _mm256_cvtepi32_ps(dot_us8(qx0, load256(yb[0].qs))), acc0[j]);
                acc1[j] =
                    _mm256_fmadd_ps(_mm256_broadcastss_ps(p1),
                                    _mm256_cvtepi32_ps(dot_us8(qx1, load256(yb[1].qs))), acc1[j]);
            }
        }
        for (; i < nb; ++i) {
            const __m256i qx = W::load(x[i]);
            const __m128 sx = two_halves(&x[i]);
#pragma GCC unroll 4
            for (int j = 0; j < NA; ++j) {
                const BlockQ8_1& yb = y.p[j][i];
                const __m128 p = _mm_mul_ps(sx, two_halves(&yb));
                acc_m[j] = _mm_add_ps(acc_m[j], p);
                acc0[j] = _mm256_fmadd_ps(_mm256_broadcastss_ps(p),
                                          _mm256_cvtepi32_ps(dot_us8(qx, load256(yb.qs))), acc0[j]);
            }
        }
        for (int j = 0; j < NA; ++j) {
            out[j] =
                hsum_ps(_mm256_add_ps(acc0[j], acc1[j])) + _mm_cvtss_f32(_mm_movehdup_ps(acc_m[j]));
        }
    }
};

}  // namespace

float dot_avx2_f32(int64_t n, const void* w, const void* a) {
    return dot_float_f32<float, LoadF32>(n, static_cast<const float*>(w),
                                         static_cast<const float*>(a));
}
float dot_avx2_f16(int64_t n, const void* w, const void* a) {
    return dot_float_f32<uint16_t, LoadF16>(n, static_cast<const uint16_t*>(w),
                                            static_cast<const float*>(a));
}
float dot_avx2_bf16(int64_t n, const void* w, const void* a) {
    return dot_float_f32<uint16_t, LoadBf16>(n, static_cast<const uint16_t*>(w),
                                             static_cast<const float*>(a));
}

float dot_avx2_q4_0(int64_t n, const void* w, const void* a) {
    return run_single<SymmetricQ8_0<WeightQ4_0>>(n, w, a);
}
float dot_avx2_q5_0(int64_t n, const void* w, const void* a) {
    return run_single<SymmetricQ8_0<WeightQ5_0>>(n, w, a);
}
float dot_avx2_q8_0(int64_t n, const void* w, const void* a) {
    return run_single<SymmetricQ8_0<WeightQ8_0>>(n, w, a);
}
float dot_avx2_q4_1(int64_t n, const void* w, const void* a) {
    return run_single<AsymmetricQ8_1<WeightQ4_1>>(n, w, a);
}
float dot_avx2_q5_1(int64_t n, const void* w, const void* a) {
    return run_single<AsymmetricQ8_1<WeightQ5_1>>(n, w, a);
}

void dot_multi_avx2_q4_0(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<SymmetricQ8_0<WeightQ4_0>>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q5_0(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<SymmetricQ8_0<WeightQ5_0>>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q8_0(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<SymmetricQ8_0<WeightQ8_0>>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q4_1(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<AsymmetricQ8_1<WeightQ4_1>>(n, w, a, s, n_a, out);
}
void dot_multi_avx2_q5_1(int64_t n, const void* w, const void* a, size_t s, int n_a, float* out) {
    run_multi<AsymmetricQ8_1<WeightQ5_1>>(n, w, a, s, n_a, out);
}

// Q8_1 x Q8_1: only an activation format; a plain loop is enough.
float dot_avx2_q8_1(int64_t n, const void* w, const void* a) {
    const auto* x = static_cast<const BlockQ8_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(a);
    const float* tab = fp16_table();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; ++i) {
        const __m256 d = _mm256_set1_ps(tab[x[i].d] * tab[y[i].d]);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_ss8(load256(x[i].qs), load256(y[i].qs))),
                              acc);
    }
    return hsum_ps(acc);
}

}  // namespace zinc::quant::detail

#endif  // ZINC_QUANT_HAVE_AVX2
