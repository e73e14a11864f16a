// zinc/backend/cuda/runner.cpp — the CUDA model::Runner: weights uploaded still quantized, a
// paged f16 KV cache in device memory, and the forward pass of the pre-norm decoder (llama,
// qwen2, qwen3) and Gemma 3 as a sequence of kernels on one stream (kernels.h).
//
// Per step: the batch's metadata (tokens, positions, KV slots, block tables, output rows) is
// staged in pinned memory and copied in one transfer; the kernels run; logits (or argmax tokens)
// come back in one transfer; one stream synchronization. Decode steps (every sequence one row)
// are captured once per row count as a CUDA graph and replayed (ZINC_CUDA_GRAPH=0: plain
// launches). Projections take the int8/dp4a matrix-vector kernels up to ZINC_DMMV_MAX_ROWS rows
// (default 16) and dequantize-to-f16 + cuBLAS above (prefill). Opt-outs: ZINC_FUSED_PROJ=0
// (separate Q/K/V and gate/up launches), ZINC_FUSED_NORM=0 (norm, then a separate pack),
// and the opt-in ZINC_REPACK=1 (the aligned weight layouts of repack.h; no measured gain yet).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/activations.h"
#include "backend/cuda/cublas_lib.h"
#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/repack.h"
#include "model/arch_model.h"
#include "model/config.h"
#include "model/tensor_names.h"
#include "quant/types.h"
#include "runtime/forward_hooks.h"

namespace zinc::cuda {
namespace {

using model::ArchModel;
using model::ModelConfig;
using model::Weight;

bool env_on(const char* name, bool dflt = true) {
    const char* e = std::getenv(name);
    if (!e || !*e) return dflt;
    return std::string(e) != "0";
}
int env_int(const char* name, int dflt) {
    const char* e = std::getenv(name);
    return e && *e ? std::atoi(e) : dflt;
}

std::string fmt_mib(size_t b) {
    return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB";
}

Error cuda_error(const std::string& what, cudaError_t e) {
    return make_error("cuda: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                      ")");
}

#define CU_TRY(what, expr)                                   \
    do {                                                     \
        const cudaError_t e_ = (expr);                       \
        if (e_ != cudaSuccess) return cuda_error(what, e_);  \
    } while (0)

struct DevMat {
    int type = -1;
    int64_t k = 0, n = 0;  // row length, rows
    size_t row_bytes = 0;
    uint8_t* d = nullptr;
    bool valid() const { return d != nullptr; }
};

struct Layer {
    DevMat wq, wk, wv, wo, gate, up, down;
    const float *attn_norm = nullptr, *ffn_norm = nullptr, *post_attn_norm = nullptr,
                *post_ffn_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr, *bq = nullptr,
                *bk = nullptr, *bv = nullptr;
};

class CudaRunner final : public model::Runner {
  public:
    CudaRunner(const ArchModel& m, const model::RunnerOptions& o, int device)
        : model_(m), cfg_(m.config()), opts_(o), device_(device) {}
    ~CudaRunner() override;

    Result<void> init();
    Result<void> forward(const model::Batch& batch, float* logits) override {
        return run(batch, logits, nullptr);
    }
    Result<void> run(const model::Batch& batch, float* logits, int32_t* tokens);
    void copy_block(int32_t src, int32_t dst) override;
    const model::RunnerOptions& options() const override { return opts_; }
    std::string tier() const override { return "cuda"; }
    size_t kv_bytes() const override { return kv_bytes_; }
    RunnerStats stats() const { return stats_; }

  private:
    Result<DevMat> upload_mat(const std::string& name, bool required);
    Result<const float*> upload_f32(const std::string& name, bool required);
    void* dalloc(size_t bytes, cudaError_t& err);
    void enqueue_step(int n_rows, int n_out);
    // Norm (w) or plain copy of x into xf_, packed for weights of type `type` (aq_/ad_ or xh_).
    void finish_rows(const float* x, const float* w, int n_rows, int dim, int type);
    void glu(int n_rows, int il, int type);
    RowOut row_out(int n_rows, int type);
    int packed_mode_ = -1;  // packing now in aq_/ad_
    void proj(const DevMat* const* mats, float* const* ys, const int* ldys, int n_mats, int n_rows,
              int k, bool accumulate);
    // Evidence (runtime/forward_hooks.h): every kernel launch is counted with its op and bytes;
    // a replayed CUDA graph adds the tally recorded when it was captured.
    void launched(runtime::Op op, uint64_t w_bytes, uint64_t a_bytes) {
        ++launches_;
        tally_.add(runtime::Device::Cuda, op, w_bytes, a_bytes);
    }
    // Fault injection and intermediate capture of residual-stream rows x (n_rows, dim).
    void observe(const char* name, int il, float* x, int n_rows, int dim);
    int launches_ = 0;
    runtime::OpTally tally_;
    std::map<int, runtime::OpTally> graph_tally_;

    const ArchModel& model_;
    const ModelConfig& cfg_;
    model::RunnerOptions opts_;
    int device_;
    bool gemma_ = false;
    cudaStream_t stream_ = nullptr;
    std::vector<void*> allocs_;
    size_t weight_bytes_ = 0, kv_bytes_ = 0;

    DevMat tok_embd_, output_;
    const float* output_norm_ = nullptr;
    const float* rope_freqs_ = nullptr;
    std::vector<Layer> layers_;
    uint16_t* k_cache_ = nullptr;
    uint16_t* v_cache_ = nullptr;
    size_t layer_k_elems_ = 0, layer_v_elems_ = 0;

    // activations (R = max_batch_tokens rows)
    int R_ = 0, wide_ = 0;
    float *x_ = nullptr, *xf_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr,
          *attn_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *h_ = nullptr, *xo_ = nullptr,
          *logits_ = nullptr;
    uint16_t* xh_ = nullptr;
    int8_t* aq_ = nullptr;
    float4* ad_ = nullptr;
    uint16_t* wdq_ = nullptr;  // dequantized weight scratch (GEMM path)
    size_t wdq_elems_ = 0;
    int32_t* tok_out_ = nullptr;
    void* argmax_scratch_ = nullptr;

    // metadata: [tokens R][row_pos R][row_slot R][row_bt R][out_rows R][bt max_bt]
    int32_t* meta_d_ = nullptr;
    int32_t* meta_h_ = nullptr;  // pinned
    // Pinned landing buffers for the step's results (a copy to pageable memory would block the
    // host until the copy, i.e. the whole step, is done): tokens (R), logits (max_seqs rows).
    int32_t* tok_h_ = nullptr;
    float* logits_h_ = nullptr;
    size_t logits_h_rows_ = 0;
    int max_bt_ = 0;
    int32_t *d_tokens_ = nullptr, *d_pos_ = nullptr, *d_slot_ = nullptr, *d_rowbt_ = nullptr,
            *d_out_ = nullptr, *d_bt_ = nullptr;

    CublasLib cublas_;
    int dmmv_max_rows_ = 16;
    bool use_graph_ = true, fused_proj_ = true, fused_norm_ = true, repack_ = true;
    std::map<int, cudaGraphExec_t> graphs_;
    RunnerStats stats_;
};

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
    repack_ = env_on("ZINC_REPACK", false);  // opt-in: no measured gain yet (perf-notes)
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
    CU_TRY("init", cudaDeviceSynchronize());
    return {};
}

RowOut CudaRunner::row_out(int n_rows, int type) {
    RowOut o;
    o.f = xf_;
    if (n_rows > dmmv_max_rows_ && cublas_.ok()) {
        o.h = xh_;
    } else {
        o.q = aq_;
        o.d = ad_;
        o.mode = pack_mode_for(type);
        packed_mode_ = o.mode;
    }
    return o;
}

void CudaRunner::finish_rows(const float* x, const float* w, int n_rows, int dim, int type) {
    RowOut o = row_out(n_rows, type);
    if (!w) {
        pack_rows(x, n_rows, dim, o, stream_);
        launched(runtime::Op::Pack, 0, 2ull * n_rows * dim * sizeof(float));
    } else if (fused_norm_) {
        rms_norm_out(x, w, cfg_.rms_eps, n_rows, dim, o, stream_);
        launched(runtime::Op::RmsNorm, dim * sizeof(float), 2ull * n_rows * dim * sizeof(float));
    } else {
        RowOut f;
        f.f = xf_;
        rms_norm_out(x, w, cfg_.rms_eps, n_rows, dim, f, stream_);
        launched(runtime::Op::RmsNorm, dim * sizeof(float), 2ull * n_rows * dim * sizeof(float));
        o.f = nullptr;
        pack_rows(xf_, n_rows, dim, o, stream_);
        launched(runtime::Op::Pack, 0, 2ull * n_rows * dim * sizeof(float));
    }
}

void CudaRunner::glu(int n_rows, int il, int type) {
    RowOut o = row_out(n_rows, type);
    const uint64_t glu_bytes = 3ull * n_rows * cfg_.n_ff * sizeof(float);
    runtime::ForwardHooks* h = opts_.hooks;
    if (h && h->force_cpu("glu")) {
        // ZINC_CPU_OPS=glu: act(gate) * up on the host (the CPU tier's kernel), then the packing
        // launch the fused kernel would have done. Never inside a graph (needs_host()).
        const size_t n = static_cast<size_t>(n_rows) * cfg_.n_ff;
        std::vector<float> g(n), u(n);
        cudaMemcpyAsync(g.data(), gate_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_);
        cudaMemcpyAsync(u.data(), up_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_);
        cudaStreamSynchronize(stream_);
        if (gemma_) cpu::geglu(g.data(), u.data(), g.data(), static_cast<int64_t>(n));
        else cpu::swiglu(g.data(), u.data(), g.data(), static_cast<int64_t>(n));
        cudaMemcpyAsync(gate_, g.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream_);
        cudaStreamSynchronize(stream_);
        tally_.add(runtime::Device::Cpu, runtime::Op::Glu, 0, glu_bytes);
        h->fallback("glu", il);
        pack_rows(gate_, n_rows, cfg_.n_ff, o, stream_);
        launched(runtime::Op::Pack, 0, 2ull * n * sizeof(float));
        return;
    }
    glu_out(gate_, up_, cfg_.n_ff, gemma_, n_rows, cfg_.n_ff, o, stream_);
    launched(runtime::Op::Glu, 0, glu_bytes);
}

void CudaRunner::observe(const char* name, int il, float* x, int n_rows, int dim) {
    runtime::ForwardHooks* h = opts_.hooks;
    if (!h) return;
    if (h->corrupts(name, il)) {  // ZINC_TEST_CORRUPT (test-only): row 0 becomes 1 - x
        std::vector<float> row(dim);
        cudaMemcpyAsync(row.data(), x, dim * sizeof(float), cudaMemcpyDeviceToHost, stream_);
        cudaStreamSynchronize(stream_);
        for (float& v : row) v = runtime::corrupt_value(v);
        cudaMemcpyAsync(x, row.data(), dim * sizeof(float), cudaMemcpyHostToDevice, stream_);
        cudaStreamSynchronize(stream_);
    }
    if (float* dst = h->capture(name, il, n_rows, dim))
        cudaMemcpyAsync(dst, x, static_cast<size_t>(n_rows) * dim * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_);
}

// Projections of the activations last finished (xf_/aq_/xh_) through n_mats weights of row
// length k into ys (row stride ldys), n_rows rows.
void CudaRunner::proj(const DevMat* const* mats, float* const* ys, const int* ldys, int n_mats,
                      int n_rows, int k, bool accumulate) {
    if (n_rows > dmmv_max_rows_ && cublas_.ok()) {
        for (int i = 0; i < n_mats; ++i) {
            const DevMat& m = *mats[i];
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
        return;
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
            ++nj;
            ++i;
        } while (fused_proj_ && i < n_mats && mats[i]->type == type);
        dmmv(type, jobs, nj, k, aq_, ad_, xf_, n_rows, accumulate, stream_);
        launched(runtime::Op::Matmul, w_bytes,
                 4ull * n_rows * k + (accumulate ? 8ull : 4ull) * out_elems);
    }
}

void CudaRunner::enqueue_step(int n_rows, int n_out) {
    const ModelConfig& c = cfg_;
    const int E = c.n_embd;
    get_rows(tok_embd_.type, tok_embd_.d, tok_embd_.row_bytes, d_tokens_, n_rows, E,
             gemma_ ? std::sqrt(static_cast<float>(E)) : 1.0f, x_, stream_);
    launched(runtime::Op::Embed, tok_embd_.row_bytes * n_rows, 4ull * n_rows * E);
    for (int il = 0; il < c.n_layer; ++il) {
        const Layer& L = layers_[il];
        finish_rows(x_, L.attn_norm, n_rows, E, L.wq.type);
        {
            const DevMat* m[3] = {&L.wq, &L.wk, &L.wv};
            float* ys[3] = {q_, k_, v_};
            const int ld[3] = {c.q_dim(), c.kv_dim_k(), c.kv_dim_v()};
            proj(m, ys, ld, 3, n_rows, E, false);
        }
        RopeJob rj;
        rj.q = q_;
        rj.k = k_;
        rj.v = v_;
        rj.q_ld = c.q_dim();
        rj.k_ld = c.kv_dim_k();
        rj.v_ld = c.kv_dim_v();
        rj.bq = L.bq;
        rj.bk = L.bk;
        rj.bv = L.bv;
        rj.q_norm = L.q_norm;
        rj.k_norm = L.k_norm;
        rj.eps = c.rms_eps;
        rj.n_head = c.n_head;
        rj.n_head_kv = c.n_head_kv;
        rj.head_dim = c.head_dim_k;
        rj.head_dim_v = c.head_dim_v;
        rj.n_rot = c.n_rot;
        const cpu::RopeParams rp = c.rope(il);
        rj.neox = rp.mode == cpu::RopeMode::Neox;
        rj.freq_base = rp.freq_base;
        rj.freq_scale = rp.freq_scale;
        rj.freq_factors = rope_freqs_;
        rj.row_pos = d_pos_;
        rj.row_slot = d_slot_;
        rj.k_cache = k_cache_ + layer_k_elems_ * il;
        rj.v_cache = v_cache_ + layer_v_elems_ * il;
        rope_kv(rj, n_rows, stream_);
        launched(runtime::Op::RopeKv, 0,
                 8ull * n_rows * (c.q_dim() + c.kv_dim_k() + c.kv_dim_v()) +
                     2ull * n_rows * (c.kv_dim_k() + c.kv_dim_v()));

        AttnJob aj;
        aj.q = q_;
        aj.q_ld = c.q_dim();
        aj.out = attn_;
        aj.out_ld = c.attn_out_dim();
        aj.k_cache = rj.k_cache;
        aj.v_cache = rj.v_cache;
        aj.n_head = c.n_head;
        aj.n_head_kv = c.n_head_kv;
        aj.head_dim = c.head_dim_k;
        aj.head_dim_v = c.head_dim_v;
        aj.scale = c.attn_scale;
        aj.window = c.window(il);
        aj.block_size = opts_.block_size;
        aj.row_pos = d_pos_;
        aj.row_bt = d_rowbt_;
        aj.bt = d_bt_;
        aj.max_pos = opts_.max_seq_len;
        attention(aj, n_rows, stream_);
        // + the K/V rows read, added per step in run() (they grow with the positions, and a
        // replayed graph's tally is the one recorded at capture)
        launched(runtime::Op::Attention, 0, 4ull * n_rows * (c.q_dim() + c.attn_out_dim()));

        finish_rows(attn_, nullptr, n_rows, c.attn_out_dim(), L.wo.type);
        {
            const DevMat* m[1] = {&L.wo};
            float* ys[1] = {gemma_ ? h_ : x_};
            const int ld[1] = {E};
            proj(m, ys, ld, 1, n_rows, c.attn_out_dim(), !gemma_);
        }
        if (gemma_) {
            add_rms_norm(x_, h_, L.post_attn_norm, c.rms_eps, n_rows, E, stream_);
            launched(runtime::Op::Add, E * sizeof(float), 12ull * n_rows * E);
        }
        const bool all_rows_out = n_out == n_rows;  // the CPU tier's last layer has n_out rows
        if (il + 1 < c.n_layer || all_rows_out) observe("ffn_inp", il, x_, n_rows, E);
        finish_rows(x_, L.ffn_norm, n_rows, E, L.gate.type);
        {
            const DevMat* m[2] = {&L.gate, &L.up};
            float* ys[2] = {gate_, up_};
            const int ld[2] = {c.n_ff, c.n_ff};
            proj(m, ys, ld, 2, n_rows, E, false);
        }
        glu(n_rows, il, L.down.type);
        {
            const DevMat* m[1] = {&L.down};
            float* ys[1] = {gemma_ ? h_ : x_};
            const int ld[1] = {E};
            proj(m, ys, ld, 1, n_rows, c.n_ff, !gemma_);
        }
        if (gemma_) {
            add_rms_norm(x_, h_, L.post_ffn_norm, c.rms_eps, n_rows, E, stream_);
            launched(runtime::Op::Add, E * sizeof(float), 12ull * n_rows * E);
        }
        if (il + 1 < c.n_layer || all_rows_out) observe("l_out", il, x_, n_rows, E);
    }
    if (n_out == 0) return;
    gather_rows(x_, d_out_, n_out, E, xo_, stream_);
    launched(runtime::Op::Gather, 0, 8ull * n_out * E);
    if (n_out != n_rows) observe("l_out", c.n_layer - 1, xo_, n_out, E);
    finish_rows(xo_, output_norm_, n_out, E, output_.type);
    {
        const DevMat* m[1] = {&output_};
        float* ys[1] = {logits_};
        const int ld[1] = {c.n_vocab};
        proj(m, ys, ld, 1, n_out, E, false);
    }
    argmax_rows(logits_, n_out, c.n_vocab, tok_out_, argmax_scratch_, stream_);
    launched(runtime::Op::Argmax, 0, 4ull * n_out * c.n_vocab);
    ++launches_;  // argmax is two launches
}

Result<void> CudaRunner::run(const model::Batch& batch, float* logits, int32_t* tokens) {
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
    int32_t* h_bt = meta_h_ + 5 * R;
    int n_bt = 0, n_out = 0, expect_row = 0;
    bool all_decode = true;
    for (int s = 0; s < n_seqs; ++s) {
        const model::BatchSeq& q = batch.seqs[s];
        if (q.row0 != expect_row || q.n_tokens < 1 || q.row0 + q.n_tokens > n_rows || q.pos0 < 0)
            return make_error("cuda forward: sequence " + std::to_string(s) +
                              " has rows [" + std::to_string(q.row0) + ", " +
                              std::to_string(q.row0 + q.n_tokens) +
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
            h_slot[r] = q.block_table[pos / opts_.block_size] * opts_.block_size +
                        pos % opts_.block_size;
            h_rowbt[r] = n_bt;
            if (q.all_logits || (q.want_logits && i == q.n_tokens - 1)) h_out[n_out++] = r;
        }
        n_bt += need;
        if (q.n_tokens != 1 || !q.want_logits || q.all_logits) all_decode = false;
    }
    if (expect_row != n_rows)
        return make_error("cuda forward: the sequences cover " + std::to_string(expect_row) +
                          " rows of " + std::to_string(n_rows));

    // One transfer of the metadata: the rows' part (5 R ints) and the block tables used.
    CU_TRY("metadata", cudaMemcpyAsync(meta_d_, meta_h_, (5 * R + n_bt) * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream_));
    launches_ = 0;
    tally_ = runtime::OpTally{};
    runtime::ForwardHooks* hooks = opts_.hooks;
    const bool graph = use_graph_ && all_decode && n_rows <= dmmv_max_rows_ &&
                       !(hooks && hooks->needs_host());
    if (graph) {
        auto it = graphs_.find(n_rows);
        if (it == graphs_.end()) {
            cudaGraph_t g = nullptr;
            CU_TRY("graph capture", cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
            enqueue_step(n_rows, n_out);
            CU_TRY("graph capture", cudaStreamEndCapture(stream_, &g));
            cudaGraphExec_t ge = nullptr;
            const cudaError_t e = cudaGraphInstantiate(&ge, g, 0);
            cudaGraphDestroy(g);
            CU_TRY("graph instantiate", e);
            it = graphs_.emplace(n_rows, ge).first;
            graph_tally_[n_rows] = tally_;
            ++stats_.graph_captures;
        }
        tally_ = graph_tally_[n_rows];  // the kernels the graph launches, counted per replay
        CU_TRY("graph launch", cudaGraphLaunch(it->second, stream_));
        ++stats_.graph_replays;
        launches_ = 1;
    } else {
        enqueue_step(n_rows, n_out);
    }
    CU_TRY("kernel launch", cudaGetLastError());
    const size_t n_logits = static_cast<size_t>(n_out) * c.n_vocab;
    const bool pinned_logits = static_cast<size_t>(n_out) <= logits_h_rows_;
    if (n_out > 0) {
        if (logits)
            CU_TRY("logits", cudaMemcpyAsync(pinned_logits ? logits_h_ : logits, logits_,
                                             n_logits * sizeof(float), cudaMemcpyDeviceToHost,
                                             stream_));
        if (tokens)
            CU_TRY("tokens", cudaMemcpyAsync(tok_h_, tok_out_, n_out * sizeof(int32_t),
                                             cudaMemcpyDeviceToHost, stream_));
    }
    const auto t1 = Clock::now();
    CU_TRY("forward", cudaStreamSynchronize(stream_));
    if (n_out > 0 && logits && pinned_logits)
        std::memcpy(logits, logits_h_, n_logits * sizeof(float));
    if (n_out > 0 && tokens) std::memcpy(tokens, tok_h_, n_out * sizeof(int32_t));
    stats_.launches_last_step = launches_;
    stats_.host_us_last_step = std::chrono::duration<double, std::micro>(t1 - t0).count();
    if (hooks) {
        // Attention's K/V reads (f16 K and V rows of every attended position, per layer) grow
        // with the positions, so they are added per step, not taken from a graph's tally.
        uint64_t kv_read = 0;
        for (int il = 0; il < c.n_layer; ++il) {
            uint64_t n_pos = 0;
            for (int r = 0; r < n_rows; ++r)
                n_pos += runtime::attended_positions(h_pos[r], c.window(il));
            kv_read += n_pos * 2ull * (c.kv_dim_k() + c.kv_dim_v());
        }
        tally_.act_bytes[static_cast<int>(runtime::Device::Cuda)] += kv_read;
        hooks->step += tally_;
    }
    return {};
}

void CudaRunner::copy_block(int32_t src, int32_t dst) {
    const ModelConfig& c = cfg_;
    const size_t bs = static_cast<size_t>(opts_.block_size);
    for (int il = 0; il < c.n_layer; ++il) {
        uint16_t* kl = k_cache_ + layer_k_elems_ * il;
        uint16_t* vl = v_cache_ + layer_v_elems_ * il;
        const size_t kn = bs * c.kv_dim_k(), vn = bs * c.kv_dim_v();
        cudaMemcpyAsync(kl + dst * kn, kl + src * kn, kn * 2, cudaMemcpyDeviceToDevice, stream_);
        cudaMemcpyAsync(vl + dst * vn, vl + src * vn, vn * 2, cudaMemcpyDeviceToDevice, stream_);
    }
    cudaStreamSynchronize(stream_);
}

}  // namespace

Result<std::unique_ptr<model::Runner>> create_runner(const model::Model& model,
                                                     const model::RunnerOptions& opts,
                                                     const CudaOptions& copts) {
    if (opts.n_blocks < 1 || opts.block_size < 1 || opts.max_batch_tokens < 1 ||
        opts.max_seqs < 1 || opts.max_seq_len < 1)
        return make_error("cuda runner: n_blocks, block_size, max_batch_tokens, max_seqs and "
                          "max_seq_len must be positive");
    if (opts.max_seq_len > 48 * 1024)
        return make_error("cuda runner: max_seq_len " + std::to_string(opts.max_seq_len) +
                          " > 49152 (the attention kernel keeps a row's scores in shared memory)");
    const auto* am = dynamic_cast<const ArchModel*>(&model);
    if (!am) return make_error("cuda runner: not a zinc architecture model");
    const Probe p = probe();
    if (p.devices.empty()) return make_error("cuda: " + p.reason);
    const DeviceInfo* dev = nullptr;
    for (const auto& d : p.devices)
        if (d.index == copts.device) dev = &d;
    if (!dev)
        return make_error("cuda: device " + std::to_string(copts.device) +
                          " is not a usable CUDA device (usable: " +
                          std::to_string(p.devices.size()) + ", first is -d " +
                          std::to_string(p.devices.front().index) + ")");
    const size_t need = device_bytes_needed(model, opts.n_blocks * opts.block_size);
    if (dev->mem_free && need > dev->mem_free)
        return make_error("cuda: out of device memory: the model needs about " + fmt_mib(need) +
                          " but device " + std::to_string(dev->index) + " (" + dev->name +
                          ") has " + fmt_mib(dev->mem_free) + " free; lower -c or use --tier cpu");
    auto r = std::make_unique<CudaRunner>(*am, opts, copts.device);
    if (auto st = r->init(); !st) return st.error();
    return std::unique_ptr<model::Runner>(std::move(r));
}

Result<void> forward_argmax(model::Runner& runner, const model::Batch& batch, int32_t* tokens) {
    auto* r = dynamic_cast<CudaRunner*>(&runner);
    if (!r) return make_error("forward_argmax: not a CUDA runner");
    return r->run(batch, nullptr, tokens);
}

size_t device_bytes_needed(const model::Model& model, int n_ctx) {
    const auto* am = dynamic_cast<const ArchModel*>(&model);
    if (!am) return 0;
    const ModelConfig& c = am->config();
    size_t w = 0;
    const std::string names[] = {"token_embd.weight", "output.weight"};
    for (const auto& n : names)
        if (const Weight* t = am->find_weight(n)) w += quant::row_size(t->type, t->ne[0]) * t->ne[1];
    for (int il = 0; il < c.n_layer; ++il)
        for (const char* s : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                              "ffn_down"})
            if (const Weight* t = am->find_weight("blk." + std::to_string(il) + "." + s + ".weight"))
                w += quant::row_size(t->type, t->ne[0]) * t->ne[1];
    const size_t kv = static_cast<size_t>(n_ctx) * c.n_layer * (c.kv_dim_k() + c.kv_dim_v()) * 2;
    // dequantized-weight scratch for prefill (largest matrix in f16) + activations (~64 MiB)
    size_t largest = static_cast<size_t>(c.n_embd) * std::max(c.n_vocab, c.n_ff) * 2;
    return w + kv + largest + (64u << 20);
}

RunnerStats runner_stats(const model::Runner& runner) {
    const auto* r = dynamic_cast<const CudaRunner*>(&runner);
    return r ? r->stats() : RunnerStats{};
}

}  // namespace zinc::cuda
