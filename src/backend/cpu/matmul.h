// zinc/backend/cpu/matmul.h — quantized weight x f32 activation products (the linear layers).
//
// A weight is a row-major matrix of n_rows rows of n_cols elements in any GGUF block type,
// read in place from the model mapping. Activations x are f32 (n_tokens, n_cols), row-major.
// They are packed once per call with quant::quantize_row to the weight's vec_dot type (Q8_0,
// Q8_1, Q8_K or F32) and that packing is shared by every weight row and every job of the call.
//
// Work split: all jobs' rows are cut into blocks of a few rows and each pool part takes a
// contiguous range of blocks, so every core streams its share of the weights sequentially
// (decode is memory-bound; interleaved blocks measured 1.5x slower). A part whose thread is late
// is run by the caller (ThreadPool's claimable parts), so a busy core does not stall the op.
// Inside a block the weight rows stay in L1 while the chunk's tokens are multiplied with them:
// by quant::gemm_tile's register tiles (several weight rows x several tokens per inner loop) for
// the types that have one, else by 8-token tiles of quant::vec_dot_multi. Either way a prefill
// chunk streams each weight byte from memory once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "backend/cpu/thread_pool.h"
#include "quant/types.h"

namespace zinc::cpu {

/// A weight matrix view: (n_rows, n_cols), rows of row_bytes bytes each.
struct MatView {
    quant::GgmlType type = quant::GgmlType::F32;
    int64_t n_cols = 0;
    int64_t n_rows = 0;
    const uint8_t* data = nullptr;
    size_t row_bytes = 0;
};

/// One output of a matmul call: y[t * ldy + r] = dot(w row r, x row t) (+ bias[r]).
struct MatmulJob {
    const MatView* w = nullptr;
    float* y = nullptr;
    int64_t ldy = 0;              // floats between consecutive tokens' outputs (>= w->n_rows)
    const float* bias = nullptr;  // (n_rows) f32, optional
};

/// Reusable packing buffers. One per Context; grows, never shrinks.
class MatmulScratch {
  public:
    MatmulScratch();
    ~MatmulScratch();
    /// Make sure packing n_tokens rows of n_cols for `n_types` vec_dot types fits.
    void reserve(int n_types, size_t bytes_per_type);
    uint8_t* buffer(int i) { return bufs_[i].get(); }
    /// Whether prefill uses quant::vec_dot_multi token tiles (default) or one vec_dot per
    /// (row, token); env ZINC_MATMUL_MULTI=0 selects the plain path for A/B checks. Both give
    /// bit-identical results.
    bool use_multi() const { return use_multi_; }
    /// Whether prefill uses the register-tiled quant::gemm_tile for the types that have a tiled
    /// micro-kernel (default; needs use_multi). Env ZINC_MATMUL_TILED=0 (read once, at
    /// construction) restores the vec_dot_multi token tiles. Bit-identical either way.
    bool use_tiled() const { return use_tiled_; }

    static constexpr int kMaxTypes = 4;

  private:
    struct Free {
        void operator()(uint8_t* p) const;
    };
    std::unique_ptr<uint8_t, Free> bufs_[kMaxTypes];
    size_t cap_ = 0;
    bool use_multi_ = true;
    bool use_tiled_ = true;
};

/// Run every job on the same activations x (n_tokens rows, row stride ldx floats, n_cols =
/// jobs' common n_cols). ZINC_CHECKs that all jobs share n_cols.
void matmul(ThreadPool& pool, MatmulScratch& scratch, std::span<const MatmulJob> jobs,
            const float* x, int n_tokens, int64_t ldx);

/// Single-job convenience.
void matmul(ThreadPool& pool, MatmulScratch& scratch, const MatView& w, const float* x,
            int n_tokens, int64_t ldx, float* y, int64_t ldy, const float* bias = nullptr);

}  // namespace zinc::cpu
