// zinc/backend/cpu/attention.cpp — causal GQA attention, one (token, head) pair at a time.
#include "backend/cpu/attention.h"

#include <algorithm>

#include "backend/cpu/f16_vec.h"
#include "backend/cpu/softmax.h"
#include "util/check.h"

namespace zinc::cpu {

void attention(ThreadPool& pool, const AttentionParams& p, const float* q, int64_t ldq,
               int n_tokens, int64_t pos0, const KvView& kv, float* out, int64_t ldo,
               float* scores) {
    ZINC_CHECK(p.n_head > 0 && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
    const int group = p.n_head / p.n_head_kv;
    const int64_t n_pos = pos0 + n_tokens;
    // Work unit: one token and one KV head, i.e. the `group` query heads that share it, so each
    // K and V row is widened from f16 once and used by all of them.
    const int64_t n_units = static_cast<int64_t>(n_tokens) * p.n_head_kv;
    constexpr int kMaxDim = 512;  // widened row buffer; larger heads widen per query head
    const bool widen = p.head_dim_k <= kMaxDim && p.head_dim_v <= kMaxDim;

    pool.run([&](int ith, int nth) {
        float* s_all = scores + static_cast<int64_t>(ith) * group * n_pos;
        alignas(32) float row[kMaxDim];
        // Interleaved split: later tokens attend to more positions, so striding balances.
        for (int64_t unit = ith; unit < n_units; unit += nth) {
            const int64_t t = unit / p.n_head_kv;
            const int kvh = static_cast<int>(unit % p.n_head_kv);
            const int64_t pos = pos0 + t;
            const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
            const int64_t n = pos - lo + 1;
            const uint16_t* kbase = kv.k + static_cast<int64_t>(kvh) * p.head_dim_k;
            const uint16_t* vbase = kv.v + static_cast<int64_t>(kvh) * p.head_dim_v;
            const float* q0 = q + t * ldq + static_cast<int64_t>(kvh) * group * p.head_dim_k;
            float* o0 = out + t * ldo + static_cast<int64_t>(kvh) * group * p.head_dim_v;

            // Scores s[g][j] = q_g . k_j * scale
            for (int64_t j = 0; j < n; ++j) {
                const uint16_t* kj = kbase + (lo + j) * kv.k_stride;
                if (widen) {
                    f16_to_f32_row(kj, row, p.head_dim_k);
                    float d[4];
                    for (int g0 = 0; g0 < group; g0 += 4) {
                        const int ng = std::min(4, group - g0);
                        dot_f32_rows(q0 + g0 * p.head_dim_k, p.head_dim_k, ng, row, p.head_dim_k,
                                     d);
                        for (int g = 0; g < ng; ++g) s_all[(g0 + g) * n + j] = d[g] * p.scale;
                    }
                } else {
                    for (int g = 0; g < group; ++g) {
                        s_all[g * n + j] =
                            dot_f32_f16(q0 + g * p.head_dim_k, kj, p.head_dim_k) * p.scale;
                    }
                }
            }
            for (int g = 0; g < group; ++g) softmax(s_all + g * n, n);

            // out_g = sum_j s[g][j] v_j, accumulated in registers over j.
            const uint16_t* vfirst = vbase + lo * kv.v_stride;
            for (int g = 0; g < group; ++g) {
                weighted_sum_f16(s_all + g * n, n, vfirst, kv.v_stride, o0 + g * p.head_dim_v,
                                 p.head_dim_v);
            }
        }
    });
}

}  // namespace zinc::cpu
