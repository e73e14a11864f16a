// zinc/backend/cuda/runner_init.cpp — the CUDA Runner's set-up: the plan of the model's op list
// (its fusions, the weights it uses uploaded still quantized (optionally repacked, repack.h), a
// device buffer per tensor, the RoPE tables), the paged KV cache and the step's scratch.
#include "backend/cpu/rope.h"
#include "backend/cuda/runner_impl.h"
#include "util/check.h"

namespace zinc::cuda::runner_detail {

CudaRunner::~CudaRunner() {
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& [n, g] : graphs_) cudaGraphExecDestroy(g);
    for (void* p : allocs_) cudaFree(p);
    if (meta_h_) cudaFreeHost(meta_h_);
    if (tok_h_) cudaFreeHost(tok_h_);
    if (logits_h_) cudaFreeHost(logits_h_);
    if (stream_) cudaStreamDestroy(stream_);
}

void* CudaRunner::dalloc(size_t bytes, cudaError_t& err) {
    void* p = nullptr;
    err = cudaMalloc(&p, std::max<size_t>(bytes, 256));
    if (err == cudaSuccess) {
        allocs_.push_back(p);
        alloc_bytes_ += std::max<size_t>(bytes, 256);
    }
    return p;
}

Result<DevMat> CudaRunner::upload_mat(const Weight& wt) {
    const Weight* w = &wt;
    const std::string& name = w->name;
    DevMat m;
    m.type = static_cast<int>(w->type);
    if (!dmmv_supports(m.type))
        return make_error("cuda: tensor " + name + " has type " +
                          std::string(quant::type_name(w->type)) +
                          ", which the CUDA tier has no kernel for");
    m.k = w->ne[0];
    m.n = w->n_rows;  // a 3-D expert tensor: all experts' rows (ne[1] * ne[2])
    if (m.k % 32 != 0)
        return make_error("cuda: tensor " + name + " has rows of " + std::to_string(m.k) +
                          " elements, expected a multiple of 32");
    m.row_bytes = quant::row_size(w->type, m.k);
    const size_t bytes = m.row_bytes * static_cast<size_t>(m.n);
    cudaError_t e;
    m.d = static_cast<uint8_t*>(dalloc(bytes, e));
    if (e != cudaSuccess)
        return make_error("cuda: out of device memory uploading " + name + " (" + fmt_mib(bytes) +
                          ", " + fmt_mib(weight_bytes_) + " uploaded so far)");
    // Expert tensors keep the GGUF layout (MatJob::expert addresses expert e's rows by stride).
    const int dt = w->ne[2] > 1 ? m.type : repacked_type(m.type, m.k, repack_);
    if (dt == m.type) {
        CU_TRY("upload " + name, cudaMemcpy(m.d, w->data, bytes, cudaMemcpyHostToDevice));
    } else {  // repack (repack.h) in slices of rows
        const int64_t step =
            std::max<int64_t>(1, (int64_t(64) << 20) / static_cast<int64_t>(m.row_bytes));
        std::vector<uint8_t> tmp(static_cast<size_t>(std::min<int64_t>(step, m.n)) * m.row_bytes);
        for (int64_t r0 = 0; r0 < m.n; r0 += step) {
            const int64_t nr = std::min<int64_t>(step, m.n - r0);
            repack_rows(m.type, w->data + r0 * m.row_bytes, tmp.data(), nr, m.k);
            CU_TRY("upload " + name, cudaMemcpy(m.d + r0 * m.row_bytes, tmp.data(),
                                                nr * m.row_bytes, cudaMemcpyHostToDevice));
        }
        m.type = dt;
    }
    weight_bytes_ += bytes;
    return m;
}

Result<const float*> CudaRunner::upload_f32(const Weight& wt) {
    const Weight* w = &wt;
    const std::string& name = w->name;
    if (w->type != quant::GgmlType::F32) return make_error("cuda: tensor " + name + " is not f32");
    int64_t n = 1;
    for (int i = 0; i < w->n_dims; ++i) n *= w->ne[i];
    cudaError_t e;
    void* p = dalloc(n * sizeof(float), e);
    CU_TRY("alloc " + name, e);
    CU_TRY("upload " + name, cudaMemcpy(p, w->data, n * sizeof(float), cudaMemcpyHostToDevice));
    weight_bytes_ += n * sizeof(float);
    return static_cast<const float*>(p);
}

Result<void> CudaRunner::plan() {
    namespace ir = model;
    const ir::Program& P = prog_;
    ir::FusionOptions fo;
    fo.matmul_add = fused_add_;
    fo.add_rms_norm = fused_add_;
    fo.moe_add = fused_add_ && fused_moe_;
    fo.router_moe = fused_add_ && fused_moe_;
    steps_ = ir::schedule(P, fo);

    // Weights: matrices (embedding tables, projections) and f32 vectors, each uploaded once.
    cudaError_t e;
    auto up_mat = [&](const Weight* w) -> Result<void> {
        if (!w || mats_.count(w)) return {};
        auto r = upload_mat(*w);
        if (!r) return r.error();
        mats_[w] = r.value();
        if (w->ne[2] == 1)  // expert tensors never take the dequant + cuBLAS path
            wdq_elems_ =
                std::max<size_t>(wdq_elems_, static_cast<size_t>(r.value().k * r.value().n));
        return {};
    };
    auto up_vec = [&](const Weight* w) -> Result<void> {
        if (!w || vecs_.count(w)) return {};
        auto r = upload_f32(*w);
        if (!r) return r.error();
        vecs_[w] = r.value();
        return {};
    };
    for (const ir::Op& op : P.ops) {
        switch (op.kind()) {
            case ir::OpKind::Embed:
                ZINC_TRY(up_mat(op.as<ir::EmbedP>().table));
                break;
            case ir::OpKind::RmsNorm:
                ZINC_TRY(up_vec(op.as<ir::RmsNormP>().w));
                break;
            case ir::OpKind::Matmul: {
                const auto& m = op.as<ir::MatmulP>();
                for (int i = 0; i < m.n_w; ++i) {
                    ZINC_TRY(up_mat(m.w[i]));
                    ZINC_TRY(up_vec(m.bias[i]));
                }
                break;
            }
            case ir::OpKind::RopeKv:
                ZINC_TRY(up_vec(op.as<ir::RopeKvP>().q_norm));
                ZINC_TRY(up_vec(op.as<ir::RopeKvP>().k_norm));
                break;
            case ir::OpKind::AddRmsNorm:
                ZINC_TRY(up_vec(op.as<ir::AddRmsNormP>().w));
                break;
            case ir::OpKind::Attention:
                ZINC_TRY(up_vec(op.as<ir::AttentionP>().sinks));
                break;
            case ir::OpKind::SsmConv:
                ZINC_TRY(up_vec(op.as<ir::SsmConvP>().w));
                break;
            case ir::OpKind::DeltaNet:
                ZINC_TRY(up_vec(op.as<ir::DeltaNetP>().dt_bias));
                ZINC_TRY(up_vec(op.as<ir::DeltaNetP>().a));
                break;
            case ir::OpKind::GatedRmsNorm:
                ZINC_TRY(up_vec(op.as<ir::GatedRmsNormP>().w));
                break;
            case ir::OpKind::Moe: {
                const auto& m = op.as<ir::MoeP>();
                for (const Weight* w : {m.gate_exps, m.up_exps, m.down_exps}) {
                    ZINC_TRY(up_mat(w));
                    if (mats_[w].type >= 100 || !dmmv_exact_supports(mats_[w].type))
                        return make_error("cuda: expert tensor " + w->name + " has type " +
                                          std::string(quant::type_name(w->type)) +
                                          ", which the expert-gathering kernels do not cover");
                }
                moe_.max_slots = std::max(moe_.max_slots, opts_.max_batch_tokens * m.n_used);
                moe_.n_expert = std::max(moe_.n_expert, m.n_expert);
                moe_.n_layers = std::max(moe_.n_layers, op.il + 1);
                if (m.n_expert > 1024)
                    return make_error("cuda: " + std::to_string(m.n_expert) +
                                      " experts per layer; the CUDA tier's routing covers 1024");
                moe_.wide = std::max<int>(moe_.wide, std::max<int>(m.n_ff, P.width(m.in)));
                break;
            }
            default:
                break;
        }
    }
    // A router folded into its Moe (FusionOptions::router_moe) runs as one kernel in fast mode
    // with an F32 router (moe_route_router); elsewhere the step runs the router's Matmul and the
    // Moe (with its residual add, if folded) as two fused ops.
    for (ir::Step& st : steps_) {
        for (size_t i = 0; i < st.fused.size(); ++i) {
            ir::Op& f = st.fused[i];
            if (f.kind() != ir::OpKind::Moe || !f.as<ir::MoeP>().router) continue;
            if (!exact_ && mats_.at(f.as<ir::MoeP>().router).type == 0) continue;
            std::get<ir::MoeP>(f.p).router = nullptr;
            ZINC_CHECK(P.ops[static_cast<size_t>(st.begin)].kind() == ir::OpKind::Matmul);
            st.fused.insert(st.fused.begin() + static_cast<std::ptrdiff_t>(i),
                            P.ops[static_cast<size_t>(st.begin)]);
            ++i;
        }
    }

    // The projection that consumes each norm's / GLU's result: the launch that computes it also
    // packs it for that projection's weight type (norm + pack, GLU + pack).
    const int n_ops = static_cast<int>(P.ops.size());
    consumer_.assign(P.ops.size(), nullptr);
    for (int i = 0; i < n_ops; ++i) {
        const ir::Op& op = P.ops[i];
        if (op.kind() != ir::OpKind::RmsNorm && op.kind() != ir::OpKind::Glu) continue;
        const ir::Tid t = op.outs[0].t;
        for (int j = i + 1; j < n_ops; ++j) {
            const ir::Op& o = P.ops[j];
            if (o.kind() == ir::OpKind::Matmul && o.as<ir::MatmulP>().in == t) {
                consumer_[i] = o.as<ir::MatmulP>().w[0];
                break;
            }
            if (o.reads(t) || o.writes(t)) break;
        }
    }

    // Buffers: every tensor some op writes to its own memory; RmsNorm and Glu results are
    // staged in xf_ (wide_ floats a row), as is every projection's input.
    R_ = opts_.max_batch_tokens;
    const size_t R = static_cast<size_t>(R_);
    std::vector<bool> own(P.tensors.size(), false);
    wide_ = 0;
    auto mark = [&](const ir::Op& op) {
        const bool staged = op.kind() == ir::OpKind::RmsNorm || op.kind() == ir::OpKind::Glu;
        for (int k = 0; k < op.n_outs; ++k) {
            if (staged)
                wide_ = std::max<int>(wide_, static_cast<int>(P.width(op.outs[k].t)));
            else
                own[static_cast<size_t>(op.outs[k].t)] = true;
        }
        if (op.kind() == ir::OpKind::Matmul)
            wide_ = std::max<int>(wide_, static_cast<int>(P.width(op.as<ir::MatmulP>().in)));
    };
    for (const ir::Op& op : P.ops) mark(op);
    for (const ir::Step& st : steps_)
        for (const ir::Op& op : st.fused) mark(op);
    // A staged value (a norm's or GLU's result, or a projection's input: it lives in xf_) that is
    // read again after another one took xf_ (qwen35moe's shared-expert gate reads the FFN norm
    // after the shared expert's GLU) also gets its own buffer: the staging launch's result is
    // copied there (keep_staged), and a later read finds it (loc()).
    auto displaced = [&](auto&& ops) {
        ir::Tid staged = ir::kNoTensor;
        for (const ir::Op& op : ops) {
            for (size_t t = 0; t < P.tensors.size(); ++t) {
                const auto ti = static_cast<ir::Tid>(t);
                if (!own[t] && ti != staged && ti != P.logits && op.reads(ti)) keep_[t] = true;
            }
            if (op.kind() == ir::OpKind::RmsNorm || op.kind() == ir::OpKind::Glu)
                staged = op.outs[0].t;
            else if (op.kind() == ir::OpKind::Matmul)
                staged = op.as<ir::MatmulP>().in;
            else
                for (int k = 0; k < op.n_outs; ++k)
                    if (op.outs[k].t == staged) staged = ir::kNoTensor;
        }
    };
    keep_.assign(P.tensors.size(), false);
    displaced(P.ops);
    {
        std::vector<ir::Op> sched;  // the list as the fused steps run it
        for (const ir::Step& st : steps_) {
            if (!st.fused.empty())
                sched.insert(sched.end(), st.fused.begin(), st.fused.end());
            else
                sched.insert(sched.end(), P.ops.begin() + st.begin, P.ops.begin() + st.end);
        }
        displaced(sched);
    }
    for (size_t t = 0; t < P.tensors.size(); ++t)
        if (keep_[t]) own[t] = true;
    size_t act_bytes = 0;
    auto fl = [&](float*& p, size_t n) -> Result<void> {
        p = static_cast<float*>(dalloc(n * sizeof(float), e));
        act_bytes += n * sizeof(float);
        if (e != cudaSuccess)
            return make_error("cuda: out of device memory for activations (" + fmt_mib(act_bytes) +
                              " so far); lower --batch or -c");
        return {};
    };
    bufs_.assign(P.tensors.size(), nullptr);
    ZINC_TRY(fl(logits_, R * static_cast<size_t>(P.width(P.logits))));
    for (size_t t = 0; t < P.tensors.size(); ++t) {
        if (static_cast<ir::Tid>(t) == P.logits)
            bufs_[t] = logits_;
        else if (own[t])
            ZINC_TRY(fl(bufs_[t], R * P.tensors[t].width));
    }
    ZINC_TRY(fl(xf_, R * wide_));
    int64_t head_w = 0;  // the head's input: gathered to the output rows first
    for (const ir::Op& op : P.ops) {
        if (!op.head) continue;
        if (op.kind() == ir::OpKind::RmsNorm)
            head_in_ = op.as<ir::RmsNormP>().in;
        else if (op.kind() == ir::OpKind::Matmul)
            head_in_ = op.as<ir::MatmulP>().in;
        if (head_in_ != ir::kNoTensor) head_w = P.width(head_in_);
        break;  // the first head op's input is what gather_head moves
    }
    ZINC_TRY(fl(xo_, R * std::max<int64_t>(head_w, 1)));
    if (moe_.max_slots > 0) {  // exec_moe's buffers
        const size_t v = static_cast<size_t>(moe_.max_slots), w = static_cast<size_t>(moe_.wide);
        ZINC_TRY(fl(moe_.x, v * w));
        ZINC_TRY(fl(moe_.g, v * w));
        ZINC_TRY(fl(moe_.u, v * w));
        ZINC_TRY(fl(moe_.y, v * w));
        ZINC_TRY(fl(moe_.w, v));
        moe_.aq = static_cast<int8_t*>(dalloc(v * w, e));
        CU_TRY("alloc moe", e);
        moe_.ad = static_cast<float4*>(dalloc(v * (w / 32) * sizeof(float4), e));
        CU_TRY("alloc moe", e);
        moe_.ids = static_cast<int32_t*>(dalloc(v * sizeof(int32_t), e));
        moe_.tickets = static_cast<unsigned*>(dalloc(R * sizeof(unsigned), e));
        CU_TRY("clear moe tickets", cudaMemset(moe_.tickets, 0, R * sizeof(unsigned)));
        CU_TRY("alloc moe", e);
        moe_.src = static_cast<int32_t*>(dalloc(v * sizeof(int32_t), e));
        CU_TRY("alloc moe", e);
        const size_t tiles =
            static_cast<size_t>(mmq_group_max_tiles(moe_.max_slots, moe_.n_expert));
        auto ints = [&](int32_t*& p, size_t n) {
            p = static_cast<int32_t*>(dalloc(n * sizeof(int32_t), e));
            return e;
        };
        CU_TRY("alloc moe", ints(moe_.grp.src, v));
        CU_TRY("alloc moe", ints(moe_.grp.slot_pos, v));
        CU_TRY("alloc moe", ints(moe_.grp.expert, v));
        CU_TRY("alloc moe", ints(moe_.grp.tile_expert, tiles));
        CU_TRY("alloc moe", ints(moe_.grp.tile_c0, tiles));
        CU_TRY("alloc moe", ints(moe_.grp.tile_c1, tiles));
        CU_TRY("alloc moe", ints(moe_.grp.n_tiles, 1));
        const size_t n_load = static_cast<size_t>(moe_.n_layers) * moe_.n_expert;
        moe_.load = static_cast<uint32_t*>(dalloc(n_load * sizeof(uint32_t), e));
        CU_TRY("alloc moe load counters", e);
        CU_TRY("clear moe load counters", cudaMemset(moe_.load, 0, n_load * sizeof(uint32_t)));
    }
    pending_bias_.assign(P.tensors.size(), nullptr);
    last_name_.assign(P.tensors.size(), LastName{});

    // RoPE: the CPU tier's cos/sin table (cpu::rope_cache) for every position, computed here on
    // the host and uploaded, one per distinct setting; the kernel only rotates.
    const size_t n_pos = static_cast<size_t>(opts_.max_seq_len);
    std::vector<std::pair<const ir::RopeKvP*, const float*>> made;
    rope_cs_.assign(cfg_.n_layer, nullptr);
    for (const ir::Op& op : P.ops) {
        if (op.kind() != ir::OpKind::RopeKv) continue;
        const auto& rp = op.as<ir::RopeKvP>();
        ZINC_CHECK(rp.kv_layer >= 0 && rp.kv_layer < cfg_.n_layer);
        const cpu::RopeParams& r = rp.rope;
        for (const auto& m : made) {
            const cpu::RopeParams& o = m.first->rope;
            if (o.n_rot == r.n_rot && o.freq_base == r.freq_base && o.freq_scale == r.freq_scale &&
                o.freq_factors == r.freq_factors)
                rope_cs_[rp.kv_layer] = m.second;
        }
        if (rope_cs_[rp.kv_layer]) continue;
        std::vector<float> host(n_pos * r.n_rot);
        for (size_t p = 0; p < n_pos; ++p)
            cpu::rope_cache(r, static_cast<int64_t>(p), host.data() + p * r.n_rot);
        void* d = dalloc(host.size() * sizeof(float), e);
        CU_TRY("alloc rope table", e);
        CU_TRY("upload rope table",
               cudaMemcpy(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
        rope_cs_[rp.kv_layer] = static_cast<const float*>(d);
        made.emplace_back(&rp, rope_cs_[rp.kv_layer]);
    }
    return {};
}

Result<void> CudaRunner::init() {
    const ModelConfig& c = cfg_;
    const int dmmv_rows_env = env_int("ZINC_DMMV_MAX_ROWS", 0);  // 0: by the model (below)
    use_graph_ = env_on("ZINC_CUDA_GRAPH");
    fused_proj_ = env_on("ZINC_FUSED_PROJ");
    fused_norm_ = env_on("ZINC_FUSED_NORM");
    fused_add_ = env_on("ZINC_FUSED_ADD");
    fused_moe_ = env_on("ZINC_FUSED_MOE");  // the router and the residual add inside the Moe
    repack_ = env_on("ZINC_REPACK");  // fast mode: the aligned layouts (perf-notes "dmmv")
    // Exact (--exact, ZINC_EXACT=1, or a batch-invariant runner): every matrix product, decode
    // and prefill, by dmmv_exact, which computes the CPU tier's bits (so also the same bits
    // whatever else is in the batch); no cuBLAS, mmq or repacked layouts. The default is fast:
    // dmmv up to ZINC_DMMV_MAX_ROWS rows, mmq / cuBLAS above, held to agreement with the CPU
    // tier (docs/cuda.md "Fast path agreement"), not bit-identical to it.
    exact_ = exact_opt_ >= 0 ? exact_opt_ == 1 : env_on("ZINC_EXACT", false);
    if (opts_.batch_invariant) exact_ = true;
    fa_ = env_on("ZINC_FA");
    // fast mode: attention_fast*.cu (ZINC_FA=0: attention.cu). Its split-K decode kernel by
    // default where the GQA group has at most 4 query heads (H200 run 10: faster than
    // attention.cu's at every depth on the 8B shape; with 8-head groups, 255 registers a thread,
    // slower on Qwen3-30B-A3B); ZINC_FA_DECODE=1 / 0 forces it on / off.
    const int fa_decode_env = env_int("ZINC_FA_DECODE", -1);
    fa_decode_ = fa_decode_env >= 0 ? fa_decode_env == 1
                                    : cfg_.n_head_kv > 0 && cfg_.n_head <= 4 * cfg_.n_head_kv;
    mmq_ = env_on("ZINC_MMQ");  // ZINC_MMQ=0: cuBLAS over dequantized f16 weights, as before mmq
    // Hybrid models (recurrent state): mmq at every row count by default. Its int8 activations
    // are the CPU tier's codes; the dequantize + cuBLAS path's f16 ones are not, and the Gated
    // DeltaNet layers carry that difference along the sequence: H200 run 7, qwen35-tiny Q8_0
    // prefill agreement 0.889 on cuBLAS, 0.986 on mmq (llama.cpp's floor 0.984); the cost is
    // prefill speed (Qwen3.5-9B pp512 12227 -> 5659 tok/s). ZINC_MMQ_MAX_ROWS overrides.
    const int mmq_rows_default = prog_.recurrent.empty() ? 128 : opts_.max_batch_tokens;
    mmq_max_rows_ = std::max(1, env_int("ZINC_MMQ_MAX_ROWS", mmq_rows_default));
    // MoE: the expert-grouped GEMM from this many routed slots (rows x experts used) on; below,
    // expert-gathering dmmv (one activation row per block: decode).
    moe_.group_min_slots = std::max(1, env_int("ZINC_MOE_GROUP_MIN_SLOTS", 32));
    if (exact_) {
        repack_ = false;
        dmmv_max_rows_ = 1 << 30;  // never the cuBLAS path
    }
    // gemma4: sliding and global layers of different K/V widths (one uniform KV row here), the
    // V norm, the scaled router norm, GELU / fused / scaled experts, the layer scalar: CPU only.
    if (!c.layer_kv_k.empty())
        return make_error("cuda: " + model_.arch_name() +
                          " has per-layer K/V widths (its sliding and global layers differ), "
                          "which the CUDA tier does not support yet (run it on the CPU tier: "
                          "--tier cpu)");
    for (const model::Op& op : model_.program().ops) {
        const model::OpKind k = op.kind();
        // The delta rule and the sigmoid gate have fast kernels only (device exp / log, lanes
        // splitting the dot products: kernels.h), not the CPU tier's bits.
        if (exact_ && (k == model::OpKind::DeltaNet || k == model::OpKind::SigmoidMul))
            return make_error(std::string("cuda: exact mode (--exact / ZINC_EXACT=1 / "
                                          "--batch-invariant): op ") +
                              model::op_kind_name(k) + " of " + model_.arch_name() +
                              " has no bit-exact CUDA kernel (its fast kernel is held to a "
                              "relative-error bound, docs/cuda.md); run without --exact, or on "
                              "the CPU tier: --tier cpu");
        // BERT's ops and gemma4's scaled norms / V norm have CPU kernels only so far.
        if (k == model::OpKind::LayerNorm || k == model::OpKind::AddEmbed ||
            k == model::OpKind::Gelu || k == model::OpKind::Scale || k == model::OpKind::Input ||
            k == model::OpKind::Concat ||
            (k == model::OpKind::RopeKv && op.as<model::RopeKvP>().v_norm) ||
            (k == model::OpKind::RmsNorm && op.as<model::RmsNormP>().scale != 1.0f))
            return make_error(std::string("cuda: op ") + model::op_kind_name(k) + " of " +
                              model_.arch_name() +
                              " has no CUDA kernel yet (run it on the CPU tier: --tier cpu)");
        if (k == model::OpKind::Attention && !op.as<model::AttentionP>().causal)
            return make_error("cuda: bidirectional attention (" + model_.arch_name() +
                              ") has no CUDA kernel yet (run it on the CPU tier: --tier cpu)");
        // gpt-oss's experts (swiglu_oai, per-expert biases): CPU tier only so far.
        const bool oai_glu =
            k == model::OpKind::Glu && op.as<model::GluP>().act == model::GluAct::SwigluOai;
        bool oai_moe = false;
        if (k == model::OpKind::Moe) {
            const auto& m = op.as<model::MoeP>();
            oai_moe = m.act != model::GluAct::SiLU || m.gate_b || m.up_b || m.down_b ||
                      m.gate_up_fused || m.down_scale;
        }
        if (oai_glu || oai_moe)
            return make_error("cuda: the " + std::string(oai_moe ? "experts" : "GLU") + " of " +
                              model_.arch_name() +
                              " (swiglu_oai / GELU, per-expert biases or scales, fused gate_up) "
                              "have no CUDA kernel yet (run it on "
                              "the CPU tier: --tier cpu)");
    }
    if (c.head_dim_k > 256 || c.head_dim_v > 256)
        return make_error("cuda: head_dim " + std::to_string(c.head_dim_k) +
                          " > 256 is not supported by the attention kernel");
    CU_TRY("set device " + std::to_string(device_), cudaSetDevice(device_));
    CU_TRY("create stream", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ZINC_TRY(plan());
    // mmq_all_: every matrix of the model is covered by mmq with one activation packing, so the
    // f16 activation copy for cuBLAS is never needed below mmq_max_rows_. Small F32 matrices
    // (MoE routers) do not count: proj() gives them dmmv's f32 kernel at every row count.
    mmq_all_ = mmq_ && !mats_.empty();
    int mmq_mode = -1;
    for (const auto& [w, m] : mats_) {
        if (m.small_f32()) continue;
        if (mmq_mode < 0) mmq_mode = pack_mode_for(m.type);
        mmq_all_ = mmq_all_ && mmq_supports(m.type) && pack_mode_for(m.type) == mmq_mode;
    }
    // dmmv's row limit: 8 when mmq covers every matrix (above it mmq with split-K is faster: H200
    // run 6, 8B Q4_K_M, 16 sequences 17.6 ms a step on dmmv, 10.3 ms on mmq; 8 sequences 9.8 on
    // dmmv, 10.1 on mmq), else 16 (above it dequantize + cuBLAS for the types mmq lacks)
    if (!exact_) dmmv_max_rows_ = dmmv_rows_env > 0 ? dmmv_rows_env : (mmq_all_ ? 8 : 16);

    // KV cache: the layers that attend only (kv_index_)
    cudaError_t e;
    kv_index_.assign(static_cast<size_t>(c.n_layer), -1);
    n_kv_layers_ = 0;
    for (const model::Op& op : prog_.ops)
        if (op.kind() == model::OpKind::RopeKv) {
            int& ix = kv_index_[static_cast<size_t>(op.as<model::RopeKvP>().kv_layer)];
            if (ix < 0) ix = n_kv_layers_++;
        }
    const size_t slots = static_cast<size_t>(opts_.n_blocks) * opts_.block_size;
    layer_k_elems_ = slots * c.kv_dim_k();
    layer_v_elems_ = slots * c.kv_dim_v();
    const size_t n_kv = static_cast<size_t>(std::max(n_kv_layers_, 1));
    kv_bytes_ = (layer_k_elems_ + layer_v_elems_) * n_kv * sizeof(uint16_t);
    k_cache_ = static_cast<uint16_t*>(dalloc(layer_k_elems_ * n_kv * 2, e));
    if (e != cudaSuccess)
        return make_error("cuda: out of device memory for the KV cache (" + fmt_mib(kv_bytes_) +
                          " for " + std::to_string(opts_.n_blocks) + " blocks); lower -c");
    v_cache_ = static_cast<uint16_t*>(dalloc(layer_v_elems_ * n_kv * 2, e));
    if (e != cudaSuccess)
        return make_error("cuda: out of device memory for the KV cache (" + fmt_mib(kv_bytes_) +
                          "); lower -c");

    // Recurrent state (hybrid models): per recurrent layer, n_state_slots_ slots of conv and
    // DeltaNet state; a slot's contents are only read after a step from position 0 wrote them.
    // Checkpoints (speculative decoding): n_ckpt_ more states per slot and layer, the same
    // layout (cpu::StatePool's), written only by steps with keep_states.
    n_state_slots_ = opts_.n_state_slots > 0 ? opts_.n_state_slots : opts_.max_seqs;
    n_ckpt_ = prog_.recurrent.empty() ? 0 : opts_.n_state_checkpoints;
    opts_.n_state_checkpoints = n_ckpt_;
    if (!prog_.recurrent.empty()) {
        opts_.n_state_slots = n_state_slots_;
        slots_ = model::StateSlots(n_state_slots_, n_ckpt_);
        const size_t ns = static_cast<size_t>(n_state_slots_);
        const size_t nc = ns * static_cast<size_t>(n_ckpt_);
        for (const model::Program::RecurrentLayer& rl : prog_.recurrent) {
            RecurrentLayerState L;
            L.conv_floats = rl.conv_floats;
            L.ssm_floats = rl.ssm_floats;
            L.conv = static_cast<float*>(dalloc(ns * rl.conv_floats * sizeof(float), e));
            if (e == cudaSuccess)
                L.ssm = static_cast<float*>(dalloc(ns * rl.ssm_floats * sizeof(float), e));
            if (e == cudaSuccess && nc > 0)
                L.conv_ckpt = static_cast<float*>(dalloc(nc * rl.conv_floats * sizeof(float), e));
            if (e == cudaSuccess && nc > 0)
                L.ssm_ckpt = static_cast<float*>(dalloc(nc * rl.ssm_floats * sizeof(float), e));
            state_bytes_ += (ns + nc) * (rl.conv_floats + rl.ssm_floats) * sizeof(float);
            if (e != cudaSuccess)
                return make_error("cuda: out of device memory for the recurrent state (" +
                                  fmt_mib(state_bytes_) + " so far for " +
                                  std::to_string(n_state_slots_) + " sequences and " +
                                  std::to_string(n_ckpt_) +
                                  " checkpoint rows each); lower --parallel or --spec-max");
            rs_.push_back(L);
        }
    }

    const size_t R = static_cast<size_t>(R_);
    xh_ = static_cast<uint16_t*>(dalloc(R * wide_ * 2, e));
    CU_TRY("alloc", e);
    aq_ = static_cast<int8_t*>(dalloc(R * wide_, e));
    CU_TRY("alloc", e);
    ad_ = static_cast<float4*>(dalloc(R * (wide_ / 32) * sizeof(float4), e));
    CU_TRY("alloc", e);
    tok_out_ = static_cast<int32_t*>(dalloc(R * sizeof(int32_t), e));
    CU_TRY("alloc", e);
    argmax_scratch_ = dalloc(argmax_scratch_bytes(R_, c.n_vocab), e);
    CU_TRY("alloc", e);
    if (cublas_.ok() && R_ > dmmv_max_rows_ && (!mmq_all_ || R_ > mmq_max_rows_)) {
        wdq_ = static_cast<uint16_t*>(dalloc(wdq_elems_ * 2, e));
        if (e != cudaSuccess)
            return make_error("cuda: out of device memory for the prefill weight scratch (" +
                              fmt_mib(wdq_elems_ * 2) + ")");
    }
    max_bt_ = opts_.max_seqs * ((opts_.max_seq_len + opts_.block_size - 1) / opts_.block_size);
    const size_t meta_n = meta_fixed() + static_cast<size_t>(max_bt_);
    meta_d_ = static_cast<int32_t*>(dalloc(meta_n * sizeof(int32_t), e));
    CU_TRY("alloc", e);
    CU_TRY("pinned alloc", cudaMallocHost(&meta_h_, meta_n * sizeof(int32_t)));
    CU_TRY("pinned alloc", cudaMallocHost(&tok_h_, R * sizeof(int32_t)));
    logits_h_rows_ = static_cast<size_t>(std::max(1, opts_.max_seqs));
    CU_TRY("pinned alloc", cudaMallocHost(&logits_h_, logits_h_rows_ * c.n_vocab * sizeof(float)));
    d_tokens_ = meta_d_;
    d_pos_ = meta_d_ + R;
    d_slot_ = meta_d_ + 2 * R;
    d_rowbt_ = meta_d_ + 3 * R;
    d_out_ = meta_d_ + 4 * R;
    d_seq_row0_ = meta_d_ + 5 * R;
    d_seq_slot_ = d_seq_row0_ + opts_.max_seqs + 1;
    d_seq_keep_ = d_seq_slot_ + opts_.max_seqs;
    d_bt_ = meta_d_ + meta_fixed();
    CU_TRY("attention shared memory", attention_prepare(opts_.max_seq_len, c.head_dim_v));
    {
        const size_t units = static_cast<size_t>(kAttnSplitRows) * c.n_head;
        attn_part_ = static_cast<float*>(dalloc(
            units * attn_max_chunks(opts_.max_seq_len) * (c.head_dim_v + 2) * sizeof(float), e));
        CU_TRY("alloc attention scratch", e);
        attn_cnt_ = static_cast<unsigned*>(dalloc(units * sizeof(unsigned), e));
        CU_TRY("alloc attention counters", e);
        CU_TRY("clear attention counters", cudaMemset(attn_cnt_, 0, units * sizeof(unsigned)));
    }
    if (mmq_ && !exact_ && env_on("ZINC_MMQ_SPLIT") && R_ > dmmv_max_rows_) {
        // split-K partials: 16 MiB covers every decode-batch shape up to 128256 rows (a launch
        // whose partials do not fit runs unsplit); one counter per output tile
        constexpr int kCounters = 8192;
        mmq_scratch_.partial = static_cast<float*>(dalloc(kMmqSplitFloats * sizeof(float), e));
        CU_TRY("alloc mmq split-K scratch", e);
        mmq_scratch_.partial_floats = kMmqSplitFloats;
        mmq_scratch_.counters = static_cast<unsigned*>(dalloc(kCounters * sizeof(unsigned), e));
        CU_TRY("alloc mmq split-K counters", e);
        mmq_scratch_.n_counters = kCounters;
        CU_TRY("clear mmq split-K counters",
               cudaMemset(mmq_scratch_.counters, 0, kCounters * sizeof(unsigned)));
    }
    CU_TRY("init", cudaDeviceSynchronize());
    return {};
}

}  // namespace zinc::cuda::runner_detail
