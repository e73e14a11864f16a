// zinc/backend/cpu/attention.cpp — causal GQA attention over a paged f16 KV cache, one (query
// row, KV head) pair at a time, in the canonical order of backend/canon.h (docs/exactness.md):
// key positions are taken in chunks aligned to canon::kAttnChunk; per chunk the scores
// (canon::dot8 times the scale), their max, exp(s - max), the sum of those in position order and
// the V rows accumulated by fma in position order; chunks merged in order; an attention sink, if
// any, merged last (canon::merge_sink). The CUDA tier's
// attention (backend/cuda/attention.cu) performs the same operations, so both give the same bits.
// The AVX2 path computes exactly the scalar path's operations, lane by lane.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#define ZINC_ATT_SIMD 1
#endif

#include "backend/canon.h"
#include "quant/quant.h"
#include "util/check.h"

namespace zinc::cpu {
namespace {

constexpr int kChunk = canon::kAttnChunk;

bool use_simd() {
#ifdef ZINC_ATT_SIMD
    static const bool on = quant::simd_enabled();
    return on;
#else
    return false;
#endif
}

// q . k (k an f16 row): canon::dot8.
float score(const float* q, const uint16_t* k, int n, bool simd) {
#ifdef ZINC_ATT_SIMD
    if (simd) {
        __m256 acc = _mm256_setzero_ps();
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            const __m256 kv =
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i)));
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, acc);
        }
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc);
        for (; i < n; ++i) lanes[i & 7] = canon::fma(q[i], quant::fp16_to_fp32(k[i]), lanes[i & 7]);
        return canon::tree8(lanes);
    }
#endif
    return canon::dot8(
        q, [k](int i) { return quant::fp16_to_fp32(k[i]); }, n);
}

// o[d] = fma(e, v[d], o[d]) for d < n.
void axpy_f16(float e, const uint16_t* v, float* o, int n, bool simd) {
    int d = 0;
#ifdef ZINC_ATT_SIMD
    if (simd) {
        const __m256 ev = _mm256_set1_ps(e);
        for (; d + 8 <= n; d += 8) {
            const __m256 vv =
                _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + d)));
            _mm256_storeu_ps(o + d, _mm256_fmadd_ps(ev, vv, _mm256_loadu_ps(o + d)));
        }
    }
#endif
    for (; d < n; ++d) o[d] = canon::fma(e, quant::fp16_to_fp32(v[d]), o[d]);
}

// o[d] = o[d] * fa + oc[d] * fb (canon::merge_value).
void merge_rows(float* o, float fa, const float* oc, float fb, int n, bool simd) {
    int d = 0;
#ifdef ZINC_ATT_SIMD
    if (simd) {
        const __m256 a = _mm256_set1_ps(fa), b = _mm256_set1_ps(fb);
        for (; d + 8 <= n; d += 8) {
            _mm256_storeu_ps(o + d, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(o + d), a),
                                                  _mm256_mul_ps(_mm256_loadu_ps(oc + d), b)));
        }
    }
#endif
    for (; d < n; ++d) o[d] = canon::merge_value(o[d], fa, oc[d], fb);
}

}  // namespace

void paged_attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
                     std::span<const AttentionSeq> seqs, const PagedKvView& kv, float* out,
                     int64_t ldo, float* scratch) {
    ZINC_CHECK(p.n_head > 0 && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
    ZINC_CHECK(kv.block_size > 0 && !seqs.empty());
    const int group = p.n_head / p.n_head_kv;
    const int64_t n_rows = static_cast<int64_t>(seqs.back().row0) + seqs.back().n_tokens;
    // Work unit: one query row and one KV head, i.e. the `group` query heads that share it, so
    // each K and V row is read once for all of them.
    const int64_t n_units = n_rows * p.n_head_kv;
    const int64_t bs = kv.block_size;
    const int hd = p.head_dim_k, hdv = p.head_dim_v;
    const bool simd = use_simd();
    const int64_t per_thread = attention_scratch_floats(p, 1, 0);

    pool.run([&](int ith, int nth) {
        float* base = scratch + static_cast<int64_t>(ith) * per_thread;
        float* sc = base;                                      // group x kChunk scores / exps
        float* o = sc + static_cast<int64_t>(group) * kChunk;  // group x hdv running output
        float* oc = o + static_cast<int64_t>(group) * hdv;     // group x hdv chunk output
        float* ml = oc + static_cast<int64_t>(group) * hdv;    // group x (m, l)
        size_t si = 0;  // sequence of the current row (units are visited in row order)
        // Interleaved split: later tokens attend to more positions, so striding balances.
        for (int64_t unit = ith; unit < n_units; unit += nth) {
            const int64_t r = unit / p.n_head_kv;
            const int kvh = static_cast<int>(unit % p.n_head_kv);
            while (r >= static_cast<int64_t>(seqs[si].row0) + seqs[si].n_tokens) ++si;
            const AttentionSeq& sq = seqs[si];
            const int64_t pos = sq.pos0 + (r - sq.row0);
            const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
            const int64_t last = p.causal ? pos : sq.pos0 + sq.n_tokens - 1;  // last key
            const uint16_t* kbase = kv.k + static_cast<int64_t>(kvh) * hd;
            const uint16_t* vbase = kv.v + static_cast<int64_t>(kvh) * hdv;
            const float* q0 = q + r * ldq + static_cast<int64_t>(kvh) * group * hd;
            float* o0 = out + r * ldo + static_cast<int64_t>(kvh) * group * hdv;
            auto phys = [&](int64_t j) {
                return static_cast<int64_t>(sq.block_table[j / bs]) * bs + j % bs;
            };

            bool first = true;
            for (int64_t c0 = lo - lo % kChunk; c0 <= last; c0 += kChunk) {
                const int64_t jb = std::max(lo, c0), je = std::min(last, c0 + kChunk - 1);
                const int len = static_cast<int>(je - jb + 1);
                for (int t = 0; t < len; ++t) {
                    const uint16_t* kj = kbase + phys(jb + t) * kv.k_stride;
                    for (int g = 0; g < group; ++g)
                        sc[g * kChunk + t] = canon::mul(score(q0 + g * hd, kj, hd, simd), p.scale);
                }
                for (int g = 0; g < group; ++g) {
                    float* s = sc + g * kChunk;
                    float mc = -INFINITY;
                    for (int t = 0; t < len; ++t) mc = s[t] > mc ? s[t] : mc;
                    float lc = 0.0f;
                    float* ocg = first ? o + g * hdv : oc + g * hdv;
                    std::fill(ocg, ocg + hdv, 0.0f);
                    for (int t = 0; t < len; ++t) {
                        const float e = canon::exp(canon::sub(s[t], mc));
                        lc = canon::add(lc, e);
                        axpy_f16(e, vbase + phys(jb + t) * kv.v_stride, ocg, hdv, simd);
                    }
                    float& m = ml[2 * g];
                    float& l = ml[2 * g + 1];
                    if (first) {
                        m = mc;
                        l = lc;
                    } else {
                        const float mn = m > mc ? m : mc;
                        const float fa = canon::merge_factor(m, mn),
                                    fb = canon::merge_factor(mc, mn);
                        l = canon::merge_value(l, fa, lc, fb);
                        merge_rows(o + g * hdv, fa, ocg, fb, hdv, simd);
                        m = mn;
                    }
                }
                first = false;
            }
            if (p.sinks) {  // one more merge: the sink chunk (m = sink, l = 1, o = 0)
                for (int g = 0; g < group; ++g) {
                    float fa, fb;
                    canon::merge_sink(ml[2 * g], ml[2 * g + 1], p.sinks[kvh * group + g], fa, fb);
                    float* og = o + g * hdv;
                    for (int d = 0; d < hdv; ++d) og[d] = canon::merge_value(og[d], fa, 0.0f, fb);
                }
            }
            for (int g = 0; g < group; ++g) {
                const float l = ml[2 * g + 1];
                for (int d = 0; d < hdv; ++d) o0[g * hdv + d] = canon::div(o[g * hdv + d], l);
            }
        }
    });
}

void attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
               int n_tokens, int64_t pos0, const KvView& kv, float* out, int64_t ldo,
               float* scratch) {
    const int32_t block0 = 0;
    const AttentionSeq seq{0, n_tokens, pos0, &block0};
    const PagedKvView paged{kv.k, kv.v, kv.k_stride, kv.v_stride, pos0 + n_tokens};
    paged_attention(pool, p, q, ldq, std::span<const AttentionSeq>(&seq, 1), paged, out, ldo,
                    scratch);
}

}  // namespace zinc::cpu
