// zinc/backend/cpu/moe.h — the CPU tier's Mixture-of-Experts FFN (model/ir.h OpKind::Moe).
//
// Per row: route (backend/moe_route.h: the row's k experts and weights from its router logits),
// then only the selected experts are computed. The rows are grouped by expert (rows (t, s) sorted
// by expert id, then by t * k + s); for each expert used by the step its rows are gathered and
// multiplied by the expert's gate/up sub-matrices (a MatView over rows [e n_ff, (e + 1) n_ff) of
// the 3-D GGUF tensor, or of the fused gate_up tensor's [2 e n_ff, ...) halves; the ordinary
// quantized cpu::matmul), through the GLU (SwiGLU, GeGLU or swiglu_oai), multiplied by its down
// sub-matrix (times the expert's down scale, if any), and scattered back to slot (t, s). Finally out[t] = sum_s w[t, s] y[t, s] in slot
// order (moe::combine_elem). Every row's result depends only on that row (cpu::matmul gives the
// same bits for any number of rows), so a batch gives the same bits as each row alone.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/thread_pool.h"
#include "model/ir.h"

namespace zinc::cpu {

struct MoeArgs {
    const float* x = nullptr;       // (n_rows, n_embd) normalised input
    const float* logits = nullptr;  // (n_rows, n_expert) router logits
    float* out = nullptr;           // (n_rows, n_embd)
    int n_rows = 0;
    int64_t n_embd = 0;
    int n_ff = 0, n_expert = 0, k = 0;
    bool softmax_first = true, norm_w = false;
    float w_scale = 0.0f;
    const MatView* gate = nullptr;  // (n_expert * n_ff rows, n_embd)
    const MatView* up = nullptr;
    const MatView* down = nullptr;  // (n_expert * n_embd rows, n_ff)
    model::GluAct act = model::GluAct::SiLU;  // swiglu, geglu (gemma4) or swiglu_oai (gpt-oss)
    /// gate == up: one fused tensor, expert e's gate rows [2 e n_ff, (2 e + 1) n_ff), its up
    /// rows the next n_ff (ffn_gate_up_exps)
    bool gate_up_fused = false;
    const float* down_scale = nullptr;  // (n_expert) multiplies expert e's down output, or null
    const float* gate_b = nullptr;  // (n_expert, n_ff) per-expert biases, or null
    const float* up_b = nullptr;
    const float* down_b = nullptr;  // (n_expert, n_embd)
};

/// Buffers of moe_ffn, sized once for a step of n_rows rows (reserve), never per call.
struct MoeScratch {
    std::vector<int32_t> ids, order, count, cursor;
    std::vector<float> w, x, gate, up, y, down;
    void reserve(int n_rows, int k, int64_t n_embd, int n_ff, int n_expert);
};

/// What one call read: the weight bytes of the experts it used and how many experts that was.
struct MoeStats {
    uint64_t weight_bytes = 0;
    int n_experts_used = 0;
    int n_matmuls = 0;
};

MoeStats moe_ffn(ThreadPool& pool, MatmulScratch& mm, const MoeArgs& a, MoeScratch& s);

}  // namespace zinc::cpu
