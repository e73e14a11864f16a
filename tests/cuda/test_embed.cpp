// zinc/tests/cuda/test_embed.cpp — the CUDA runner's embeddings (Runner::forward_embed) and
// trunk hidden rows (Batch::hidden_out, Runner::hidden_width) against the CPU tier's, on a GPU
// (docs/cuda.md "Embeddings and hidden rows").
//
//   cuda_test_embed [--ctest] MODEL.gguf ...
//
// MODEL: causal (decoder) models, e.g. the synthetic ones of scripts/gpu-round (from the build
// directory):
//   for p in llama-tiny:q4_k_m gemma3-tiny:q4_k_m qwen3moe-tiny:q8_0 qwen35-tiny:q8_0; do
//     ./zinc synth --preset ${p%:*} --type ${p#*:} --seed 1 -o /tmp/${p%:*}.gguf; done
//   M="/tmp/llama-tiny.gguf /tmp/gemma3-tiny.gguf /tmp/qwen3moe-tiny.gguf /tmp/qwen35-tiny.gguf"
//   ./cuda_test_embed $M
//
// For each model and each kernel mode the runner accepts (fast, CudaOptions::exact 0: within
// the validator's residual tolerance, 5e-2 relative L2 per row; exact, 1: bit for bit, reported
// as SKIP with the runner's reason where it refuses the model, as it refuses qwen35's delta rule
// today), the CUDA runner and a CPU runner with the same options get the same batches:
//  * embeddings: one step of three sequences (a 37-row prefill, the first 20 rows of a second
//    sequence, a 1-row sequence), then a step continuing the second at position 20 (a causal
//    input in chunks, as engine/embedding_step.cpp runs it) beside a fresh 5-row sequence: every
//    row of forward_embed's (n_rows, n_embd) output against the CPU tier's; then one forward()
//    token after the 37-row embedding, whose logits show the embedding step appended the K/V
//    rows as forward() does (same tolerance, argmax equal in fast mode);
//  * hidden rows, where the CPU tier returns them (hidden_width() > 0: qwen35): hidden_width()
//    equal; a step with a 23-row prefill (last row), a 4-row sequence with all_logits and a
//    prefill chunk without logits, then a decode step of all three (one row each: the captured
//    CUDA graph path, twice so the graph is replayed): the hidden_out rows, in logits-row order,
//    against the CPU tier's. Where the CPU tier returns none, the CUDA hidden_width() must be 0
//    too and hidden_out refused;
//  * error paths, messages compared whole with the CPU tier's: forward_embed into a null buffer.
// Output: PASS / FAIL / SKIP lines, then a summary line. Exit 0 when every case passes, 1
// otherwise, 77 without a usable device or (--ctest) without a model argument.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "gpu_model.h"
#include "gpu_test.h"
#include "model_test_main.h"
#include "model/batch.h"
#include "model/model.h"

using namespace zinc;
namespace cu = zinc::cuda;
namespace zm = zinc::model;
using namespace zinc::gpu_test;

namespace {

constexpr int kBlock = 16, kBlocksPerSeq = 4, kSeqs = 4;
constexpr double kRowRel = 5e-2;  // runtime::Thresholds::residual (relative L2 per row)

zm::RunnerOptions options() {
    zm::RunnerOptions o;
    o.n_blocks = kSeqs * kBlocksPerSeq;
    o.block_size = kBlock;
    o.max_batch_tokens = 96;
    o.max_seqs = kSeqs;
    o.max_seq_len = kBlock * kBlocksPerSeq;
    o.n_state_slots = kSeqs;  // hybrid models: one state slot per sequence
    return o;
}

Result<std::unique_ptr<zm::Runner>> make_cuda(const zm::Model& m, const Mode& mode) {
    cu::CudaOptions co;
    co.exact = mode.exact ? 1 : 0;
    return cu::create_runner(m, options(), co);
}

// One sequence's slice of a step: tokens at pos0 on its own blocks and state slot (index s).
struct Seq {
    std::vector<int32_t> tokens;
    int32_t pos0 = 0, s = 0;
    bool want = true, all = false;
};

std::vector<int32_t> blocks_of(int32_t s) {
    std::vector<int32_t> b;
    for (int i = 0; i < kBlocksPerSeq; ++i) b.push_back(s * kBlocksPerSeq + i);
    return b;
}

// The batch of `ss` (its spans point into the returned holder's vectors).
struct Step {
    std::vector<int32_t> toks;
    std::vector<std::vector<int32_t>> bts;
    std::vector<zm::BatchSeq> seqs;
    size_t logit_rows = 0;
    zm::Batch batch() const { return {toks, seqs}; }
};
Step make_step(const std::vector<Seq>& ss) {
    Step st;
    for (const Seq& s : ss) st.bts.push_back(blocks_of(s.s));
    for (size_t i = 0; i < ss.size(); ++i) {
        zm::BatchSeq q;
        q.row0 = static_cast<int32_t>(st.toks.size());
        q.n_tokens = static_cast<int32_t>(ss[i].tokens.size());
        q.pos0 = ss[i].pos0;
        q.block_table = st.bts[i];
        q.state_slot = ss[i].s;
        q.want_logits = ss[i].want || ss[i].all;
        q.all_logits = ss[i].all;
        st.toks.insert(st.toks.end(), ss[i].tokens.begin(), ss[i].tokens.end());
        st.logit_rows += ss[i].all ? ss[i].tokens.size() : q.want_logits ? 1 : 0;
        st.seqs.push_back(q);
    }
    return st;
}

std::vector<int32_t> random_tokens(int n, int32_t n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
    return t;
}

int argmax(const float* l, int64_t n) {
    return static_cast<int>(std::max_element(l, l + n) - l);
}

// Rows (width w) of the CUDA tier (g) against the CPU tier's (c): exact mode bit for bit, fast
// mode every row's ||g - c|| / ||c|| <= kRowRel (NaN or Inf never passes); `argmax_rows`: also
// the argmax of every row equal (logits). `how` gets the numbers.
bool agree(const std::vector<float>& g, const std::vector<float>& c, int64_t w, bool exact,
           bool argmax_rows, std::string& how) {
    if (g.size() != c.size() || g.empty() || w <= 0 || g.size() % static_cast<size_t>(w) != 0) {
        how = fmt("sizes %zu / %zu (width %lld)", g.size(), c.size(), static_cast<long long>(w));
        return false;
    }
    const size_t n_rows = g.size() / static_cast<size_t>(w);
    double worst = 0;
    size_t unequal = 0;
    int n_argmax = 0;
    for (size_t r = 0; r < n_rows; ++r) {
        const float* a = g.data() + r * w;
        const float* b = c.data() + r * w;
        unequal += std::memcmp(a, b, sizeof(float) * static_cast<size_t>(w)) != 0;
        double num = 0, den = 0;
        bool finite = true;
        for (int64_t i = 0; i < w; ++i) {
            finite &= std::isfinite(a[i]);
            num += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
            den += double{b[i]} * b[i];
        }
        worst = std::max(worst, finite ? std::sqrt(num / std::max(den, 1e-300)) : INFINITY);
        if (argmax_rows) n_argmax += argmax(a, w) != argmax(b, w);
    }
    how = fmt("%zu rows: %zu bitwise unequal, worst rel err %.2e", n_rows, unequal, worst);
    if (argmax_rows) how += fmt(", %d argmax differences", n_argmax);
    if (exact) return unequal == 0;
    return worst <= kRowRel && n_argmax == 0;
}

std::string msg(const Result<void>& r) {
    return r.ok() ? "ok" : r.error().message;
}

// forward_embed on both runners; `rows` gets each tier's output.
bool embed_both(zm::Runner& gpu, zm::Runner& cpu, const Step& st, int64_t w, std::vector<float>& g,
                std::vector<float>& c, const std::string& tag) {
    g.assign(st.toks.size() * static_cast<size_t>(w), NAN);
    c.assign(g.size(), NAN);
    const Result<void> rg = gpu.forward_embed(st.batch(), g.data());
    const Result<void> rc = cpu.forward_embed(st.batch(), c.data());
    if (!rg || !rc) {
        report(false, tag + " forward_embed: cuda " + msg(rg) + "; cpu " + msg(rc));
        return false;
    }
    return true;
}

void embeddings(const zm::Model& m, const Mode& mode, const std::string& tag) {
    auto rg = make_cuda(m, mode);
    auto rc = zm::Runner::create_cpu(m, options());
    if (!rg || !rc) return report(false, tag + " create: " + (rg ? rc : rg).error().message);
    zm::Runner& gpu = *rg.value();
    zm::Runner& cpu = *rc.value();
    const int64_t w = m.config().n_embd;
    const int32_t V = m.n_vocab();
    const std::vector<int32_t> a = random_tokens(37, V, 1), b = random_tokens(29, V, 2);
    const std::vector<int32_t> one = random_tokens(1, V, 3), d = random_tokens(5, V, 4);
    const std::vector<int32_t> b0(b.begin(), b.begin() + 20), b1(b.begin() + 20, b.end());
    std::vector<float> g, c;
    std::string how;
    // (want_logits false, as the embedding step sends them: forward_embed ignores it)
    const Step s1 = make_step({{a, 0, 0, false}, {b0, 0, 1, false}, {one, 0, 2, false}});
    if (!embed_both(gpu, cpu, s1, w, g, c, tag)) return;
    report(agree(g, c, w, mode.exact, false, how),
           tag + " forward_embed of 37 + 20 + 1 rows (three sequences from position 0): " + how);
    const Step s2 = make_step({{b1, 20, 1, false}, {d, 0, 3, false}});
    if (!embed_both(gpu, cpu, s2, w, g, c, tag)) return;
    report(agree(g, c, w, mode.exact, false, how),
           tag + " forward_embed continuing a sequence at position 20 (9 rows) beside a fresh " +
               "5-row one: " + how);
    // The K/V the embedding step appended: one forward() token after the 37 rows.
    const Step s3 = make_step({{random_tokens(1, V, 5), 37, 0}});
    g.assign(static_cast<size_t>(V), NAN);
    c.assign(g.size(), NAN);
    const Result<void> fg = gpu.forward(s3.batch(), g.data());
    const Result<void> fc = cpu.forward(s3.batch(), c.data());
    if (!fg || !fc) return report(false, tag + " forward: cuda " + msg(fg) + "; cpu " + msg(fc));
    report(
        agree(g, c, V, mode.exact, true, how),
        tag + " forward() at position 37 after the embedding step (its K/V rows): logits " + how);
    // Error path: the same message as the CPU tier's.
    const std::string eg = msg(gpu.forward_embed(s1.batch(), nullptr));
    const std::string ec = msg(cpu.forward_embed(s1.batch(), nullptr));
    report(eg == ec && eg == "embeddings: hidden-state buffer is null",
           tag + " forward_embed into a null buffer: cuda \"" + eg + "\", cpu \"" + ec + "\"");
}

// forward() with hidden_out on both runners: logits and hidden rows of each.
bool forward_hidden(zm::Runner& gpu, zm::Runner& cpu, const Step& st, int32_t V, int64_t w,
                    std::vector<float>& hg, std::vector<float>& hc, const std::string& tag) {
    std::vector<float> lg(st.logit_rows * static_cast<size_t>(V)), lc(lg.size());
    hg.assign(st.logit_rows * static_cast<size_t>(w), NAN);
    hc.assign(hg.size(), NAN);
    zm::Batch bg = st.batch(), bc = st.batch();
    bg.hidden_out = hg.data();
    bc.hidden_out = hc.data();
    const Result<void> rg = gpu.forward(bg, lg.data());
    const Result<void> rc = cpu.forward(bc, lc.data());
    if (!rg || !rc) {
        report(false, tag + " forward with hidden_out: cuda " + msg(rg) + "; cpu " + msg(rc));
        return false;
    }
    return true;
}

void hidden_rows(const zm::Model& m, const Mode& mode, const std::string& tag) {
    auto rg = make_cuda(m, mode);
    auto rc = zm::Runner::create_cpu(m, options());
    if (!rg || !rc) return report(false, tag + " create: " + (rg ? rc : rg).error().message);
    zm::Runner& gpu = *rg.value();
    zm::Runner& cpu = *rc.value();
    const int32_t V = m.n_vocab();
    const int64_t w = cpu.hidden_width();
    if (w == 0) {
        const Step st = make_step({{random_tokens(3, V, 6), 0, 0}});
        std::vector<float> l(static_cast<size_t>(V)), h(static_cast<size_t>(m.config().n_embd));
        zm::Batch b = st.batch();
        b.hidden_out = h.data();
        const std::string e = msg(gpu.forward(b, l.data()));
        return report(gpu.hidden_width() == 0 && e.find("marks no hidden state") != e.npos,
                      tag +
                          fmt(" no hidden rows on the CPU tier: cuda hidden_width() %lld, "
                              "hidden_out refused: \"",
                              static_cast<long long>(gpu.hidden_width())) +
                          e + "\"");
    }
    if (gpu.hidden_width() != w)
        return report(false, tag + fmt(" hidden_width(): cuda %lld, cpu %lld",
                                       static_cast<long long>(gpu.hidden_width()),
                                       static_cast<long long>(w)));
    std::vector<float> hg, hc;
    std::string how;
    const std::vector<int32_t> a = random_tokens(23, V, 7), b = random_tokens(4, V, 8);
    const std::vector<int32_t> c = random_tokens(18, V, 9);
    const Step s1 = make_step({{a, 0, 0}, {b, 0, 1, true, true}, {c, 0, 2, false}});
    if (!forward_hidden(gpu, cpu, s1, V, w, hg, hc, tag)) return;
    report(agree(hg, hc, w, mode.exact, false, how),
           tag +
               " hidden_out of a prefill's last row, 4 all_logits rows and a chunk without "
               "logits (5 rows in logits order): " +
               how);
    for (int t = 0; t < 2; ++t) {  // decode rows: the graph is captured, then replayed
        const Step sd = make_step({{random_tokens(1, V, 10 + t), 23 + t, 0},
                                   {random_tokens(1, V, 20 + t), 4 + t, 1},
                                   {random_tokens(1, V, 30 + t), 18 + t, 2}});
        if (!forward_hidden(gpu, cpu, sd, V, w, hg, hc, tag)) return;
        report(agree(hg, hc, w, mode.exact, false, how),
               tag +
                   fmt(" hidden_out of a 3-row decode step (%s): ",
                       t == 0 ? "graph captured" : "graph replayed") +
                   how);
    }
}

}  // namespace

int main(int argc, char** argv) {
    ModelTestMain t;
    t.program = "cuda_test_embed";
    t.model_hint = "causal models: see the header";
    t.probe = make_cuda;
    t.cases = [](const LoadedModel& L, const Mode& mode, const std::string& tag) {
        embeddings(*L.model, mode, tag);
        hidden_rows(*L.model, mode, tag);
    };
    return model_test_main(argc, argv, t);
}
