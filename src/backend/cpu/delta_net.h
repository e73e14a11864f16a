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

namespace zinc::cpu {

/// Per-sequence recurrent state of every recurrent layer: one slot per running sequence.
/// pos(slot) is how many positions the slot's state has consumed; a step starting at position
/// 0 resets the slot (zeros), any other start must continue exactly where the state is.
class StatePool {
  public:
    StatePool(const model::Program& prog, int32_t n_slots);
    int32_t n_slots() const { return n_slots_; }
    bool empty() const { return layers_.empty(); }
    float* conv(int rs_layer, int32_t slot);
    float* ssm(int rs_layer, int32_t slot);
    int64_t pos(int32_t slot) const { return pos_[static_cast<size_t>(slot)]; }
    void set_pos(int32_t slot, int64_t p) { pos_[static_cast<size_t>(slot)] = p; }
    /// Zero every layer's state of the slot and set its position to 0.
    void reset(int32_t slot);
    /// Bytes of state one sequence needs (every recurrent layer).
    static size_t bytes_per_seq(const model::Program& prog);
    size_t bytes() const { return bytes_per_seq_ * static_cast<size_t>(n_slots_); }

  private:
    int32_t n_slots_;
    size_t bytes_per_seq_;
    std::vector<model::Program::RecurrentLayer> layers_;
    std::vector<std::vector<float>> conv_, ssm_;  // per layer: (n_slots, floats)
    std::vector<int64_t> pos_;                    // (n_slots)
};

/// SsmConv for one sequence's n_t rows, channels [c0, c1): x (n_t, ch) row-major, w (ch, d_conv),
/// state (ch, d_conv - 1) updated, y (n_t, ch) = silu(conv). Sums in f32 over the taps in order
/// (as ggml_ssm_conv).
void ssm_conv(const float* x, int n_t, int64_t ch, const float* w, int d_conv, float* state,
              float* y, int64_t c0, int64_t c1);

/// DeltaNet for one sequence's n_t rows and one v head h: qkv (n_t, qkv width), beta/alpha
/// (n_t, n_v_heads), S (head_v_dim, head_k_dim) of head h updated, out (n_t, n_v_heads *
/// head_v_dim) head h's columns written. scratch: >= 2 * head_k_dim + head_v_dim floats.
void delta_net_head(const model::DeltaNetP& p, const float* qkv, const float* beta,
                    const float* alpha, int n_t, int h, float* S, float* out, float* scratch);

/// One row: x[h] = rms_norm(x[h]) * w * silu(z[h]) for each head h of head_dim elements.
void gated_rms_norm_row(float* x, const float* z, const float* w, int64_t width, int head_dim,
                        float eps);
/// One row: in = [q_0 | g_0 | q_1 | g_1 ...] (head_dim each) -> q, gate.
void split_gate_row(const float* in, float* q, float* gate, int n_head, int head_dim);
/// x[i] *= sigmoid(gate[i]) = 1 / (1 + exp(-gate[i])).
void sigmoid_mul(float* x, const float* gate, int64_t n);

}  // namespace zinc::cpu
