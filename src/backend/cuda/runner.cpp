// zinc/backend/cuda/runner.cpp — the CUDA model::Runner: weights uploaded still quantized, a
// paged f16 KV cache in device memory, and the model's op list (model/ir.h, the same one the
// CPU tier executes) walked as a sequence of kernels on one stream (runner_exec.cpp, kernels.h).
//
// Per step: the batch's metadata (tokens, positions, KV slots, block tables, output rows) is
// staged in pinned memory and copied in one transfer; the kernels run; logits (or argmax tokens)
// come back in one transfer; one stream synchronization. Decode steps (every sequence one row)
// are captured once per row count as a CUDA graph and replayed (ZINC_CUDA_GRAPH=0: plain
// launches). Projections, all through proj(): by default (fast mode) the int8/dp4a
// matrix-vector kernels up to ZINC_DMMV_MAX_ROWS rows (default 8 where mmq covers every matrix,
// else 16) and above them (prefill, large decode batches) the int8 tensor-core GEMM of mmq.cu for
// the types it covers up to ZINC_MMQ_MAX_ROWS rows, dequantize-to-f16 + cuBLAS otherwise
// (ZINC_MMQ=0: cuBLAS for all), held to agreement with the CPU tier, not bit-identical to it;
// with --exact / ZINC_EXACT=1 the exact kernels of dmmv_exact.cu for every row count,
// bit-identical to the CPU tier. Hybrid models (qwen35) keep each sequence's recurrent state in
// device memory (runner_recurrent.cpp). Embeddings (forward_embed) are the same step with every
// row an output row, stopped after Program::embd_op, and Batch::hidden_out gets the head's
// gathered input rows (docs/cuda.md "Embeddings and hidden rows"). Opt-outs of the
// executor's fusions: ZINC_FUSED_PROJ=0 (separate Q/K/V and gate/up launches), ZINC_FUSED_NORM=0
// (norm, then a separate pack), ZINC_FUSED_ADD=0 (residual adds and post-norms as their own
// launches); and the opt-in ZINC_REPACK=1 (the aligned weight layouts of repack.h; no measured
// gain yet). Validation (ZINC_VALIDATE, docs/runtime.md): a step whose hooks ask gets the CPU
// tier's named intermediates copied out (runner_exec.cpp's observe()), ungraphed and with the
// fusions that would hide one of them unfused, so the validator can name the single op that
// diverged.
#include "backend/cuda/runner_impl.h"
#include "model/embed_batch.h"

namespace zinc::cuda {
namespace runner_detail {

RowOut CudaRunner::row_out(int n_rows, int type) {
    RowOut o;
    o.f = xf_;
    if (type < 0) return o;  // no projection reads it: f32 only
    const bool big = n_rows > dmmv_max_rows_ && cublas_.ok();
    const bool mmq_rows = mmq_ && n_rows <= mmq_max_rows_;
    // Above the row limit: int8 codes for mmq where it covers the type, f16 for cuBLAS where a
    // matrix of the model may need it (proj falls back per call).
    if (big && (!mmq_all_ || !mmq_rows)) o.h = xh_;
    if (!big || (mmq_rows && mmq_supports(type))) {
        o.q = aq_;
        o.d = ad_;
        o.mode = pack_mode_for(type);
        packed_mode_ = o.mode;
    } else {
        packed_mode_ = -1;
    }
    return o;
}

void CudaRunner::finish_rows(const float* x, const float* w, float eps, int n_rows, int dim,
                             int type) {
    RowOut o = row_out(n_rows, type);
    if (x == xf_) o.f = nullptr;  // already there: pack only
    if (!w) {
        pack_rows(x, n_rows, dim, o, stream_);
        launched(runtime::Op::Pack, 0, 2ull * n_rows * dim * sizeof(float));
    } else if (fused_norm_ || type < 0) {
        rms_norm_out(x, w, eps, n_rows, dim, o, exact_, stream_);
        launched(runtime::Op::RmsNorm, dim * sizeof(float), 2ull * n_rows * dim * sizeof(float));
    } else {
        RowOut f;
        f.f = xf_;
        rms_norm_out(x, w, eps, n_rows, dim, f, exact_, stream_);
        launched(runtime::Op::RmsNorm, dim * sizeof(float), 2ull * n_rows * dim * sizeof(float));
        o.f = nullptr;
        pack_rows(xf_, n_rows, dim, o, stream_);
        launched(runtime::Op::Pack, 0, 2ull * n_rows * dim * sizeof(float));
    }
}

// Projections of the activations last finished (xf_/aq_/xh_) through n_mats weights of row
// length k into ys (row stride ldys), n_rows rows.
bool CudaRunner::proj(const DevMat* const* mats, float* const* ys, const int* ldys, int n_mats,
                      int n_rows, int k, bool accumulate, const float* const* biases) {
    const bool big = n_rows > dmmv_max_rows_;
    bool use_blas = big && cublas_.ok();
    // Small F32 matrices (MoE routers, qwen35's beta / alpha and other tensors the file keeps at
    // full precision) are not rounded to f16 for cuBLAS: dmmv's f32 kernel on the f32 activations
    // instead (a router's top-k choice flips on small changes of its logits: H200 run 4,
    // qwen3moe-tiny prefill), each on its own; the group's other matrices keep their path (their
    // activations were packed for it: H200 run 7, qwen35's beta beside Q/K/V and z).
    bool all_small_f32 = true;
    for (int i = 0; i < n_mats; ++i) all_small_f32 &= mats[i]->small_f32();
    if (all_small_f32) use_blas = false;
    if (use_blas && mmq_ && n_rows <= mmq_max_rows_) {  // mmq when it covers every matrix
        bool all = true;
        for (int i = 0; i < n_mats; ++i)
            all &= mats[i]->small_f32() ||
                   (mmq_supports(mats[i]->type) && pack_mode_for(mats[i]->type) == packed_mode_);
        use_blas = !all;
    }
    if (use_blas) {
        for (int i = 0; i < n_mats; ++i) {
            const DevMat& m = *mats[i];
            if (m.small_f32()) {  // (no bias here: biases on this path are added later, pending)
                MatJob j;
                j.w = m.d;
                j.row_bytes = m.row_bytes;
                j.n_out = static_cast<int>(m.n);
                j.y = ys[i];
                j.ldy = ldys[i];
                dmmv(m.type, &j, 1, k, aq_, ad_, xf_, n_rows, accumulate, stream_);
                launched(runtime::Op::Matmul, m.row_bytes * m.n,
                         4ull * n_rows * k + (accumulate ? 8ull : 4ull) * n_rows * m.n);
                continue;
            }
            const void* w = m.d;
            if (m.type != 1) {  // not F16: dequantize the whole matrix first
                dequant_f16(m.type, m.d, m.row_bytes, static_cast<int>(m.n), k, wdq_, stream_);
                launched(runtime::Op::Dequant, m.row_bytes * m.n, 2ull * m.n * k);
                w = wdq_;
            }
            cublas_.gemm_f16(stream_, static_cast<int>(m.n), n_rows, k, w, xh_, ys[i], ldys[i],
                             accumulate ? 1.f : 0.f);
            launched(runtime::Op::Matmul, 2ull * m.n * k,
                     2ull * n_rows * k + (accumulate ? 8ull : 4ull) * n_rows * m.n);
        }
        return false;  // no biases on this path
    }
    int i = 0;
    while (i < n_mats) {
        MatJob jobs[3];
        int nj = 0;
        const int type = mats[i]->type;
        uint64_t w_bytes = 0, out_elems = 0;
        do {
            w_bytes += mats[i]->row_bytes * mats[i]->n;
            out_elems += static_cast<uint64_t>(mats[i]->n) * n_rows;
            jobs[nj].w = mats[i]->d;
            jobs[nj].row_bytes = mats[i]->row_bytes;
            jobs[nj].n_out = static_cast<int>(mats[i]->n);
            jobs[nj].y = ys[i];
            jobs[nj].ldy = ldys[i];
            jobs[nj].bias = biases ? biases[i] : nullptr;
            if (jobs[nj].bias) w_bytes += mats[i]->n * sizeof(float);
            ++nj;
            ++i;
        } while (fused_proj_ && i < n_mats && mats[i]->type == type);
        // (no cuBLAS: mmq at any row count, far faster than dmmv there)
        if (!(big && mmq_ && (n_rows <= mmq_max_rows_ || !cublas_.ok()) &&
              mmq(type, jobs, nj, k, aq_, ad_, n_rows, accumulate, stream_, &mmq_scratch_)))
            (exact_ ? dmmv_exact : dmmv)(type, jobs, nj, k, aq_, ad_, xf_, n_rows, accumulate,
                                         stream_);
        launched(runtime::Op::Matmul, w_bytes,
                 4ull * n_rows * k + (accumulate ? 8ull : 4ull) * out_elems);
    }
    return true;
}

Result<void> CudaRunner::forward_embed(const model::Batch& batch, float* hidden) {
    ZINC_TRY(model::check_embed_batch(prog_, cfg_.arch_name, batch, hidden));
    return run(batch, nullptr, nullptr, hidden);
}

Result<void> CudaRunner::run(const model::Batch& batch, float* logits, int32_t* tokens,
                             float* embd) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const ModelConfig& c = cfg_;
    const int n_rows = static_cast<int>(batch.tokens.size());
    const int n_seqs = static_cast<int>(batch.seqs.size());
    if (n_rows == 0) return make_error("cuda forward: empty batch");
    if (n_rows > R_)
        return make_error("cuda forward: " + std::to_string(n_rows) + " rows > max_batch_tokens " +
                          std::to_string(R_));
    if (n_seqs > opts_.max_seqs)
        return make_error("cuda forward: " + std::to_string(n_seqs) + " sequences > max_seqs " +
                          std::to_string(opts_.max_seqs));
    const size_t R = static_cast<size_t>(R_);
    int32_t* h_tok = meta_h_;
    int32_t* h_pos = meta_h_ + R;
    int32_t* h_slot = meta_h_ + 2 * R;
    int32_t* h_rowbt = meta_h_ + 3 * R;
    int32_t* h_out = meta_h_ + 4 * R;
    int32_t* h_row0 = meta_h_ + 5 * R;
    int32_t* h_sslot = h_row0 + opts_.max_seqs + 1;
    int32_t* h_skeep = h_sslot + opts_.max_seqs;
    int32_t* h_bt = meta_h_ + meta_fixed();
    if (!rs_.empty()) ZINC_TRY(slots_.check(batch, "cuda forward: "));
    if (batch.hidden_out && hidden_width() == 0)
        return make_error("cuda forward: " + cfg_.arch_name +
                          "'s op list marks no hidden state the CUDA tier returns "
                          "(Batch::hidden_out; Runner::hidden_width is 0)");
    int n_bt = 0, n_out = 0, expect_row = 0;
    bool all_decode = true;
    step_keeps_ = false;
    attn_spans_.clear();
    for (int s = 0; s < n_seqs; ++s) {
        const model::BatchSeq& q = batch.seqs[s];
        if (q.row0 != expect_row || q.n_tokens < 1 || q.row0 + q.n_tokens > n_rows || q.pos0 < 0)
            return make_error("cuda forward: sequence " + std::to_string(s) + " has rows [" +
                              std::to_string(q.row0) + ", " + std::to_string(q.row0 + q.n_tokens) +
                              "), expected contiguous rows after the previous sequence's");
        expect_row = q.row0 + q.n_tokens;
        const int end = q.pos0 + q.n_tokens;
        if (end > opts_.max_seq_len)
            return make_error("cuda forward: sequence " + std::to_string(s) + " reaches position " +
                              std::to_string(end) + " > max_seq_len " +
                              std::to_string(opts_.max_seq_len));
        const int need = (end + opts_.block_size - 1) / opts_.block_size;
        if (static_cast<int>(q.block_table.size()) < need)
            return make_error("cuda forward: sequence " + std::to_string(s) + " block table has " +
                              std::to_string(q.block_table.size()) + " blocks, needs " +
                              std::to_string(need));
        if (n_bt + need > max_bt_) return make_error("cuda forward: block tables too long");
        for (int b = 0; b < need; ++b) {
            const int32_t id = q.block_table[b];
            if (id < 0 || id >= opts_.n_blocks)
                return make_error("cuda forward: block id " + std::to_string(id) +
                                  " out of range [0, " + std::to_string(opts_.n_blocks) + ")");
            h_bt[n_bt + b] = id;
        }
        for (int i = 0; i < q.n_tokens; ++i) {
            const int r = q.row0 + i, pos = q.pos0 + i;
            const int32_t t = batch.tokens[r];
            if (t < 0 || t >= c.n_vocab)
                return make_error("cuda forward: token id " + std::to_string(t) + " at row " +
                                  std::to_string(r) + " is out of range [0, " +
                                  std::to_string(c.n_vocab) + ")");
            h_tok[r] = t;
            h_pos[r] = pos;
            h_slot[r] =
                q.block_table[pos / opts_.block_size] * opts_.block_size + pos % opts_.block_size;
            h_rowbt[r] = n_bt;
            if (embd || q.all_logits || (q.want_logits && i == q.n_tokens - 1)) h_out[n_out++] = r;
        }
        n_bt += need;
        h_row0[s] = q.row0;
        h_sslot[s] = q.state_slot;
        h_skeep[s] = q.keep_states ? 1 : 0;
        step_keeps_ |= q.keep_states && !rs_.empty();
        if (q.n_tokens != 1 || !q.want_logits || q.all_logits || embd) all_decode = false;
        const bool dec = q.n_tokens == 1;
        if (s > 0 && attn_spans_.back().decode == dec)
            attn_spans_.back().n += q.n_tokens;
        else
            attn_spans_.push_back({q.row0, q.n_tokens, dec});
    }
    if (expect_row != n_rows)
        return make_error("cuda forward: the sequences cover " + std::to_string(expect_row) +
                          " rows of " + std::to_string(n_rows));

    h_row0[n_seqs] = n_rows;
    n_seqs_ = n_seqs;
    // One transfer of the metadata: the rows' and sequences' part and the block tables used.
    CU_TRY("metadata", cudaMemcpyAsync(meta_d_, meta_h_, (meta_fixed() + n_bt) * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream_));
    launches_ = 0;
    tally_ = runtime::OpTally{};
    runtime::ForwardHooks* hooks = opts_.hooks;
    // Decode steps replay a captured graph per row count: up to dmmv's row limit, and above it
    // while mmq covers every matrix (no cuBLAS, whose workspace use is not captured here).
    const bool graph_rows = n_rows <= dmmv_max_rows_ || (mmq_all_ && n_rows <= mmq_max_rows_);
    const bool graph = use_graph_ && all_decode && graph_rows && !(hooks && hooks->needs_host());
    if (graph) {
        // Keyed by the row count and whether the step keeps states (its kernels then get the
        // checkpoint pools; the keep flags themselves are read from the metadata).
        const int key = 2 * n_rows + (step_keeps_ ? 1 : 0);
        auto it = graphs_.find(key);
        if (it == graphs_.end()) {
            cudaGraph_t g = nullptr;
            CU_TRY("graph capture",
                   cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
            enqueue_step(n_rows, n_out);  // (never an embedding step: not all_decode)
            CU_TRY("graph capture", cudaStreamEndCapture(stream_, &g));
            cudaGraphExec_t ge = nullptr;
            const cudaError_t e = cudaGraphInstantiate(&ge, g, 0);
            cudaGraphDestroy(g);
            CU_TRY("graph instantiate", e);
            it = graphs_.emplace(key, ge).first;
            graph_tally_[key] = tally_;
            ++stats_.graph_captures;
        }
        tally_ = graph_tally_[key];  // the kernels the graph launches, counted per replay
        CU_TRY("graph launch", cudaGraphLaunch(it->second, stream_));
        ++stats_.graph_replays;
        launches_ = 1;
    } else {
        enqueue_step(n_rows, n_out, embd != nullptr);
        ZINC_CHECK(!embd || embd_src_ != nullptr);
    }
    CU_TRY("kernel launch", cudaGetLastError());
    // forward_sample (runner_sample.cpp): the sampler and its result copy, before the one sync.
    if (after_step_) CU_TRY("sampling", after_step_(n_out));
    const size_t n_logits = static_cast<size_t>(n_out) * c.n_vocab;
    const bool pinned_logits = static_cast<size_t>(n_out) <= logits_h_rows_;
    if (n_out > 0) {
        if (logits)
            CU_TRY("logits",
                   cudaMemcpyAsync(pinned_logits ? logits_h_ : logits, logits_,
                                   n_logits * sizeof(float), cudaMemcpyDeviceToHost, stream_));
        if (tokens)
            CU_TRY("tokens", cudaMemcpyAsync(tok_h_, tok_out_, n_out * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, stream_));
        // Embeddings: Program::embd of every row. Batch::hidden_out: the head's input rows
        // gathered into xo_ (Program::hidden, hidden_width()), in logits-row order.
        if (embd)
            CU_TRY("embeddings", cudaMemcpyAsync(embd, embd_src_,
                                                 static_cast<size_t>(n_rows) *
                                                     prog_.width(prog_.embd) * sizeof(float),
                                                 cudaMemcpyDeviceToHost, stream_));
        else if (batch.hidden_out)
            CU_TRY("hidden rows",
                   cudaMemcpyAsync(batch.hidden_out, xo_,
                                   static_cast<size_t>(n_out) * hidden_width() * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream_));
    }
    const auto t1 = Clock::now();
    CU_TRY("forward", cudaStreamSynchronize(stream_));
    if (n_out > 0 && logits && pinned_logits)
        std::memcpy(logits, logits_h_, n_logits * sizeof(float));
    if (n_out > 0 && tokens) std::memcpy(tokens, tok_h_, n_out * sizeof(int32_t));
    if (!rs_.empty())
        for (const model::BatchSeq& q : batch.seqs)
            slots_.advance(q.state_slot, q.pos0, q.n_tokens, q.keep_states);
    stats_.launches_last_step = launches_;
    stats_.host_us_last_step = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if (hooks) {
        // Attention's K/V reads (f16 K and V rows of every attended position, per layer) grow
        // with the positions, so they are added per step, not taken from a graph's tally.
        uint64_t kv_read = 0;
        for (const model::Op& op : prog_.ops) {
            if (op.kind() != model::OpKind::Attention) continue;
            const auto& ap = op.as<model::AttentionP>();
            uint64_t n_pos = 0;
            for (int r = 0; r < n_rows; ++r)
                n_pos += runtime::attended_positions(h_pos[r], ap.window);
            kv_read += n_pos * 2ull * ap.n_head_kv * (ap.head_dim_k + ap.head_dim_v);
        }
        tally_.act_bytes[static_cast<int>(runtime::Device::Cuda)] += kv_read;
        hooks->step += tally_;
    }
    return {};
}

void CudaRunner::copy_block(int32_t src, int32_t dst) {
    const ModelConfig& c = cfg_;
    const size_t bs = static_cast<size_t>(opts_.block_size);
    for (int il = 0; il < n_kv_layers_; ++il) {
        uint16_t* kl = k_cache_ + layer_k_elems_ * il;
        uint16_t* vl = v_cache_ + layer_v_elems_ * il;
        const size_t kn = bs * c.kv_dim_k(), vn = bs * c.kv_dim_v();
        cudaMemcpyAsync(kl + dst * kn, kl + src * kn, kn * 2, cudaMemcpyDeviceToDevice, stream_);
        cudaMemcpyAsync(vl + dst * vn, vl + src * vn, vn * 2, cudaMemcpyDeviceToDevice, stream_);
    }
    cudaStreamSynchronize(stream_);
}

}  // namespace runner_detail

using namespace runner_detail;  // CudaRunner, the helpers and the model:: names it uses

Result<std::unique_ptr<model::Runner>> create_runner(const model::Model& model,
                                                     const model::RunnerOptions& opts,
                                                     const CudaOptions& copts) {
    if (opts.n_blocks < 1 || opts.block_size < 1 || opts.max_batch_tokens < 1 ||
        opts.max_seqs < 1 || opts.max_seq_len < 1)
        return make_error(
            "cuda runner: n_blocks, block_size, max_batch_tokens, max_seqs and "
            "max_seq_len must be positive");
    ZINC_TRY(model::StateSlots::check_options(opts.n_state_checkpoints, "cuda"));
    const auto* am = dynamic_cast<const ArchModel*>(&model);
    if (!am) return make_error("cuda runner: not a zinc architecture model");
    const Probe p = probe();
    if (p.devices.empty()) return make_error("cuda: " + p.reason);
    const DeviceInfo* dev = nullptr;
    for (const auto& d : p.devices)
        if (d.index == copts.device) dev = &d;
    if (!dev)
        return make_error(
            "cuda: device " + std::to_string(copts.device) +
            " is not a usable CUDA device (usable: " + std::to_string(p.devices.size()) +
            ", first is -d " + std::to_string(p.devices.front().index) + ")");
    const size_t need = device_bytes_needed(model, opts);
    if (dev->mem_free && need > dev->mem_free)
        return make_error("cuda: out of device memory: the model needs about " + fmt_mib(need) +
                          " but device " + std::to_string(dev->index) + " (" + dev->name +
                          ") has " + fmt_mib(dev->mem_free) + " free; lower -c or use --tier cpu");
    auto r = std::make_unique<CudaRunner>(*am, opts, copts.device, copts.exact, copts.shards,
                                          copts.rank);
    if (auto st = r->init(); !st) return st.error();
    return std::unique_ptr<model::Runner>(std::move(r));
}

Result<void> forward_argmax(model::Runner& runner, const model::Batch& batch, int32_t* tokens) {
    auto* r = dynamic_cast<CudaRunner*>(&runner);
    if (!r) return make_error("forward_argmax: not a CUDA runner");
    return r->run(batch, nullptr, tokens);
}

RunnerStats runner_stats(const model::Runner& runner) {
    const auto* r = dynamic_cast<const CudaRunner*>(&runner);
    return r ? r->stats() : RunnerStats{};
}

ExpertLoad expert_load(const model::Runner& runner) {
    const auto* r = dynamic_cast<const CudaRunner*>(&runner);
    return r ? r->expert_load() : ExpertLoad{};
}

}  // namespace zinc::cuda
