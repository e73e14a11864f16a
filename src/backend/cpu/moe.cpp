// zinc/backend/cpu/moe.cpp — routed experts on the CPU (see moe.h).
#include "backend/cpu/moe.h"

#include <algorithm>
#include <cstring>

#include "backend/canon.h"
#include "backend/cpu/activations.h"
#include "backend/moe_route.h"
#include "model/ir.h"
#include "util/check.h"

namespace zinc::cpu {

static_assert(moe::kMaxUsed == model::kMoeMaxUsed);

void MoeScratch::reserve(int n_rows, int k, int64_t n_embd, int n_ff, int n_expert) {
    const size_t v = static_cast<size_t>(n_rows) * k;
    auto grow = [](auto& vec, size_t n) {
        if (vec.size() < n) vec.resize(n);
    };
    grow(ids, v);
    grow(order, v);
    grow(count, static_cast<size_t>(n_expert) + 1);
    grow(cursor, static_cast<size_t>(n_expert));
    grow(w, v);
    grow(x, static_cast<size_t>(n_rows) * n_embd);  // one expert's rows: at most n_rows
    grow(gate, static_cast<size_t>(n_rows) * n_ff);
    grow(up, static_cast<size_t>(n_rows) * n_ff);
    grow(y, static_cast<size_t>(n_rows) * n_embd);
    grow(down, v * n_embd);
}

// y[i] += b[e] for the ne rows of expert e (ggml_add_id: one rounded add per element).
static void add_bias(const float* b, int e, int64_t n, float* y, int ne) {
    if (!b) return;
    const float* be = b + static_cast<int64_t>(e) * n;
    for (int i = 0; i < ne; ++i)
        for (int64_t j = 0; j < n; ++j) y[i * n + j] = canon::add(y[i * n + j], be[j]);
}

MoeStats moe_ffn(ThreadPool& pool, MatmulScratch& mm, const MoeArgs& a, MoeScratch& s) {
    const int n = a.n_rows, k = a.k;
    const int64_t E = a.n_embd, F = a.n_ff;
    ZINC_CHECK(k >= 1 && k <= moe::kMaxUsed && k <= a.n_expert);
    s.reserve(n, k, E, a.n_ff, a.n_expert);
    for (int t = 0; t < n; ++t)
        moe::route_row(a.logits + static_cast<int64_t>(t) * a.n_expert, a.n_expert, k,
                       a.softmax_first, a.norm_w, a.w_scale, s.ids.data() + t * k,
                       s.w.data() + t * k);
    // Counting sort of the slots v = t * k + s by expert (stable: ascending v within an expert).
    for (int e = 0; e <= a.n_expert; ++e) s.count[e] = 0;
    const int nv = n * k;
    for (int v = 0; v < nv; ++v) {
        const int32_t e = s.ids[v];
        ZINC_CHECK(e >= 0 && e < a.n_expert);
        ++s.count[e + 1];
    }
    for (int e = 0; e < a.n_expert; ++e) s.count[e + 1] += s.count[e];
    for (int e = 0; e < a.n_expert; ++e) s.cursor[e] = s.count[e];
    for (int v = 0; v < nv; ++v) s.order[s.cursor[s.ids[v]]++] = v;
    MoeStats st;
    for (int e = 0; e < a.n_expert; ++e) {
        const int b = s.count[e], ne = s.count[e + 1] - b;
        if (ne == 0) continue;
        // first rows of expert e's gate and up in their tensors
        const int64_t g0 = a.gate_up_fused ? 2 * e * F : e * F;
        const int64_t u0 = a.gate_up_fused ? g0 + F : e * F;
        const MatView g{a.gate->type, E, F, a.gate->data + g0 * a.gate->row_bytes,
                        a.gate->row_bytes};
        const MatView u{a.up->type, E, F, a.up->data + u0 * a.up->row_bytes, a.up->row_bytes};
        const MatView d{a.down->type, F, E, a.down->data + e * E * a.down->row_bytes,
                        a.down->row_bytes};
        for (int i = 0; i < ne; ++i) {
            const int t = s.order[b + i] / k;
            std::memcpy(s.x.data() + i * E, a.x + t * E, sizeof(float) * E);
        }
        const MatmulJob gu[2] = {{&g, s.gate.data(), F, nullptr}, {&u, s.up.data(), F, nullptr}};
        matmul(pool, mm, std::span<const MatmulJob>(gu, 2), s.x.data(), ne, E);
        add_bias(a.gate_b, e, F, s.gate.data(), ne);
        add_bias(a.up_b, e, F, s.up.data(), ne);
        for (int i = 0; i < ne; ++i) {  // one call per row, as the Glu op (batch invariance)
            float* g = s.gate.data() + i * F;
            const float* u = s.up.data() + i * F;
            switch (a.act) {
                case model::GluAct::SwigluOai:
                    for (int64_t j = 0; j < F; ++j) g[j] = canon::swiglu_oai(g[j], u[j]);
                    break;
                case model::GluAct::GeluTanh:
                    geglu(g, u, g, F);
                    break;
                case model::GluAct::SiLU:
                    swiglu(g, u, g, F);
                    break;
            }
        }
        matmul(pool, mm, d, s.gate.data(), ne, F, s.y.data(), E);
        add_bias(a.down_b, e, E, s.y.data(), ne);
        if (a.down_scale) {  // ggml_mul by the expert's scale, before the weighting
            const float sc = a.down_scale[e];
            for (int64_t i = 0; i < ne * E; ++i) s.y[i] *= sc;
        }
        for (int i = 0; i < ne; ++i)
            std::memcpy(s.down.data() + static_cast<int64_t>(s.order[b + i]) * E,
                        s.y.data() + i * E, sizeof(float) * E);
        st.weight_bytes += static_cast<uint64_t>(F) * (g.row_bytes + u.row_bytes) +
                           static_cast<uint64_t>(E) * d.row_bytes;
        ++st.n_experts_used;
        st.n_matmuls += 2;
    }
    for (int t = 0; t < n; ++t) {
        const float* ys = s.down.data() + static_cast<int64_t>(t) * k * E;
        const float* w = s.w.data() + t * k;
        float* o = a.out + static_cast<int64_t>(t) * E;
        for (int64_t i = 0; i < E; ++i) o[i] = moe::combine_elem(ys, E, w, k, i);
    }
    return st;
}

}  // namespace zinc::cpu
