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
#include "model/state_slots.h"
#include "util/result.h"

namespace zinc::cpu {

/// Per-sequence recurrent state of every recurrent layer: one slot per running sequence. Where
/// each slot's state is and which checkpoints its last step kept is model::StateSlots's
/// bookkeeping (slots(): the positions, the batch checks and the rewind rule, shared with the
/// CUDA tier); this pool holds the floats. A step starting at position 0 resets the slot (zeros),
/// any other start must continue exactly where the state is.
///
/// Checkpoints (speculative decoding, docs/speculative.md "Recurrent state"): with n_ckpt > 0
/// each slot also has room for the state after each of up to n_ckpt rows of one step. A step
/// recorded with keep (advance) has the recurrent ops write the state after every row of that
/// slot; rewind(slot, pos) then puts the state of any checkpointed position back in place, so a
/// rejected draft's rows are undone without recomputing anything. A step on the slot without
/// keep drops them.
class StatePool {
  public:
    StatePool(const model::Program& prog, int32_t n_slots, int32_t n_ckpt = 0);
    int32_t n_slots() const { return slots_.n_slots(); }
    int32_t n_checkpoints() const { return slots_.n_checkpoints(); }
    bool empty() const { return layers_.empty(); }
    float* conv(int rs_layer, int32_t slot);
    float* ssm(int rs_layer, int32_t slot);
    /// Positions and checkpoints of the slots (the checks of a step batch: slots().check()).
    const model::StateSlots& slots() const { return slots_; }
    /// Zero every layer's state of the slot (a step from position 0; advance() then records it).
    void reset(int32_t slot);
    /// Bytes of state one sequence needs (every recurrent layer).
    static size_t bytes_per_seq(const model::Program& prog);
    /// Live states and checkpoints of every slot.
    size_t bytes() const {
        return bytes_per_seq_ * static_cast<size_t>(n_slots()) *
               (1 + static_cast<size_t>(n_checkpoints()));
    }

    /// The next step runs n_rows rows on the slot from pos0 and, with keep (n_rows in [1,
    /// n_checkpoints()]), keeps the state after each: checkpoint i is the state at position
    /// pos0 + i + 1 (model::StateSlots::advance).
    void advance(int32_t slot, int64_t pos0, int32_t n_rows, bool keep) {
        slots_.advance(slot, pos0, n_rows, keep);
    }
    /// Rows the current step checkpoints on the slot (0: none).
    int32_t checkpointing(int32_t slot) const { return slots_.kept(slot); }
    /// Checkpoint row 0 of the slot's layer (the state after row i is at + i * conv_floats, resp.
    /// ssm_floats, of that layer); only valid when n_checkpoints() > 0.
    float* conv_ckpt(int rs_layer, int32_t slot);
    float* ssm_ckpt(int rs_layer, int32_t slot);
    /// Floats of one state of the layer (the checkpoint row strides).
    int64_t conv_floats(int rs_layer) const { return layers_[rs_layer].conv_floats; }
    int64_t ssm_floats(int rs_layer) const { return layers_[rs_layer].ssm_floats; }
    /// Put the slot's state at position p (model::StateSlots::rewind's rule and errors: p where
    /// it is, or one of the positions the last step checkpointed, whose state is copied back).
    Result<void> rewind(int32_t slot, int64_t p);

  private:
    model::StateSlots slots_;
    size_t bytes_per_seq_;
    std::vector<model::Program::RecurrentLayer> layers_;
    std::vector<std::vector<float>> conv_, ssm_;  // per layer: (n_slots, floats)
    // Checkpoints, per layer: (n_slots, n_ckpt, floats).
    std::vector<std::vector<float>> conv_ckpt_, ssm_ckpt_;
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
