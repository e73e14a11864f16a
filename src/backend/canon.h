// zinc/backend/canon.h — the canonical arithmetic that the CPU tier and the CUDA tier share, so
// that both compute the same bits (docs/exactness.md).
//
// Why: activations are packed to int8 before every quantized matrix product. A one-ulp
// difference in a value that is packed can move an int8 code across a rounding boundary, and that
// difference grows over the layers: two correct implementations that merely add in different
// orders end up with logits ~1 apart and different greedy text at near-ties. The cure is to fix
// the order and the rounding of every float operation on the path from the token to the logits,
// write it down once here, and have each tier (scalar code, AVX2 lanes, CUDA threads) perform
// exactly these operations. IEEE-754 add, mul, div, sqrt and fused multiply-add are correctly
// rounded on x86 and on NVIDIA GPUs, so the same sequence of them gives the same result.
//
// Rules for code that claims to follow this header:
//  * every float operation that affects a result is one of the functions below (or a plain
//    `+ - * /` on the host, which the build compiles with -ffp-contract=off so that nothing is
//    fused behind our back; in CUDA code always use these functions: nvcc fuses `a*b+c`);
//  * no libm call (expf, sinf, powf, tanhf) on a value path: use canon::exp, or a table computed
//    once on the host and shared (RoPE);
//  * reductions follow the orders defined here (chains, then the tree), whatever the SIMD width
//    or the thread layout that computes them.
//
// The matrix-vector products of quantized weights have their own canonical order, defined by the
// CPU tier's kernels (src/quant/canon_dot.h).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZINC_HD __host__ __device__ __forceinline__
#else
#include <cmath>
#define ZINC_HD inline
#endif

namespace zinc::canon {

// ---- correctly rounded primitives -------------------------------------------------------------

ZINC_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
ZINC_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
ZINC_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
ZINC_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
ZINC_HD float fma(float a, float b, float c) {  // a * b + c, one rounding
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}
ZINC_HD float sqrt(float a) {
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(a);
#else
    return std::sqrt(a);
#endif
}
ZINC_HD double dadd(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
ZINC_HD double ddiv(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
// Round to the nearest integer, ties to even (the default rounding mode on both).
ZINC_HD float rint(float a) {
#if defined(__CUDA_ARCH__)
    return rintf(a);
#else
    return std::nearbyint(a);
#endif
}
// max/min with the x86 SSE/AVX semantics: the second operand when either is NaN (or both are
// zeros), so the SIMD lanes (_mm256_max_ps(x, y)) and the scalar form agree on every input.
ZINC_HD float max_sse(float x, float y) {
    return x > y ? x : y;
}
ZINC_HD float min_sse(float x, float y) {
    return x < y ? x : y;
}
ZINC_HD float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// ---- exp and the activations built on it ----------------------------------------------------

/// exp(x) to about 2 ulp: x clamped to [-87.3, 88.7] (so the result is finite and normal; NaN
/// becomes the lower bound), n = rint(x / ln 2), Cody-Waite reduction r = x - n ln 2 in two
/// steps, degree-6 polynomial, times 2^n built in the exponent bits. The constants are the
/// classic Cephes expf ones. AVX2 code evaluates the same steps lane by lane
/// (backend/cpu/activations.cpp exp8).
ZINC_HD float exp(float x) {
    x = max_sse(x, -87.3f);
    x = min_sse(x, 88.7f);
    const float n = rint(mul(x, 1.44269504088896341f));
    float r = fma(-n, 0.693359375f, x);
    r = fma(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fma(p, r, 1.3981999507e-3f);
    p = fma(p, r, 8.3334519073e-3f);
    p = fma(p, r, 4.1665795894e-2f);
    p = fma(p, r, 1.6666665459e-1f);
    p = fma(p, r, 5.0000001201e-1f);
    p = fma(p, mul(r, r), add(r, 1.0f));
    const uint32_t e = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
    return mul(p, from_bits(e));
}

/// x * sigmoid(z) = x / (1 + exp(-z)), with -z computed as 0 - z.
ZINC_HD float x_sigmoid(float x, float z) {
    return div(x, add(1.0f, exp(sub(0.0f, z))));
}
/// SiLU (swish): x * sigmoid(x).
ZINC_HD float silu(float x) {
    return x_sigmoid(x, x);
}
/// gpt-oss's gated activation (ggml_swiglu_oai, alpha 1.702, limit 7): x = min(gate, limit),
/// y = clamp(up, -limit, limit), x sigmoid(alpha x) (y + 1).
constexpr float kOaiAlpha = 1.702f, kOaiLimit = 7.0f;
ZINC_HD float swiglu_oai(float gate, float up) {
    const float x = gate < kOaiLimit ? gate : kOaiLimit;  // NaN stays NaN (as std::min(g, limit))
    const float y = up < -kOaiLimit ? -kOaiLimit : (up > kOaiLimit ? kOaiLimit : up);
    return mul(x_sigmoid(x, mul(kOaiAlpha, x)), add(y, 1.0f));
}
constexpr float kGeluZ = 2.0f * 0.79788456080286535588f;  // 2 sqrt(2/pi)
constexpr float kGeluC = 0.044715f;
/// GELU, tanh approximation: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi)(x + c x^3);
/// z = (x * 2 sqrt(2/pi)) * fma(x*x, c, 1).
ZINC_HD float gelu_tanh(float x) {
    const float z = mul(mul(x, kGeluZ), fma(mul(x, x), kGeluC, 1.0f));
    return x_sigmoid(x, z);
}

/// tanh(y): for |y| < 0.125 the odd Taylor polynomial y + y^3 (-1/3 + y^2 (2/15 - 17/315 y^2))
/// (truncation below 2e-10 relative), else 1 - 2 / (exp(2|y|) + 1) with the sign of y.
ZINC_HD float tanh(float y) {
    const float a = y < 0.0f ? -y : y;
    if (a < 0.125f) {
        const float y2 = mul(y, y);
        float p = fma(y2, -17.0f / 315.0f, 2.0f / 15.0f);
        p = fma(y2, p, -1.0f / 3.0f);
        return fma(mul(y, y2), p, y);
    }
    const float t = sub(1.0f, div(2.0f, add(exp(mul(2.0f, a)), 1.0f)));
    return y < 0.0f ? -t : t;
}
/// Logit soft-capping (Gemma 2/3): cap * tanh(x / cap).
ZINC_HD float softcap(float x, float cap) {
    return mul(cap, tanh(div(x, cap)));
}

// ---- reductions ------------------------------------------------------------------------------

/// The 8-lane tree of an AVX2 horizontal sum: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
ZINC_HD float tree8(const float* a) {
    return add(add(add(a[0], a[4]), add(a[2], a[6])), add(add(a[1], a[5]), add(a[3], a[7])));
}

/// Dot product of n floats in the canonical order: 8 chains, element i into chain i % 8 by
/// fma(a_i, b_i, chain) in increasing i, then tree8. (An AVX2 loop with one accumulator register
/// over 8 elements at a time, lanes stored and finished in scalar code for a tail, is this.)
/// b is given as a loader so f16 K rows and f32 rows share the order.
template <typename LoadB>
ZINC_HD float dot8(const float* a, LoadB b, int n) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int i = 0; i < n; ++i) acc[i & 7] = fma(a[i], b(i), acc[i & 7]);
    return tree8(acc);
}

/// The 32-lane butterfly of a CUDA warp (xor 16, 8, 4, 2, 1) as lane 0 sees it: v[i] += v[i+h]
/// for h = 16, 8, 4, 2, 1. v is clobbered.
ZINC_HD double tree32(double* v) {
    for (int h = 16; h >= 1; h >>= 1)
        for (int i = 0; i < h; ++i) v[i] = dadd(v[i], v[i + h]);
    return v[0];
}

// ---- RMS norm --------------------------------------------------------------------------------

/// RMS norm's scale 1 / sqrt(mean(x^2) + eps). The squares are float products widened to double
/// and summed in 32 chains (element i into chain i % 32, increasing i), the chains combined by
/// tree32; mean = (float)(sum / n); scale = 1 / sqrt(mean + eps) in float. A warp computes it
/// with lane l owning chain l; scalar code with an array of 32 doubles.
ZINC_HD float rms_scale(const float* x, int64_t n, float eps) {
    double ch[32];
    for (int c = 0; c < 32; ++c) ch[c] = 0.0;
    for (int64_t i = 0; i < n; ++i) ch[i & 31] = dadd(ch[i & 31], static_cast<double>(mul(x[i], x[i])));
    const float mean = static_cast<float>(ddiv(tree32(ch), static_cast<double>(n)));
    return div(1.0f, sqrt(add(mean, eps)));
}
/// One normalized element: (x * scale) * w (w == 1 when there is no weight: x * scale).
ZINC_HD float rms_apply(float x, float scale, float w) {
    return mul(mul(x, scale), w);
}
ZINC_HD float rms_apply(float x, float scale) {
    return mul(x, scale);
}

// ---- RoPE ------------------------------------------------------------------------------------

/// Rotation of the pair (a, b) by the angle whose cosine and sine are c and s (from the RoPE
/// table the host computes once, cpu::rope_cache, and shares with the device):
/// a' = a c - b s, b' = a s + b c, each product rounded, no fused operations.
ZINC_HD void rope_pair(float& a, float& b, float c, float s) {
    const float a0 = a, b0 = b;
    a = sub(mul(a0, c), mul(b0, s));
    b = add(mul(a0, s), mul(b0, c));
}

// ---- attention -------------------------------------------------------------------------------

/// Key positions are processed in chunks aligned to multiples of kAttnChunk (absolute
/// positions), so the split does not depend on batch composition, window or thread layout.
constexpr int kAttnChunk = 256;

/// Partial result of one chunk of keys for one query head: m = max score, l = sum of
/// exp(s_j - m) (float, increasing j), o[d] = sum of exp(s_j - m) * v_j[d] (fma chain, increasing
/// j). Scores s_j = dot8(q, k_j) * scale (then soft-capped if the model asks for it).
/// Chunks are merged in increasing order (merge_chunk), and the output is o[d] / l.
struct ChunkState {
    float m, l;
};
/// Merges chunk b into the running state a (a holds chunks before b). The factors are
/// fa = exp(a.m - m), fb = exp(b.m - m) with m = max(a.m, b.m); l = l_a fa + l_b fb and each
/// o[d] = o_a[d] fa + o_b[d] fb (products rounded, then the sum).
ZINC_HD float merge_factor(float m_part, float m_new) {
    return exp(sub(m_part, m_new));
}
ZINC_HD float merge_value(float va, float fa, float vb, float fb) {
    return add(mul(va, fa), mul(vb, fb));
}

/// Attention sinks (gpt-oss): after the last key chunk the sink logit is merged as one more
/// chunk with m = sink, l = 1, o = 0: mn = m > sink ? m : sink (the chunk merges' rule),
/// fa = merge_factor(m, mn), fb = merge_factor(sink, mn), l = merge_value(l, fa, 1, fb); the
/// caller then sets each o[d] = merge_value(o[d], fa, 0, fb). The output is o / l as without.
ZINC_HD void merge_sink(float& m, float& l, float sink, float& fa, float& fb) {
    const float mn = m > sink ? m : sink;
    fa = merge_factor(m, mn);
    fb = merge_factor(sink, mn);
    l = merge_value(l, fa, 1.0f, fb);
    m = mn;
}

}  // namespace zinc::canon
