// zinc/backend/cuda/runner_exec.cpp — the CUDA tier's executor: the model's op list
// (model/ir.h), with this tier's fusions (model::schedule), walked as kernel launches on one
// stream. The same walk runs plain and under CUDA graph capture (decode steps, runner.cpp).
//
// Fusions, decided here from the list and never by architecture:
//   - norm + pack: a RmsNorm whose result feeds a projection writes it to the staging buffer xf_
//     already packed for that projection's weight type (rms_norm_out; ZINC_FUSED_NORM=0: the
//     norm, then a separate pack launch); a GLU likewise (glu_out); any other projection input
//     gets one pack launch (pack_rows).
//   - grouped projections: a Matmul op of several weights (Q/K/V, gate/up) is one launch per run
//     of equal weight types (proj(); ZINC_FUSED_PROJ=0: one launch per weight).
//   - residual add inside the projection (Matmul -> t; Add x += t  ==>  projection accumulating
//     into x) and Gemma-style post-norm + residual (RmsNorm t -> t; Add x += t  ==>
//     add_rms_norm): model::schedule's fused steps (ZINC_FUSED_ADD=0: the plain ops). A step
//     that wants an intermediate the fusion hides (validation capture or ZINC_TEST_CORRUPT of
//     attn_out / ffn_out) runs the plain ops: in exact mode the same single rounded add, the
//     same bits.
//   - output rows: KeepRows only marks that the CPU tier now has the output rows alone; this
//     tier computes every row to the end of the last layer and gathers the output rows (into
//     xo_) before the head, where the CPU tier's last-layer l_out is observed.
//
// The op boundary (observe()) is the one place where an intermediate is copied out for
// validation or corrupted on purpose (test-only), and where every launch is counted (launched()).
// Such steps never run in a CUDA graph (ForwardHooks::needs_host). ZINC_SKIP_LAYERS is the CPU
// tier's only (checked_runner.cpp refuses it here) and ZINC_DUMP is read by the CPU tier.
#include "backend/cuda/moe_router.h"
#include "backend/cuda/runner_impl.h"

namespace zinc::cuda::runner_detail {

using model::OpKind;
using model::Tid;

float* CudaRunner::buf(Tid t) const {
    if (t == head_x_ && gathered_) return xo_;
    return bufs_[static_cast<size_t>(t)];
}

float* CudaRunner::loc(Tid t) const {
    return t == staged_ ? xf_ : buf(t);
}

bool CudaRunner::wants(const char* name, int il) const {
    const runtime::ForwardHooks* hk = opts_.hooks;
    return name && hk && !rows_differ() && (hk->capturing || hk->corrupts(name, il));
}

void CudaRunner::observe(const model::Output& o, int il, Tid t, bool force) {
    runtime::ForwardHooks* h = opts_.hooks;
    if (!h || !o.name || !o.validate || (rows_differ() && !force)) return;
    if (pending_bias_[static_cast<size_t>(t)]) return;  // not the CPU tier's value yet
    float* x = loc(t);
    const int dim = static_cast<int>(prog_.width(t));
    const bool corrupt = h->corrupts(o.name, il);
    if (corrupt) {  // ZINC_TEST_CORRUPT (test-only): row 0 becomes 1 - x
        std::vector<float> row(dim);
        cudaMemcpyAsync(row.data(), x, dim * sizeof(float), cudaMemcpyDeviceToHost, stream_);
        cudaStreamSynchronize(stream_);
        for (float& v : row) v = runtime::corrupt_value(v);
        cudaMemcpyAsync(x, row.data(), dim * sizeof(float), cudaMemcpyHostToDevice, stream_);
        cudaStreamSynchronize(stream_);
    }
    if (float* dst = h->capture(o.name, il, rows_, dim))
        cudaMemcpyAsync(dst, x, static_cast<size_t>(rows_) * dim * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_);
    if (corrupt && t == staged_ && staged_type_ >= 0) {
        // The staged f32 value feeds a projection through its packed copy: pack it again so the
        // fault propagates.
        RowOut p = row_out(rows_, staged_type_);
        p.f = nullptr;
        pack_rows(xf_, rows_, dim, p, stream_);
        launched(runtime::Op::Pack, 0, 2ull * rows_ * dim * sizeof(float));
    }
}

void CudaRunner::enqueue_step(int n_rows, int n_out, bool embeddings) {
    n_rows_ = rows_ = n_rows;
    n_out_ = n_out;
    kept_ = gathered_ = false;
    staged_ = model::kNoTensor;
    staged_type_ = -1;
    head_x_ = model::kNoTensor;
    embd_src_ = nullptr;
    ZINC_CHECK(!embeddings || (prog_.embd_op >= 0 && n_out == n_rows));
    std::fill(pending_bias_.begin(), pending_bias_.end(), nullptr);
    std::fill(last_name_.begin(), last_name_.end(), LastName{});
    for (const model::Step& st : steps_) {
        const model::Op& first = prog_.ops[static_cast<size_t>(st.begin)];
        if (first.head && !gathered_) {
            if (n_out == 0) return;  // a prefill chunk whose logits nobody wants
            // The head starts from one tensor (the final residual stream): its output norm, or
            // the LM head itself.
            ZINC_CHECK(first.kind() == OpKind::RmsNorm || first.kind() == OpKind::Matmul);
            gather_head(first.kind() == OpKind::RmsNorm ? first.as<model::RmsNormP>().in
                                                        : first.as<model::MatmulP>().in);
        }
        if (embeddings && st.end > prog_.embd_op) {
            // An embedding step ends with the op that writes Program::embd (the output norm of
            // a decoder), run plain: the CPU tier's value, left where the next op would read it.
            for (int i = st.begin; i <= prog_.embd_op; ++i)
                exec(prog_.ops[static_cast<size_t>(i)], i);
            embd_src_ = loc(prog_.embd);
            return;
        }
        bool fused = !st.fused.empty();
        for (const model::Output& o : st.hidden)
            if (wants(o.name, st.il)) fused = false;
        if (fused) {
            for (const model::Op& op : st.fused) exec(op, -1);
        } else {
            for (int i = st.begin; i < st.end; ++i) exec(prog_.ops[static_cast<size_t>(i)], i);
        }
    }
    if (n_out == 0) return;
    const int64_t n_vocab = prog_.width(prog_.logits);
    argmax_rows(logits_, n_out, static_cast<int>(n_vocab), tok_out_, argmax_scratch_, stream_);
    launched(runtime::Op::Argmax, 0, 4ull * n_out * n_vocab);
    ++launches_;  // argmax is two launches
}

// The output rows of the head's input x, gathered into xo_; the CPU tier's last-layer value of
// x (its l_out, computed on those rows only) is observed here.
void CudaRunner::gather_head(Tid x) {
    const int dim = static_cast<int>(prog_.width(x));
    gather_rows(loc(x), d_out_, n_out_, dim, xo_, stream_);
    launched(runtime::Op::Gather, 0, 8ull * n_out_ * dim);
    const bool differ = n_out_ != n_rows_;
    if (staged_ == x) staged_ = model::kNoTensor;
    head_x_ = x;
    gathered_ = true;
    rows_ = n_out_;
    const LastName& ln = last_name_[static_cast<size_t>(x)];
    if (differ && ln.name) observe(model::Output{x, ln.name, true}, ln.il, x, true);
}

void CudaRunner::exec(const model::Op& op, int idx) {
    const int n = rows_;
    // A result written to its own memory replaces a staged copy of the same tensor.
    auto written = [&](Tid t) {
        if (staged_ == t) staged_ = model::kNoTensor;
    };
    switch (op.kind()) {
        case OpKind::Embed: {
            const auto& p = op.as<model::EmbedP>();
            const DevMat& m = mat(p.table);
            const Tid o = op.outs[0].t;
            const int dim = static_cast<int>(prog_.width(o));
            written(o);
            get_rows(m.type, m.d, m.row_bytes, d_tokens_, n, dim, p.scale, buf(o), stream_);
            launched(runtime::Op::Embed, m.row_bytes * n, 4ull * n * dim);
            break;
        }
        case OpKind::RmsNorm:
            exec_rms_norm(op, idx);
            break;
        case OpKind::Matmul:
            exec_matmul(op);
            break;
        case OpKind::RopeKv:
            exec_rope_kv(op);
            break;
        case OpKind::Attention:
            exec_attention(op);
            break;
        case OpKind::Glu:
            exec_glu(op, idx);
            break;
        case OpKind::Add: {
            const Tid o = op.outs[0].t, in = op.as<model::AddP>().in;
            ZINC_CHECK(staged_ != o);
            add_inplace(buf(o), loc(in), static_cast<int64_t>(n) * prog_.width(o), stream_);
            launched(runtime::Op::Add, 0, 12ull * n * prog_.width(o));
            break;
        }
        case OpKind::AddRmsNorm: {
            const auto& p = op.as<model::AddRmsNormP>();
            const Tid o = op.outs[0].t;
            const int dim = static_cast<int>(prog_.width(o));
            ZINC_CHECK(staged_ != o);
            add_rms_norm(buf(o), loc(p.in), vec(p.w), p.eps, n, dim, exact_, stream_);
            launched(runtime::Op::Add, dim * sizeof(float), 12ull * n * dim);
            break;
        }
        case OpKind::KeepRows:
            kept_ = true;
            break;
        case OpKind::Softcap: {
            const Tid o = op.outs[0].t;
            const int64_t count = static_cast<int64_t>(n) * prog_.width(o);
            ZINC_CHECK(staged_ != o);
            softcap(buf(o), count, op.as<model::SoftcapP>().cap, stream_);
            launched(runtime::Op::Softcap, 0, 8ull * count);
            break;
        }
        case OpKind::AllReduce:  // one device is one rank: the identity (model/shard.h)
            ZINC_CHECK(op.as<model::AllReduceP>().n_ranks == 1);
            break;
        case OpKind::Moe:
            exec_moe(op);
            break;
        case OpKind::SsmConv:
        case OpKind::DeltaNet:
        case OpKind::GatedRmsNorm:
        case OpKind::SplitGate:
        case OpKind::SigmoidMul:
            exec_recurrent(op);
            break;
        case OpKind::LayerNorm:  // refused at init (runner_init.cpp): no kernels yet
        case OpKind::AddEmbed:
        case OpKind::Gelu:
        case OpKind::Scale:
        case OpKind::Input:  // the NextN program: CPU tier only (never given to this tier)
        case OpKind::Concat:
        case OpKind::kCount:
            ZINC_CHECK(false && "unknown op");
    }
    for (int k = 0; k < op.n_outs; ++k) {
        const model::Output& o = op.outs[k];
        if (!o.name) continue;
        last_name_[static_cast<size_t>(o.t)] = {o.name, op.il};
        observe(o, op.il, o.t);
    }
}

void CudaRunner::exec_rms_norm(const model::Op& op, int idx) {
    const auto& p = op.as<model::RmsNormP>();
    const Tid o = op.outs[0].t;
    const int dim = static_cast<int>(prog_.width(o));
    // Into the staging buffer, packed for the projection that reads it (if one does).
    const Weight* cw = idx >= 0 ? consumer_[static_cast<size_t>(idx)] : nullptr;
    const int type = cw ? mat(cw).type : -1;
    finish_rows(loc(p.in), vec(p.w), p.eps, rows_, dim, type);
    staged_ = o;
    staged_type_ = type;
    keep_staged(o, dim);
}

void CudaRunner::exec_matmul(const model::Op& op) {
    const auto& p = op.as<model::MatmulP>();
    const int k = static_cast<int>(prog_.width(p.in));
    const int type = mat(p.w[0]).type;
    if (staged_ != p.in || staged_type_ != type) {  // pack the input for the first weight's type
        finish_rows(loc(p.in), nullptr, 0.0f, rows_, k, type);
        staged_ = p.in;
        staged_type_ = type;
    }
    const DevMat* m[3];
    float* ys[3];
    int ld[3];
    const float* b[3];
    for (int i = 0; i < p.n_w; ++i) {
        const Tid o = op.outs[i].t;
        ZINC_CHECK(o != p.in);
        m[i] = &mat(p.w[i]);
        ys[i] = buf(o);
        ld[i] = static_cast<int>(prog_.width(o));
        b[i] = vec(p.bias[i]);
        pending_bias_[static_cast<size_t>(o)] = nullptr;
    }
    // Biases go into the projection (MatJob::bias: one rounded add, as the CPU tier's matmul
    // and as rope_kv's); on the cuBLAS path (ZINC_EXACT=0 prefill) rope_kv adds them instead
    // and the projections' results are not observed.
    for (int i = 0; i < p.n_w; ++i) {
        if (p.accumulate) ZINC_CHECK(staged_ != op.outs[i].t);  // reads its own memory
        if (staged_ == op.outs[i].t) staged_ = model::kNoTensor;
    }
    const bool biased = proj(m, ys, ld, p.n_w, rows_, k, p.accumulate, b);
    if (!biased)
        for (int i = 0; i < p.n_w; ++i) pending_bias_[static_cast<size_t>(op.outs[i].t)] = b[i];
}

void CudaRunner::exec_rope_kv(const model::Op& op) {
    const auto& p = op.as<model::RopeKvP>();
    const Tid tq = op.outs[0].t, tk = op.outs[1].t;
    RopeJob rj;
    rj.q = buf(tq);
    rj.k = buf(tk);
    rj.v = buf(p.v);
    rj.q_ld = static_cast<int>(prog_.width(tq));
    rj.k_ld = static_cast<int>(prog_.width(tk));
    rj.v_ld = static_cast<int>(prog_.width(p.v));
    rj.bq = pending_bias_[static_cast<size_t>(tq)];
    rj.bk = pending_bias_[static_cast<size_t>(tk)];
    rj.bv = pending_bias_[static_cast<size_t>(p.v)];
    pending_bias_[static_cast<size_t>(tq)] = nullptr;
    pending_bias_[static_cast<size_t>(tk)] = nullptr;
    pending_bias_[static_cast<size_t>(p.v)] = nullptr;
    rj.q_norm = vec(p.q_norm);
    rj.k_norm = vec(p.k_norm);
    rj.eps = p.eps;
    rj.n_head = p.n_head;
    rj.n_head_kv = p.n_head_kv;
    rj.head_dim = p.head_dim_k;
    rj.head_dim_v = p.head_dim_v;
    rj.n_rot = p.rope.n_rot;
    rj.neox = p.rope.mode == model::RopeMode::Neox;
    rj.cs = rope_cs_[static_cast<size_t>(p.kv_layer)];
    rj.row_pos = d_pos_;
    rj.row_slot = d_slot_;
    rj.k_cache = k_layer(p.kv_layer);
    rj.v_cache = v_layer(p.kv_layer);
    rope_kv(rj, rows_, stream_);
    launched(runtime::Op::RopeKv, 0,
             8ull * rows_ * (rj.q_ld + rj.k_ld + rj.v_ld) + 2ull * rows_ * (rj.k_ld + rj.v_ld));
}

void CudaRunner::exec_attention(const model::Op& op) {
    const auto& p = op.as<model::AttentionP>();
    const Tid o = op.outs[0].t;
    AttnJob aj;
    aj.q = buf(p.q);
    aj.q_ld = static_cast<int>(prog_.width(p.q));
    aj.out = buf(o);
    aj.out_ld = static_cast<int>(prog_.width(o));
    aj.k_cache = k_layer(p.kv_layer);
    aj.v_cache = v_layer(p.kv_layer);
    aj.n_head = p.n_head;
    aj.n_head_kv = p.n_head_kv;
    aj.head_dim = p.head_dim_k;
    aj.head_dim_v = p.head_dim_v;
    aj.scale = p.scale;
    aj.window = p.window;
    aj.sinks = vec(p.sinks);
    aj.block_size = opts_.block_size;
    aj.row_pos = d_pos_;
    aj.row_bt = d_rowbt_;
    aj.bt = d_bt_;
    aj.max_pos = opts_.max_seq_len;
    aj.part = attn_part_;
    aj.counters = attn_cnt_;
    if (staged_ == o) staged_ = model::kNoTensor;
    // Fast mode: decode spans by the GQA-grouped split-K kernel, prefill spans by the
    // tensor-core FlashAttention kernel (attention_fast*.cu); exact mode, ZINC_FA=0 or a shape
    // they do not cover: attention.cu for the whole step.
    // Decode spans take the fast decode kernel when fa_decode_ (init(): GQA groups of at most 4
    // query heads, or ZINC_FA_DECODE=1), else attention.cu's split-K (docs/cuda.md, "Fast
    // attention").
    bool fast = !exact_ && fa_ && rows_ == n_rows_ && attention_fast_covers(aj);
    if (fast && !fa_decode_ && attn_spans_.size() == 1 && attn_spans_[0].decode) fast = false;
    if (fast) {
        for (const AttnSpan& sp : attn_spans_) {
            if (sp.decode && !fa_decode_) {  // attention.cu on the span's rows alone
                AttnJob d = aj;
                d.q += static_cast<size_t>(sp.row0) * aj.q_ld;
                d.out += static_cast<size_t>(sp.row0) * aj.out_ld;
                d.row_pos += sp.row0;
                d.row_bt += sp.row0;
                attention(d, sp.n, stream_);
            } else {
                fast = sp.decode ? attention_fast_decode(aj, sp.row0, sp.n, stream_)
                                 : attention_fast_prefill(aj, sp.row0, sp.n, stream_);
            }
            if (!fast) break;  // (attention() below then recomputes every row)
            if (&sp != &attn_spans_.back()) ++launches_;
        }
    }
    if (!fast) attention(aj, rows_, stream_);
    // + the K/V rows read, added per step in run() (they grow with the positions, and a
    // replayed graph's tally is the one recorded at capture)
    launched(runtime::Op::Attention, 0, 4ull * rows_ * (aj.q_ld + aj.out_ld));
}

void CudaRunner::exec_glu(const model::Op& op, int idx) {
    const auto& p = op.as<model::GluP>();
    const Tid o = op.outs[0].t;
    const int n = rows_;
    const int dim = static_cast<int>(prog_.width(o));
    const int ld = static_cast<int>(prog_.width(p.gate));
    const Weight* cw = idx >= 0 ? consumer_[static_cast<size_t>(idx)] : nullptr;
    const int type = cw ? mat(cw).type : -1;
    RowOut out = row_out(n, type);
    const uint64_t glu_bytes = 3ull * n * dim * sizeof(float);
    const bool gelu = p.act == model::GluAct::GeluTanh;
    runtime::ForwardHooks* h = opts_.hooks;
    if (h && h->force_cpu("glu")) {
        // ZINC_CPU_OPS=glu: act(gate) * up on the host (the CPU tier's kernel), then the packing
        // launch the fused kernel would have done. Never inside a graph (needs_host()).
        const size_t cnt = static_cast<size_t>(n) * dim;
        std::vector<float> g(cnt), u(cnt);
        float* gd = loc(p.gate);
        cudaMemcpyAsync(g.data(), gd, cnt * sizeof(float), cudaMemcpyDeviceToHost, stream_);
        cudaMemcpyAsync(u.data(), loc(p.up), cnt * sizeof(float), cudaMemcpyDeviceToHost, stream_);
        cudaStreamSynchronize(stream_);
        if (gelu)
            cpu::geglu(g.data(), u.data(), g.data(), static_cast<int64_t>(cnt));
        else
            cpu::swiglu(g.data(), u.data(), g.data(), static_cast<int64_t>(cnt));
        cudaMemcpyAsync(gd, g.data(), cnt * sizeof(float), cudaMemcpyHostToDevice, stream_);
        cudaStreamSynchronize(stream_);
        tally_.add(runtime::Device::Cpu, runtime::Op::Glu, 0, glu_bytes);
        h->fallback("glu", op.il);
        pack_rows(gd, n, dim, out, stream_);
        launched(runtime::Op::Pack, 0, 2ull * cnt * sizeof(float));
    } else {
        glu_out(loc(p.gate), loc(p.up), ld, gelu, n, dim, out, stream_);
        launched(runtime::Op::Glu, 0, glu_bytes);
    }
    staged_ = o;
    staged_type_ = type;
    keep_staged(o, dim);
}

}  // namespace zinc::cuda::runner_detail

namespace zinc::cuda::runner_detail {

// Routed experts, all on the device (no host round trip: a decode step stays one graph):
//   1. moe_route: each row's k expert ids and weights from the router logits (the Matmul before
//      this op), and the source row of each of the rows * k expert slots;
//   2. from moe_.group_min_slots slots on (fast mode, mmq): moe_group sorts the slots by expert
//      and cuts them into tiles of one expert each; pack_rows then gathers and packs the input
//      rows in that order, and gate, up and down are mmq_grouped launches (each expert's weights read
//      once per tile of up to 32 rows instead of once per slot); the combine reads each slot's
//      row at its sorted position. A matrix mmq_grouped refuses (its type, alignment) runs
//      expert-gathering dmmv over the sorted rows instead.
//   3. otherwise (decode, exact mode): the input row of every slot in slot order; gate and up of
//      every slot by its own expert (dmmv with MatJob::expert: one activation row per block);
//   4. SwiGLU + packing for down, down by the slot's expert, moe_combine: each row's weighted
//      sum of its k slots, in slot order (the CPU tier's order either way).
void CudaRunner::exec_moe(const model::Op& op) {
    const auto& p = op.as<model::MoeP>();
    const int n = rows_, k = p.n_used, nv = n * k;
    const int E = static_cast<int>(prog_.width(p.in)), F = p.n_ff;
    ZINC_CHECK(nv <= moe_.max_slots);
    const Tid o = op.outs[0].t;
    if (p.accumulate) ZINC_CHECK(staged_ != o);  // (fused with the residual Add: reads buf(o))
    if (staged_ == o) staged_ = model::kNoTensor;
    const bool softmax_first = p.gating == model::MoeGating::SoftmaxTopK;
    uint32_t* load = moe_.load + static_cast<size_t>(op.il) * moe_.n_expert;
    bool routed = false;
    if (p.router) {  // the router's Matmul folded in (plan() keeps it only for F32, fast mode)
        const DevMat& r = mat(p.router);
        routed = moe_route_router(loc(p.in), E, reinterpret_cast<const float*>(r.d), n, p.n_expert,
                                  buf(p.logits), moe_.tickets, k, softmax_first, p.norm_w,
                                  p.w_scale, moe_.ids, moe_.w, moe_.src, stream_, load);
        if (!routed) {  // (a shape the fused kernel does not take: the router's dmmv)
            MatJob j;
            j.w = r.d;
            j.row_bytes = r.row_bytes;
            j.n_out = p.n_expert;
            j.y = buf(p.logits);
            j.ldy = p.n_expert;
            dmmv(r.type, &j, 1, E, nullptr, nullptr, loc(p.in), n, false, stream_);
        }
        launched(runtime::Op::Matmul, r.row_bytes * static_cast<uint64_t>(p.n_expert),
                 4ull * n * (E + p.n_expert));
        if (routed) tally_.add(runtime::Device::Cuda, runtime::Op::MoeRoute, 0,
                               4ull * n * (p.n_expert + 3 * k));  // (the same launch)
    }
    if (!routed) {
        moe_route(loc(p.logits), n, p.n_expert, k, softmax_first, p.norm_w, p.w_scale, moe_.ids,
                  moe_.w, moe_.src, exact_, stream_, load);
        launched(runtime::Op::MoeRoute, 0, 4ull * n * (p.n_expert + 3 * k));
    }
    const bool grouped = !exact_ && mmq_ && nv >= moe_.group_min_slots;
    MmqGroups groups;
    if (grouped) {
        groups = moe_group(moe_.ids, n, k, p.n_expert, moe_.grp, stream_);
        launched(runtime::Op::MoeRoute, 0, 12ull * nv);
    }
    const DevMat& g = mat(p.gate_exps);
    const DevMat& u = mat(p.up_exps);
    const DevMat& d = mat(p.down_exps);
    auto packed = [&](int type) {
        RowOut r;
        r.q = moe_.aq;
        r.d = moe_.ad;
        r.mode = pack_mode_for(type);
        return r;
    };
    auto expert_job = [&](const DevMat& m, int n_out, float* y) {
        MatJob j;
        j.w = m.d;
        j.row_bytes = m.row_bytes;
        j.n_out = n_out;
        j.y = y;
        j.ldy = n_out;
        j.expert = grouped ? moe_.grp.expert : moe_.ids;
        j.expert_stride = m.row_bytes * static_cast<size_t>(n_out);
        return j;
    };
    // Weight bytes read: once per tile (grouped; an estimate from the mean tile count, the
    // real one is on the device) or once per slot.
    const uint64_t reads = grouped ? static_cast<uint64_t>(std::min(nv, p.n_expert)) +
                                         static_cast<uint64_t>(nv / kMmqGroupCols)
                                   : static_cast<uint64_t>(nv);
    auto run = [&](int type, const MatJob* jobs, int nj, int kk, uint64_t w_bytes) {
        bool done = false;
        if (grouped) {
            MatJob gj[3];
            for (int i = 0; i < nj; ++i) (gj[i] = jobs[i]).expert = nullptr;
            done = mmq_grouped(type, gj, nj, kk, moe_.aq, moe_.ad, nv, groups, stream_);
        }
        if (!done)
            (exact_ ? dmmv_exact : dmmv)(type, jobs, nj, kk, moe_.aq, moe_.ad, moe_.x, nv, false,
                                         stream_);
        launched(runtime::Op::Matmul, w_bytes, 4ull * nv * kk);
    };
    // Each slot's input row, packed for gate (and copied to moe_.x in f32: the float weights'
    // input and a second packing's): the gather and the packing in one launch.
    RowOut gi = packed(g.type);
    gi.f = moe_.x;
    pack_rows(loc(p.in), nv, E, gi, stream_, grouped ? moe_.grp.src : moe_.src);
    launched(runtime::Op::Pack, 0, 12ull * nv * E);
    const MatJob gu[2] = {expert_job(g, F, moe_.g), expert_job(u, F, moe_.u)};
    const uint64_t gu_bytes = reads * F * (g.row_bytes + u.row_bytes);
    if (g.type == u.type && fused_proj_) {
        run(g.type, gu, 2, E, gu_bytes);
    } else {
        run(g.type, &gu[0], 1, E, gu_bytes / 2);
        if (pack_mode_for(u.type) != pack_mode_for(g.type)) {
            pack_rows(moe_.x, nv, E, packed(u.type), stream_);
            launched(runtime::Op::Pack, 0, 8ull * nv * E);
        }
        run(u.type, &gu[1], 1, E, gu_bytes / 2);
    }
    RowOut go = packed(d.type);
    go.f = moe_.x;  // f32 copy (F32/F16/BF16 down weights read it)
    glu_out(moe_.g, moe_.u, F, false, nv, F, go, stream_);
    launched(runtime::Op::Glu, 0, 12ull * nv * F);
    const MatJob dj = expert_job(d, E, moe_.y);
    run(d.type, &dj, 1, F, reads * E * d.row_bytes);
    moe_combine(moe_.y, moe_.w, n, k, E, buf(o), stream_, grouped ? moe_.grp.slot_pos : nullptr,
                p.accumulate);
    launched(runtime::Op::MoeCombine, 0, 4ull * n * (k + 1 + (p.accumulate ? 2 : 0)) * E);
}

}  // namespace zinc::cuda::runner_detail
