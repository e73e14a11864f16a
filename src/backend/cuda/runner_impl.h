// zinc/backend/cuda/runner_impl.h — private to src/backend/cuda: the CudaRunner class shared by
// runner_init.cpp (device memory, weight upload, the plan of the op list), runner_exec.cpp (the
// executor: the op list walked as kernel launches) and runner.cpp (steps, graphs, projections).
// What the runner does and its switches: runner.cpp's header comment.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/activations.h"
#include "backend/cuda/cublas_lib.h"
#include "backend/cuda/cuda_tier.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/repack.h"
#include "model/arch_model.h"
#include "model/config.h"
#include "model/ir.h"
#include "model/state_slots.h"
#include "quant/types.h"
#include "runtime/forward_hooks.h"

namespace zinc::cuda::runner_detail {

using model::ArchModel;
using model::ModelConfig;
using model::Weight;

inline bool env_on(const char* name, bool dflt = true) {
    const char* e = std::getenv(name);
    if (!e || !*e) return dflt;
    return std::string(e) != "0";
}
inline int env_int(const char* name, int dflt) {
    const char* e = std::getenv(name);
    return e && *e ? std::atoi(e) : dflt;
}

inline std::string fmt_mib(size_t b) {
    return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB";
}

inline Error cuda_error(const std::string& what, cudaError_t e) {
    return make_error("cuda: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                      ")");
}

#define CU_TRY(what, expr)                                  \
    do {                                                    \
        const cudaError_t e_ = (expr);                      \
        if (e_ != cudaSuccess) return cuda_error(what, e_); \
    } while (0)

struct DevMat {
    int type = -1;
    int64_t k = 0, n = 0;  // row length, rows
    size_t row_bytes = 0;
    uint8_t* d = nullptr;
    bool valid() const { return d != nullptr; }
    /// A small F32 matrix (MoE router, qwen35's beta / alpha): always dmmv's f32 kernel on the
    /// f32 activations, never rounded to f16 for cuBLAS nor packed for mmq (CudaRunner::proj).
    bool small_f32() const { return type == 0 && n * k <= (int64_t{1} << 22); }
};

// Where a tensor's named value was last written (for the deferred output-row capture).
struct LastName {
    const char* name = nullptr;
    int il = -1;
};

struct SampleState;  // runner_sample.cpp: device buffers of forward_sample

class CudaRunner final : public model::Runner {
  public:
    CudaRunner(const ArchModel& m, const model::RunnerOptions& o, int device, int exact,
               std::shared_ptr<const model::ShardSet> shards = nullptr, int rank = 0)
        : model_(m),
          cfg_(m.config()),
          opts_(o),
          device_(device),
          exact_opt_(exact),
          shards_(std::move(shards)),
          prog_(shards_ ? shards_->shards[static_cast<size_t>(rank)].program : m.program()) {}
    ~CudaRunner() override;

    Result<void> init();
    Result<void> forward(const model::Batch& batch, float* logits) override {
        return run(batch, logits, nullptr);
    }
    // One step (runner.cpp): logits (host, or null), argmax tokens (host, or null), or with
    // `embd` an embedding step: every row an output row, the ops up to Program::embd_op, and
    // Program::embd's rows (n_rows, n_embd) copied to `embd` (host) instead of any logits.
    Result<void> run(const model::Batch& batch, float* logits, int32_t* tokens,
                     float* embd = nullptr);
    // Embeddings (model/batch.h): the CPU tier's rows, computed by run() over the same op list.
    Result<void> forward_embed(const model::Batch& batch, float* hidden) override;
    // Batch::hidden_out: Program::hidden where it is the head's input (the rows gather_head
    // moves into xo_, in logits-row order; qwen35's trunk), else 0.
    int64_t hidden_width() const override {
        return prog_.hidden != model::kNoTensor && prog_.hidden == head_in_
                   ? prog_.width(prog_.hidden)
                   : 0;
    }
    void copy_block(int32_t src, int32_t dst) override;
    const model::RunnerOptions& options() const override { return opts_; }
    std::string tier() const override { return "cuda"; }
    size_t kv_bytes() const override { return kv_bytes_; }
    size_t state_bytes() const override { return state_bytes_; }
    // Recurrent state checkpoints (runner_recurrent.cpp; the CPU tier's contract, model/batch.h):
    // RunnerOptions::n_state_checkpoints rows per slot where the model has recurrent state.
    int32_t state_checkpoints() const override { return rs_.empty() ? 0 : n_ckpt_; }
    Result<void> rewind_state(int32_t slot, int64_t pos) override;
    bool exact() const override { return exact_; }  // --exact / ZINC_EXACT=1 / batch_invariant
    RunnerStats stats() const {
        RunnerStats s = stats_;
        s.weight_bytes = weight_bytes_;
        s.kv_bytes = kv_bytes_;
        s.scratch_bytes = alloc_bytes_ - std::min(alloc_bytes_, weight_bytes_ + kv_bytes_);
        return s;
    }
    ExpertLoad expert_load() const {  // (synchronous: for benchmarks, not the step path)
        ExpertLoad el;
        if (!moe_.load) return el;
        std::vector<uint32_t> h(static_cast<size_t>(moe_.n_layers) * moe_.n_expert);
        cudaStreamSynchronize(stream_);
        if (cudaMemcpy(h.data(), moe_.load, h.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost) !=
            cudaSuccess)
            return el;
        el.counts.assign(h.begin(), h.end());
        el.n_expert = moe_.n_expert;
        return el;
    }
    // Sampling on the device (runner_sample.cpp); ZINC_GPU_SAMPLING=0 turns it off.
    bool samples_on_device() const override;
    Result<void> forward_sample(const model::Batch& batch, std::span<const model::RowSampling> rows,
                                model::SampledToken* out, bool want_logprob) override;

  private:
    Result<DevMat> upload_mat(const Weight& w);
    Result<const float*> upload_f32(const Weight& w);
    void* dalloc(size_t bytes, cudaError_t& err);
    Result<void> plan();  // runner_init.cpp: weights, buffers and tables of the op list
    // ---- the executor (runner_exec.cpp): the op list as kernel launches on stream_
    // `embeddings`: stop after Program::embd_op (every row an output row), leaving embd_src_.
    void enqueue_step(int n_rows, int n_out, bool embeddings = false);
    void exec(const model::Op& op, int idx);
    void exec_rms_norm(const model::Op& op, int idx);
    void exec_matmul(const model::Op& op);
    void exec_rope_kv(const model::Op& op);
    void exec_attention(const model::Op& op);
    void exec_glu(const model::Op& op, int idx);
    void exec_moe(const model::Op& op);
    // qwen35's recurrent and gated ops (runner_recurrent.cpp): SsmConv, DeltaNet, GatedRmsNorm,
    // SplitGate, SigmoidMul
    void exec_recurrent(const model::Op& op);
    RecurrentSeqs recurrent_seqs() const;
    void gather_head(model::Tid x);
    bool wants(const char* name, int il) const;
    bool rows_differ() const { return kept_ && !gathered_ && n_out_ != n_rows_; }
    // Norm (w, eps) or plain copy of x into xf_, packed for weights of type `type` (aq_/ad_ or
    // xh_); type < 0: f32 only.
    void finish_rows(const float* x, const float* w, float eps, int n_rows, int dim, int type);
    RowOut row_out(int n_rows, int type);
    const DevMat& mat(const Weight* w) const { return mats_.at(w); }
    const float* vec(const Weight* w) const { return w ? vecs_.at(w) : nullptr; }
    // The device memory holding tensor t's current value (the staging xf_ when it was staged).
    float* loc(model::Tid t) const;
    float* buf(model::Tid t) const;
    // biases: one per matrix (entries may be null), added as the projection's MatJob::bias on the
    // dmmv paths; returns whether they were (false on the cuBLAS path, which has none).
    bool proj(const DevMat* const* mats, float* const* ys, const int* ldys, int n_mats, int n_rows,
              int k, bool accumulate, const float* const* biases = nullptr);
    // Evidence (runtime/forward_hooks.h): every kernel launch is counted with its op and bytes;
    // a replayed CUDA graph adds the tally recorded when it was captured.
    void launched(runtime::Op op, uint64_t w_bytes, uint64_t a_bytes) {
        ++launches_;
        tally_.add(runtime::Device::Cuda, op, w_bytes, a_bytes);
    }
    // Fault injection and intermediate capture of output o of an op of layer il (rows x of
    // (n_rows, dim)); `force`: also where the rows are not the CPU tier's (deferred gather).
    void observe(const model::Output& o, int il, model::Tid t, bool force = false);
    int launches_ = 0;
    runtime::OpTally tally_;
    std::map<int, runtime::OpTally> graph_tally_;

    const ArchModel& model_;
    const ModelConfig& cfg_;
    model::RunnerOptions opts_;
    int device_;
    int exact_opt_;                                  // CudaOptions::exact
    std::shared_ptr<const model::ShardSet> shards_;  // tensor parallel: owns prog_ (or null)
    const model::Program& prog_;
    std::vector<model::Step> steps_;  // the op list with this tier's fusions (model::schedule)
    // Per plain op (index into prog_.ops): the weight of the projection that consumes a
    // RmsNorm's or Glu's result (its packing is done by the same launch), or null.
    std::vector<const Weight*> consumer_;
    cudaStream_t stream_ = nullptr;
    std::vector<void*> allocs_;
    size_t weight_bytes_ = 0, kv_bytes_ = 0;
    size_t alloc_bytes_ = 0;  // everything dalloc gave out

    std::map<const Weight*, DevMat> mats_;        // matrices (embedding, projections)
    std::map<const Weight*, const float*> vecs_;  // f32 vectors (norms, biases)
    // Per KV layer: the device copy of the CPU tier's RoPE cos/sin table (max_seq_len x n_rot),
    // shared by layers with the same setting (docs/exactness.md).
    std::vector<const float*> rope_cs_;
    // Split-K attention scratch for decode steps (kernels.h AttnJob::part / counters).
    float* attn_part_ = nullptr;
    unsigned* attn_cnt_ = nullptr;
    // Fast attention (attention_fast*.cu; fast mode only, ZINC_FA=0: attention.cu) and the
    // step's rows split into spans of consecutive sequences of one kind: single-row sequences
    // (decode kernel) or multi-row ones (prefill kernel). Set by run() before enqueue_step.
    struct AttnSpan {
        int row0 = 0, n = 0;
        bool decode = false;
    };
    bool fa_ = true;
    bool fa_decode_ = false;  // decode spans by attention_fast_decode.cu (init(): GQA <= 4, or
                              // ZINC_FA_DECODE=1 / 0)
    std::vector<AttnSpan> attn_spans_;
    uint16_t* k_cache_ = nullptr;
    uint16_t* v_cache_ = nullptr;
    size_t layer_k_elems_ = 0, layer_v_elems_ = 0;
    // The KV cache holds only the layers that attend: kv_index_[kv_layer] is the layer's place
    // in it (-1: a layer without attention, e.g. qwen35's DeltaNet layers); n_kv_layers_ of them.
    std::vector<int> kv_index_;
    int n_kv_layers_ = 0;
    uint16_t* k_layer(int kv_layer) const {
        return k_cache_ + layer_k_elems_ * kv_index_[static_cast<size_t>(kv_layer)];
    }
    uint16_t* v_layer(int kv_layer) const {
        return v_cache_ + layer_v_elems_ * kv_index_[static_cast<size_t>(kv_layer)];
    }
    // Recurrent state (hybrid models, model::Program::recurrent): per recurrent layer the conv
    // and DeltaNet state of n_state_slots_ slots, laid out as cpu::StatePool's; where each
    // slot's state is (host side: the CPU tier's bookkeeping and checks, model::StateSlots); the
    // step's sequence table (device, in the metadata: row offsets and slots).
    // Checkpoints (n_ckpt_ > 0): per layer conv_ckpt / ssm_ckpt (n_state_slots_, n_ckpt_,
    // floats), the state after each kept row (kernels.h SsmConvJob::ckpt); the step's keep flags
    // travel in the metadata (d_seq_keep_), and step_keeps_ (a sequence of the step keeps) hands
    // the pools to the kernels, so a step without keep_states reads and writes nothing more.
    struct RecurrentLayerState {
        float *conv = nullptr, *ssm = nullptr;
        float *conv_ckpt = nullptr, *ssm_ckpt = nullptr;
        int64_t conv_floats = 0, ssm_floats = 0;
    };
    std::vector<RecurrentLayerState> rs_;
    int n_state_slots_ = 0, n_ckpt_ = 0;
    bool step_keeps_ = false;
    size_t state_bytes_ = 0;
    model::StateSlots slots_{0, 0};
    int n_seqs_ = 0;  // sequences of the step being enqueued
    int32_t *d_seq_row0_ = nullptr, *d_seq_slot_ = nullptr, *d_seq_keep_ = nullptr;

    // activations (R = max_batch_tokens rows): one buffer per tensor of the op list that is
    // written to its own memory (null for those only ever staged in xf_); the logits tensor is
    // logits_; xo_ holds the output rows gathered for the head.
    int R_ = 0, wide_ = 0;
    std::vector<float*> bufs_;
    // Per tensor: a staged value that is read after xf_ was taken by another (plan()); the
    // staging launch's f32 result is copied into its own buffer too (keep_staged()).
    std::vector<bool> keep_;
    void keep_staged(model::Tid t, int dim) {
        if (!keep_[static_cast<size_t>(t)]) return;
        cudaMemcpyAsync(bufs_[static_cast<size_t>(t)], xf_,
                        static_cast<size_t>(rows_) * dim * sizeof(float), cudaMemcpyDeviceToDevice,
                        stream_);
        launched(runtime::Op::Gather, 0, 8ull * rows_ * dim);
    }
    float *xf_ = nullptr, *xo_ = nullptr, *logits_ = nullptr;
    model::Tid head_in_ = model::kNoTensor;  // the first head op's input (plan(); gather_head's)
    // ---- executor state of the step being enqueued (reset by enqueue_step)
    int n_rows_ = 0, n_out_ = 0, rows_ = 0;   // batch rows, output rows, rows of the current op
    bool kept_ = false, gathered_ = false;    // past KeepRows / past the head's gather
    model::Tid staged_ = model::kNoTensor;    // the tensor whose value is in xf_ (and packed)
    int staged_type_ = -1;                    // the weight type it is packed for (-1: f32 only)
    model::Tid head_x_ = model::kNoTensor;    // the tensor gathered into xo_
    const float* embd_src_ = nullptr;         // an embedding step: where Program::embd's rows are
    std::vector<const float*> pending_bias_;  // per tensor: a bias the projection did not add
    std::vector<LastName> last_name_;         // per tensor
    // MoE (exec_moe): V = R * (most experts a row uses) expert slots; per slot the gathered
    // input / GLU result (moe_x_, f32, and packed in moe_aq_/moe_ad_), gate and up (moe_g_,
    // moe_u_), the down projection (moe_y_); per slot the expert id, weight and source row.
    struct MoeBufs {
        int max_slots = 0, wide = 0;
        float *x = nullptr, *g = nullptr, *u = nullptr, *y = nullptr, *w = nullptr;
        int8_t* aq = nullptr;
        float4* ad = nullptr;
        int32_t *ids = nullptr, *src = nullptr;
        unsigned* tickets = nullptr;  // (rows) moe_route_router's per-row counters, left zeroed
        // Expert-grouped GEMM (exec_moe): slots sorted by expert, mmq_grouped, from
        // group_min_slots slots on (ZINC_MOE_GROUP_MIN_SLOTS; fast mode with mmq only).
        int n_expert = 0, group_min_slots = 32;
        MoeGroupBufs grp;
        // Expert load: (n_layers, n_expert) slot counts since load, layer il at il * n_expert
        // (moe_route adds them; RunnerStats::expert_load reads them back).
        int n_layers = 0;
        uint32_t* load = nullptr;
    } moe_;
    uint16_t* xh_ = nullptr;
    int8_t* aq_ = nullptr;
    float4* ad_ = nullptr;
    uint16_t* wdq_ = nullptr;  // dequantized weight scratch (GEMM path)
    size_t wdq_elems_ = 0;
    int32_t* tok_out_ = nullptr;
    void* argmax_scratch_ = nullptr;

    // metadata: [tokens R][row_pos R][row_slot R][row_bt R][out_rows R][seq_row0 max_seqs + 1]
    // [seq_slot max_seqs][seq_keep max_seqs][bt max_bt]
    int32_t* meta_d_ = nullptr;
    int32_t* meta_h_ = nullptr;  // pinned
    // ints of the metadata before the block tables
    size_t meta_fixed() const {
        return 5 * static_cast<size_t>(R_) + 3 * static_cast<size_t>(opts_.max_seqs) + 1;
    }
    // Pinned landing buffers for the step's results (a copy to pageable memory would block the
    // host until the copy, i.e. the whole step, is done): tokens (R), logits (max_seqs rows).
    int32_t* tok_h_ = nullptr;
    float* logits_h_ = nullptr;
    size_t logits_h_rows_ = 0;
    int max_bt_ = 0;
    int32_t *d_tokens_ = nullptr, *d_pos_ = nullptr, *d_slot_ = nullptr, *d_rowbt_ = nullptr,
            *d_out_ = nullptr, *d_bt_ = nullptr;

    CublasLib cublas_;
    int dmmv_max_rows_ = 16;  // init(): ZINC_DMMV_MAX_ROWS, else 8 or 16 by the model
    bool use_graph_ = true, fused_proj_ = true, fused_norm_ = true, fused_add_ = true, fused_moe_ = true,
         repack_ = true;
    bool exact_ = false;  // every matrix product by dmmv_exact (docs/exactness.md); init() sets it
    // ZINC_MMQ (default on): above dmmv_max_rows_ rows, mmq.cu for the types it covers. mmq_all_:
    // it covers every matrix of the model (and each fused group shares one packing), so the f16
    // activations and the dequantized-weight scratch of the cuBLAS path are never needed.
    // mmq_max_rows_ (ZINC_MMQ_MAX_ROWS, default 128): above it dequantize + cuBLAS, faster there
    // since the dequantization writes at bandwidth (docs/perf-notes.md "Prefill GEMM path").
    bool mmq_ = true, mmq_all_ = false;
    int mmq_max_rows_ = 128;
    // mmq's split-K scratch (ZINC_MMQ_SPLIT, default on; kernels.h MmqScratch): decode batches
    // and short prefill chunks give fewer output tiles than the GPU has block slots, so mmq
    // splits k across blocks (docs/perf-notes.md "mmq v6"). Empty: no split.
    MmqScratch mmq_scratch_{};
    int packed_mode_ = -1;  // packing of aq_/ad_ by the last row_out (-1: none; proj checks it)
    std::map<int, cudaGraphExec_t> graphs_;
    RunnerStats stats_;
    std::shared_ptr<SampleState> sample_;  // created by the first forward_sample
    // Set by forward_sample for one run(): enqueues the sampler after the step's kernels (n_out
    // logits rows), before run()'s copies and its single stream sync.
    std::function<cudaError_t(int)> after_step_;
};

}  // namespace zinc::cuda::runner_detail
