// zinc/tests/unit/cuda_emul/attn_fast_emul_test.cpp — the fast attention kernels' CUDA sources
// (src/backend/cuda/attention_fast.cu via attn_fast_unit.cpp, attention_fast_decode.cu here),
// compiled for the host over the SIMT shim in shim/ (whose ldmatrix, ldmatrix.trans and f16
// mma.sync models follow the PTX fragment layouts), run through their real entry points on host
// memory against the float64 reference of tests/cuda/attn_ref.h: small shapes (the shim runs a
// block's threads as host threads), several sequences with shuffled block tables, a prefill
// chunk after a cached prefix whose 64-row tile also holds another sequence and a decode row,
// GQA, windows, sinks. This checks tiling, fragment addressing, masking, the online softmax and
// the split merge in CI without a GPU; tests/cuda/test_attn.cpp checks the same on the device.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "backend/cuda/attention_fast_decode.cu"
#pragma GCC diagnostic pop

#include "../../cuda/attn_ref.h"

namespace zinc::cuda {
extern std::atomic<int> fa_skip_violations;  // attention_fast.cu (host model only)
// attention.cu is not compiled here (it needs device atomics the shim lacks); its scratch
// sizing, which attention_fast_decode.cu reads, is kernels.h's contract: kAttnChunk-position
// chunks covering max_pos, plus two.
int attn_max_chunks(int max_pos) {
    return max_pos / 256 + 2;
}
}  // namespace zinc::cuda

namespace {

namespace at = zinc::attn_test;
namespace cu = zinc::cuda;

// Runs the case through the fast kernels (the runner's spans; decode spans by the decode
// kernel, or every span by the prefill kernel with all_prefill); returns the outputs.
std::vector<float> run_fast(const at::Case& c, const at::Data& d, bool all_prefill) {
    std::vector<float> out(static_cast<size_t>(d.rows) * c.n_head * c.hd,
                           std::numeric_limits<float>::quiet_NaN());
    const int max_pos = d.max_pos + 1000;  // the runner's capacity exceeds the positions used
    std::vector<float> part(static_cast<size_t>(cu::kAttnSplitRows) * c.n_head *
                                cu::attn_max_chunks(max_pos) * (c.hd + 2),
                            std::numeric_limits<float>::quiet_NaN());
    std::vector<unsigned> cnt(static_cast<size_t>(cu::kAttnSplitRows) * c.n_head, 0u);
    cu::AttnJob j;
    j.q = d.q.data();
    j.q_ld = c.n_head * c.hd;
    j.out = out.data();
    j.out_ld = c.n_head * c.hd;
    j.k_cache = d.k.data();
    j.v_cache = d.v.data();
    j.n_head = c.n_head;
    j.n_head_kv = c.n_kv;
    j.head_dim = j.head_dim_v = c.hd;
    j.scale = d.scale;
    j.window = c.window;
    j.block_size = c.block_size;
    j.row_pos = d.pos.data();
    j.row_bt = d.rowbt.data();
    j.bt = d.bt.data();
    j.max_pos = max_pos;
    j.part = part.data();
    j.counters = cnt.data();
    j.sinks = c.sinks ? d.sinks.data() : nullptr;
    EXPECT_TRUE(cu::attention_fast_covers(j));
    for (const at::Span& sp : at::spans(c)) {
        const bool ok = sp.decode && !all_prefill
                            ? cu::attention_fast_decode(j, sp.row0, sp.n, nullptr)
                            : cu::attention_fast_prefill(j, sp.row0, sp.n, nullptr);
        EXPECT_TRUE(ok);
    }
    for (unsigned v : cnt) EXPECT_EQ(v, 0u) << "split counters must be left at zero";
    return out;
}

void check(const at::Case& c, bool all_prefill, double tol) {
    const at::Data d = at::make_data(c, 1234);
    const std::vector<double> ref = at::reference(c, d);
    cu::fa_skip_violations = 0;
    const std::vector<float> got = run_fast(c, d, all_prefill);
    EXPECT_EQ(cu::fa_skip_violations.load(), 0)
        << c.name << ": a warp would skip a key tile one of its rows attends";
    for (const at::Span& sp : at::spans(c)) {
        int worst = -1;
        const double e = at::rel_err(c, got, ref, sp.row0, sp.row0 + sp.n, &worst);
        std::printf("%s%s rows [%d, %d): rel. error %.3g\n", c.name.c_str(),
                    sp.decode && !all_prefill ? " decode" : " prefill", sp.row0, sp.row0 + sp.n, e);
        EXPECT_LE(e, (sp.decode && !all_prefill) ? 1e-5 : tol)
            << c.name << (sp.decode ? " decode" : " prefill") << " rows [" << sp.row0 << ", "
            << sp.row0 + sp.n << "): worst row " << worst;
    }
}

// f16 Q and P in the prefill kernel: ~1e-3 of the output scale.
constexpr double kPrefillTol = 3e-3;

TEST(AttnFastEmul, PrefillChunksAndMixedRows) {
    at::Case c;
    c.name = "gqa2 hd64";
    c.n_head = 4;
    c.n_kv = 2;
    c.hd = 64;
    // rows 0-39: chunk at 70..109; rows 40-69: a second sequence from 0; row 70..: decodes
    c.seqs = {{70, 40}, {0, 30}, {150, 1}, {20, 1}};
    check(c, false, kPrefillTol);
    check(c, true, kPrefillTol);  // decode rows through the prefill kernel's runs
}

TEST(AttnFastEmul, PrefillWindowSinks) {
    at::Case c;
    c.name = "gqa4 hd64 window 50 sinks";
    c.n_head = 4;
    c.n_kv = 1;
    c.hd = 64;
    c.window = 50;
    c.sinks = true;
    c.seqs = {{33, 70}, {5, 1}};
    check(c, false, kPrefillTol);
}

TEST(AttnFastEmul, PrefillHeadDims128And256) {
    at::Case c;
    c.name = "gqa2 hd128 bs32";
    c.n_head = 2;
    c.n_kv = 1;
    c.hd = 128;
    c.block_size = 32;
    c.seqs = {{90, 20}, {64, 1}};
    check(c, true, kPrefillTol);
    c.name = "gqa1 hd256 window 100 sinks";
    c.n_head = 1;
    c.hd = 256;
    c.window = 100;
    c.sinks = true;
    c.block_size = 16;
    c.seqs = {{150, 12}};
    check(c, false, kPrefillTol);
}

TEST(AttnFastEmul, DecodeGroupsAndSplits) {
    at::Case c;
    c.name = "decode gqa 10 (two head chunks) hd64 sinks";
    c.n_head = 10;
    c.n_kv = 1;
    c.hd = 64;
    c.sinks = true;
    c.seqs = {{700, 1}, {3, 1}, {300, 1}};
    check(c, false, kPrefillTol);
    at::Case w = c;
    w.name = "decode gqa 3 hd128 window 100";
    w.n_head = 6;
    w.n_kv = 2;
    w.hd = 128;
    w.sinks = false;
    w.window = 100;
    check(w, false, kPrefillTol);
}

}  // namespace
