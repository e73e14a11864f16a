// zinc/tests/cuda/qwen35_ref.h — test cases for the qwen35 kernels (ssm_conv.cu, deltanet.cu,
// gated_norm.cu): random inputs, a step's sequences (some starting at position 0, whose state
// slot holds NaN garbage the kernels must not read; some continuing a random state; slots
// shuffled over a pool larger than needed), and the reference results from the CPU tier's own
// kernels (backend/cpu/delta_net.h) run sequence by sequence as cpu::Executor runs them. Shared by
// tests/cuda/test_deltanet.cpp (device) and tests/unit/cuda_emul/qwen35_*_emul_test.cpp (the
// kernels on the host over the SIMT shim).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/delta_net.h"
#include "model/ir.h"
#include "model/weights.h"
#include "quant/types.h"

namespace zinc::qwen35_test {

inline std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f, float mean = 0.0f) {
    std::normal_distribution<float> d(mean, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

/// An f32 model::Weight over v (which must outlive it), as the CPU kernels read dt_bias and a.
inline model::Weight f32_weight(const std::vector<float>& v) {
    model::Weight w;
    w.type = quant::GgmlType::F32;
    w.n_dims = 1;
    w.ne[0] = static_cast<int64_t>(v.size());
    w.n_rows = 1;
    w.data = reinterpret_cast<const uint8_t*>(v.data());
    w.row_bytes = v.size() * sizeof(float);
    return w;
}

/// A step's sequences: (pos0, n_tokens) each, rows in this order, each on its own state slot.
struct Step {
    std::vector<std::pair<int, int>> seqs;
    int rows() const {
        int n = 0;
        for (const auto& s : seqs) n += s.second;
        return n;
    }
};
/// The kernels' sequence table (kernels.h RecurrentSeqs) on the host.
struct SeqTable {
    int n_slots = 0;
    std::vector<int32_t> row0, slot, row_pos;
};
inline SeqTable seq_table(const Step& st, std::mt19937& rng) {
    SeqTable t;
    t.n_slots = static_cast<int>(st.seqs.size()) + 3;
    std::vector<int32_t> perm(static_cast<size_t>(t.n_slots));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    int r = 0;
    for (size_t i = 0; i < st.seqs.size(); ++i) {
        t.row0.push_back(r);
        t.slot.push_back(perm[i]);
        for (int k = 0; k < st.seqs[i].second; ++k) t.row_pos.push_back(st.seqs[i].first + k);
        r += st.seqs[i].second;
    }
    t.row0.push_back(r);
    return t;
}
/// Sequence si of t alone, on its first n rows: a one-sequence table with the same slot and
/// positions, rows renumbered from 0 (the caller offsets its row data by t.row0[si]). Running a
/// kernel on it gives the state a checkpoint row n - 1 of that sequence must hold.
inline SeqTable prefix_table(const SeqTable& t, size_t si, int n) {
    SeqTable p;
    p.n_slots = t.n_slots;
    p.row0 = {0, n};
    p.slot = {t.slot[si]};
    p.row_pos.assign(t.row_pos.begin() + t.row0[si], t.row_pos.begin() + t.row0[si] + n);
    return p;
}
/// Slot state for every slot: random where a sequence continues (pos0 > 0), NaN where one starts
/// at position 0 (a kernel that reads it instead of starting from zeros fails) and in the unused
/// slots (a kernel writing the wrong slot is caught by the comparison of all slots).
inline std::vector<float> initial_state(const Step& st, const SeqTable& t, int64_t slot_floats,
                                        std::mt19937& rng, float sd) {
    std::vector<float> s(static_cast<size_t>(t.n_slots * slot_floats),
                         std::numeric_limits<float>::quiet_NaN());
    for (size_t i = 0; i < st.seqs.size(); ++i) {
        if (st.seqs[i].first == 0) continue;
        const auto v = randn(static_cast<size_t>(slot_floats), rng, sd);
        std::copy(v.begin(), v.end(), s.begin() + t.slot[i] * slot_floats);
    }
    return s;
}

/// max |a - b| / max |ref| over the elements (NaN anywhere, or a size mismatch: infinity).
/// Elements where both are NaN (the untouched state of unused slots) count as equal.
inline double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
    if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
    double amax = 0.0, dmax = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (std::isnan(ref[i]) && std::isnan(got[i])) continue;
        if (std::isnan(ref[i]) || std::isnan(got[i]))
            return std::numeric_limits<double>::infinity();
        amax = std::max(amax, std::abs(static_cast<double>(ref[i])));
        dmax = std::max(dmax, std::abs(static_cast<double>(got[i]) - ref[i]));
    }
    return amax > 0.0 ? dmax / amax : dmax;
}
/// A kernel's output buffer of n floats poisoned with NaN (an unwritten element never passes),
/// between two guard bands of `guard` floats holding a canary NaN of its own payload: a write
/// before or past the buffer changes a canary (intact()). On the host (the SIMT emulation) an
/// out-of-bounds store does not fault; this catches those landing within a band.
class Guarded {
  public:
    Guarded(size_t n, size_t guard, const std::vector<float>& init = {})
        : n_(n), guard_(guard), buf_(n + 2 * guard, canary()) {
        std::fill_n(buf_.begin() + static_cast<int64_t>(guard), n,
                    std::numeric_limits<float>::quiet_NaN());
        std::copy_n(init.begin(), std::min(init.size(), n),
                    buf_.begin() + static_cast<int64_t>(guard));
    }
    float* data() { return buf_.data() + guard_; }
    /// The n floats between the bands.
    std::vector<float> inner() const {
        return {buf_.begin() + static_cast<int64_t>(guard_),
                buf_.begin() + static_cast<int64_t>(guard_ + n_)};
    }
    /// Whether every guard float still holds the canary's bits.
    bool intact() const {
        const float c = canary();
        for (size_t i = 0; i < buf_.size(); ++i) {
            if (i == guard_) i += n_;
            if (i < buf_.size() && std::memcmp(&buf_[i], &c, sizeof c) != 0) return false;
        }
        return true;
    }

  private:
    static float canary() {
        const uint32_t bits = 0x7fc0a5a5u;  // a quiet NaN no kernel computes
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
    }
    size_t n_, guard_;
    std::vector<float> buf_;
};

/// Bitwise equality (NaN payloads included).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// A kernel's checkpoint pool (n_slots, n_ckpt, slot_floats) after one step with per-sequence
/// keep flags (kernels.h RecurrentSeqs::keep), the pool NaN before: row i of a kept sequence's
/// slot must hold, bit for bit, the slot's state after that sequence's first i + 1 rows run
/// alone (prefix_state(si, i + 1): the whole state pool after such a call, from the initial
/// one); every other row (sequences without keep, rows past a sequence's own, unused slots) must
/// still be NaN. Returns "" or the first difference.
template <class PrefixState>
std::string check_checkpoints(const std::vector<float>& pool, const SeqTable& t,
                              const std::vector<int32_t>& keep, int n_ckpt, int64_t slot_floats,
                              PrefixState prefix_state) {
    if (pool.size() != static_cast<size_t>(t.n_slots) * n_ckpt * slot_floats)
        return "pool size " + std::to_string(pool.size());
    auto row_at = [&](int32_t slot, int i) {
        return pool.begin() + (int64_t{slot} * n_ckpt + i) * slot_floats;
    };
    std::vector<bool> kept_slot(static_cast<size_t>(t.n_slots), false);
    for (size_t si = 0; si < t.slot.size(); ++si) {
        const int n = t.row0[si + 1] - t.row0[si];
        if (!keep[si]) continue;
        kept_slot[static_cast<size_t>(t.slot[si])] = true;
        for (int i = 0; i < n_ckpt; ++i) {
            const auto row = row_at(t.slot[si], i);
            const std::vector<float> got(row, row + slot_floats);
            if (i >= n) {
                for (float v : got)
                    if (!std::isnan(v))
                        return "sequence " + std::to_string(si) + ": row " + std::to_string(i) +
                               " past its " + std::to_string(n) + " rows was written";
                continue;
            }
            const std::vector<float> all = prefix_state(si, i + 1);
            const auto at = all.begin() + int64_t{t.slot[si]} * slot_floats;
            if (!same_bits(got, std::vector<float>(at, at + slot_floats)))
                return "sequence " + std::to_string(si) + ": checkpoint row " + std::to_string(i) +
                       " is not the state after its first " + std::to_string(i + 1) + " rows";
        }
    }
    for (int32_t slot = 0; slot < t.n_slots; ++slot) {
        if (kept_slot[static_cast<size_t>(slot)]) continue;
        for (int i = 0; i < n_ckpt; ++i)
            for (auto it = row_at(slot, i); it != row_at(slot, i) + slot_floats; ++it)
                if (!std::isnan(*it))
                    return "slot " + std::to_string(slot) + " (no sequence keeps it): row " +
                           std::to_string(i) + " was written";
    }
    return "";
}

// ---- DeltaNet -------------------------------------------------------------------------------

struct DeltaNetCase {
    std::string name;
    int n_k = 1, n_v = 1, dk = 32, dv = 32;
    Step step;
};
struct DeltaNetData {
    DeltaNetCase c;
    SeqTable t;
    int rows = 0, qkv_ld = 0, out_ld = 0;
    int64_t slot_floats = 0;
    float eps = 1e-6f;
    std::vector<float> qkv, beta, alpha, dt_bias, a, state0;
    // the CPU tier's results: out (rows, out_ld), every slot's state afterwards (empty when made
    // without the reference: size a kernel's buffers with out_floats(), never out.size())
    std::vector<float> out, state;
    /// Floats of the op's output (rows, out_ld), with or without the reference.
    size_t out_floats() const { return static_cast<size_t>(rows) * out_ld; }
};
/// Random inputs (alpha reaching past softplus's threshold of 20 in a few rows) and (reference:
/// true) the CPU tier's cpu::delta_net_head per (sequence, v head) over the sequence's rows.
inline DeltaNetData make_delta_net(const DeltaNetCase& c, uint32_t seed, bool reference = true) {
    std::mt19937 rng(seed);
    DeltaNetData d;
    d.c = c;
    d.t = seq_table(c.step, rng);
    d.rows = c.step.rows();
    d.qkv_ld = 2 * c.n_k * c.dk + c.n_v * c.dv;
    d.out_ld = c.n_v * c.dv;
    d.slot_floats = int64_t{c.n_v} * c.dv * c.dk;
    d.qkv = randn(static_cast<size_t>(d.rows) * d.qkv_ld, rng);
    d.beta = randn(static_cast<size_t>(d.rows) * c.n_v, rng, 2.0f);
    d.alpha = randn(static_cast<size_t>(d.rows) * c.n_v, rng, 2.0f);
    for (size_t i = 3; i < d.alpha.size(); i += 11) d.alpha[i] = 21.0f + static_cast<float>(i % 5);
    d.dt_bias = randn(static_cast<size_t>(c.n_v), rng, 0.5f);
    std::uniform_real_distribution<float> ua(-2.0f, 0.5f);
    for (int h = 0; h < c.n_v; ++h) d.a.push_back(-std::exp(ua(rng)));  // a = -exp(A_log)
    d.state0 = initial_state(c.step, d.t, d.slot_floats, rng, 0.3f);
    if (!reference) return d;
    // the CPU tier
    const model::Weight wa = f32_weight(d.a), wdt = f32_weight(d.dt_bias);
    model::DeltaNetP p;
    p.dt_bias = &wdt;
    p.a = &wa;
    p.n_k_heads = c.n_k;
    p.n_v_heads = c.n_v;
    p.head_k_dim = c.dk;
    p.head_v_dim = c.dv;
    p.eps = d.eps;
    d.out.assign(d.out_floats(), 0.0f);
    d.state = d.state0;
    std::vector<float> scratch(2 * static_cast<size_t>(c.dk) + c.dv);
    for (size_t si = 0; si < c.step.seqs.size(); ++si) {
        const int r0 = d.t.row0[si], n = c.step.seqs[si].second;
        float* S = d.state.data() + d.t.slot[si] * d.slot_floats;
        if (c.step.seqs[si].first == 0) std::fill_n(S, d.slot_floats, 0.0f);  // StatePool::reset
        for (int h = 0; h < c.n_v; ++h)
            cpu::delta_net_head(
                p, d.qkv.data() + int64_t{r0} * d.qkv_ld, d.beta.data() + int64_t{r0} * c.n_v,
                d.alpha.data() + int64_t{r0} * c.n_v, n, h, S + int64_t{h} * c.dv * c.dk,
                d.out.data() + int64_t{r0} * d.out_ld, scratch.data());
    }
    return d;
}

// ---- SsmConv --------------------------------------------------------------------------------

struct SsmConvCase {
    std::string name;
    int ch = 8, d_conv = 4;
    Step step;
};
struct SsmConvData {
    SsmConvCase c;
    SeqTable t;
    int rows = 0;
    int64_t slot_floats = 0;
    std::vector<float> x, w, state0;
    std::vector<float> y, state;  // the CPU tier's (empty without the reference: y_floats())
    /// Floats of the op's output (rows, ch), with or without the reference.
    size_t y_floats() const { return static_cast<size_t>(rows) * c.ch; }
};
/// Random inputs and (reference: true) the CPU tier's cpu::ssm_conv per sequence.
inline SsmConvData make_ssm_conv(const SsmConvCase& c, uint32_t seed, bool reference = true) {
    std::mt19937 rng(seed);
    SsmConvData d;
    d.c = c;
    d.t = seq_table(c.step, rng);
    d.rows = c.step.rows();
    d.slot_floats = int64_t{c.ch} * (c.d_conv - 1);
    d.x = randn(static_cast<size_t>(d.rows) * c.ch, rng);
    d.w = randn(static_cast<size_t>(c.ch) * c.d_conv, rng, 0.5f);
    d.state0 = initial_state(c.step, d.t, d.slot_floats, rng, 1.0f);
    if (!reference) return d;
    d.y.assign(d.y_floats(), 0.0f);
    d.state = d.state0;
    for (size_t si = 0; si < c.step.seqs.size(); ++si) {
        const int r0 = d.t.row0[si];
        float* st = d.state.data() + d.t.slot[si] * d.slot_floats;
        if (c.step.seqs[si].first == 0) std::fill_n(st, d.slot_floats, 0.0f);
        cpu::ssm_conv(d.x.data() + int64_t{r0} * c.ch, c.step.seqs[si].second, c.ch, d.w.data(),
                      c.d_conv, st, d.y.data() + int64_t{r0} * c.ch, 0, c.ch);
    }
    return d;
}

// ---- the gating ops -------------------------------------------------------------------------

struct GatedNormData {
    int rows = 0, width = 0, hd = 0;
    float eps = 1e-6f;
    std::vector<float> x, z, w, y;  // y: the CPU tier's x afterwards
};
inline GatedNormData make_gated_norm(int rows, int n_heads, int hd, uint32_t seed) {
    std::mt19937 rng(seed);
    GatedNormData d;
    d.rows = rows;
    d.hd = hd;
    d.width = n_heads * hd;
    d.x = randn(static_cast<size_t>(rows) * d.width, rng);
    for (int r = 0; r < rows; ++r)  // rows at very different scales
        for (int i = 0; i < d.width; ++i)
            d.x[static_cast<size_t>(r) * d.width + i] *= std::ldexp(1.0f, r % 7 - 3);
    d.z = randn(d.x.size(), rng, 2.0f);
    d.w = randn(static_cast<size_t>(hd), rng, 0.5f, 1.0f);
    d.y = d.x;
    for (int r = 0; r < rows; ++r)
        cpu::gated_rms_norm_row(d.y.data() + static_cast<size_t>(r) * d.width,
                                d.z.data() + static_cast<size_t>(r) * d.width, d.w.data(), d.width,
                                hd, d.eps);
    return d;
}

struct SplitGateData {
    int rows = 0, n_head = 0, hd = 0;
    std::vector<float> in, q, gate;  // q, gate: the CPU tier's
};
inline SplitGateData make_split_gate(int rows, int n_head, int hd, uint32_t seed) {
    std::mt19937 rng(seed);
    SplitGateData d;
    d.rows = rows;
    d.n_head = n_head;
    d.hd = hd;
    d.in = randn(static_cast<size_t>(rows) * n_head * 2 * hd, rng);
    d.q.assign(static_cast<size_t>(rows) * n_head * hd, 0.0f);
    d.gate = d.q;
    for (int r = 0; r < rows; ++r)
        cpu::split_gate_row(d.in.data() + static_cast<size_t>(r) * n_head * 2 * hd,
                            d.q.data() + static_cast<size_t>(r) * n_head * hd,
                            d.gate.data() + static_cast<size_t>(r) * n_head * hd, n_head, hd);
    return d;
}

struct SigmoidMulData {
    int rows = 0, width = 0, gate_width = 0;
    std::vector<float> x, gate, y;  // y: the CPU tier's x afterwards
};
/// gate_width == width (elementwise) or 1 (one gate per row, broadcast as cpu::Executor does).
inline SigmoidMulData make_sigmoid_mul(int rows, int width, int gate_width, uint32_t seed) {
    std::mt19937 rng(seed);
    SigmoidMulData d;
    d.rows = rows;
    d.width = width;
    d.gate_width = gate_width;
    d.x = randn(static_cast<size_t>(rows) * width, rng);
    d.gate = randn(static_cast<size_t>(rows) * gate_width, rng, 4.0f);
    d.y = d.x;
    if (gate_width == width) {
        cpu::sigmoid_mul(d.y.data(), d.gate.data(), static_cast<int64_t>(rows) * width);
    } else {
        for (int r = 0; r < rows; ++r) {  // cpu::Executor's broadcast of a row's gate
            const float s = 1.0f / (1.0f + std::exp(-d.gate[static_cast<size_t>(r)]));
            for (int i = 0; i < width; ++i) d.y[static_cast<size_t>(r) * width + i] *= s;
        }
    }
    return d;
}

}  // namespace zinc::qwen35_test
