// zinc/backend/cuda/runner_recurrent.cpp — the CUDA executor's part for qwen35 / qwen35moe: the
// Gated DeltaNet layer's ops (SsmConv, DeltaNet, GatedRmsNorm) over the per-sequence recurrent
// state, and the gated attention's SplitGate and SigmoidMul, as launches of ssm_conv.cu,
// deltanet.cu and gated_norm.cu (kernels.h; docs/cuda.md "Gated DeltaNet kernels").
//
// The recurrent ops read the step's sequence table (row offsets and state slots, uploaded with
// the rest of the metadata into fixed device addresses, so a captured decode graph stays valid)
// and run on every row of the step, before the head's gather, as the CPU executor requires. A
// sequence whose first row is at position 0 starts from a zero state (the kernels' rule, the CPU
// tier's StatePool::reset), so no per-step clearing is needed. Counted with the CPU tier's op
// kinds and byte formulas (backend/cpu/executor.cpp), so the evidence of both tiers agrees.
#include "backend/cuda/runner_impl.h"
#include "util/check.h"

namespace zinc::cuda::runner_detail {

using model::OpKind;
using model::Tid;

RecurrentSeqs CudaRunner::recurrent_seqs() const {
    RecurrentSeqs q;
    q.row0 = d_seq_row0_;
    q.slot = d_seq_slot_;
    q.row_pos = d_pos_;
    q.n_seqs = n_seqs_;
    q.keep = d_seq_keep_;
    q.n_ckpt = n_ckpt_;
    return q;
}

Result<void> CudaRunner::rewind_state(int32_t slot, int64_t pos) {
    if (rs_.empty()) return {};                    // attention only: nothing to rewind
    Result<int32_t> r = slots_.rewind(slot, pos);  // the rule and its errors (model::StateSlots)
    if (!r) return r.error();
    if (r.value() < 0) return {};  // already there
    // Checkpoint row r.value() of the slot back into its live state, every recurrent layer, on
    // the stream (ordered before the next step, whose one synchronisation reports an error).
    const size_t row =
        static_cast<size_t>(slot) * static_cast<size_t>(n_ckpt_) + static_cast<size_t>(r.value());
    for (const RecurrentLayerState& L : rs_) {
        const auto cf = static_cast<size_t>(L.conv_floats), sf = static_cast<size_t>(L.ssm_floats);
        CU_TRY("rewind_state",
               cudaMemcpyAsync(L.conv + slot * cf, L.conv_ckpt + row * cf, cf * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream_));
        CU_TRY("rewind_state",
               cudaMemcpyAsync(L.ssm + slot * sf, L.ssm_ckpt + row * sf, sf * sizeof(float),
                               cudaMemcpyDeviceToDevice, stream_));
    }
    return {};
}

void CudaRunner::exec_recurrent(const model::Op& op) {
    constexpr uint64_t kF32 = sizeof(float);
    const int n = rows_;
    const Tid o = op.outs[0].t;
    const int64_t w = prog_.width(o);
    ZINC_CHECK(!gathered_);  // every row, before the head
    switch (op.kind()) {
        case OpKind::SsmConv: {
            const auto& p = op.as<model::SsmConvP>();
            const RecurrentLayerState& L = rs_[static_cast<size_t>(p.rs_layer)];
            SsmConvJob j;
            j.x = loc(p.in);
            j.w = vec(p.w);
            j.y = buf(o);
            j.state = L.conv;
            j.slot_floats = L.conv_floats;
            j.ch = static_cast<int>(prog_.width(p.in));
            j.d_conv = static_cast<int>(p.w->ne[0]);
            j.seqs = recurrent_seqs();
            j.ckpt = step_keeps_ ? L.conv_ckpt : nullptr;
            if (staged_ == o) staged_ = model::kNoTensor;
            ZINC_CHECK(ssm_conv(j, stream_));
            launched(runtime::Op::SsmConv, p.w->bytes(),
                     2 * kF32 * n * j.ch + 2 * kF32 * n_seqs_ * j.ch * (j.d_conv - 1));
            break;
        }
        case OpKind::DeltaNet: {
            const auto& p = op.as<model::DeltaNetP>();
            const RecurrentLayerState& L = rs_[static_cast<size_t>(p.rs_layer)];
            DeltaNetJob j;
            j.qkv = loc(p.qkv);
            j.qkv_ld = static_cast<int>(prog_.width(p.qkv));
            j.beta = loc(p.beta);
            j.alpha = loc(p.alpha);
            j.dt_bias = vec(p.dt_bias);
            j.a = vec(p.a);
            j.out = buf(o);
            j.out_ld = static_cast<int>(w);
            j.state = L.ssm;
            j.slot_floats = L.ssm_floats;
            j.n_k_heads = p.n_k_heads;
            j.n_v_heads = p.n_v_heads;
            j.head_k_dim = p.head_k_dim;
            j.head_v_dim = p.head_v_dim;
            j.eps = p.eps;
            j.seqs = recurrent_seqs();
            j.ckpt = step_keeps_ ? L.ssm_ckpt : nullptr;
            if (staged_ == o) staged_ = model::kNoTensor;
            ZINC_CHECK(delta_net_recurrent(j, stream_));
            const uint64_t units = static_cast<uint64_t>(n_seqs_) * p.n_v_heads;
            launched(runtime::Op::DeltaNet, p.dt_bias->bytes() + p.a->bytes(),
                     kF32 * n * (j.qkv_ld + 2 * p.n_v_heads + w) +
                         2 * kF32 * units * p.head_k_dim * p.head_v_dim);
            break;
        }
        case OpKind::GatedRmsNorm: {  // in place on o
            const auto& p = op.as<model::GatedRmsNormP>();
            ZINC_CHECK(staged_ != o);
            gated_rms_norm(buf(o), loc(p.z), vec(p.w), n, static_cast<int>(w), p.head_dim, p.eps,
                           stream_);
            launched(runtime::Op::RmsNorm, p.w->bytes(), 3 * kF32 * n * w);
            break;
        }
        case OpKind::SplitGate: {
            const auto& p = op.as<model::SplitGateP>();
            const Tid g = op.outs[1].t;
            if (staged_ == o || staged_ == g) staged_ = model::kNoTensor;
            split_gate(loc(p.in), buf(o), buf(g), n, p.n_head, p.head_dim, stream_);
            launched(runtime::Op::Gather, 0, 2 * kF32 * n * prog_.width(p.in));
            break;
        }
        case OpKind::SigmoidMul: {  // in place on o
            const Tid g = op.as<model::SigmoidMulP>().gate;
            ZINC_CHECK(staged_ != o);
            sigmoid_mul(buf(o), loc(g), n, static_cast<int>(w), static_cast<int>(prog_.width(g)),
                        stream_);
            launched(runtime::Op::Glu, 0, 3 * kF32 * n * w);
            break;
        }
        default:
            ZINC_CHECK(false && "not a recurrent or gate op");
    }
}

}  // namespace zinc::cuda::runner_detail
