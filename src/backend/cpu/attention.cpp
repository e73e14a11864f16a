// zinc/backend/cpu/attention.cpp — causal GQA attention over a paged f16 KV cache, one (query
// row, KV head) pair at a time.
#include "backend/cpu/attention.h"

#include <algorithm>

#include "backend/cpu/f16_vec.h"
#include "backend/cpu/softmax.h"
#include "util/check.h"

namespace zinc::cpu {

void paged_attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
                     std::span<const AttentionSeq> seqs, const PagedKvView& kv, float* out,
                     int64_t ldo, float* scores) {
    ZINC_CHECK(p.n_head > 0 && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
    ZINC_CHECK(kv.block_size > 0 && !seqs.empty());
    const int group = p.n_head / p.n_head_kv;
    int64_t max_pos = 0;
    for (const AttentionSeq& s : seqs) max_pos = std::max(max_pos, s.pos0 + s.n_tokens);
    const int64_t n_rows = static_cast<int64_t>(seqs.back().row0) + seqs.back().n_tokens;
    // Work unit: one query row and one KV head, i.e. the `group` query heads that share it, so
    // each K and V row is widened from f16 once and used by all of them.
    const int64_t n_units = n_rows * p.n_head_kv;
    constexpr int kMaxDim = 512;  // widened row buffer; larger heads widen per query head
    const bool widen = p.head_dim_k <= kMaxDim && p.head_dim_v <= kMaxDim;
    const int64_t bs = kv.block_size;

    pool.run([&](int ith, int nth) {
        float* s_all = scores + static_cast<int64_t>(ith) * group * max_pos;
        alignas(32) float row[kMaxDim];
        size_t si = 0;  // sequence of the current row (units are visited in row order)
        // Interleaved split: later tokens attend to more positions, so striding balances.
        for (int64_t unit = ith; unit < n_units; unit += nth) {
            const int64_t r = unit / p.n_head_kv;
            const int kvh = static_cast<int>(unit % p.n_head_kv);
            while (r >= static_cast<int64_t>(seqs[si].row0) + seqs[si].n_tokens) ++si;
            const AttentionSeq& sq = seqs[si];
            const int64_t pos = sq.pos0 + (r - sq.row0);
            const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
            const int64_t n = pos - lo + 1;
            const uint16_t* kbase = kv.k + static_cast<int64_t>(kvh) * p.head_dim_k;
            const uint16_t* vbase = kv.v + static_cast<int64_t>(kvh) * p.head_dim_v;
            const float* q0 = q + r * ldq + static_cast<int64_t>(kvh) * group * p.head_dim_k;
            float* o0 = out + r * ldo + static_cast<int64_t>(kvh) * group * p.head_dim_v;

            // Scores s[g][j] = q_g . k_j * scale, walking positions lo..pos run by run (a run is
            // the part of one block inside the range: consecutive physical rows).
            for (int64_t j0 = lo; j0 <= pos;) {
                const int64_t off = j0 % bs;
                const int64_t len = std::min(bs - off, pos - j0 + 1);
                const int64_t phys = static_cast<int64_t>(sq.block_table[j0 / bs]) * bs + off;
                for (int64_t i = 0; i < len; ++i) {
                    const int64_t j = j0 - lo + i;
                    const uint16_t* kj = kbase + (phys + i) * kv.k_stride;
                    if (widen) {
                        f16_to_f32_row(kj, row, p.head_dim_k);
                        float d[4];
                        for (int g0 = 0; g0 < group; g0 += 4) {
                            const int ng = std::min(4, group - g0);
                            dot_f32_rows(q0 + g0 * p.head_dim_k, p.head_dim_k, ng, row,
                                         p.head_dim_k, d);
                            for (int g = 0; g < ng; ++g) s_all[(g0 + g) * n + j] = d[g] * p.scale;
                        }
                    } else {
                        for (int g = 0; g < group; ++g) {
                            s_all[g * n + j] =
                                dot_f32_f16(q0 + g * p.head_dim_k, kj, p.head_dim_k) * p.scale;
                        }
                    }
                }
                j0 += len;
            }
            for (int g = 0; g < group; ++g) softmax(s_all + g * n, n);

            // out_g = sum_j s[g][j] v_j, accumulated in position order across the runs.
            for (int g = 0; g < group; ++g) {
                for (int64_t j0 = lo; j0 <= pos;) {
                    const int64_t off = j0 % bs;
                    const int64_t len = std::min(bs - off, pos - j0 + 1);
                    const int64_t phys = static_cast<int64_t>(sq.block_table[j0 / bs]) * bs + off;
                    weighted_sum_f16(s_all + g * n + (j0 - lo), len, vbase + phys * kv.v_stride,
                                     kv.v_stride, o0 + g * p.head_dim_v, p.head_dim_v,
                                     /*accumulate=*/j0 != lo);
                    j0 += len;
                }
            }
        }
    });
}

void attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
               int n_tokens, int64_t pos0, const KvView& kv, float* out, int64_t ldo,
               float* scores) {
    const int32_t block0 = 0;
    const AttentionSeq seq{0, n_tokens, pos0, &block0};
    const PagedKvView paged{kv.k, kv.v, kv.k_stride, kv.v_stride, pos0 + n_tokens};
    paged_attention(pool, p, q, ldq, std::span<const AttentionSeq>(&seq, 1), paged, out, ldo,
                    scores);
}

}  // namespace zinc::cpu
