// zinc/tests/cuda/dmmv_check.h — inputs and the CPU reference for the fast matrix-vector
// kernels (src/backend/cuda/dmmv*.cu), shared by tests/cuda/bench_dmmv.cpp (on the device) and
// tests/unit/cuda_emul/dmmv_fast_emul_test.cpp (the same kernels on the host SIMT shim).
//
// Weights: random payload bytes (every code pattern a block can hold) with random finite f16
// scales in a moderate range, so no row is zero and sums do not overflow. Activations: Gaussian
// rows with a few large elements, packed by the CPU tier's quantize_row(vec_dot_type) and
// converted to pack.cu's device layout (int8 codes; per 32 elements a float4 (d, s_lo, s_hi,
// code sums as int16 bits)); the reference is quant::vec_dot on the CPU packing, so both sides
// see the same codes and only the order of float sums differs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/quant.h"
#include "quant/types.h"

namespace zinc::dmmv_check {

using quant::GgmlType;

/// splitmix64: fast, seedable, good enough for test data.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    float normal() {  // Box-Muller
        const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
        return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                  std::cos(6.283185307179586 * u2));
    }
};

/// A positive normal f16 of magnitude in [2^lo, 2^hi).
inline uint16_t rand_half(Rng& r, int lo, int hi) {
    const uint64_t v = r.next();
    const int e = lo + static_cast<int>(v % static_cast<uint64_t>(hi - lo)) + 15;
    return static_cast<uint16_t>((e << 10) | ((v >> 8) & 0x3FF));
}

/// Rows [r0, r1) of a (?, k) weight of type t: random bytes, scale fields set to random f16s.
inline void fill_weights(GgmlType t, uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1, int k,
                         uint64_t seed) {
    Rng rng(seed * 1000003u + static_cast<uint64_t>(r0));
    const int64_t bs = quant::type_traits(t).block_size;
    const size_t blk = quant::row_size(t, bs);
    auto set_h = [&](uint8_t* p, int lo, int hi) {
        const uint16_t h = rand_half(rng, lo, hi);
        std::memcpy(p, &h, 2);
    };
    for (int64_t r = r0; r < r1; ++r) {
        uint8_t* p = w + static_cast<size_t>(r) * row_bytes;
        size_t i = 0;
        for (; i + 8 <= row_bytes; i += 8) {
            const uint64_t v = rng.next();
            std::memcpy(p + i, &v, 8);
        }
        for (; i < row_bytes; ++i) p[i] = static_cast<uint8_t>(rng.next());
        for (int64_t b = 0; b < k / bs; ++b) {
            uint8_t* d = p + b * blk;
            switch (t) {
                case GgmlType::Q4_0:
                case GgmlType::Q5_0:
                case GgmlType::Q8_0:
                    set_h(d, -10, -5);
                    break;
                case GgmlType::Q4_1:
                case GgmlType::Q5_1:
                    set_h(d, -10, -5);
                    set_h(d + 2, -8, -4);
                    break;
                case GgmlType::Q4_K:
                case GgmlType::Q5_K:
                    set_h(d, -12, -7);
                    set_h(d + 2, -12, -7);
                    break;
                case GgmlType::Q6_K:
                    set_h(d + 208, -12, -7);
                    break;
                case GgmlType::Q2_K:
                    set_h(d + 80, -10, -6);
                    set_h(d + 82, -10, -6);
                    break;
                case GgmlType::Q3_K:
                    set_h(d + 108, -12, -7);
                    break;
                case GgmlType::MXFP4:  // E8M0 scale 2^(e - 128): 2^-12 .. 2^-5
                    d[0] = static_cast<uint8_t>(116 + rng.next() % 8);
                    break;
                default:
                    break;
            }
        }
    }
}

/// n_act Gaussian rows of k elements, scaled per row, with every 97th element 20x larger.
inline std::vector<float> make_acts(int n_act, int k, uint64_t seed) {
    Rng rng(seed);
    std::vector<float> x(static_cast<size_t>(n_act) * k);
    for (int j = 0; j < n_act; ++j) {
        float* r = x.data() + static_cast<size_t>(j) * k;
        const float sc = std::ldexp(1.0f, static_cast<int>(rng.next() % 8) - 4);
        for (int i = 0; i < k; ++i) r[i] = rng.normal() * sc;
        for (int i = static_cast<int>(rng.next() % 97); i < k; i += 97) r[i] *= 20.f;
    }
    return x;
}

/// The CPU packing of activation rows for weight type t, and the same in pack.cu's device layout.
struct Acts {
    GgmlType vt;
    size_t prb = 0;               // bytes per packed CPU row
    std::vector<uint8_t> packed;  // CPU layout (quantize_row(vt))
    std::vector<uint4> q_store;   // device codes, 16-byte aligned
    std::vector<float4> d;        // device scales
    const int8_t* q() const { return reinterpret_cast<const int8_t*>(q_store.data()); }
    size_t q_bytes() const { return q_store.size() * sizeof(uint4); }
};

inline Acts pack_acts(GgmlType t, const std::vector<float>& x, int n_act, int k) {
    Acts a;
    a.vt = quant::type_traits(t).vec_dot_type;
    a.prb = quant::row_size(a.vt, k);
    a.packed.resize(a.prb * n_act);
    for (int j = 0; j < n_act; ++j)
        quant::quantize_row(a.vt, x.data() + static_cast<size_t>(j) * k,
                            a.packed.data() + a.prb * j, k);
    a.q_store.resize(static_cast<size_t>(n_act) * k / 16);
    a.d.resize(static_cast<size_t>(n_act) * k / 32);
    int8_t* codes = reinterpret_cast<int8_t*>(a.q_store.data());
    for (int j = 0; j < n_act; ++j) {
        const uint8_t* row = a.packed.data() + a.prb * j;
        for (int c = 0; c < k / 32; ++c) {
            const int8_t* cq;
            float4 f{0.f, 0.f, 0.f, 0.f};
            int lo = 0, hi = 0;
            if (a.vt == GgmlType::Q8_K) {  // f32 d, 256 codes, 16 int16 sums of 16
                const uint8_t* b = row + 292 * (c / 8);
                float d;
                std::memcpy(&d, b, 4);
                cq = reinterpret_cast<const int8_t*>(b + 4) + 32 * (c % 8);
                int16_t bs[2];
                std::memcpy(bs, b + 4 + 256 + 4 * (c % 8), 4);
                lo = bs[0];
                hi = bs[1];
                f.x = d;
                f.y = d * static_cast<float>(lo);
                f.z = d * static_cast<float>(hi);
            } else {  // Q8_0: f16 d, 32 codes; Q8_1: f16 d, f16 s, 32 codes
                const size_t bsz = a.vt == GgmlType::Q8_0 ? 34 : 36;
                const uint8_t* b = row + bsz * c;
                uint16_t dh;
                std::memcpy(&dh, b, 2);
                f.x = quant::fp16_to_fp32(dh);
                cq = reinterpret_cast<const int8_t*>(b + bsz - 32);
                for (int i = 0; i < 16; ++i) lo += cq[i], hi += cq[16 + i];
                if (a.vt == GgmlType::Q8_1) {
                    uint16_t sh;
                    std::memcpy(&sh, b + 2, 2);
                    f.y = quant::fp16_to_fp32(sh);
                } else {
                    f.y = f.x * static_cast<float>(lo);
                    f.z = f.x * static_cast<float>(hi);
                }
            }
            const uint32_t bits =
                (static_cast<uint32_t>(lo) & 0xffffu) | (static_cast<uint32_t>(hi) << 16);
            std::memcpy(&f.w, &bits, 4);
            a.d[static_cast<size_t>(j) * (k / 32) + c] = f;
            std::memcpy(codes + static_cast<size_t>(j) * k + 32 * c, cq, 32);
        }
    }
    return a;
}

/// ref[j * n_rows + r] = vec_dot(row r0 + r, activation row j), r in [0, n_rows).
inline void reference(GgmlType t, int k, const uint8_t* w, size_t row_bytes, int64_t r0, int64_t r1,
                      const Acts& a, int n_act, int n_rows, double* ref) {
    for (int j = 0; j < n_act; ++j)
        for (int64_t r = r0; r < r1; ++r)
            ref[static_cast<size_t>(j) * n_rows + r] = quant::vec_dot(
                t, k, w + static_cast<size_t>(r) * row_bytes, a.packed.data() + a.prb * j);
}

/// Comparison of a kernel's outputs with the reference: the relative L2 error, the largest
/// element error relative to the reference's RMS, and whether every output is finite.
struct Err {
    double rel_l2 = 0, max_rel_rms = 0;
    bool finite = true;
    bool ok(double tol_l2, double tol_max) const {
        return finite && rel_l2 <= tol_l2 && max_rel_rms <= tol_max;
    }
};
inline Err compare(const float* got, const double* want, size_t n, double scale_want = 1.0,
                   const double* add = nullptr) {
    Err e;
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; ++i) {
        const double w = want[i] * scale_want + (add ? add[i] : 0.0);
        if (!std::isfinite(got[i])) {
            e.finite = false;
            continue;
        }
        const double d = got[i] - w;
        num += d * d;
        den += w * w;
        mx = std::max(mx, std::fabs(d));
    }
    const double rms = std::sqrt(den / std::max<size_t>(n, 1));
    e.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
    e.max_rel_rms = mx / std::max(rms, 1e-300);
    return e;
}

}  // namespace zinc::dmmv_check
