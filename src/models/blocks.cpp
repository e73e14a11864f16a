// zinc/models/blocks.cpp — shared transformer blocks over the CPU ops.
#include "models/blocks.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cpu/activations.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/f16_vec.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "runtime/forward_hooks.h"

namespace zinc::models {
namespace {

// Run fn(r0, r1) over [0, n_rows): inline for a single row (decode), split across the pool
// otherwise.
template <class F>
void parallel_rows(ForwardState& st, int64_t n_rows, F&& fn) {
    if (n_rows <= 1 || st.pool.n_threads() == 1) {
        fn(int64_t{0}, n_rows);
        return;
    }
    st.pool.run([&](int ith, int nth) {
        const cpu::Range r = cpu::split_range(n_rows, ith, nth);
        if (r.begin < r.end) fn(r.begin, r.end);
    });
}

// Evidence (runtime/forward_hooks.h): one count per CPU op call, with the weight bytes it reads
// (each tensor once per call) and the f32 activation (and f16 KV) bytes it reads and writes.
using runtime::Op;
void count(ForwardState& st, Op op, uint64_t w_bytes, uint64_t a_bytes) {
    if (st.hooks) st.hooks->count(runtime::Device::Cpu, op, w_bytes, a_bytes);
}
uint64_t mat_bytes(const Weight* w) {
    return w ? static_cast<uint64_t>(w->mat.row_bytes) * static_cast<uint64_t>(w->mat.n_rows) : 0;
}
uint64_t vec_bytes(const Weight* w) {
    return w ? static_cast<uint64_t>(w->ne[0]) * sizeof(float) : 0;
}
constexpr uint64_t kF32 = sizeof(float);

}  // namespace

void dump(ForwardState& st, std::string_view name, int il, float* data, int64_t dim) {
    if (st.hooks) {
        if (st.hooks->corrupts(name, il))  // test-only (ZINC_TEST_CORRUPT)
            for (int64_t i = 0; i < dim; ++i) data[i] = runtime::corrupt_value(data[i]);
        st.hooks->capture_host(name, il, data, st.n_tokens, dim);
    }
    if (st.dump.name.empty()) return;
    std::string full =
        il >= 0 ? "blk." + std::to_string(il) + "." + std::string(name) : std::string(name);
    if (!st.dump.wants(full)) return;
    std::fprintf(stderr, "ZINC_DUMP %s pos0=%lld shape=[%lld, %d]:", full.c_str(),
                 static_cast<long long>(st.dump_pos0), static_cast<long long>(dim), st.n_tokens);
    for (int64_t i = 0; i < dim * st.n_tokens; ++i) std::fprintf(stderr, " %.6g", data[i]);
    std::fprintf(stderr, "\n");
}

void embed(ForwardState& st, const Weight& tok_embd, float scale) {
    const int64_t dim = tok_embd.mat.n_cols;
    parallel_rows(st, st.n_tokens, [&](int64_t r0, int64_t r1) {
        cpu::get_rows(tok_embd.mat, st.tokens + r0, static_cast<int>(r1 - r0),
                      st.ws.x.data() + r0 * dim, scale);
    });
    count(st, Op::Embed, st.n_tokens * static_cast<uint64_t>(tok_embd.mat.row_bytes),
          kF32 * st.n_tokens * dim);
    dump(st, "inp_embd", -1, st.ws.x.data(), dim);
}

void rms_norm(ForwardState& st, const float* x, const Weight& w, float eps, float* y, int64_t dim) {
    const float* wd = w.f32();
    parallel_rows(st, st.n_tokens, [&](int64_t r0, int64_t r1) {
        cpu::rms_norm_rows(x + r0 * dim, wd, y + r0 * dim, r1 - r0, dim, eps);
    });
    count(st, Op::RmsNorm, kF32 * dim, 2 * kF32 * st.n_tokens * dim);
}

void self_attention(ForwardState& st, const ModelConfig& cfg, int il, const AttentionWeights& w,
                    const float* xn, float* out) {
    model::Workspace& ws = st.ws;
    const int n = st.n_tokens;
    const int64_t q_dim = cfg.q_dim(), kd = cfg.kv_dim_k(), vd = cfg.kv_dim_v();

    const cpu::MatmulJob qkv[3] = {
        {&w.wq->mat, ws.q.data(), q_dim, w.bq ? w.bq->f32() : nullptr},
        {&w.wk->mat, ws.k.data(), kd, w.bk ? w.bk->f32() : nullptr},
        {&w.wv->mat, ws.v.data(), vd, w.bv ? w.bv->f32() : nullptr},
    };
    cpu::matmul(st.pool, st.mm, qkv, xn, n, cfg.n_embd);
    count(st, Op::Matmul,
          mat_bytes(w.wq) + mat_bytes(w.wk) + mat_bytes(w.wv) + vec_bytes(w.bq) + vec_bytes(w.bk) +
              vec_bytes(w.bv),
          kF32 * n * (cfg.n_embd + q_dim + kd + vd));
    dump(st, "Qcur", il, ws.q.data(), q_dim);
    dump(st, "Kcur", il, ws.k.data(), kd);
    dump(st, "Vcur", il, ws.v.data(), vd);

    cpu::RopeParams rp = cfg.rope(il);
    if (w.rope_freqs) rp.freq_factors = w.rope_freqs->f32();
    const float* qn = w.q_norm ? w.q_norm->f32() : nullptr;
    const float* kn = w.k_norm ? w.k_norm->f32() : nullptr;
    parallel_rows(st, n, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            float* cs = ws.rope_cs.data() + t * cfg.n_rot;
            cpu::rope_cache(rp, st.pos[t], cs);
            float* qt = ws.q.data() + t * q_dim;
            float* kt = ws.k.data() + t * kd;
            if (qn) {
                for (int h = 0; h < cfg.n_head; ++h) {
                    float* qh = qt + static_cast<int64_t>(h) * cfg.head_dim_k;
                    cpu::rms_norm(qh, qn, qh, cfg.head_dim_k, cfg.rms_eps);
                }
            }
            if (kn) {
                for (int h = 0; h < cfg.n_head_kv; ++h) {
                    float* kh = kt + static_cast<int64_t>(h) * cfg.head_dim_k;
                    cpu::rms_norm(kh, kn, kh, cfg.head_dim_k, cfg.rms_eps);
                }
            }
            cpu::rope_apply(rp, cs, qt, cfg.n_head, cfg.head_dim_k);
            cpu::rope_apply(rp, cs, kt, cfg.n_head_kv, cfg.head_dim_k);
            cpu::f32_to_f16_row(kt, st.kv.k_row(il, st.kv_slot[t]), kd);
            cpu::f32_to_f16_row(ws.v.data() + t * vd, st.kv.v_row(il, st.kv_slot[t]), vd);
        }
    });

    // RoPE (+ Q/K norms) and the K/V append above: one op over all rows.
    count(st, Op::RopeKv, vec_bytes(w.q_norm) + vec_bytes(w.k_norm),
          2 * kF32 * n * (q_dim + kd) + (kF32 + 2) * n * (kd + vd));
    uint64_t n_attended = 0;  // K/V positions read, over all rows
    for (const cpu::AttentionSeq& s : st.seqs)
        for (int32_t i = 0; i < s.n_tokens; ++i)
            n_attended += runtime::attended_positions(s.pos0 + i, cfg.window(il));
    cpu::paged_attention(st.pool, cfg.attention(il), ws.q.data(), q_dim, st.seqs, st.kv.view(il),
                         ws.attn.data(), cfg.attn_out_dim(), ws.scores.data());
    count(st, Op::Attention, 0,
          2 * n_attended * (kd + vd) + kF32 * n * (q_dim + cfg.attn_out_dim()));
    dump(st, "kqv_out", il, ws.attn.data(), cfg.attn_out_dim());
    cpu::matmul(st.pool, st.mm, w.wo->mat, ws.attn.data(), n, cfg.attn_out_dim(), out, cfg.n_embd);
    count(st, Op::Matmul, mat_bytes(w.wo), kF32 * n * (cfg.attn_out_dim() + cfg.n_embd));
    dump(st, "attn_out", il, out, cfg.n_embd);
}

void ffn_gated(ForwardState& st, const ModelConfig& cfg, int il, const FfnWeights& w,
               Activation act, const float* xn, float* out) {
    model::Workspace& ws = st.ws;
    const int n = st.n_tokens;
    const int64_t ff = cfg.n_ff;
    const cpu::MatmulJob gu[2] = {
        {&w.gate->mat, ws.gate.data(), ff, nullptr},
        {&w.up->mat, ws.up.data(), ff, nullptr},
    };
    cpu::matmul(st.pool, st.mm, gu, xn, n, cfg.n_embd);
    count(st, Op::Matmul, mat_bytes(w.gate) + mat_bytes(w.up), kF32 * n * (cfg.n_embd + 2 * ff));
    dump(st, "ffn_gate", il, ws.gate.data(), ff);
    dump(st, "ffn_up", il, ws.up.data(), ff);
    parallel_rows(st, n, [&](int64_t t0, int64_t t1) {
        // One call per row: the SIMD body / scalar tail split then depends only on the column,
        // never on which rows share the step (batch invariance, docs/engine.md).
        for (int64_t t = t0; t < t1; ++t) {
            float* g = ws.gate.data() + t * ff;
            const float* u = ws.up.data() + t * ff;
            if (act == Activation::SiLU) {
                cpu::swiglu(g, u, g, ff);
            } else {
                cpu::geglu(g, u, g, ff);
            }
        }
    });
    count(st, Op::Glu, 0, 3 * kF32 * n * ff);
    dump(st, "ffn_glu", il, ws.gate.data(), ff);
    cpu::matmul(st.pool, st.mm, w.down->mat, ws.gate.data(), n, ff, out, cfg.n_embd);
    count(st, Op::Matmul, mat_bytes(w.down), kF32 * n * (ff + cfg.n_embd));
    dump(st, "ffn_out", il, out, cfg.n_embd);
}

void keep_output_rows(ForwardState& st, std::initializer_list<float*> bufs, int64_t dim) {
    if (st.n_out == st.n_tokens) return;  // every row's logits are wanted
    count(st, Op::Gather, 0,
          2 * kF32 * bufs.size() * static_cast<uint64_t>(std::max(st.n_out, 1)) * dim);
    if (st.n_out == 0) {
        // Nobody wants logits (a prefill chunk): finish the last row only, for ZINC_DUMP.
        const int64_t last = st.n_tokens - 1;
        for (float* b : bufs) std::memmove(b, b + last * dim, sizeof(float) * dim);
        st.dump_pos0 = st.pos[last];
        st.n_tokens = 1;
    } else {
        // Gather the output rows to the front (out_rows ascending, so row i <= out_rows[i] and
        // the forward copy never overwrites a row still to be read).
        for (float* b : bufs) {
            for (int i = 0; i < st.n_out; ++i) {
                const int64_t r = st.out_rows[i];
                if (r != i) std::memcpy(b + i * dim, b + r * dim, sizeof(float) * dim);
            }
        }
        st.dump_pos0 = st.pos[st.out_rows[0]];
        st.n_tokens = st.n_out;
    }
    // Rows no longer match the batch's tokens, positions and sequences.
    st.tokens = nullptr;
    st.pos = nullptr;
    st.kv_slot = nullptr;
    st.seqs = {};
}

void add_residual(ForwardState& st, float* x, const float* y, int64_t dim) {
    parallel_rows(st, st.n_tokens, [&](int64_t r0, int64_t r1) {
        cpu::add(x + r0 * dim, y + r0 * dim, x + r0 * dim, (r1 - r0) * dim);
    });
    count(st, Op::Add, 0, 3 * kF32 * st.n_tokens * dim);
}

void output_head(ForwardState& st, const ModelConfig& cfg, const Weight& norm,
                 const Weight& lm_head, float softcap) {
    if (!st.logits) return;  // a prefill chunk whose logits nobody asked for
    ZINC_CHECK(st.n_tokens == st.n_out);  // keep_output_rows has run
    model::Workspace& ws = st.ws;
    const int64_t d = cfg.n_embd;
    const int n_out = st.n_out;
    cpu::rms_norm_rows(ws.x.data(), norm.f32(), ws.xn.data(), n_out, d, cfg.rms_eps);
    count(st, Op::RmsNorm, kF32 * d, 2 * kF32 * n_out * d);
    cpu::matmul(st.pool, st.mm, lm_head.mat, ws.xn.data(), n_out, d, st.logits, cfg.n_vocab);
    count(st, Op::Matmul, mat_bytes(&lm_head), kF32 * n_out * (d + cfg.n_vocab));
    if (softcap > 0.0f) {
        cpu::softcap(st.logits, softcap, static_cast<int64_t>(n_out) * cfg.n_vocab);
        count(st, Op::Softcap, 0, 2 * kF32 * n_out * cfg.n_vocab);
    }
}

}  // namespace zinc::models
