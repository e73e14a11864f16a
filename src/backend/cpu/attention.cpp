// zinc/backend/cpu/attention.cpp — causal GQA attention, one (token, head) pair at a time.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cstring>

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
    const int64_t n_pairs = static_cast<int64_t>(n_tokens) * p.n_head;

    pool.run([&](int ith, int nth) {
        float* s = scores + static_cast<int64_t>(ith) * n_pos;
        // Interleaved split: later tokens attend to more positions, so striding balances.
        for (int64_t pair = ith; pair < n_pairs; pair += nth) {
            const int64_t t = pair / p.n_head;
            const int h = static_cast<int>(pair % p.n_head);
            const int kvh = h / group;
            const int64_t pos = pos0 + t;
            const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
            const int64_t n = pos - lo + 1;
            const float* qh = q + t * ldq + static_cast<int64_t>(h) * p.head_dim_k;
            const uint16_t* kbase = kv.k + static_cast<int64_t>(kvh) * p.head_dim_k;
            for (int64_t j = 0; j < n; ++j) {
                s[j] = dot_f32_f16(qh, kbase + (lo + j) * kv.k_stride, p.head_dim_k) * p.scale;
            }
            softmax(s, n);
            float* o = out + t * ldo + static_cast<int64_t>(h) * p.head_dim_v;
            std::memset(o, 0, sizeof(float) * p.head_dim_v);
            const uint16_t* vbase = kv.v + static_cast<int64_t>(kvh) * p.head_dim_v;
            for (int64_t j = 0; j < n; ++j) {
                axpy_f16(s[j], vbase + (lo + j) * kv.v_stride, o, p.head_dim_v);
            }
        }
    });
}

}  // namespace zinc::cpu
