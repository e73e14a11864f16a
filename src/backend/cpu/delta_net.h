// zinc/backend/cpu/delta_net.h — the CPU kernels of the Gated DeltaNet layer and the gated
// attention of the Qwen 3.5 hybrid (the op list's SsmConv, DeltaNet, GatedRmsNorm, SplitGate,
// SigmoidMul; model/ir.h has each op's formula), and the per-sequence recurrent state pool.
//
// The delta rule (Yang, Kautz, Hatamizadeh 2024, "Gated Delta Networks: Improving Mamba2 with
// Delta Rule", eq. 10) is computed here as its recurrent form, one step per token in order, for
// decode and prefill alike: this is the CPU tier's reference (and the form llama.cpp's CPU
// backend runs, ggml_gated_delta_net). A chunked (WY / UT-transform) scan computes the same
// recurrence with matrix products per chunk of 64 tokens; it belongs to the CUDA tier, where it
// pays, and is checked against this one.
//
// State layout per sequence slot and recurrent layer (f32):
//   conv  (channels, d_conv - 1): channel c's last d_conv - 1 inputs, oldest first;
//   S     (n_v_heads, head_v_dim, head_k_dim): S^T per v head, so row j (value j) is contiguous
//         over the key index (the dot products S^T k and S^T q read rows).
#pragma once

#include <cstdint>
#include <vector>

#include "model/ir.h"
#include "util/result.h"

namespace zinc::cpu {

/// Per-sequence recurrent state of every recurrent layer: one slot per running sequence.
/// pos(slot) is how many positions the slot's state has consumed; a step starting at position
/// 0 resets the slot (zeros), any other start must continue exactly where the state is.
///
/// Checkpoints (speculative decoding, docs/speculative.md "Recurrent state"): with n_ckpt > 0
/// each slot also has room for the state after each of up to n_ckpt rows of one step. A step
/// that asks for them (begin_checkpoints) has the recurrent ops write the state after every
/// row of that slot; rewind(slot, pos) then puts the state of any checkpointed position back in
/// place, so a rejected draft's rows are undone without recomputing anything. A step on the
/// slot that does not ask for checkpoints drops them (drop_checkpoints).
class StatePool {
  public:
    StatePool(const model::Program& prog, int32_t n_slots, int32_t n_ckpt = 0);
    int32_t n_slots() const { return n_slots_; }
    int32_t n_checkpoints() const { return n_ckpt_; }
    bool empty() const { return layers_.empty(); }
    float* conv(int rs_layer, int32_t slot);
    float* ssm(int rs_layer, int32_t slot);
    int64_t pos(int32_t slot) const { return pos_[static_cast<size_t>(slot)]; }
    void set_pos(int32_t slot, int64_t p) { pos_[static_cast<size_t>(slot)] = p; }
    /// Zero every layer's state of the slot and set its position to 0 (drops its checkpoints).
    void reset(int32_t slot);
    /// Bytes of state one sequence needs (every recurrent layer).
    static size_t bytes_per_seq(const model::Program& prog);
    /// Live states and checkpoints of every slot.
    size_t bytes() const {
        return bytes_per_seq_ * static_cast<size_t>(n_slots_) * (1 + static_cast<size_t>(n_ckpt_));
    }

    /// The next step runs n_rows (1..n_checkpoints()) rows on the slot from pos(slot) and keeps
    /// the state after each: checkpoint i is the state at position pos(slot) + i + 1.
    void begin_checkpoints(int32_t slot, int32_t n_rows);
    /// The slot's checkpoints no longer describe its tokens (a step without checkpoints).
    void drop_checkpoints(int32_t slot);
    /// Rows the current step checkpoints on the slot (0: none).
    int32_t checkpointing(int32_t slot) const { return ckpt_n_[static_cast<size_t>(slot)]; }
    /// Checkpoint row 0 of the slot's layer (the state after row i is at + i * conv_floats, resp.
    /// ssm_floats, of that layer); only valid when n_checkpoints() > 0.
    float* conv_ckpt(int rs_layer, int32_t slot);
    float* ssm_ckpt(int rs_layer, int32_t slot);
    /// Floats of one state of the layer (the checkpoint row strides).
    int64_t conv_floats(int rs_layer) const { return layers_[rs_layer].conv_floats; }
    int64_t ssm_floats(int rs_layer) const { return layers_[rs_layer].ssm_floats; }
    /// Put the slot's state at position p: p == pos(slot) is a no-op; otherwise p must be one
    /// of the positions the last step checkpointed (p0 < p <= p0 + n for a step of n rows from
    /// p0), whose state is copied back. Later checkpoints are dropped (their rows were rejected).
    /// Error: p not checkpointed (what was, and that a state cannot be rewound further).
    Result<void> rewind(int32_t slot, int64_t p);

  private:
    int32_t n_slots_;
    int32_t n_ckpt_;
    size_t bytes_per_seq_;
    std::vector<model::Program::RecurrentLayer> layers_;
    std::vector<std::vector<float>> conv_, ssm_;  // per layer: (n_slots, floats)
    std::vector<int64_t> pos_;                    // (n_slots)
    // Checkpoints, per layer: (n_slots, n_ckpt, floats); per slot: the position before row 0
    // of the checkpointed step and its rows (0: none).
    std::vector<std::vector<float>> conv_ckpt_, ssm_ckpt_;
    std::vector<int64_t> ckpt_pos0_;
    std::vector<int32_t> ckpt_n_;
};

/// SsmConv for one sequence's n_t rows, channels [c0, c1): x (n_t, ch) row-major, w (ch, d_conv),
/// state (ch, d_conv - 1) updated, y (n_t, ch) = silu(conv). Sums in f32 over the taps in order
/// (as ggml_ssm_conv). ckpt (optional): (n_t, ch, d_conv - 1), the state after each row.
void ssm_conv(const float* x, int n_t, int64_t ch, const float* w, int d_conv, float* state,
              float* y, int64_t c0, int64_t c1, float* ckpt = nullptr);

/// DeltaNet for one sequence's n_t rows and one v head h: qkv (n_t, qkv width), beta/alpha
/// (n_t, n_v_heads), S (head_v_dim, head_k_dim) of head h updated, out (n_t, n_v_heads *
/// head_v_dim) head h's columns written. scratch: >= 2 * head_k_dim + head_v_dim floats.
/// ckpt (optional): head h's S after each row t at ckpt + t * ckpt_stride.
void delta_net_head(const model::DeltaNetP& p, const float* qkv, const float* beta,
                    const float* alpha, int n_t, int h, float* S, float* out, float* scratch,
                    float* ckpt = nullptr, int64_t ckpt_stride = 0);

/// One row: x[h] = rms_norm(x[h]) * w * silu(z[h]) for each head h of head_dim elements.
void gated_rms_norm_row(float* x, const float* z, const float* w, int64_t width, int head_dim,
                        float eps);
/// One row: in = [q_0 | g_0 | q_1 | g_1 ...] (head_dim each) -> q, gate.
void split_gate_row(const float* in, float* q, float* gate, int n_head, int head_dim);
/// x[i] *= sigmoid(gate[i]) = 1 / (1 + exp(-gate[i])).
void sigmoid_mul(float* x, const float* gate, int64_t n);

}  // namespace zinc::cpu
