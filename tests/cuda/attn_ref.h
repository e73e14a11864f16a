// zinc/tests/cuda/attn_ref.h — attention test cases for the fast kernels (attention_fast*.cu):
// random Q and a paged f16 KV cache laid out as the CUDA Runner lays it out (rows of
// n_head_kv * head_dim f16 per slot, slot = block_table[p / block_size] * block_size +
// p % block_size, block tables shuffled over a pool larger than needed), the step's row
// metadata (positions, block-table offsets) for several sequences (prefill chunks that start
// after a cached prefix, and single decode rows), and a float64 reference of causal GQA
// attention with an optional window and sinks. Shared by tests/cuda/test_attn.cpp (device) and
// tests/unit/cuda_emul/attn_fast_emul_test.cpp (the kernels on the host over the SIMT shim).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "quant/quant.h"

namespace zinc::attn_test {

struct Case {
    std::string name;
    int n_head = 4, n_kv = 1, hd = 64;
    int window = 0;  // 0: full causal
    bool sinks = false;
    int block_size = 16;
    std::vector<std::pair<int, int>> seqs;  // (pos0, n_tokens) per sequence, rows in this order
};

struct Data {
    int rows = 0, n_slots = 0, max_pos = 0;
    float scale = 1.f;
    std::vector<float> q;        // (rows, n_head * hd)
    std::vector<uint16_t> k, v;  // (n_slots, n_kv * hd) f16
    std::vector<int32_t> pos, rowbt, bt;
    std::vector<float> sinks;  // (n_head) or empty
};

/// cheap: K/V as random f16 bit patterns in +-[0.125, 0.25) instead of Gaussians (for the
/// benchmark's GB-sized caches; the values do not matter there, only that they are finite).
inline Data make_data(const Case& c, uint32_t seed, bool cheap = false) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    Data d;
    d.scale = 1.f / std::sqrt(static_cast<float>(c.hd));
    int n_blocks = 0;
    for (auto [p0, n] : c.seqs) {
        d.rows += n;
        n_blocks += (p0 + n + c.block_size - 1) / c.block_size;
        d.max_pos = std::max(d.max_pos, p0 + n);
    }
    const int pool = n_blocks + 7;  // some blocks no sequence uses
    std::vector<int32_t> ids(pool);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    d.n_slots = pool * c.block_size;
    const int kvd = c.n_kv * c.hd;
    d.k.resize(static_cast<size_t>(d.n_slots) * kvd);
    d.v.resize(d.k.size());
    // Every slot holds finite random values (also those no sequence uses): the kernels must
    // mask, not rely on zeros.
    for (size_t i = 0; i < d.k.size(); ++i) {
        if (cheap) {
            const uint32_t r = rng();
            d.k[i] = static_cast<uint16_t>(0x3000u | (r & 0x83ffu));
            d.v[i] = static_cast<uint16_t>(0x3000u | ((r >> 16) & 0x83ffu));
            continue;
        }
        d.k[i] = quant::fp32_to_fp16(nd(rng) * 1.5f);
        d.v[i] = quant::fp32_to_fp16(nd(rng));
    }
    int used = 0;
    for (auto [p0, n] : c.seqs) {
        const int off = static_cast<int>(d.bt.size());
        const int need = (p0 + n + c.block_size - 1) / c.block_size;
        for (int b = 0; b < need; ++b) d.bt.push_back(ids[used++]);
        for (int i = 0; i < n; ++i) {
            d.pos.push_back(p0 + i);
            d.rowbt.push_back(off);
        }
    }
    d.q.resize(static_cast<size_t>(d.rows) * c.n_head * c.hd);
    for (float& x : d.q) x = nd(rng) * 1.5f;
    if (c.sinks) {
        d.sinks.resize(c.n_head);
        for (float& s : d.sinks) s = nd(rng) * 2.f + 1.f;
    }
    return d;
}

/// The runner's split of the rows (runner.cpp): consecutive sequences of one kind, single-row
/// ones (decode kernel) or multi-row ones (prefill kernel): (row0, n, decode).
struct Span {
    int row0, n;
    bool decode;
};
inline std::vector<Span> spans(const Case& c) {
    std::vector<Span> out;
    int row = 0;
    for (auto [p0, n] : c.seqs) {
        const bool dec = n == 1;
        if (!out.empty() && out.back().decode == dec)
            out.back().n += n;
        else
            out.push_back({row, n, dec});
        row += n;
    }
    return out;
}

/// float64 attention: out[r][h * hd + i] for every row and head.
inline std::vector<double> reference(const Case& c, const Data& d) {
    const int kvd = c.n_kv * c.hd, G = c.n_head / c.n_kv;
    std::vector<double> out(static_cast<size_t>(d.rows) * c.n_head * c.hd);
    std::vector<double> s, acc(c.hd);
    for (int r = 0; r < d.rows; ++r) {
        const int p = d.pos[r];
        const int lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
        for (int h = 0; h < c.n_head; ++h) {
            const float* q = d.q.data() + (static_cast<size_t>(r) * c.n_head + h) * c.hd;
            const int hk = h / G;
            s.assign(p - lo + 1, 0.0);
            double m = -INFINITY;
            for (int j = lo; j <= p; ++j) {
                const int slot =
                    d.bt[d.rowbt[r] + j / c.block_size] * c.block_size + j % c.block_size;
                const uint16_t* k = d.k.data() + static_cast<size_t>(slot) * kvd + hk * c.hd;
                double x = 0.0;
                for (int i = 0; i < c.hd; ++i)
                    x += static_cast<double>(q[i]) * quant::fp16_to_fp32(k[i]);
                s[j - lo] = x * d.scale;
                m = std::max(m, s[j - lo]);
            }
            if (c.sinks) m = std::max(m, static_cast<double>(d.sinks[h]));
            double l = c.sinks ? std::exp(d.sinks[h] - m) : 0.0;
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int j = lo; j <= p; ++j) {
                const int slot =
                    d.bt[d.rowbt[r] + j / c.block_size] * c.block_size + j % c.block_size;
                const uint16_t* v = d.v.data() + static_cast<size_t>(slot) * kvd + hk * c.hd;
                const double e = std::exp(s[j - lo] - m);
                l += e;
                for (int i = 0; i < c.hd; ++i) acc[i] += e * quant::fp16_to_fp32(v[i]);
            }
            for (int i = 0; i < c.hd; ++i)
                out[(static_cast<size_t>(r) * c.n_head + h) * c.hd + i] = acc[i] / l;
        }
    }
    return out;
}

/// Largest |got - ref| over max |ref| (rows [r0, r1)); NaN/inf in got gives +inf.
inline double rel_err(const Case& c, const std::vector<float>& got, const std::vector<double>& ref,
                      int r0, int r1, int* worst_row = nullptr) {
    const size_t w = static_cast<size_t>(c.n_head) * c.hd;
    double mx = 0.0, scale = 0.0;
    for (size_t i = r0 * w; i < r1 * w; ++i) scale = std::max(scale, std::fabs(ref[i]));
    for (size_t i = r0 * w; i < r1 * w; ++i) {
        const double e = std::isfinite(got[i]) ? std::fabs(got[i] - ref[i]) : INFINITY;
        if (e > mx) {
            mx = e;
            if (worst_row) *worst_row = static_cast<int>(i / w);
        }
    }
    return scale > 0 ? mx / scale : mx;
}

}  // namespace zinc::attn_test
