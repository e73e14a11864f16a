// zinc/backend/cuda/kernels.h — host-side launchers of the CUDA kernels (one .cu per op family).
// Plain pointers to device memory and a stream; shapes in elements; row-major activations
// (row r of a (n_rows, dim) buffer starts at r * dim). Launchers never synchronize.
//
// Activation packing (pack.cu): a row of dim floats (dim % 32 == 0) becomes dim int8 codes `aq`
// and dim/32 float4 `ad` = (d, s_lo, s_hi, sums) per 32 elements: x ~ d * code, and s_lo / s_hi
// the (scaled) sums of the codes of each half, for the weights' min terms (Q8_1: s_lo = the f16
// s of the block, s_hi = 0); `sums` holds the two 16-element integer code sums as int16 bits
// (low half | high half << 16), Q8_K's bsums, for the exact kernels. The codes and scales are the
// CPU tier's packing for the consuming weight type (RowOut::mode), byte for byte:
// quant::quantize_row(Q8_0 / Q8_1 / Q8_K) (d = the f16 value for Q8_0/Q8_1, the f32 for Q8_K).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/scratch_sizes.h"

namespace zinc::cuda {

/// Activation packings, as the CPU tier's vec_dot types: Q8_0 (Q4_0/Q5_0/Q8_0 weights), Q8_1
/// (Q4_1/Q5_1), Q8_K (K-quants; scale per 256 elements). See pack.cu.
constexpr int kPackQ8_0 = 0, kPackQ8_1 = 1, kPackQ8K = 2;
/// The packing a weight of ggml type `type` is multiplied with.
inline int pack_mode_for(int type) {
    if (type == 3 || type == 7) return kPackQ8_1;
    if ((type >= 10 && type <= 14) || type == 114) return kPackQ8K;
    return kPackQ8_0;
}

/// Destination of a row-finishing kernel: any of the three may be null.
struct RowOut {
    float* f = nullptr;     // (n_rows, dim) f32
    uint16_t* h = nullptr;  // (n_rows, dim) f16 (for the cuBLAS path)
    int8_t* q = nullptr;    // (n_rows, dim) int8 codes
    float4* d = nullptr;    // (n_rows, dim / 32) scales and sums
    int mode = kPackQ8_0;   // packing of q/d (Q8K needs dim % 256 == 0)
};

// ---- pack.cu
/// out = rms_norm(x) * w (w may be null), per row; eps as the model's. exact: the RMS scale is
/// canon.h's (32 f64 chains, the CPU tier's bits; one warp's serial chains, ~5 us a 4096-wide
/// row on the H200); else a block-wide f32 tree over the row (same order whatever the batch: no
/// batch dependence; relative error ~1e-7, the fast path's, docs/cuda.md).
void rms_norm_out(const float* x, const float* w, float eps, int n_rows, int dim, RowOut out,
                  bool exact, cudaStream_t s);
/// out = x (pack only). src_rows (device, n_rows entries, or null): output row i is input row
/// src_rows[i] (a gather fused with the packing: gather_rows + pack_rows in one launch, the same
/// outputs; the MoE slots' input rows).
void pack_rows(const float* x, int n_rows, int dim, RowOut out, cudaStream_t s,
               const int32_t* src_rows = nullptr);
/// out = act(gate) * up, act = SiLU (gelu = false) or tanh-GELU (gelu = true).
void glu_out(const float* gate, const float* up, int ld, bool gelu, int n_rows, int dim, RowOut out,
             cudaStream_t s);
/// x += rms_norm(h) * w (Gemma 3's post-norms), per row; exact as rms_norm_out's.
void add_rms_norm(float* x, const float* h, const float* w, float eps, int n_rows, int dim,
                  bool exact, cudaStream_t s);
/// x += h over n elements.
void add_inplace(float* x, const float* h, int64_t n, cudaStream_t s);

// ---- dmmv.cu
/// One weight matrix of a (possibly fused) matrix-vector job: y[j * ldy + r] (+)= W[r] . a_j.
struct MatJob {
    const uint8_t* w = nullptr;  // (n_out rows) of row_bytes each, GGUF block layout
    size_t row_bytes = 0;
    int n_out = 0;
    float* y = nullptr;
    int ldy = 0;
    const float* bias = nullptr;  // (n_out) or null
    // Expert gathering (MoE): activation row j is multiplied by the matrix of expert expert[j],
    // at w + expert[j] * expert_stride bytes (a 3-D GGUF tensor: n_expert matrices of n_out
    // rows). Null: every activation row uses w. Gathered calls run one activation row per block
    // (dmmv_v2 and dmmv_exact's kernels; never dmmv_fast, mmq or the tiled exact GEMM), and all
    // jobs of one call must agree on being gathered.
    const int32_t* expert = nullptr;  // (n_act) device
    size_t expert_stride = 0;
#if defined(__CUDACC__)
    __host__ __device__ __forceinline__
#endif
        const uint8_t*
        matrix(int act_row) const {
        return expert ? w + static_cast<size_t>(expert[act_row]) * expert_stride : w;
    }
};
/// Whether dmmv has a kernel for ggml type id `type`.
bool dmmv_supports(int type);
/// Up to 3 matrices of the same type and row length k, over n_act activation rows packed by
/// pack.cu (quantized types) or as f32 x (F32/F16/BF16 weights). accumulate: y += instead of =.
/// Runs dmmv_fast where it covers the call and is preferred (dmmv_fast_preferred; ZINC_DMMV=v2:
/// never, ZINC_DMMV=v3: wherever it covers the call; ZINC_DMMV_PDL=1: launched with PDL), else
/// dmmv_v2.
void dmmv(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
          const float* xf, int n_act, bool accumulate, cudaStream_t s);
/// dmmv.cu's own kernels (v2: a block of 4 warps per few rows): every dmmv_supports type.
void dmmv_v2(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
             const float* xf, int n_act, bool accumulate, cudaStream_t s);

// ---- dmmv_fast.cu (v3: bandwidth-oriented; docs/perf-notes.md "dmmv")
/// Most activation rows dmmv_fast takes.
constexpr int kDmmvFastMaxRows = 16;
/// Whether dmmv_fast covers the call: a quantized type (GGUF layouts, or the repacked 102/108/
/// 114), 1..kDmmvFastMaxRows activation rows (any count when gathering: MatJob::expert set on
/// every job), 1..3 jobs, aq 16-byte aligned; for the 16-byte-load kernels (Q4_K, Q5_K and the
/// repacked types) 16-byte aligned weights, row sizes and expert strides.
bool dmmv_fast_covers(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, int n_act);
/// Whether dmmv() should take dmmv_fast for a call of `type` with `rows` output rows in all and
/// n_act activation rows (where the H200 measurements showed it at least as fast as dmmv_v2).
bool dmmv_fast_preferred(int type, int rows, int n_act);
/// dmmv's contract for the covered calls (false: nothing launched). lanes_per_row 0 picks the
/// thread mapping from the shape; 8 or 32 force it (for measuring). pdl: launch with
/// programmatic stream serialization, so that the grid starts while the previous kernel drains
/// and streams its weights before waiting for that kernel's outputs (griddepcontrol.wait).
bool dmmv_fast(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
               int n_act, bool accumulate, cudaStream_t s, int lanes_per_row = 0, bool pdl = false);

// ---- dmmv_exact.cu (ZINC_EXACT=1, the default: docs/exactness.md)
/// Whether dmmv_exact has a kernel for ggml type `type` (the GGUF layouts; not the repacked ones).
bool dmmv_exact_supports(int type);
/// dmmv's contract, computed in the CPU tier's vec_dot order (quant/canon_dot.h): each output is
/// bit-identical to quant::vec_dot(type, k, row, packed activation row) (+ bias: one rounded add;
/// accumulate: y + that, one rounded add). Any n_act >= 1 (decode and prefill). The activations
/// must come from pack.cu with the consuming type's packing mode (ad.w carries the code sums).
void dmmv_exact(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
                const float* xf, int n_act, bool accumulate, cudaStream_t s);

// ---- dmmv_exact_gemm.cu (prefill: many activation rows; docs/cuda.md "Exact prefill GEMM")
/// Whether dmmv_exact_gemm has a tiled kernel for ggml type `type` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
/// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; not the float types).
bool dmmv_exact_gemm_supports(int type);
/// dmmv_exact's contract (same bits: quant::vec_dot order, bias and accumulate as one rounded add
/// each) for quantized weights, computed by a shared-memory tiled __dp4a GEMM that reuses each
/// staged weight block for a tile of activation rows and vice versa; meant for n_act > 16.
/// Returns false (nothing launched) for a type it does not cover, more than 3 jobs, or aq not
/// 16-byte aligned; the caller then uses dmmv_exact's kernels.
bool dmmv_exact_gemm(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                     const float4* ad, int n_act, bool accumulate, cudaStream_t s);
/// The same with tile variant `variant` in [0, dmmv_exact_gemm_variants()) (0: dmmv_exact_gemm's
/// own); every variant gives the same bits; for measuring them on the device.
int dmmv_exact_gemm_variants();
bool dmmv_exact_gemm_variant(int variant, int type, const MatJob* jobs, int n_jobs, int k,
                             const int8_t* aq, const float4* ad, int n_act, bool accumulate,
                             cudaStream_t s);
/// ZINC_EXACT_GEMM (default on; "0" turns the tiled GEMM off), read once per process.
bool exact_gemm_enabled();

// ---- mmq.cu (fast path, many activation rows: docs/cuda.md "Quantized GEMM on tensor cores")
/// Whether mmq has a kernel for ggml type `type` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K in the
/// GGUF layouts, MXFP4, and the repacked Q4_0/Q8_0/Q6_K of repack.h (tile variants 1-4); not
/// the float types).
bool mmq_supports(int type);
/// dmmv's contract for quantized weights (bias and accumulate honoured; not bit-identical to the
/// CPU tier: a relative-error bound, tests/cuda/test_mmq.cpp), computed by an int8 tensor-core
/// GEMM (mma.sync s8 x s8 -> s32, scales applied in f32 per 32 or 16 elements) over the
/// activations packed by pack.cu for `type`'s packing mode. Meant for n_act above dmmv's row
/// limit. Returns false (nothing launched) for a type it does not cover, more than 3 jobs, k not a
/// multiple of the type's block, aq not 16-byte aligned, or a weight pointer / row size not as
/// aligned as the type's decoder needs (16 bytes for Q4_K and the repacked layouts, 4 for
/// Q4_1/Q5_1/Q5_K/Q2_K, else 2).
///
/// `scratch` (optional) lets a launch with fewer output tiles than the GPU has block slots split
/// k across blocks (split-K, docs/perf-notes.md "mmq v6"): deterministic for a given shape, not
/// bitwise equal to the unsplit result (the partial sums are added per k slice). Without it, or
/// when the shape fills the GPU, no split.
struct MmqScratch;
bool mmq(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq, const float4* ad,
         int n_act, bool accumulate, cudaStream_t s, const MmqScratch* scratch = nullptr);
/// Device scratch for mmq's split-K, owned by the caller and used by one stream at a time:
/// `partial` holds tiles x slices x tile-size floats (a launch whose partials would not fit does
/// not split), `counters` one unsigned per output tile, zero-initialised once (cudaMemset) and
/// left at zero by every launch; a launch with more tiles than n_counters does not split.
struct MmqScratch {
    float* partial = nullptr;
    size_t partial_floats = 0;
    unsigned* counters = nullptr;
    int n_counters = 0;
};
/// The same with tile variant `variant` in [0, mmq_variants()) (0: mmq's choice by shape) and
/// `ksplit` k slices (0: mmq's choice, 1: none, n: n, fewer when k or the scratch cannot take n;
/// a split needs `scratch`); for measuring them on the device and for the split's tests.
int mmq_variants();
/// Expert-grouped launches (MoE): activation rows sorted by expert (moe_group), cut into tiles of
/// at most kMmqGroupCols rows of one expert each. Device arrays, written by moe_group inside the
/// stream (so a decode step stays one CUDA graph): tile t multiplies rows [tile_c0[t],
/// tile_c1[t]) by expert tile_expert[t]'s matrices; *n_tiles tiles are used, max_tiles (host) is
/// the bound the grid is launched with (tiles past *n_tiles exit at once).
constexpr int kMmqGroupCols = 32;
struct MmqGroups {
    const int32_t* tile_expert = nullptr;
    const int32_t* tile_c0 = nullptr;
    const int32_t* tile_c1 = nullptr;
    const int32_t* n_tiles = nullptr;
    int max_tiles = 0;
};
/// Tiles a grouping of n_slots rows over n_expert experts can need at most:
/// floor(n_slots / kMmqGroupCols) + min(n_expert, n_slots).
inline int mmq_group_max_tiles(int n_slots, int n_expert) {
    return n_slots / kMmqGroupCols + (n_expert < n_slots ? n_expert : n_slots);
}
/// y[j][r] = W_e[r] . a_j for every activation row j of every tile, W_e = jobs[i].w +
/// e * jobs[i].expert_stride (3-D GGUF expert tensors; MatJob::expert must be null), y rows in
/// the sorted order (jobs' y / ldy). mmq's numerics per output (each output's sum does not
/// depend on the other rows of its tile), no accumulate, no split-K. variant 0 (mmq's choice),
/// 8, 9 or 10 (the 32-row tiles); false (nothing launched) where mmq_variant would refuse.
bool mmq_grouped(int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                 const float4* ad, int n_act, const MmqGroups& groups, cudaStream_t s,
                 int variant = 0);
bool mmq_variant(int variant, int type, const MatJob* jobs, int n_jobs, int k, const int8_t* aq,
                 const float4* ad, int n_act, bool accumulate, cudaStream_t s,
                 const MmqScratch* scratch = nullptr, int ksplit = 0);

// ---- gemm.cu
/// Dequantize a (n_out, k) weight of `type` to f16 (row-major) into dst.
void dequant_f16(int type, const uint8_t* w, size_t row_bytes, int n_out, int k, uint16_t* dst,
                 cudaStream_t s);
/// Dequantize row `rows[i]` of a (?, k) weight into out (n, k) f32 times `scale` (embedding).
void get_rows(int type, const uint8_t* w, size_t row_bytes, const int32_t* rows, int n, int k,
              float scale, float* out, cudaStream_t s);

// ---- rope.cu
struct RopeJob {
    float* q = nullptr;        // (n_rows, q_ld) in/out; heads at h * head_dim
    float* k = nullptr;        // (n_rows, k_ld)
    const float* v = nullptr;  // (n_rows, v_ld)
    int q_ld = 0, k_ld = 0, v_ld = 0;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // biases or null
    const float *q_norm = nullptr, *k_norm = nullptr;         // per-head RMS weights or null
    float eps = 1e-6f;
    int n_head = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0, n_rot = 0;
    bool neox = false;
    // (positions, n_rot) cos/sin table of this layer's RoPE: row p is cpu::rope_cache(params, p)
    // computed on the host (the CPU tier's own values; docs/exactness.md).
    const float* cs = nullptr;
    const int32_t* row_pos = nullptr;   // (n_rows) positions
    const int32_t* row_slot = nullptr;  // (n_rows) physical KV slot = block * block_size + off
    uint16_t* k_cache = nullptr;        // this layer: (slots, n_head_kv * head_dim) f16
    uint16_t* v_cache = nullptr;        // (slots, n_head_kv * head_dim_v) f16
};
/// Bias, Q/K RMS norm, RoPE on q and k; K and V rows written to the cache as f16.
void rope_kv(const RopeJob& j, int n_rows, cudaStream_t s);

// ---- attention.cu
/// Attention in the canonical chunked order (backend/canon.h): key positions in chunks aligned
/// to canon::kAttnChunk, per chunk max / exp / sum / V accumulation in position order, chunks
/// merged in order; bit-identical to cpu::paged_attention.
struct AttnJob {
    const float* q = nullptr;  // (n_rows, q_ld)
    int q_ld = 0;
    float* out = nullptr;  // (n_rows, out_ld) heads at h * head_dim_v
    int out_ld = 0;
    const uint16_t* k_cache = nullptr;
    const uint16_t* v_cache = nullptr;
    int n_head = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0;
    float scale = 1.f;
    int window = 0;  // 0: full causal
    // (n_head) f32 attention sinks or null (gpt-oss): merged after the last key chunk as a chunk
    // with m = sinks[h], l = 1, o = 0 (canon::merge_sink; docs/exactness.md). The fast kernels
    // (attention_fast*.cu) add exp(sink - m) to each row's denominator in their own order.
    const float* sinks = nullptr;
    int block_size = 16;
    const int32_t* row_pos = nullptr;  // (n_rows) query position
    const int32_t* row_bt = nullptr;   // (n_rows) offset of the row's block table in `bt`
    const int32_t* bt = nullptr;       // concatenated block tables
    int max_pos = 0;                   // most positions a row attends to, fixed per runner
    // Split-K scratch (decode: at most attn_split_rows(...) rows): chunk partials
    // (rows, n_head, max_chunks, head_dim_v + 2) floats and (rows, n_head) arrival counters
    // (zero at allocation; the kernel leaves them zero). Null: one block per (row, head) walks
    // its chunks in order (prefill).
    float* part = nullptr;
    unsigned* counters = nullptr;
};
/// Rows up to which attention splits the key chunks over blocks (when part/counters are set).
constexpr int kAttnSplitRows = 16;
/// Chunks of canon::kAttnChunk positions covering max_pos positions.
int attn_max_chunks(int max_pos);
/// Once per runner, before any launch or capture (no-op today; kept for kernels that need more
/// shared memory than the default).
cudaError_t attention_prepare(int max_pos, int head_dim_v);
void attention(const AttnJob& j, int n_rows, cudaStream_t s);

// ---- attention_fast.cu / attention_fast_decode.cu (fast mode only; ZINC_FA=0: attention())
// The same attention (causal, GQA, sliding window, paged f16 KV, sinks) in another summation
// order: not bit-identical to attention(); held to a relative-error bound (tests/cuda/test_attn).
/// Whether the fast kernels cover the job's shape: head_dim == head_dim_v in {64, 128, 256},
/// n_head a multiple of n_head_kv, q/out/K/V rows 16-byte aligned where the kernels need it.
bool attention_fast_covers(const AttnJob& j);
/// Rows [row0, row0 + n_rows) of the step, prefill rows (FlashAttention-2 on tensor cores,
/// mma.sync m16n8k16 f16 -> f32): tiles of 64 consecutive rows x one query head; the rows of a
/// tile that share a block table (one sequence) are processed together, a tile holding several
/// sequences walks them one after another. false: not covered, nothing launched.
bool attention_fast_prefill(const AttnJob& j, int row0, int n_rows, cudaStream_t s);
/// Rows [row0, row0 + n_rows), decode rows (any row works; meant for one row per sequence): a
/// block per (row, kv head, key split) computes every query head of the GQA group, f32 math,
/// the split partials merged by the last block to arrive (j.part / j.counters, as attention()'s
/// split-K; launched in passes of kAttnSplitRows rows). false: not covered (or no scratch).
bool attention_fast_decode(const AttnJob& j, int row0, int n_rows, cudaStream_t s);
/// The number of key splits attention_fast_decode uses for n_rows rows (for measuring).
int attention_fast_splits(const AttnJob& j, int n_rows);

// ---- misc.cu
/// out[i] = x[rows[i]] (rows of dim floats).
void gather_rows(const float* x, const int32_t* rows, int n, int dim, float* out, cudaStream_t s);
/// tokens[i] = argmax of logits row i (first index on ties); two launches (partial maxima over
/// spans of the vocabulary, then one warp per row). scratch: argmax_scratch_bytes.
size_t argmax_scratch_bytes(int n_rows, int n_vocab);
void argmax_rows(const float* logits, int n_rows, int n_vocab, int32_t* tokens, void* scratch,
                 cudaStream_t s);
/// x = cap * tanh(x / cap).
void softcap(float* x, int64_t n, float cap, cudaStream_t s);
/// Convert f32 to f16 (n elements).
void f32_to_f16(const float* x, uint16_t* y, int64_t n, cudaStream_t s);

// ---- moe.cu (Mixture of experts; docs/cuda.md "MoE")
/// Per row t of logits (n_rows, n_expert): its k experts and weights (backend/moe_route.h, the
/// CPU tier's routine, same bits) into ids / w (n_rows * k, slot-major per row), and
/// src_row[t * k + s] = t (the gather list of the experts' input rows). One block per row
/// (n_expert <= 1024). load: (n_expert) device counters of this layer, or null: each slot adds 1
/// to its expert's (atomics; the expert load a run spread, cuda::expert_load). exact = false
/// (the fast path): the logits' maximum and the softmax's sum are block-wide trees instead of
/// thread 0's passes in index order (the selections are the same unless two probabilities are
/// within an ulp; the weights within a few ulp).
void moe_route(const float* logits, int n_rows, int n_expert, int k, bool softmax_first,
               bool norm_w, float w_scale, int32_t* ids, float* w, int32_t* src_row, bool exact,
               cudaStream_t s, uint32_t* load = nullptr);
/// out[t] = sum_s w[t k + s] * ys[pos(t k + s)] (rows of dim floats), slots added in order;
/// pos = slot_pos (moe_group's sorted position of each slot) or the identity when null.
/// accumulate: out[t] += that sum (one rounded add after it: the residual Add fused, the bits of
/// the combine followed by the add).
void moe_combine(const float* ys, const float* w, int n_rows, int k, int dim, float* out,
                 cudaStream_t s, const int32_t* slot_pos = nullptr, bool accumulate = false);
/// Device buffers of moe_group for up to `slots` slots over n_expert experts.
struct MoeGroupBufs {
    int32_t* src = nullptr;       // (slots) input row of each sorted position
    int32_t* slot_pos = nullptr;  // (slots) sorted position of each slot
    int32_t* expert = nullptr;    // (slots) expert of each sorted position
    int32_t* tile_expert = nullptr;
    int32_t* tile_c0 = nullptr;
    int32_t* tile_c1 = nullptr;  // (mmq_group_max_tiles) each
    int32_t* n_tiles = nullptr;  // (1)
};
/// Sort the n_slots = n_rows * k slots of moe_route's ids (n_expert experts; n_expert <= 1024)
/// by expert: b.src[p] = the input row of sorted position p (for gather_rows), b.expert[p] its
/// expert (MatJob::expert for dmmv over the sorted rows), b.slot_pos[slot] = its position, and the
/// tile table of mmq_grouped (tiles of kMmqGroupCols rows, experts in id order). One block;
/// positions within one expert are in arrival order (not deterministic, which no output depends on:
/// every row's products are computed alone). Returns the MmqGroups view of b.
MmqGroups moe_group(const int32_t* ids, int n_rows, int k, int n_expert, const MoeGroupBufs& b,
                    cudaStream_t s);

// ---- qwen35's Gated DeltaNet layer and gated attention (docs/cuda.md "Gated DeltaNet kernels";
// wired into the runner by runner_recurrent.cpp). The op list's SsmConv, DeltaNet, GatedRmsNorm,
// SplitGate and SigmoidMul (model/ir.h has each op's formula); the CPU tier's kernels
// (backend/cpu/delta_net.h) are the reference, and their float operations are followed.

/// The sequences of a step, for the recurrent ops. The rows of a sequence are consecutive, at least
/// one, and the sequences in row order (the CPU tier's AttentionSeq). All device pointers.
struct RecurrentSeqs {
    const int32_t* row0 = nullptr;     // (n_seqs + 1): sequence i has rows [row0[i], row0[i + 1])
                                       // (none: its state is left as it is)
    const int32_t* slot = nullptr;     // (n_seqs): its recurrent state slot
    const int32_t* row_pos = nullptr;  // (n_rows) positions, or null: a sequence whose first row
                                       // is at position 0 starts from a zero state (cpu::StatePool
                                       // ::reset), any other continues the slot's state
    int n_seqs = 0;
    // Checkpoints (speculative decoding; BatchSeq::keep_states, Runner::rewind_state): read only
    // when the job's ckpt pool is set. keep (n_seqs): nonzero = also write the state after each
    // of the sequence's rows, row i (i < n_ckpt) at checkpoint row i of its slot; n_ckpt: rows
    // per slot of the pool (a sequence's rows past n_ckpt are not kept).
    const int32_t* keep = nullptr;
    int n_ckpt = 0;
};

// ---- ssm_conv.cu
/// One SsmConv op: y[t, c] = silu(sum_i w[c, i] * win_t[i]) over the d_conv taps in order, win_t
/// the channel's last d_conv inputs up to row t (the first d_conv - 1 from the conv state, zeros
/// at position 0); afterwards the state holds the sequence's last d_conv - 1 inputs. Each tap is
/// one rounded multiply and one rounded add in tap order from 0, then canon::silu: the CPU tier's
/// cpu::ssm_conv operation for operation (bit-identical).
struct SsmConvJob {
    const float* x = nullptr;  // (n_rows, ch)
    const float* w = nullptr;  // (ch, d_conv): row c = channel c's taps, oldest input first
    float* y = nullptr;        // (n_rows, ch); not x
    float* state = nullptr;    // slot s at state + s * slot_floats: (ch, d_conv - 1), oldest first
    int64_t slot_floats = 0;
    int ch = 0, d_conv = 0;  // d_conv in [2, 16]
    RecurrentSeqs seqs;
    // Checkpoint pool or null (none: nothing read or written for them): slot s's row i at ckpt +
    // (s * seqs.n_ckpt + i) * slot_floats, laid out as a state; written for sequences with keep.
    float* ckpt = nullptr;
};
/// One thread per (channel, sequence), the sequence's rows in order; with a checkpoint pool, a
/// kept sequence's thread also stores its window after each row (the same registers the next
/// row continues from, so a checkpoint is bit for bit the state of the rows up to it run alone).
/// false (nothing launched): d_conv outside [2, 16] or a non-positive size.
bool ssm_conv(const SsmConvJob& j, cudaStream_t s);

// ---- deltanet.cu
/// One DeltaNet op (the gated delta rule; Yang, Kautz, Hatamizadeh 2024, "Gated Delta Networks",
/// eq. 10, as llama.cpp's ggml_gated_delta_net and cpu::delta_net_head), per sequence and v head
/// h, for each of the sequence's rows t in order:
///   q, k = l2(q_kh), l2(k_kh), kh = h % n_k_heads: x * (1 / sqrt(mean(x^2) + eps / d_k)) *
///          (1 / sqrt(d_k)), the squares summed in f64;
///   b = 1 / (1 + exp(-beta[t, h])); g = softplus(alpha[t, h] + dt_bias[h]) * a[h] (softplus =
///          x above 20, else log(1 + exp(x))); S = exp(g) S;
///   S^T_j += k * (b * (v_j - S^T_j . k)) for each value row j;
///   out[t, h, j] = S^T_j . q / sqrt(d_v).
/// Not bit-identical to the CPU tier (its dot products are sequential, here a warp's lanes split
/// them, over the raw q / k with the L2 scales applied to the sums, and out comes from the old
/// state as decay (S_old^T_j . q) + d_j (k . q); exp / log are the device's): held to a
/// relative-error bound (tests/unit/cuda_emul/qwen35_deltanet_emul_test.cpp: 2e-6 of max |cpu|,
/// tests/cuda/test_deltanet.cpp: 3e-5).
struct DeltaNetJob {
    // (n_rows, qkv_ld): q heads at kh * d_k, k heads at key_dim + kh * d_k, v heads at
    // 2 * key_dim + h * d_v (key_dim = n_k_heads * d_k)
    const float* qkv = nullptr;
    int qkv_ld = 0;
    const float* beta = nullptr;     // (n_rows, n_v_heads), before the sigmoid
    const float* alpha = nullptr;    // (n_rows, n_v_heads), before dt_bias and softplus
    const float* dt_bias = nullptr;  // (n_v_heads)
    const float* a = nullptr;        // (n_v_heads): -exp(A_log)
    float* out = nullptr;            // (n_rows, out_ld): head h's values at h * d_v
    int out_ld = 0;
    // slot s at state + s * slot_floats: S^T (n_v_heads, d_v, d_k) f32, row j of head h (value j)
    // contiguous over the key index (cpu::StatePool's layout)
    float* state = nullptr;
    int64_t slot_floats = 0;
    int n_k_heads = 0, n_v_heads = 0, head_k_dim = 0, head_v_dim = 0;
    float eps = 1e-6f;  // of the L2 norms
    RecurrentSeqs seqs;
    // Checkpoint pool or null, as SsmConvJob::ckpt: slot s's row i at ckpt + (s * seqs.n_ckpt +
    // i) * slot_floats, laid out as a state (the S^T after the sequence's row i).
    float* ckpt = nullptr;
};
/// Most key dimensions the recurrent kernel holds per lane (head_k_dim <= 32 * 8).
constexpr int kDeltaNetMaxKeyDim = 256;
/// The recurrence computed one token at a time, sequential over each sequence's rows (decode, and
/// for now prefill too: the chunked WY scan is not written yet). Blocks of 4 warps per
/// (sequence, v head, 16 value rows); a warp owns 4 rows S^T_j in registers across the tokens,
/// its lanes splitting the key index; state read once and written once per call (and, for a kept
/// sequence with a checkpoint pool, its registers stored after each row: bit for bit the state
/// of the rows up to it run alone). false (nothing launched): head_k_dim outside [1,
/// kDeltaNetMaxKeyDim], or another non-positive size.
bool delta_net_recurrent(const DeltaNetJob& j, cudaStream_t s);

// ---- gated_norm.cu
/// GatedRmsNorm: x[r, h] = rms_norm(x[r, h]) * w * silu(z[r, h]) for each head h of head_dim
/// elements of each of n_rows rows of width elements (width % head_dim == 0): canon::rms_scale
/// (lane l of a warp owning chain l, tree32 by xor shuffles), canon::rms_apply, then one rounded
/// multiply by canon::silu(z): the CPU tier's cpu::gated_rms_norm_row, bit-identical.
void gated_rms_norm(float* x, const float* z, const float* w, int n_rows, int width, int head_dim,
                    float eps, cudaStream_t s);
/// SplitGate: in (n_rows, n_head * 2 * head_dim) = [q_0 | g_0 | q_1 | g_1 ...] -> q, gate (n_rows,
/// n_head * head_dim) (copies; cpu::split_gate_row).
void split_gate(const float* in, float* q, float* gate, int n_rows, int n_head, int head_dim,
                cudaStream_t s);
/// SigmoidMul: x[r, i] *= 1 / (1 + exp(-gate[r, i])) (gate_width == width), or by one gate per row
/// (gate_width == 1, qwen35moe's shared expert), as cpu::sigmoid_mul with the device's expf
/// (within 2 ulp of the CPU tier's libm exp; relative-error bound in the tests).
void sigmoid_mul(float* x, const float* gate, int n_rows, int width, int gate_width,
                 cudaStream_t s);

// ---- sampling.cu
/// One logits row's sampling settings (engine/sampler.h's chain; model::RowSampling with the
/// host-side constants precomputed exactly as the CPU sampler computes them).
struct SampleRowParams {
    double uniform = 0.0;      // [0, 1): the row's draw
    float temperature = 0.0f;  // <= 0: greedy
    float inv_t = 0.0f;        // 1.0f / temperature
    float top_p = 1.0f;        // >= 1: off
    float log_min_p = 0.0f;    // std::log(std::min(min_p, 1.0f)) (host libm)
    float repeat = 1.0f, presence = 0.0f, frequency = 0.0f;
    int32_t top_k = 0;               // <= 0 or >= n_vocab: off
    int32_t min_p_on = 0;            // min_p > 0
    int32_t pen_off = 0, pen_n = 0;  // this row's slice of pen_ids / pen_counts / pen_orig
};
struct SampleOut {
    int32_t token;
    int32_t used;   // the uniform was consumed (not greedy, some finite logit)
    float logprob;  // log-softmax of the raw logits at token (want_logprob)
};
/// Host side (runner_sample.cpp): a row's device settings, inv_t = 1.0f / temperature and
/// log_min_p = std::log(std::min(min_p, 1.0f)) computed with the host libm as the CPU sampler
/// computes them; pen_off / pen_n left 0.
SampleRowParams sample_row_params(float temperature, int32_t top_k, float top_p, float min_p,
                                  float repeat, float presence, float frequency, double uniform);
/// Sample one token per row of logits (n_rows, n_vocab), one block per row. The penalties are
/// applied to `logits` in place (pen_orig receives the raw values). pen_ids: distinct per row.
void sample_rows(float* logits, int n_rows, int n_vocab, const SampleRowParams* rows,
                 const int32_t* pen_ids, const int32_t* pen_counts, float* pen_orig, SampleOut* out,
                 bool want_logprob, cudaStream_t s);

}  // namespace zinc::cuda
