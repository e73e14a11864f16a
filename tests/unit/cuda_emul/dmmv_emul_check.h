// zinc/tests/unit/cuda_emul/dmmv_emul_check.h — the check shared by the matrix-vector kernels'
// emulation tests (dmmv_fast_emul_test.cpp, dmmv_stream_emul_test.cpp): random weights of one
// layout in three fused jobs (the first with a bias), packed activations, the kernel's output
// (plain, then accumulate) against quant::vec_dot (tests/cuda/dmmv_check.h). Include after the
// kernel source under test.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../../cuda/dmmv_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/repack.h"  // repack.cpp: compiled by repack_unit.cpp

namespace zinc::dmmv_emul {

/// Three fused jobs of n_out[0..2] rows (the first with a bias) over n_act activation rows:
/// run(dt, jobs, k, aq, ad, n_act, accumulate) must launch the kernel and return true; checked
/// plain, then accumulate (y = 2 (W x + b)), to relative L2 1e-5 and max/rms 1e-4. `what` names
/// the case in failure messages.
template <class Run>
void check(quant::GgmlType t, bool repack, int k, int n_act, uint64_t seed, const int (&n_out)[3],
           const std::string& what, Run run) {
    namespace q = zinc::quant;
    namespace cu = zinc::cuda;
    namespace dc = zinc::dmmv_check;
    SCOPED_TRACE(std::string(q::type_name(t)) + (repack ? "R" : "") + " k " + std::to_string(k) +
                 " n_act " + std::to_string(n_act) + " " + what);
    const int total = n_out[0] + n_out[1] + n_out[2];
    const size_t rb = q::row_size(t, k);
    std::vector<uint8_t> w(rb * total);
    dc::fill_weights(t, w.data(), rb, 0, total, k, seed);
    int dt = static_cast<int>(t);
    std::vector<uint8_t> wd(w);
    if (repack) {
        dt = cu::repacked_type(dt, k);
        ASSERT_NE(dt, static_cast<int>(t));
        cu::repack_rows(static_cast<int>(t), w.data(), wd.data(), total, k);
    }
    // 16-byte aligned copies of the weights (the 16-byte-load kernels require it)
    std::vector<uint8_t> wa(wd.size() + 16);
    uint8_t* wp = wa.data() + ((16 - (reinterpret_cast<uintptr_t>(wa.data()) & 15u)) & 15u);
    std::memcpy(wp, wd.data(), wd.size());
    const auto x = dc::make_acts(n_act, k, seed + 1);
    const dc::Acts a = dc::pack_acts(t, x, n_act, k);
    std::vector<double> ref(static_cast<size_t>(n_act) * total);
    dc::reference(t, k, w.data(), rb, 0, total, a, n_act, total, ref.data());
    dc::Rng brng(seed + 2);
    std::vector<float> bias(n_out[0]);
    for (auto& b : bias) b = brng.normal();
    // outputs: (n_act, total) with the jobs' columns back to back, ldy = total
    std::vector<float> y(ref.size());
    std::memset(y.data(), 0xff, y.size() * 4);
    cu::MatJob jobs[3];
    for (int j = 0, col = 0; j < 3; col += n_out[j], ++j) {
        jobs[j].w = wp + rb * col;
        jobs[j].row_bytes = rb;
        jobs[j].n_out = n_out[j];
        jobs[j].y = y.data() + col;
        jobs[j].ldy = total;
        jobs[j].bias = j == 0 ? bias.data() : nullptr;
    }
    std::vector<double> add(ref.size(), 0.0);
    for (int b = 0; b < n_act; ++b)
        for (int r = 0; r < n_out[0]; ++r) add[static_cast<size_t>(b) * total + r] = bias[r];
    for (int pass = 0; pass < 2; ++pass) {
        ASSERT_TRUE(run(dt, jobs, k, a.q(), a.d.data(), n_act, pass == 1));
        std::vector<double> add2(add);
        for (auto& v : add2) v *= pass + 1.0;
        const dc::Err e = dc::compare(y.data(), ref.data(), y.size(), pass + 1.0, add2.data());
        EXPECT_TRUE(e.ok(1e-5, 1e-4))
            << (pass ? "accumulate" : "plain") << ": rel L2 " << e.rel_l2 << ", max/rms "
            << e.max_rel_rms << (e.finite ? "" : ", non-finite");
    }
}

}  // namespace zinc::dmmv_emul
