// zinc/backend/cpu/executor.cpp — the CPU tier's executor of the op list (model/ir.h): each op
// with the CPU kernels, op by op, over all rows of the step.
//
// The op boundary is the one place where the executor counts the op (runtime/forward_hooks.h:
// one count per kernel call, with the weight bytes it reads, each tensor once per call, and
// the f32 activation (and f16 KV) bytes it reads and writes), skips the layers ZINC_SKIP_LAYERS
// names, and observes each named output: first the test-only fault injection (ZINC_TEST_CORRUPT
// rewrites row 0 in place, so the forward pass continues on the wrong value), then the capture
// for validation, then ZINC_DUMP. The math inside an op knows none of this. The CPU tier runs
// the plain ops (no fusions): it is the oracle.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/canon.h"
#include "backend/cpu/activations.h"
#include "backend/cpu/delta_net.h"
#include "backend/cpu/elementwise.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/f16_vec.h"
#include "backend/cpu/forward_state.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "util/check.h"

namespace zinc::cpu {

using model::OpKind;
using model::Program;
using model::Tid;
using model::Weight;

Workspace::Workspace(const Program& prog, int nb, int max_seq_len, int n_threads) : n_batch(nb) {
    const size_t n = static_cast<size_t>(nb);
    t.resize(prog.tensors.size());
    for (size_t i = 0; i < prog.tensors.size(); ++i)
        if (static_cast<Tid>(i) != prog.logits) t[i].resize(n * prog.tensors[i].width);
    int64_t n_rot = 0, scratch = 0;
    for (const model::Op& op : prog.ops) {
        if (op.kind() == OpKind::RopeKv)
            n_rot = std::max<int64_t>(n_rot, op.as<model::RopeKvP>().rope.n_rot);
        if (op.kind() == OpKind::Attention) {
            const auto& a = op.as<model::AttentionP>();
            const AttentionParams p{a.n_head,
                                    a.n_head_kv,
                                    a.head_dim_k,
                                    a.head_dim_v,
                                    a.scale,
                                    a.window,
                                    a.sinks ? a.sinks->f32() : nullptr};
            scratch = std::max(scratch, attention_scratch_floats(p, n_threads, max_seq_len));
        }
        if (op.kind() == OpKind::Moe) {
            const auto& m = op.as<model::MoeP>();
            moe.reserve(nb, m.n_used, prog.width(m.in), m.n_ff, m.n_expert);
        }
    }
    rope_cs.resize(n * static_cast<size_t>(n_rot));
    scores.resize(static_cast<size_t>(scratch));
    for (const Weight* w : prog.weights())
        mats[w] = MatView{w->type, w->ne[0], w->n_rows, w->data, w->row_bytes};
}

namespace {

using runtime::Op;  // the evidence op names
constexpr uint64_t kF32 = sizeof(float);

// Run fn(r0, r1) over [0, n_rows): inline for a single row (decode), split across the pool
// otherwise.
template <class F>
void parallel_rows(ForwardState& st, int64_t n_rows, F&& fn) {
    if (n_rows <= 1 || st.pool.n_threads() == 1) {
        fn(int64_t{0}, n_rows);
        return;
    }
    st.pool.run([&](int ith, int nth) {
        const Range r = split_range(n_rows, ith, nth);
        if (r.begin < r.end) fn(r.begin, r.end);
    });
}

uint64_t mat_bytes(const Weight* w) {
    return w ? w->bytes() : 0;
}
uint64_t vec_bytes(const Weight* w) {
    return w ? static_cast<uint64_t>(w->ne[0]) * sizeof(float) : 0;
}

class Executor {
  public:
    Executor(const Program& prog, ForwardState& st) : prog_(prog), st_(st) {}

    void run(size_t begin, size_t end) {
        int il = -2;
        bool skip = false;
        for (size_t i = begin; i < end; ++i) {
            const model::Op& op = prog_.ops[i];
            if (op.il != il) {  // a layer boundary: ZINC_SKIP_LAYERS (debug) skips it whole
                il = op.il;
                skip = il >= 0 && st_.hooks && st_.hooks->skip_layer(il, prog_.n_layer);
            }
            if (skip) continue;
            if (op.head) {
                // a prefill chunk whose logits nobody wants (an embedding forward runs the head
                // up to Program::embd_op, where execute() stops it)
                if (!st_.logits && !st_.embeddings) continue;
                ZINC_CHECK(st_.n_tokens == st_.n_out);  // KeepRows has run
            }
            exec(op);
            for (int i = 0; i < op.n_outs; ++i)
                if (op.outs[i].name) observe(op, op.outs[i]);
        }
    }

  private:
    float* buf(Tid t) {
        if (t == prog_.logits) return st_.logits;
        return st_.ws.t[static_cast<size_t>(t)].data();
    }
    int64_t width(Tid t) const { return prog_.width(t); }
    void count(Op op, uint64_t w_bytes, uint64_t a_bytes) {
        if (st_.hooks) st_.hooks->count(runtime::Device::Cpu, op, w_bytes, a_bytes);
    }

    void observe(const model::Op& op, const model::Output& o) {
        float* data = buf(o.t);
        const int64_t dim = width(o.t);
        if (st_.hooks && o.validate) {
            if (st_.hooks->corrupts(o.name, op.il))  // test-only (ZINC_TEST_CORRUPT)
                for (int64_t i = 0; i < dim; ++i) data[i] = runtime::corrupt_value(data[i]);
            st_.hooks->capture_host(o.name, op.il, data, st_.n_tokens, dim);
        }
        if (st_.dump.name.empty()) return;
        const std::string full = model::full_name(o.name, op.il);
        if (st_.dump.wants(full)) model::print_dump(full, st_.dump_pos0, data, st_.n_tokens, dim);
    }

    void exec(const model::Op& op) {
        switch (op.kind()) {
            case OpKind::Embed:
                return embed(op);
            case OpKind::RmsNorm:
                return rms_norm(op);
            case OpKind::Matmul:
                return matmul(op);
            case OpKind::RopeKv:
                return rope_kv(op);
            case OpKind::Attention:
                return attention(op);
            case OpKind::Glu:
                return glu(op);
            case OpKind::Add:
                return add(op);
            case OpKind::AddRmsNorm:
                return add_rms_norm(op);
            case OpKind::KeepRows:
                return keep_rows(op);
            case OpKind::Softcap:
                return softcap(op);
            case OpKind::SsmConv:
                return ssm_conv(op);
            case OpKind::DeltaNet:
                return delta_net(op);
            case OpKind::GatedRmsNorm:
                return gated_rms_norm(op);
            case OpKind::SplitGate:
                return split_gate(op);
            case OpKind::SigmoidMul:
                return sigmoid_mul(op);
            case OpKind::Moe:
                return moe(op);
            case OpKind::AllReduce:  // one executor is one rank: the sum over one rank
                return;              // (backend/cpu/tp_runner.cpp sums N shards around it)
            case OpKind::LayerNorm:
                return layer_norm(op);
            case OpKind::AddEmbed:
                return add_embed(op);
            case OpKind::Gelu:
                return gelu(op);
            case OpKind::Scale:
                return scale(op);
            case OpKind::Input:
                return input(op);
            case OpKind::Concat:
                return concat(op);
            case OpKind::kCount:
                break;
        }
        ZINC_CHECK(false && "unknown op");
    }

    void embed(const model::Op& op) {
        const auto& p = op.as<model::EmbedP>();
        const MatView& m = st_.ws.mat(p.table);
        const int64_t dim = m.n_cols;
        float* out = buf(op.outs[0].t);
        parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
            get_rows(m, st_.tokens + r0, static_cast<int>(r1 - r0), out + r0 * dim, p.scale);
        });
        count(Op::Embed, st_.n_tokens * static_cast<uint64_t>(m.row_bytes),
              kF32 * st_.n_tokens * dim);
    }

    void rms_norm(const model::Op& op) {
        const auto& p = op.as<model::RmsNormP>();
        const int64_t dim = width(p.in);
        const float* x = buf(p.in);
        float* y = buf(op.outs[0].t);
        const float* wd = p.w->f32();
        auto rows = [&](int64_t r0, int64_t r1) {
            if (p.scale == 1.0f) {
                rms_norm_rows(x + r0 * dim, wd, y + r0 * dim, r1 - r0, dim, p.eps);
                return;
            }
            // ggml's order (gemma4's router input): rms_norm, then the scale, then the weight
            rms_norm_rows(x + r0 * dim, nullptr, y + r0 * dim, r1 - r0, dim, p.eps);
            for (int64_t i = r0 * dim; i < r1 * dim; ++i) y[i] = (y[i] * p.scale) * wd[i % dim];
        };
        if (op.head) {
            rows(0, st_.n_tokens);
        } else {
            parallel_rows(st_, st_.n_tokens, rows);
        }
        count(Op::RmsNorm, kF32 * dim, 2 * kF32 * st_.n_tokens * dim);
    }

    // out = the caller's rows (Batch::hidden_in), before any KeepRows: one per batch row.
    void input(const model::Op& op) {
        const int64_t w = width(op.outs[0].t);
        ZINC_CHECK(st_.hidden_in != nullptr && st_.tokens != nullptr);
        std::memcpy(buf(op.outs[0].t), st_.hidden_in, kF32 * st_.n_tokens * w);
        count(Op::Gather, 0, 2 * kF32 * st_.n_tokens * w);
    }

    // out = [a | b] per row.
    void concat(const model::Op& op) {
        const auto& p = op.as<model::ConcatP>();
        const int64_t wa = width(p.a), wb = width(p.b), wo = width(op.outs[0].t);
        const float* a = buf(p.a);
        const float* b = buf(p.b);
        float* o = buf(op.outs[0].t);
        for (int64_t r = 0; r < st_.n_tokens; ++r) {
            std::memcpy(o + r * wo, a + r * wa, kF32 * wa);
            std::memcpy(o + r * wo + wa, b + r * wb, kF32 * wb);
        }
        count(Op::Gather, 0, 2 * kF32 * st_.n_tokens * wo);
    }

    // x *= w[0] (one learned scalar).
    void scale(const model::Op& op) {
        const auto& p = op.as<model::ScaleP>();
        const int64_t n = st_.n_tokens * width(op.outs[0].t);
        float* x = buf(op.outs[0].t);
        const float s = p.w->f32()[0];
        for (int64_t i = 0; i < n; ++i) x[i] *= s;
        count(Op::Add, kF32, 2 * kF32 * n);
    }

    void layer_norm(const model::Op& op) {
        const auto& p = op.as<model::LayerNormP>();
        const int64_t dim = width(p.in);
        const float* x = buf(p.in);
        float* y = buf(op.outs[0].t);
        const float* wd = p.w->f32();
        const float* bd = p.b ? p.b->f32() : nullptr;
        parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r)
                cpu::layer_norm(x + r * dim, wd, bd, y + r * dim, dim, p.eps);
        });
        count(Op::RmsNorm, vec_bytes(p.w) + vec_bytes(p.b), 2 * kF32 * st_.n_tokens * dim);
    }

    // out += table[pos] (or table[row]): each row's embedding row dequantized, then added.
    void add_embed(const model::Op& op) {
        const auto& p = op.as<model::AddEmbedP>();
        const MatView& m = st_.ws.mat(p.table);
        const int64_t dim = m.n_cols;
        float* out = buf(op.outs[0].t);
        parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
            std::vector<float> row(static_cast<size_t>(dim));
            for (int64_t r = r0; r < r1; ++r) {
                const int32_t id = p.by_position ? st_.pos[r] : p.row;
                get_rows(m, &id, 1, row.data());
                cpu::add(out + r * dim, row.data(), out + r * dim, dim);
            }
        });
        count(Op::Embed, st_.n_tokens * static_cast<uint64_t>(m.row_bytes),
              2 * kF32 * st_.n_tokens * dim);
    }

    void gelu(const model::Op& op) {
        const int64_t w = width(op.outs[0].t);
        float* x = buf(op.outs[0].t);
        parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) gelu_erf_rows(x + r * w, x + r * w, w);
        });
        count(Op::Glu, 0, 2 * kF32 * st_.n_tokens * w);
    }

    void matmul(const model::Op& op) {
        const auto& p = op.as<model::MatmulP>();
        ZINC_CHECK(!p.accumulate);  // the CPU tier runs no fused ops
        const int n = st_.n_tokens;
        const int64_t k = width(p.in);
        MatmulJob jobs[3];
        uint64_t w_bytes = 0, a_elems = static_cast<uint64_t>(k);
        for (int i = 0; i < p.n_w; ++i) {
            const Tid o = op.outs[i].t;
            jobs[i] = {&st_.ws.mat(p.w[i]), buf(o), width(o),
                       p.bias[i] ? p.bias[i]->f32() : nullptr};
            w_bytes += mat_bytes(p.w[i]) + vec_bytes(p.bias[i]);
            a_elems += static_cast<uint64_t>(width(o));
        }
        cpu::matmul(st_.pool, st_.mm, std::span<const MatmulJob>(jobs, p.n_w), buf(p.in), n, k);
        count(Op::Matmul, w_bytes, kF32 * n * a_elems);
    }

    void rope_kv(const model::Op& op) {
        const auto& p = op.as<model::RopeKvP>();
        const int n = st_.n_tokens;
        const Tid tq = op.outs[0].t, tk = op.outs[1].t;
        const int64_t q_dim = width(tq), kd = width(tk), vd = width(p.v);
        float* q = buf(tq);
        float* k = buf(tk);
        float* v = buf(p.v);
        const RopeParams& rp = p.rope;
        const float* qn = p.q_norm ? p.q_norm->f32() : nullptr;
        const float* kn = p.k_norm ? p.k_norm->f32() : nullptr;
        parallel_rows(st_, n, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) {
                float* cs = st_.ws.rope_cs.data() + t * rp.n_rot;
                rope_cache(rp, st_.pos[t], cs);
                float* qt = q + t * q_dim;
                float* kt = k + t * kd;
                if (qn) {
                    for (int h = 0; h < p.n_head; ++h) {
                        float* qh = qt + static_cast<int64_t>(h) * p.head_dim_k;
                        cpu::rms_norm(qh, qn, qh, p.head_dim_k, p.eps);
                    }
                }
                if (kn) {
                    for (int h = 0; h < p.n_head_kv; ++h) {
                        float* kh = kt + static_cast<int64_t>(h) * p.head_dim_k;
                        cpu::rms_norm(kh, kn, kh, p.head_dim_k, p.eps);
                    }
                }
                if (p.v_norm) {  // per head, no weight (ggml_rms_norm of Vcur)
                    for (int h = 0; h < p.n_head_kv; ++h) {
                        float* vh = v + t * vd + static_cast<int64_t>(h) * p.head_dim_v;
                        cpu::rms_norm(vh, nullptr, vh, p.head_dim_v, p.eps);
                    }
                }
                rope_apply(rp, cs, qt, p.n_head, p.head_dim_k);
                rope_apply(rp, cs, kt, p.n_head_kv, p.head_dim_k);
                f32_to_f16_row(kt, st_.kv.k_row(p.kv_layer, st_.kv_slot[t]), kd);
                f32_to_f16_row(v + t * vd, st_.kv.v_row(p.kv_layer, st_.kv_slot[t]), vd);
            }
        });
        // Q/K norms + RoPE and the K/V append: one op over all rows.
        count(Op::RopeKv, vec_bytes(p.q_norm) + vec_bytes(p.k_norm),
              2 * kF32 * n * (q_dim + kd) + (kF32 + 2) * n * (kd + vd));
    }

    void attention(const model::Op& op) {
        const auto& p = op.as<model::AttentionP>();
        const int n = st_.n_tokens;
        const int64_t q_dim = width(p.q), out_dim = width(op.outs[0].t);
        const int64_t kd = int64_t{p.n_head_kv} * p.head_dim_k;
        const int64_t vd = int64_t{p.n_head_kv} * p.head_dim_v;
        uint64_t n_attended = 0;  // K/V positions read, over all rows
        for (const AttentionSeq& s : st_.seqs)
            for (int32_t i = 0; i < s.n_tokens; ++i)
                n_attended += runtime::attended_positions(
                    p.causal ? s.pos0 + i : s.pos0 + s.n_tokens - 1, p.window);
        const AttentionParams ap{p.n_head,
                                 p.n_head_kv,
                                 p.head_dim_k,
                                 p.head_dim_v,
                                 p.scale,
                                 p.window,
                                 p.sinks ? p.sinks->f32() : nullptr,
                                 p.causal};
        paged_attention(st_.pool, ap, buf(p.q), q_dim, st_.seqs, st_.kv.view(p.kv_layer),
                        buf(op.outs[0].t), out_dim, st_.ws.scores.data());
        count(Op::Attention, 0, 2 * n_attended * (kd + vd) + kF32 * n * (q_dim + out_dim));
    }

    void glu(const model::Op& op) {
        const auto& p = op.as<model::GluP>();
        const int n = st_.n_tokens;
        const int64_t ff = width(p.gate);
        const float* gate = buf(p.gate);
        const float* up = buf(p.up);
        float* out = buf(op.outs[0].t);
        parallel_rows(st_, n, [&](int64_t t0, int64_t t1) {
            // One call per row: the SIMD body / scalar tail split then depends only on the
            // column, never on which rows share the step (batch invariance, docs/engine.md).
            for (int64_t t = t0; t < t1; ++t) {
                if (p.act == model::GluAct::SiLU) {
                    swiglu(gate + t * ff, up + t * ff, out + t * ff, ff);
                } else if (p.act == model::GluAct::SwigluOai) {
                    for (int64_t j = 0; j < ff; ++j)
                        out[t * ff + j] = canon::swiglu_oai(gate[t * ff + j], up[t * ff + j]);
                } else {
                    geglu(gate + t * ff, up + t * ff, out + t * ff, ff);
                }
            }
        });
        count(Op::Glu, 0, 3 * kF32 * n * ff);
    }

    void add_rows(float* x, const float* y, int64_t dim) {
        parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
            cpu::add(x + r0 * dim, y + r0 * dim, x + r0 * dim, (r1 - r0) * dim);
        });
        count(Op::Add, 0, 3 * kF32 * st_.n_tokens * dim);
    }

    void add(const model::Op& op) {
        const Tid in = op.as<model::AddP>().in;
        add_rows(buf(op.outs[0].t), buf(in), width(in));
    }

    // The fused op's plain fallback (the CPU tier never fuses; kept so a fused list runs too):
    // in = rms_norm(in) * w in place, then out += in.
    void add_rms_norm(const model::Op& op) {
        const auto& p = op.as<model::AddRmsNormP>();
        model::Op norm;
        norm.il = op.il;
        norm.p = model::RmsNormP{p.in, p.w, p.eps};
        norm.n_outs = 1;
        norm.outs[0] = {p.in, nullptr, true};
        rms_norm(norm);
        add_rows(buf(op.outs[0].t), buf(p.in), width(p.in));
    }

    // Only the rows whose logits are wanted matter from here (as llama.cpp's inp_out_ids): move
    // rows st.out_rows to the front of each kept buffer and set n_tokens = n_out. With no output
    // rows, the last row is kept (its results are only dumped). Afterwards tokens, pos, kv_slot
    // and seqs are cleared: rows no longer match them.
    void keep_rows(const model::Op& op) {
        ForwardState& st = st_;
        if (st.n_out == st.n_tokens) return;  // every row's logits are wanted
        const auto& p = op.as<model::KeepRowsP>();
        uint64_t bytes = 0;
        for (int b = 0; b < p.n; ++b)
            bytes += 2 * kF32 * static_cast<uint64_t>(std::max(st.n_out, 1)) * width(p.t[b]);
        count(Op::Gather, 0, bytes);
        if (st.n_out == 0) {
            const int64_t last = st.n_tokens - 1;
            for (int b = 0; b < p.n; ++b) {
                const int64_t dim = width(p.t[b]);
                float* x = buf(p.t[b]);
                std::memmove(x, x + last * dim, sizeof(float) * dim);
            }
            st.dump_pos0 = st.pos[last];
            st.n_tokens = 1;
        } else {
            // out_rows ascending, so row i <= out_rows[i] and the forward copy never overwrites
            // a row still to be read.
            for (int b = 0; b < p.n; ++b) {
                const int64_t dim = width(p.t[b]);
                float* x = buf(p.t[b]);
                for (int i = 0; i < st.n_out; ++i) {
                    const int64_t r = st.out_rows[i];
                    if (r != i) std::memcpy(x + i * dim, x + r * dim, sizeof(float) * dim);
                }
            }
            st.dump_pos0 = st.pos[st.out_rows[0]];
            st.n_tokens = st.n_out;
        }
        st.tokens = nullptr;
        st.pos = nullptr;
        st.kv_slot = nullptr;
        st.seqs = {};
    }

    void softcap(const model::Op& op) {
        const float cap = op.as<model::SoftcapP>().cap;
        const int64_t n = static_cast<int64_t>(st_.n_tokens) * width(op.outs[0].t);
        cpu::softcap(buf(op.outs[0].t), cap, n);
        count(Op::Softcap, 0, 2 * kF32 * n);
    }

    // Recurrent ops run per sequence (its rows in order, its own state slot) and must come
    // before KeepRows (they need every row and the sequence table).
    void ssm_conv(const model::Op& op) {
        const auto& p = op.as<model::SsmConvP>();
        ZINC_CHECK(st_.rs && st_.seq_slot && !st_.seqs.empty());
        const int64_t ch = width(p.in);
        const int d_conv = static_cast<int>(p.w->ne[0]);
        const float* x = buf(p.in);
        float* y = buf(op.outs[0].t);
        const float* w = p.w->f32();
        st_.pool.run([&](int ith, int nth) {
            const Range r = split_range(ch, ith, nth);
            if (r.begin >= r.end) return;
            for (size_t si = 0; si < st_.seqs.size(); ++si) {
                const AttentionSeq& s = st_.seqs[si];
                const int64_t o = static_cast<int64_t>(s.row0) * ch;
                const int32_t slot = st_.seq_slot[si];
                // Checkpoints: the state after each row (StatePool, speculative decoding).
                float* ckpt =
                    st_.rs->checkpointing(slot) > 0 ? st_.rs->conv_ckpt(p.rs_layer, slot) : nullptr;
                cpu::ssm_conv(x + o, s.n_tokens, ch, w, d_conv, st_.rs->conv(p.rs_layer, slot),
                              y + o, r.begin, r.end, ckpt);
            }
        });
        count(Op::SsmConv, mat_bytes(p.w),
              2 * kF32 * st_.n_tokens * ch + 2 * kF32 * st_.seqs.size() * ch * (d_conv - 1));
    }

    void delta_net(const model::Op& op) {
        const auto& p = op.as<model::DeltaNetP>();
        ZINC_CHECK(st_.rs && st_.seq_slot && !st_.seqs.empty());
        const float* qkv = buf(p.qkv);
        const float* beta = buf(p.beta);
        const float* alpha = buf(p.alpha);
        float* out = buf(op.outs[0].t);
        const int64_t qkv_w = width(p.qkv), out_w = width(op.outs[0].t);
        const int64_t n_units = static_cast<int64_t>(st_.seqs.size()) * p.n_v_heads;
        const int64_t s_floats = int64_t{p.head_k_dim} * p.head_v_dim;
        st_.pool.run([&](int ith, int nth) {
            std::vector<float> scratch(2 * static_cast<size_t>(p.head_k_dim) + p.head_v_dim);
            for (int64_t u = ith; u < n_units; u += nth) {  // (sequence, v head) units
                const size_t si = static_cast<size_t>(u / p.n_v_heads);
                const int h = static_cast<int>(u % p.n_v_heads);
                const AttentionSeq& s = st_.seqs[si];
                const int64_t r0 = s.row0;
                const int32_t slot = st_.seq_slot[si];
                float* S = st_.rs->ssm(p.rs_layer, slot) + h * s_floats;
                float* ckpt = st_.rs->checkpointing(slot) > 0
                                  ? st_.rs->ssm_ckpt(p.rs_layer, slot) + h * s_floats
                                  : nullptr;
                delta_net_head(p, qkv + r0 * qkv_w, beta + r0 * p.n_v_heads,
                               alpha + r0 * p.n_v_heads, s.n_tokens, h, S, out + r0 * out_w,
                               scratch.data(), ckpt, st_.rs->ssm_floats(p.rs_layer));
            }
        });
        count(Op::DeltaNet, vec_bytes(p.dt_bias) + vec_bytes(p.a),
              kF32 * st_.n_tokens * (qkv_w + 2 * p.n_v_heads + out_w) +
                  2 * kF32 * n_units * s_floats);
    }

    void gated_rms_norm(const model::Op& op) {
        const auto& p = op.as<model::GatedRmsNormP>();
        const int64_t w = width(p.z);
        float* x = buf(op.outs[0].t);
        const float* z = buf(p.z);
        parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r)
                gated_rms_norm_row(x + r * w, z + r * w, p.w->f32(), w, p.head_dim, p.eps);
        });
        count(Op::RmsNorm, vec_bytes(p.w), 3 * kF32 * st_.n_tokens * w);
    }

    void split_gate(const model::Op& op) {
        const auto& p = op.as<model::SplitGateP>();
        const int64_t wi = width(p.in), d = wi / 2;
        const float* in = buf(p.in);
        float* q = buf(op.outs[0].t);
        float* g = buf(op.outs[1].t);
        parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r)
                split_gate_row(in + r * wi, q + r * d, g + r * d, p.n_head, p.head_dim);
        });
        count(Op::Gather, 0, 2 * kF32 * st_.n_tokens * wi);
    }

    void sigmoid_mul(const model::Op& op) {
        const Tid g = op.as<model::SigmoidMulP>().gate;
        const int64_t w = width(op.outs[0].t);
        float* x = buf(op.outs[0].t);
        const float* gate = buf(g);
        if (width(g) == 1) {  // one gate per row (qwen35moe's shared expert), broadcast
            parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                    const float s = 1.0f / (1.0f + std::exp(-gate[r]));
                    for (int64_t i = 0; i < w; ++i) x[r * w + i] *= s;
                }
            });
        } else {
            parallel_rows(st_, st_.n_tokens, [&](int64_t r0, int64_t r1) {
                cpu::sigmoid_mul(x + r0 * w, gate + r0 * w, (r1 - r0) * w);
            });
        }
        count(Op::Glu, 0, 3 * kF32 * st_.n_tokens * w);
    }

    // Routed experts (backend/cpu/moe.h): counted as the routing, one matmul per expert
    // projection call (with the bytes of the experts used), the GLUs and the weighted sum.
    void moe(const model::Op& op) {
        const auto& p = op.as<model::MoeP>();
        MoeArgs a;
        a.x = buf(p.in);
        a.logits = buf(p.logits);
        a.out = buf(op.outs[0].t);
        a.n_rows = st_.n_tokens;
        a.n_embd = width(p.in);
        a.n_ff = p.n_ff;
        a.n_expert = p.n_expert;
        a.k = p.n_used;
        a.softmax_first = p.gating == model::MoeGating::SoftmaxTopK;
        a.norm_w = p.norm_w;
        a.w_scale = p.w_scale;
        a.gate = &st_.ws.mat(p.gate_exps);
        a.up = &st_.ws.mat(p.up_exps);
        a.down = &st_.ws.mat(p.down_exps);
        a.act = p.act;
        a.gate_up_fused = p.gate_up_fused;
        a.down_scale = p.down_scale ? p.down_scale->f32() : nullptr;
        a.gate_b = p.gate_b ? p.gate_b->f32() : nullptr;
        a.up_b = p.up_b ? p.up_b->f32() : nullptr;
        a.down_b = p.down_b ? p.down_b->f32() : nullptr;
        const MoeStats ms = moe_ffn(st_.pool, st_.mm, a, st_.ws.moe);
        const uint64_t n = static_cast<uint64_t>(st_.n_tokens), k = p.n_used;
        count(Op::MoeRoute, 0, kF32 * n * (p.n_expert + 2 * k));
        for (int i = 0; i < ms.n_matmuls; ++i) count(Op::Matmul, i == 0 ? ms.weight_bytes : 0, 0);
        if (ms.n_experts_used) count(Op::Glu, 0, 3 * kF32 * n * k * p.n_ff);
        count(Op::MoeCombine, 0, kF32 * n * (k + 1) * a.n_embd);
    }

    const Program& prog_;
    ForwardState& st_;
};

}  // namespace

void execute(const Program& prog, ForwardState& st) {
    if (st.embeddings) {
        ZINC_CHECK(prog.embd_op >= 0 && st.n_out == st.n_tokens && !st.logits);
        Executor(prog, st).run(0, static_cast<size_t>(prog.embd_op) + 1);
        return;
    }
    ZINC_CHECK(prog.logits != model::kNoTensor || !st.logits);
    Executor(prog, st).run(0, prog.ops.size());
}

void execute_ops(const Program& prog, ForwardState& st, size_t begin, size_t end) {
    ZINC_CHECK(begin <= end && end <= prog.ops.size());
    Executor(prog, st).run(begin, end);
}

}  // namespace zinc::cpu
