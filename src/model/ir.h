// zinc/model/ir.h — the op list: an architecture written once, for every backend.
//
// An architecture file (src/models/) turns its config and bound weights into a Program once, at
// load: a flat sequence of ops over named activation tensors. The Program is shape-static for a
// given batch: every tensor is (n_rows, width) f32 row-major, the widths are fixed, and n_rows
// (the step's batch rows) is the one runtime parameter; per-layer differences (sliding window,
// RoPE base, optional weights) are written into each layer's ops, never decided by an executor.
// Backends execute it: the CPU tier op by op (backend/cpu/executor.cpp), the CUDA tier as kernel
// launches (backend/cuda/runner_exec.cpp), both wrapping every op boundary in one place for
// evidence counting, validation captures, fault injection, layer skipping and ZINC_DUMP.
//
// Weights are the WeightBinder's (model/weights.h): bound declaratively by GGUF name, shape and
// type; an op holds pointers to them and a backend finds its own copy by that pointer or name.
//
// Fused ops are ops too (Matmul with accumulate = the residual add inside the projection,
// AddRmsNorm = Gemma's post-norm + residual): schedule() replaces a plain op sequence by its
// fused form where a tier asks for it, and keeps the plain ops as the fallback, which the tier
// runs instead whenever an intermediate the fusion would hide is wanted (captured, corrupted or
// dumped) or the fusion's switch is off. Adding an op: a kind, a param struct, the builder call,
// and its case in each executor.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "model/rope.h"
#include "model/weights.h"

namespace zinc::model {

/// Index of a tensor in Program::tensors.
using Tid = int16_t;
inline constexpr Tid kNoTensor = -1;

/// An activation buffer: (rows, width) f32, row-major. `role` names the buffer ("x": residual
/// stream, "xn": normalised block input, "q", "k", "v", "attn", "gate", "up", "proj",
/// "logits"); the names of the values written into it are the ops' output names.
struct TensorDesc {
    std::string role;
    int64_t width = 0;
};

/// Variant order: OpKind values index OpParams.
enum class OpKind : uint8_t {
    Embed,       // out = table[token] * scale                                     (get_rows)
    RmsNorm,     // out = rms_norm(in) * w, per row
    Matmul,      // outs[i] (+)= W_i in (+ b_i), i < n_w: one grouped projection (Q/K/V, gate/up)
    RopeKv,      // q, k (outs, in place): + per-head RMS norm, RoPE; K/V rows to the KV cache
    Attention,   // out = causal attention of q over the layer's KV (window, scale)
    Glu,         // out = act(gate) * up, act = SiLU | tanh-GELU
    Add,         // out += in                                                    (residual)
    AddRmsNorm,  // out += rms_norm(in) * w        (fused: RmsNorm in->in, Add out += in)
    KeepRows,    // from here on only the output rows of the listed tensors matter
    Softcap,     // out = cap * tanh(out / cap)
    // Gated DeltaNet (Yang et al. 2024, "Gated Delta Networks") and the gated attention of the
    // Qwen 3.5 hybrid (models/qwen35.cpp); their per-sequence state is the Runner's
    // (model/batch.h).
    SsmConv,       // out = silu(causal depthwise conv1d(in)) with the sequence's rolling conv state
    DeltaNet,      // out = gated delta rule over q|k|v (in), beta, alpha; the sequence's state S
    GatedRmsNorm,  // out = rms_norm_per_head(out) * w * silu(z)
    SplitGate,     // outs q, gate = the per-head halves of in ([q_h | g_h] per head)
    SigmoidMul,    // out *= sigmoid(gate)
    Moe,  // out = sum over the row's top-k experts e of w_e * down_e(act(gate_e in) * up_e in)
    AllReduce,  // out = sum of out over the tensor-parallel ranks (model/shard.h); identity
                // for one rank, which is also what a single executor does with it
    // Encoder (BERT) ops (models/bert.cpp); the CUDA tier refuses them at init (docs/cuda.md).
    LayerNorm,  // out = (in - mean) / sqrt(var + eps) * w + b, per row
    AddEmbed,   // out += table[position of the row] (absolute positions), or table[row] (fixed)
    Gelu,       // out = gelu(out) (erf form), elementwise
    Scale,      // out *= w[0]: one learned scalar (gemma4's layer_output_scale)
    // NextN / MTP (models/qwen35.cpp's NextN program; CPU tier only, docs/speculative.md).
    Input,   // out = the caller's rows (Batch::hidden_in): the trunk's hidden state per row
    Concat,  // out = [a | b] per row
    kCount
};
const char* op_kind_name(OpKind k);

/// SiLU: silu(g) u; GeluTanh: gelu_tanh(g) u; SwigluOai (MoE experts only, gpt-oss):
/// canon::swiglu_oai(g, u) = min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u, -7, 7) + 1).
enum class GluAct : uint8_t { SiLU, GeluTanh, SwigluOai };

struct EmbedP {
    const Weight* table = nullptr;  // (n_vocab rows, width) any matmul type
    float scale = 1.0f;
};
struct RmsNormP {
    Tid in = kNoTensor;
    const Weight* w = nullptr;  // (width) f32
    float eps = 1e-5f;
    /// Multiplies the result: out = rms_norm(in) * scale * w (gemma4's router input, scale
    /// 1/sqrt(n_embd)); 1 everywhere else. schedule() does not fuse a scaled norm.
    float scale = 1.0f;
};
struct MatmulP {
    Tid in = kNoTensor;                   // (rows, k)
    int n_w = 0;                          // 1..3 weights, one per output
    std::array<const Weight*, 3> w{};     // (k -> width of outs[i])
    std::array<const Weight*, 3> bias{};  // (width of outs[i]) f32 or null
    bool accumulate = false;              // outs[i] += instead of = (only fused, n_w == 1)
};
struct RopeKvP {
    Tid v = kNoTensor;  // (rows, n_head_kv * head_dim_v), written to the cache as it is
    const Weight* q_norm = nullptr;  // (head_dim_k) f32 per-head RMS norm before RoPE, or null
    const Weight* k_norm = nullptr;
    RopeParams rope;   // this layer's (base, scale, freq_factors)
    int kv_layer = 0;  // which layer of the KV cache
    int n_head = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
    float eps = 1e-5f;  // of the Q/K norms (and of the V norm)
    /// RMS-normalise V per head (head_dim_v) with no weight before it is cached (gemma4:
    /// ggml_rms_norm of Vcur); V in place.
    bool v_norm = false;
};
struct AttentionP {
    Tid q = kNoTensor;  // (rows, n_head * head_dim_k)
    int kv_layer = 0;
    int n_head = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
    float scale = 1.0f;  // multiplies q.k
    int window = 0;      // sliding window (0: full causal)
    /// false: bidirectional (encoders): every row attends to all positions of its sequence in
    /// the step, [0, pos0 + n_tokens), not only to [0, its own position].
    bool causal = true;
    const Weight* sinks = nullptr;  // (n_head) f32 learned sink logits (gpt-oss), or null
};
struct GluP {
    Tid gate = kNoTensor, up = kNoTensor;
    GluAct act = GluAct::SiLU;
};
struct AddP {
    Tid in = kNoTensor;
};
struct AddRmsNormP {
    Tid in = kNoTensor;
    const Weight* w = nullptr;
    float eps = 1e-5f;
};
struct KeepRowsP {
    std::array<Tid, 4> t{kNoTensor, kNoTensor, kNoTensor, kNoTensor};
    int n = 0;
};
struct SoftcapP {
    float cap = 0.0f;
};
struct AllReduceP {
    int n_ranks = 1;  // shards whose partial sums of outs[0] are added (model/shard.h)
};
/// LayerNorm (Ba et al. 2016) per row with learned gain and bias: the mean and variance over the
/// row's width, summed in double (as ggml_norm), y = (x - mean) / sqrt(var + eps) * w + b.
struct LayerNormP {
    Tid in = kNoTensor;
    const Weight* w = nullptr;  // (width) f32
    const Weight* b = nullptr;  // (width) f32 or null
    float eps = 1e-12f;
};
/// out += one row of `table` (width of out) per batch row: the row's position (BERT's absolute
/// position embeddings; positions must be < table rows) or, when by_position is false, the
/// fixed row `row` for every batch row (BERT's token type 0, as llama.cpp hard-codes).
struct AddEmbedP {
    const Weight* table = nullptr;  // (n_rows of the table, width) f32 or any matmul type
    bool by_position = true;
    int row = 0;
};
struct GeluP {};
struct ScaleP {
    const Weight* w = nullptr;  // (1) f32: the scalar
};
/// out = the step's caller-provided rows (model::Batch::hidden_in, (n_rows, width of out)), row
/// for row: the NextN block's input h (the trunk's last hidden state before the output norm).
struct InputP {};
/// out = [a | b] per row: width(out) = width(a) + width(b).
struct ConcatP {
    Tid a = kNoTensor, b = kNoTensor;
};
/// How a Moe op turns a row's router logits into its k experts and their weights (llama.cpp's
/// build_moe_ffn gating): SoftmaxTopK (qwen3moe: softmax over all experts, the k most probable,
/// their probabilities as weights, renormalised to sum 1 when norm_w); TopKSoftmax (gpt-oss: the
/// k largest logits, softmax over those k).
enum class MoeGating : uint8_t { SoftmaxTopK, TopKSoftmax };
inline constexpr int kMoeMaxUsed = 32;  // most experts one row may use (backend/moe_route.h)
struct MoeP {
    Tid in = kNoTensor;      // (rows, n_embd) the normalised FFN input
    Tid logits = kNoTensor;  // (rows, n_expert) router logits (a Matmul by ffn_gate_inp before it)
    const Weight* gate_exps = nullptr;  // (n_embd, n_ff, n_expert): expert e's rows [e n_ff, ...)
    const Weight* up_exps = nullptr;    // (n_embd, n_ff, n_expert)
    const Weight* down_exps = nullptr;  // (n_ff, n_embd, n_expert)
    int n_expert = 0, n_used = 0, n_ff = 0;
    MoeGating gating = MoeGating::SoftmaxTopK;
    bool norm_w = false;   // renormalise the k weights (sum clamped below at 2^-14, as llama.cpp)
    float w_scale = 0.0f;  // multiplies the weights (0 or 1: none; <arch>.expert_weights_scale)
    GluAct act = GluAct::SiLU;  // the experts' gated activation
    // Per-expert biases (gpt-oss), each added to its expert's output before the activation /
    // the weighting, or null: gate_b, up_b (n_ff, n_expert), down_b (n_embd, n_expert) f32.
    const Weight* gate_b = nullptr;
    const Weight* up_b = nullptr;
    const Weight* down_b = nullptr;
    /// gate_exps == up_exps is one fused (n_embd, 2 n_ff, n_expert) tensor: expert e's gate is
    /// rows [2 e n_ff, (2 e + 1) n_ff), its up the next n_ff rows (ffn_gate_up_exps, gemma4).
    bool gate_up_fused = false;
    /// (n_expert) f32 per-expert scale of the down projection's output (gemma4's
    /// ffn_down_exps.scale, the router's per_expert_scale), or null.
    const Weight* down_scale = nullptr;
    /// outs[0] += the weighted sum instead of = (only fused: Moe -> t; Add x += t, FusionOptions::
    /// moe_add; the sum rounded first, then one add, as the plain ops).
    bool accumulate = false;
    /// The router's matrix when its Matmul (in -> logits) is folded into this op (only fused:
    /// FusionOptions::router_moe; the op still writes logits), else null.
    const Weight* router = nullptr;
};
/// Causal depthwise conv1d (kernel d_conv) per channel over a sequence's rows, the d_conv - 1
/// inputs before its first row taken from the sequence's conv state (zeros at position 0), then
/// SiLU: y[t, c] = silu(sum_k w[c, k] * x[t - (d_conv - 1) + k, c]) (ggml_ssm_conv + ggml_silu).
/// The state afterwards holds the sequence's last d_conv - 1 inputs.
struct SsmConvP {
    Tid in = kNoTensor;         // (rows, channels)
    const Weight* w = nullptr;  // (d_conv, channels) f32: row c = the taps of channel c
    int rs_layer = 0;           // which recurrent layer's state (0 .. n_recurrent - 1)
};
/// The gated delta rule, one recurrent step per row in order (decode and prefill alike):
///   q, k = l2_norm(q), l2_norm(k) per head (x / sqrt(sum x^2 + eps)); v head h reads q/k head
///   h % n_k_heads (llama.cpp's repeat); beta = sigmoid(beta_raw); g = softplus(alpha +
///   dt_bias) * a (a = -exp(A_log), stored so); S = exp(g) S; S += k (beta (v - S^T k))^T;
///   out = S^T q / sqrt(head_k_dim). S is (head_k_dim x head_v_dim) per v head.
struct DeltaNetP {
    Tid qkv = kNoTensor;              // (rows, 2 * n_k_heads * head_k_dim + n_v_heads * head_v_dim)
    Tid beta = kNoTensor;             // (rows, n_v_heads) before the sigmoid
    Tid alpha = kNoTensor;            // (rows, n_v_heads) before dt_bias and softplus
    const Weight* dt_bias = nullptr;  // (n_v_heads) f32
    const Weight* a = nullptr;        // (n_v_heads) f32, -exp(A_log)
    int rs_layer = 0;
    int n_k_heads = 0, n_v_heads = 0, head_k_dim = 0, head_v_dim = 0;
    float eps = 1e-6f;  // of the L2 norms
};
struct GatedRmsNormP {
    Tid z = kNoTensor;          // (rows, width of out): the gate
    const Weight* w = nullptr;  // (head_dim) f32
    int head_dim = 0;
    float eps = 1e-6f;
};
struct SplitGateP {
    Tid in = kNoTensor;  // (rows, n_head * 2 * head_dim)
    int n_head = 0, head_dim = 0;
};
/// x *= sigmoid(gate), elementwise (gate as wide as x), or one gate per row (gate width 1:
/// qwen35moe's shared-expert gate) broadcast over the row.
struct SigmoidMulP {
    Tid gate = kNoTensor;
};
using OpParams =
    std::variant<EmbedP, RmsNormP, MatmulP, RopeKvP, AttentionP, GluP, AddP, AddRmsNormP, KeepRowsP,
                 SoftcapP, SsmConvP, DeltaNetP, GatedRmsNormP, SplitGateP, SigmoidMulP, MoeP,
                 AllReduceP, LayerNormP, AddEmbedP, GeluP, ScaleP, InputP, ConcatP>;

/// A value an op writes. `name` (a string literal, or null) is the intermediate's name as in
/// llama.cpp's graph callbacks: validation captures it and ZINC_TEST_CORRUPT / ZINC_DUMP address
/// it, "blk.<il>.<name>" for layer ops. `validate` false: ZINC_DUMP only (not captured).
struct Output {
    Tid t = kNoTensor;
    const char* name = nullptr;
    bool validate = true;
};

struct Op {
    int il = -1;        // layer, -1 for whole-model ops
    bool head = false;  // output head: runs on the output rows, only when logits are wanted
    int n_outs = 0;
    std::array<Output, 3> outs{};
    OpParams p;

    OpKind kind() const { return static_cast<OpKind>(p.index()); }
    template <class P>
    const P& as() const {
        return std::get<P>(p);
    }
    /// Whether the op reads tensor t (outputs it updates in place count as read: Add,
    /// AddRmsNorm, RopeKv, Softcap, accumulating Matmul; KeepRows reads what it keeps).
    bool reads(Tid t) const;
    bool writes(Tid t) const;
};

struct Program {
    std::vector<TensorDesc> tensors;
    std::vector<Op> ops;  // plain ops, in execution order; a layer's ops are contiguous
    int n_layer = 0;      // ops with il in [0, n_layer)
    /// Recurrent layers (SsmConv/DeltaNet rs_layer values are [0, n_recurrent)) and the state
    /// one sequence needs for each: conv (d_conv - 1, channels) and S (n_v_heads, head_v_dim,
    /// head_k_dim) f32. Empty for attention-only models.
    struct RecurrentLayer {
        int64_t conv_floats = 0;
        int64_t ssm_floats = 0;
    };
    std::vector<RecurrentLayer> recurrent;
    Tid logits = kNoTensor;  // (n_out rows, n_vocab): the head's result, the caller's buffer;
                             // kNoTensor for an encoder (no LM head: embeddings only)
    /// The hidden state embeddings are pooled from (model/pooling.h): (rows, n_embd), the value
    /// op embd_op writes. Decoders: the output norm's result (llama.cpp's t_embd,
    /// "result_norm"); encoders: the last layer's output. An embedding forward runs ops
    /// [0, embd_op] on every row and stops there (no LM head).
    Tid embd = kNoTensor;
    int embd_op = -1;
    /// The hidden state a NextN/MTP block reads (model::Batch::hidden_out): (rows, n_embd), the
    /// residual stream after the last layer and before the output norm, valid after a forward
    /// for the output rows (those kept by KeepRows). kNoTensor: the arch marks none.
    Tid hidden = kNoTensor;
    /// Some attention op is bidirectional (AttentionP::causal false): a sequence's embedding
    /// must then be computed in one forward from position 0.
    bool bidirectional = false;

    int64_t width(Tid t) const { return tensors[static_cast<size_t>(t)].width; }
    /// The tensor with role `role`, or kNoTensor.
    Tid find(std::string_view role) const;
    /// Every weight the ops use, each once, in first-use order.
    std::vector<const Weight*> weights() const;
    /// One line per op, e.g. "12 L1 matmul xn -> q:Qcur k:Kcur v:Vcur [blk.1.attn_q.weight ...]"
    std::string describe() const;
};

/// Emits ops in order. Every call checks its shapes (ZINC_CHECK: an arch file's bug).
class ProgramBuilder {
  public:
    Tid tensor(std::string role, int64_t width);
    /// Layer of the ops emitted next (-1: whole model); `head` marks the output head.
    void set_layer(int il) { il_ = il; }
    void set_head(bool head) { head_ = head; }

    void embed(const Weight& table, float scale, Tid out, const char* name);
    void rms_norm(Tid in, const Weight& w, float eps, Tid out, const char* name = nullptr,
                  bool validate = true, float scale = 1.0f);
    struct Proj {
        const Weight* w = nullptr;
        const Weight* bias = nullptr;
        Tid out = kNoTensor;
        const char* name = nullptr;
    };
    /// Up to three projections of the same input (one grouped op).
    void matmul(Tid in, std::initializer_list<Proj> projs);
    void rope_kv(Tid q, Tid k, Tid v, const RopeKvP& p);
    void attention(Tid out, const AttentionP& p, const char* name);
    void glu(Tid gate, Tid up, GluAct act, Tid out, const char* name);
    void add(Tid acc, Tid in, const char* name);
    void keep_rows(std::initializer_list<Tid> ts);
    void softcap(Tid x, float cap);
    void ssm_conv(Tid in, const SsmConvP& p, Tid out, const char* name);
    void delta_net(const DeltaNetP& p, Tid out, const char* name);
    void gated_rms_norm(Tid x, const GatedRmsNormP& p, const char* name);
    void split_gate(const SplitGateP& p, Tid q, Tid gate);
    void sigmoid_mul(Tid x, Tid gate, const char* name);
    /// Routed experts (p.in, p.logits) -> out (width n_embd).
    void moe(const MoeP& p, Tid out, const char* name);
    /// x = sum of x over n_ranks tensor-parallel ranks, in place (model/shard.h emits it).
    void all_reduce(Tid x, int n_ranks, const char* name);
    /// out = layer_norm(in) * w (+ b), rows of width(in) (in == out allowed); b may be null.
    void layer_norm(Tid in, const Weight& w, const Weight* b, float eps, Tid out, const char* name);
    /// x += p.table[position] (or p.table[p.row]) per row; the table's rows are width(x) wide.
    void add_embed(Tid x, const AddEmbedP& p, const char* name);
    /// x = gelu_erf(x) in place.
    void gelu(Tid x, const char* name);
    /// x *= w[0] in place (w: one f32 value).
    void scale(Tid x, const Weight& w, const char* name);
    /// The value the op just emitted wrote to t is the hidden state embeddings pool
    /// (Program::embd, embd_op).
    void mark_embeddings(Tid t);
    /// x = the caller's rows (InputP), width(x) wide.
    void input(Tid x, const char* name);
    /// out = [a | b] per row (width(out) == width(a) + width(b)).
    void concat(Tid a, Tid b, Tid out, const char* name);
    /// t holds Program::hidden once the forward is done (the head does not write it).
    void mark_hidden(Tid t) { prog_.hidden = t; }

    /// The Program; `logits` is the head's result tensor (kNoTensor: an encoder, which must
    /// have marked its embeddings).
    Program finish(int n_layer, Tid logits);

  private:
    Op& emit(OpParams p);
    void out(Op& op, Tid t, const char* name, bool validate = true);
    Program prog_;
    int il_ = -1;
    bool head_ = false;
};

// ---- fusion

/// The fusions a tier can perform from the op list, each with its switch.
struct FusionOptions {
    bool matmul_add = false;    // Matmul -> t; [KeepRows]; Add x += t  ==>  Matmul x += W in
    bool add_rms_norm = false;  // RmsNorm t -> t; Add x += t            ==>  AddRmsNorm x += ...
    bool moe_add = false;       // Moe -> t; Add x += t                  ==>  Moe x += ...
    bool router_moe = false;    // Matmul in -> logits; Moe(in, logits)   ==>  Moe with its router
};
/// One entry of a tier's schedule: plain ops [begin, end) of Program::ops and, where a fusion
/// matched, the ops that replace them (`fused`, empty otherwise). `hidden` lists the named
/// intermediates the plain ops produce and the fused ones do not: when any of them is wanted
/// this step, the tier runs the plain ops instead.
struct Step {
    int begin = 0, end = 0;
    std::vector<Op> fused;
    std::vector<Output> hidden;
    int il = -1;  // layer of the step's ops
};
std::vector<Step> schedule(const Program& prog, const FusionOptions& opts);

// ---- observation (shared by the tiers' executors)

/// ZINC_DUMP=<name> (e.g. "blk.3.attn_out", or "all"): print that intermediate to stderr.
struct DumpFilter {
    std::string name;  // empty: dumping off
    bool wants(std::string_view n) const { return !name.empty() && (name == n || name == "all"); }
};
/// "blk.<il>.<name>" (il >= 0) or "<name>".
std::string full_name(std::string_view name, int il);
/// The ZINC_DUMP line of (n_rows, dim) values: "ZINC_DUMP <full> pos0=P shape=[dim, n_rows]: ...".
void print_dump(std::string_view full, int64_t pos0, const float* data, int n_rows, int64_t dim);

}  // namespace zinc::model
