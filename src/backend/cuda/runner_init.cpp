// zinc/backend/cuda/runner_init.cpp — the CUDA Runner's set-up: device buffers, the paged KV
// cache, and the weights uploaded still quantized (optionally repacked, repack.h).
#include "backend/cuda/runner_impl.h"

#include "backend/cpu/rope.h"

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
    if (err == cudaSuccess) allocs_.push_back(p);
    return p;
}

Result<DevMat> CudaRunner::upload_mat(const std::string& name, bool required) {
    const Weight* w = model_.find_weight(name);
    DevMat m;
    if (!w) {
        if (required) return make_error("cuda: the model has no tensor " + name);
        return m;
    }
    m.type = static_cast<int>(w->type);
    if (!dmmv_supports(m.type))
        return make_error("cuda: tensor " + name + " has type " +
                          std::string(quant::type_name(w->type)) +
                          ", which the CUDA tier has no kernel for");
    m.k = w->ne[0];
    m.n = w->ne[1];
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
    const int dt = repacked_type(m.type, m.k, repack_);
    if (dt == m.type) {
        CU_TRY("upload " + name, cudaMemcpy(m.d, w->data, bytes, cudaMemcpyHostToDevice));
    } else {  // repack (repack.h) in slices of rows
        const int64_t step = std::max<int64_t>(1, (int64_t(64) << 20) / static_cast<int64_t>(m.row_bytes));
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

Result<const float*> CudaRunner::upload_f32(const std::string& name, bool required) {
    const Weight* w = model_.find_weight(name);
    if (!w) {
        if (required) return make_error("cuda: the model has no tensor " + name);
        return static_cast<const float*>(nullptr);
    }
    if (w->type != quant::GgmlType::F32)
        return make_error("cuda: tensor " + name + " is not f32");
    int64_t n = 1;
    for (int i = 0; i < w->n_dims; ++i) n *= w->ne[i];
    cudaError_t e;
    void* p = dalloc(n * sizeof(float), e);
    CU_TRY("alloc " + name, e);
    CU_TRY("upload " + name, cudaMemcpy(p, w->data, n * sizeof(float), cudaMemcpyHostToDevice));
    weight_bytes_ += n * sizeof(float);
    return static_cast<const float*>(p);
}

Result<void> CudaRunner::init() {
    namespace tn = model::tn;
    const ModelConfig& c = cfg_;
    gemma_ = c.arch == model::Arch::Gemma3;
    dmmv_max_rows_ = std::max(1, env_int("ZINC_DMMV_MAX_ROWS", 16));
    use_graph_ = env_on("ZINC_CUDA_GRAPH");
    fused_proj_ = env_on("ZINC_FUSED_PROJ");
    fused_norm_ = env_on("ZINC_FUSED_NORM");
    repack_ = env_on("ZINC_REPACK");  // fast mode: the aligned layouts (perf-notes "dmmv")
    // ZINC_EXACT (default on): every matrix product, decode and prefill, by dmmv_exact, which
    // computes the CPU tier's bits; no cuBLAS, no repacked layouts. ZINC_EXACT=0: the fast
    // kernels (dmmv, cuBLAS above ZINC_DMMV_MAX_ROWS rows), not bit-identical to the CPU tier.
    exact_ = env_on("ZINC_EXACT");
    if (exact_) {
        repack_ = false;
        dmmv_max_rows_ = 1 << 30;  // never the cuBLAS path
    }
    if (c.head_dim_k > 256 || c.head_dim_v > 256)
        return make_error("cuda: head_dim " + std::to_string(c.head_dim_k) +
                          " > 256 is not supported by the attention kernel");
    CU_TRY("set device " + std::to_string(device_), cudaSetDevice(device_));
    CU_TRY("create stream", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));

    auto mat = [&](const std::string& n, bool req, DevMat& out) -> Result<void> {
        auto r = upload_mat(n, req);
        if (!r) return r.error();
        out = r.value();
        return {};
    };
    auto f32 = [&](const std::string& n, bool req, const float*& out) -> Result<void> {
        auto r = upload_f32(n, req);
        if (!r) return r.error();
        out = r.value();
        return {};
    };
    ZINC_TRY(mat(tn::global(tn::kTokenEmbd), true, tok_embd_));
    ZINC_TRY(mat(tn::global(tn::kOutput), false, output_));
    if (!output_.valid()) output_ = tok_embd_;
    ZINC_TRY(f32(tn::global(tn::kOutputNorm), true, output_norm_));
    ZINC_TRY(f32(tn::global(tn::kRopeFreqs), false, rope_freqs_));
    layers_.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; ++il) {
        Layer& L = layers_[il];
        ZINC_TRY(mat(tn::layer(il, tn::kAttnQ), true, L.wq));
        ZINC_TRY(mat(tn::layer(il, tn::kAttnK), true, L.wk));
        ZINC_TRY(mat(tn::layer(il, tn::kAttnV), true, L.wv));
        ZINC_TRY(mat(tn::layer(il, tn::kAttnOut), true, L.wo));
        ZINC_TRY(mat(tn::layer(il, tn::kFfnGate), true, L.gate));
        ZINC_TRY(mat(tn::layer(il, tn::kFfnUp), true, L.up));
        ZINC_TRY(mat(tn::layer(il, tn::kFfnDown), true, L.down));
        ZINC_TRY(f32(tn::layer(il, tn::kAttnNorm), true, L.attn_norm));
        ZINC_TRY(f32(tn::layer(il, tn::kFfnNorm), true, L.ffn_norm));
        ZINC_TRY(f32(tn::layer(il, tn::kAttnQNorm), false, L.q_norm));
        ZINC_TRY(f32(tn::layer(il, tn::kAttnKNorm), false, L.k_norm));
        ZINC_TRY(f32(tn::layer(il, tn::kAttnQ, "bias"), false, L.bq));
        ZINC_TRY(f32(tn::layer(il, tn::kAttnK, "bias"), false, L.bk));
        ZINC_TRY(f32(tn::layer(il, tn::kAttnV, "bias"), false, L.bv));
        if (gemma_) {
            ZINC_TRY(f32(tn::layer(il, tn::kAttnPostNorm), true, L.post_attn_norm));
            ZINC_TRY(f32(tn::layer(il, tn::kFfnPostNorm), true, L.post_ffn_norm));
        }
        for (const DevMat* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down})
            wdq_elems_ = std::max<size_t>(wdq_elems_, static_cast<size_t>(m->k * m->n));
    }
    wdq_elems_ = std::max<size_t>(wdq_elems_, static_cast<size_t>(output_.k * output_.n));

    // RoPE: the CPU tier's cos/sin table (cpu::rope_cache) for every position, computed here on
    // the host and uploaded, one per distinct (base, scale) setting; the kernel only rotates.
    {
        const Weight* ffw = model_.find_weight(tn::global(tn::kRopeFreqs));
        const float* ffh = ffw ? reinterpret_cast<const float*>(ffw->data) : nullptr;
        const size_t n_pos = static_cast<size_t>(opts_.max_seq_len);
        std::vector<float> host(n_pos * c.n_rot);
        std::vector<std::pair<std::pair<float, float>, const float*>> made;
        rope_cs_.assign(c.n_layer, nullptr);
        for (int il = 0; il < c.n_layer; ++il) {
            cpu::RopeParams rp = c.rope(il);
            rp.freq_factors = ffh;
            const std::pair<float, float> key{rp.freq_base, rp.freq_scale};
            for (const auto& m : made)
                if (m.first == key) rope_cs_[il] = m.second;
            if (rope_cs_[il]) continue;
            for (size_t p = 0; p < n_pos; ++p)
                cpu::rope_cache(rp, static_cast<int64_t>(p), host.data() + p * c.n_rot);
            cudaError_t err;
            void* d = dalloc(host.size() * sizeof(float), err);
            CU_TRY("alloc rope table", err);
            CU_TRY("upload rope table",
                   cudaMemcpy(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
            rope_cs_[il] = static_cast<const float*>(d);
            made.emplace_back(key, rope_cs_[il]);
        }
    }

    // KV cache
    cudaError_t e;
    const size_t slots = static_cast<size_t>(opts_.n_blocks) * opts_.block_size;
    layer_k_elems_ = slots * c.kv_dim_k();
    layer_v_elems_ = slots * c.kv_dim_v();
    kv_bytes_ = (layer_k_elems_ + layer_v_elems_) * c.n_layer * sizeof(uint16_t);
    k_cache_ = static_cast<uint16_t*>(dalloc(layer_k_elems_ * c.n_layer * 2, e));
    if (e != cudaSuccess)
        return make_error("cuda: out of device memory for the KV cache (" + fmt_mib(kv_bytes_) +
                          " for " + std::to_string(opts_.n_blocks) + " blocks); lower -c");
    v_cache_ = static_cast<uint16_t*>(dalloc(layer_v_elems_ * c.n_layer * 2, e));
    if (e != cudaSuccess)
        return make_error("cuda: out of device memory for the KV cache (" + fmt_mib(kv_bytes_) +
                          "); lower -c");

    // activations
    R_ = opts_.max_batch_tokens;
    const size_t R = static_cast<size_t>(R_);
    wide_ = std::max({c.n_embd, c.attn_out_dim(), c.n_ff});
    size_t act_bytes = 0;
    auto fl = [&](float*& p, size_t n) -> Result<void> {
        p = static_cast<float*>(dalloc(n * sizeof(float), e));
        act_bytes += n * sizeof(float);
        if (e != cudaSuccess)
            return make_error("cuda: out of device memory for activations (" + fmt_mib(act_bytes) +
                              " so far); lower --batch or -c");
        return {};
    };
    ZINC_TRY(fl(x_, R * c.n_embd));
    ZINC_TRY(fl(xf_, R * wide_));
    ZINC_TRY(fl(q_, R * c.q_dim()));
    ZINC_TRY(fl(k_, R * c.kv_dim_k()));
    ZINC_TRY(fl(v_, R * c.kv_dim_v()));
    ZINC_TRY(fl(attn_, R * c.attn_out_dim()));
    ZINC_TRY(fl(gate_, R * c.n_ff));
    ZINC_TRY(fl(up_, R * c.n_ff));
    ZINC_TRY(fl(h_, R * c.n_embd));
    ZINC_TRY(fl(xo_, R * c.n_embd));
    ZINC_TRY(fl(logits_, R * static_cast<size_t>(c.n_vocab)));
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
    if (cublas_.ok() && R_ > dmmv_max_rows_) {
        wdq_ = static_cast<uint16_t*>(dalloc(wdq_elems_ * 2, e));
        if (e != cudaSuccess)
            return make_error("cuda: out of device memory for the prefill weight scratch (" +
                              fmt_mib(wdq_elems_ * 2) + ")");
    }
    max_bt_ = opts_.max_seqs * ((opts_.max_seq_len + opts_.block_size - 1) / opts_.block_size);
    const size_t meta_n = 5 * R + static_cast<size_t>(max_bt_);
    meta_d_ = static_cast<int32_t*>(dalloc(meta_n * sizeof(int32_t), e));
    CU_TRY("alloc", e);
    CU_TRY("pinned alloc", cudaMallocHost(&meta_h_, meta_n * sizeof(int32_t)));
    CU_TRY("pinned alloc", cudaMallocHost(&tok_h_, R * sizeof(int32_t)));
    logits_h_rows_ = static_cast<size_t>(std::max(1, opts_.max_seqs));
    CU_TRY("pinned alloc",
           cudaMallocHost(&logits_h_, logits_h_rows_ * c.n_vocab * sizeof(float)));
    d_tokens_ = meta_d_;
    d_pos_ = meta_d_ + R;
    d_slot_ = meta_d_ + 2 * R;
    d_rowbt_ = meta_d_ + 3 * R;
    d_out_ = meta_d_ + 4 * R;
    d_bt_ = meta_d_ + 5 * R;
    CU_TRY("attention shared memory", attention_prepare(opts_.max_seq_len, c.head_dim_v));
    {
        const size_t units = static_cast<size_t>(kAttnSplitRows) * c.n_head;
        attn_part_ = static_cast<float*>(dalloc(units * attn_max_chunks(opts_.max_seq_len) *
                                                    (c.head_dim_v + 2) * sizeof(float), e));
        CU_TRY("alloc attention scratch", e);
        attn_cnt_ = static_cast<unsigned*>(dalloc(units * sizeof(unsigned), e));
        CU_TRY("alloc attention counters", e);
        CU_TRY("clear attention counters", cudaMemset(attn_cnt_, 0, units * sizeof(unsigned)));
    }
    CU_TRY("init", cudaDeviceSynchronize());
    return {};
}

}  // namespace zinc::cuda::runner_detail
