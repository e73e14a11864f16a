// zinc/runtime/forward_hooks.h — what a Runner's forward pass reports while it runs: one count
// per op it executes (with the bytes that op moves), the intermediates it produced (for
// validation against the CPU oracle), and the debug/test switches it honoured (layers skipped,
// a value corrupted on purpose, an op forced onto the CPU).
//
// A Runner gets a ForwardHooks through RunnerOptions::hooks (model/batch.h); nullptr means no
// accounting. The counting happens at the op boundary of each tier's executor of the model's op
// list (src/backend/cpu/executor.cpp, src/backend/cuda/runner_exec.cpp), so a count exists only
// when the op ran. Header-only so both tiers' libraries can call it without a
// link dependency on zinc_runtime. What each number means is in docs/runtime.md.
//
// Not thread-safe: the Runner's forward caller (one thread) owns it; runtime::Evidence merges
// finished steps under its own lock for readers such as /health.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::runtime {

/// Where an op ran.
enum class Device : uint8_t { Cpu = 0, Cuda = 1 };
inline constexpr int kNumDevices = 2;
inline const char* device_name(Device d) {
    return d == Device::Cpu ? "cpu" : "cuda";
}

/// The ops a forward pass issues. One count = one call of a CPU op function or one CUDA kernel
/// launch (kernels inside a replayed CUDA graph are counted once per replay).
enum class Op : uint8_t {
    Embed,      // token embedding rows (get_rows)
    RmsNorm,    // RMS norm of rows (CUDA: fused with the int8/f16 packing of its output)
    Matmul,     // one projection call (CPU: a cpu::matmul call, which may do Q/K/V together;
                // CUDA: one dmmv launch, which may do several matrices of one type, or one
                // cuBLAS GEMM)
    Dequant,    // CUDA prefill: a weight matrix dequantized to f16 before the GEMM
    RopeKv,     // bias + per-head Q/K norm + RoPE + K/V append to the cache, per row
    Attention,  // causal attention of every row over its sequence's KV
    Pack,       // CUDA: activation rows quantized/converted for the next projection
    Glu,        // gated activation act(gate) * up
    Add,        // residual add (CUDA Gemma: fused with the post-norm)
    Gather,     // move the output rows to the front before the LM head
    Softcap,    // final logit soft-capping
    Argmax,     // CUDA: argmax of each logits row
    SsmConv,    // causal conv1d with the rolling state (Gated DeltaNet layers)
    DeltaNet,   // the gated delta rule over a sequence's rows with its recurrent state
    MoeRoute,    // MoE: each row's top-k experts and weights from its router logits
    MoeCombine,  // MoE: each row's weighted sum of its experts' outputs
    kCount
};
inline constexpr int kNumOps = static_cast<int>(Op::kCount);
inline const char* op_name(Op op) {
    static constexpr const char* kNames[kNumOps] = {
        "embed", "rms_norm", "matmul", "dequant", "rope_kv", "attention", "pack",
        "glu",   "add",      "gather", "softcap", "argmax",  "ssm_conv",  "delta_net",
        "moe_route", "moe_combine"};
    return kNames[static_cast<int>(op)];
}

/// Counts of one step (or a sum of steps), per device and op.
struct OpTally {
    std::array<std::array<uint64_t, kNumOps>, kNumDevices> ops{};  // [device][op] executions
    std::array<uint64_t, kNumDevices>
        weight_bytes{};                             // weight bytes read (each tensor once per call)
    std::array<uint64_t, kNumDevices> act_bytes{};  // activation + KV bytes read and written

    void add(Device d, Op op, uint64_t w_bytes, uint64_t a_bytes) {
        const int i = static_cast<int>(d);
        ++ops[i][static_cast<int>(op)];
        weight_bytes[i] += w_bytes;
        act_bytes[i] += a_bytes;
    }
    uint64_t total_ops(Device d) const {
        uint64_t n = 0;
        for (uint64_t c : ops[static_cast<int>(d)]) n += c;
        return n;
    }
    OpTally& operator+=(const OpTally& o) {
        for (int d = 0; d < kNumDevices; ++d) {
            for (int k = 0; k < kNumOps; ++k) ops[d][k] += o.ops[d][k];
            weight_bytes[d] += o.weight_bytes[d];
            act_bytes[d] += o.act_bytes[d];
        }
        return *this;
    }
};

/// One named intermediate of one step, copied to host memory: `name` as in ZINC_DUMP
/// ("blk.3.l_out", "result_output" for the logits), (n_rows, dim) row-major f32.
struct Captured {
    std::string name;
    int il = -1;  // layer, -1 for whole-model tensors
    int n_rows = 0;
    int64_t dim = 0;
    std::vector<float> data;
};

/// Test-only fault injection (ZINC_TEST_CORRUPT=name:layer, docs/runtime.md): every step, the
/// Runner replaces row 0 of the named intermediate of that layer, x, by corrupt_value(x) = 1 - x
/// (a sign flip plus an offset, so even a zero row changes), and the forward pass continues on
/// the wrong value.
struct CorruptSpec {
    std::string name;  // e.g. "attn_out", "ffn_inp", "l_out"; empty: off
    int il = -1;
};
inline float corrupt_value(float x) {
    return 1.0f - x;
}

/// KV positions a query row at position `pos` attends to (window 0: full causal attention).
inline uint64_t attended_positions(int64_t pos, int window) {
    const int64_t n = pos + 1;
    return static_cast<uint64_t>(window > 0 && n > window ? window : n);
}

/// A shortcut the forward pass took that changes the model's result (a skipped layer, a capped
/// vocabulary, clamped experts, a truncated context).
struct Shortcut {
    std::string what;  // e.g. "layer 3 skipped (ZINC_SKIP_LAYERS)"
};

/// An op that was meant for the device tier but ran on the CPU.
struct Fallback {
    std::string op;  // e.g. "glu", or "forward" when a whole step moved to the CPU
    int il = -1;
};

class ForwardHooks {
  public:
    OpTally step;                     // ops of the current step; the step's owner resets it
    std::vector<Shortcut> shortcuts;  // reported by the forward pass, drained by the owner
    std::vector<Fallback> fallbacks;  // idem

    // ---- accounting (called at each op's call site) ----
    void count(Device d, Op op, uint64_t w_bytes, uint64_t a_bytes) {
        step.add(d, op, w_bytes, a_bytes);
    }
    void fallback(std::string op, int il) { fallbacks.push_back({std::move(op), il}); }

    // ---- debug shortcut: ZINC_SKIP_LAYERS ----
    /// Layers to skip entirely (a debug switch; every skip is reported as a shortcut). The last
    /// layer is never skipped: it selects the output rows.
    std::vector<int> skip_layers;
    bool skip_layer(int il, int n_layer) {
        if (il >= n_layer - 1) return false;
        for (int s : skip_layers) {
            if (s == il) {
                shortcuts.push_back(
                    {"layer " + std::to_string(il) + " skipped (ZINC_SKIP_LAYERS)"});
                return true;
            }
        }
        return false;
    }

    // ---- ops forced onto the CPU (device tiers only): ZINC_CPU_OPS=glu,... ----
    std::vector<std::string> cpu_ops;
    bool force_cpu(std::string_view op) const {
        for (const auto& o : cpu_ops)
            if (o == op) return true;
        return false;
    }

    // ---- intermediates (validation) ----
    bool capturing = false;  // set by the owner for validated steps
    std::vector<Captured> captured;
    /// Host buffer for (n_rows, dim) floats of intermediate `name` of layer il, to be filled by
    /// the Runner; nullptr when not capturing this step.
    float* capture(std::string_view name, int il, int n_rows, int64_t dim) {
        if (!capturing) return nullptr;
        Captured c;
        c.name =
            il >= 0 ? "blk." + std::to_string(il) + "." + std::string(name) : std::string(name);
        c.il = il;
        c.n_rows = n_rows;
        c.dim = dim;
        c.data.resize(static_cast<size_t>(n_rows) * static_cast<size_t>(dim));
        captured.push_back(std::move(c));
        return captured.back().data.data();
    }
    /// CPU convenience: copy host data if capturing.
    void capture_host(std::string_view name, int il, const float* data, int n_rows, int64_t dim) {
        if (float* dst = capture(name, il, n_rows, dim))
            std::memcpy(dst, data, sizeof(float) * static_cast<size_t>(n_rows) * dim);
    }

    // ---- test-only fault injection ----
    CorruptSpec corrupt;
    bool corrupts(std::string_view name, int il) const {
        return !corrupt.name.empty() && corrupt.name == name && corrupt.il == il;
    }

    /// Whether this step needs host round trips inside the forward pass (captures, fault
    /// injection, ops forced onto the CPU): a device tier then runs it without a CUDA graph.
    bool needs_host() const { return capturing || !corrupt.name.empty() || !cpu_ops.empty(); }

    /// Start a step: clear the per-step tally and captures.
    void begin_step(bool capture_this_step) {
        step = OpTally{};
        captured.clear();
        capturing = capture_this_step;
    }
};

}  // namespace zinc::runtime
