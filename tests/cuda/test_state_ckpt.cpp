// zinc/tests/cuda/test_state_ckpt.cpp — the CUDA runner's recurrent state checkpoints
// (RunnerOptions::n_state_checkpoints, BatchSeq::keep_states, Runner::rewind_state; docs/cuda.md
// "State checkpoints", docs/speculative.md "Recurrent state") on a hybrid model, on a GPU.
//
//   cuda_test_state_ckpt [--ctest] MODEL.gguf ...
//
// MODEL: a qwen35 / qwen35moe file, e.g. the synthetic ones (from the build directory):
//   ./zinc synth --preset qwen35-tiny --type q8_0 --seed 1 -o /tmp/qwen35-tiny.gguf
//   ./zinc synth --preset qwen35moe-tiny --type q8_0 --seed 1 -o /tmp/qwen35moe-tiny.gguf
//   ./cuda_test_state_ckpt /tmp/qwen35-tiny.gguf /tmp/qwen35moe-tiny.gguf
// (scripts/gpu-round makes the same files with `synth qwen35-tiny q8_0`.)
//
// For each model and each kernel mode the runner accepts (fast, ZINC_EXACT=0: tolerance; exact,
// ZINC_EXACT=1: bitwise, reported as SKIP with the runner's reason where it refuses the model,
// as it refuses the delta rule today), with 4 checkpoint rows per slot:
//  * rewind k = 1..4: a 23-token prefill, a 4-token draft chunk with keep_states (all logits),
//    rewind_state(slot, 23 + k), one more token; its logits against a run that never went past
//    position 23 + k (prefill, the draft's first k tokens, the same token). Fast mode: argmax
//    equal and max |d| <= 1e-3 (the batch16 tolerance of cuda_test_parity); exact mode: bit for
//    bit. Rows of steps of other row counts take other kernels in fast mode: kAcrossShapes. The
//    draft rows' own logits are also compared with the reference chunk's (the checkpoints change no
//    output).
//  * two sequences in one step, on slots 2 and 1, only the first with keep_states: the first is
//    rewound, the second (a plain prefill) continues; both against runs of each alone.
//  * decode rows with keep_states (one row: the captured graph path, which also runs without
//    keep beside it): a no-op rewind to where the state is, then a rewind after a step without
//    keep refused ("no checkpoints").
//  * the Context over the CUDA runner (cuda::make_runner_context, `zinc run --spec`'s path):
//    eval(draft, all_logits) then truncate(23 + 2), one more token, against the plain Context.
//  * error paths, each message compared whole: n_state_checkpoints -1 and 1025 at creation;
//    keep_states for 5 rows; rewind_state on slot 4 of 4; rewinds to the chunk's pos0, past its
//    end, and past an earlier rewind; a step continuing where the state is not; a runner with
//    no checkpoints (state_checkpoints() 0, keep_states refused, rewind refused). And
//    state_bytes() with 4 checkpoints is 5 times that without.
// Output: PASS / FAIL / SKIP lines, then a summary line. Exit 0 when every case passes, 1
// otherwise, 77 without a usable device or (--ctest) without a model argument.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

constexpr int kCkpt = 4, kPrefix = 23, kBlock = 16, kBlocksPerSeq = 4, kSlots = 4;

zm::RunnerOptions options(int n_ckpt) {
    zm::RunnerOptions o;
    o.n_blocks = kSlots * kBlocksPerSeq;
    o.block_size = kBlock;
    o.max_batch_tokens = 64;
    o.max_seqs = kSlots;
    o.max_seq_len = kBlock * kBlocksPerSeq;
    o.n_state_slots = kSlots;
    o.n_state_checkpoints = n_ckpt;
    return o;
}

Result<std::unique_ptr<zm::Runner>> make(const zm::Model& m, const Mode& mode, int n_ckpt) {
    cu::CudaOptions co;
    co.exact = mode.exact ? 1 : 0;
    return cu::create_runner(m, options(n_ckpt), co);
}

std::string msg(const Result<void>& r) {
    return r.ok() ? "ok" : r.error().message;
}

// One sequence's slice: tokens at pos0 on a state slot, with its own blocks.
struct Seq {
    std::vector<int32_t> tokens;
    int32_t pos0 = 0, slot = 0;
    bool keep = false, all = false;
};
std::vector<int32_t> blocks_of(int32_t slot) {
    std::vector<int32_t> b;
    for (int i = 0; i < kBlocksPerSeq; ++i) b.push_back(slot * kBlocksPerSeq + i);
    return b;
}
// One step of the given sequences; the logits rows forward() writes (n_vocab each).
Result<void> step(zm::Runner& r, const std::vector<Seq>& ss, int32_t n_vocab,
                  std::vector<float>& logits) {
    std::vector<int32_t> toks;
    std::vector<std::vector<int32_t>> bts;
    std::vector<zm::BatchSeq> bs;
    size_t rows_out = 0;
    for (const Seq& s : ss) bts.push_back(blocks_of(s.slot));
    for (size_t i = 0; i < ss.size(); ++i) {
        zm::BatchSeq q;
        q.row0 = static_cast<int32_t>(toks.size());
        q.n_tokens = static_cast<int32_t>(ss[i].tokens.size());
        q.pos0 = ss[i].pos0;
        q.block_table = bts[i];
        q.state_slot = ss[i].slot;
        q.keep_states = ss[i].keep;
        q.all_logits = ss[i].all;
        toks.insert(toks.end(), ss[i].tokens.begin(), ss[i].tokens.end());
        rows_out += ss[i].all ? ss[i].tokens.size() : 1;
        bs.push_back(q);
    }
    logits.assign(rows_out * static_cast<size_t>(n_vocab), NAN);
    return r.forward({toks, bs}, logits.data());
}

int argmax(const float* l, int n) {
    return static_cast<int>(std::max_element(l, l + n) - l);
}

// Whether a (rows of n_vocab) is within the mode's tolerance of b: exact mode bit for bit, fast
// mode argmax equal per row and max |d| <= 1e-3 (NaN never passes). `how` gets the numbers.
// Rows computed by steps of different row counts (a 4-row draft chunk against a k-row one, two
// sequences in one step against each alone) take other matrix-vector kernels in fast mode (dmmv
// v3 for 1-2 activation rows, v2 from 3: sums in another order): there max |d| <= kAcrossShapes
// with every argmax equal (H200 run 8: up to 0.10 on these models' logits, argmax always equal).
constexpr double kAcrossShapes = 0.25;

bool close(const std::vector<float>& a, const std::vector<float>& b, int n_vocab, bool exact,
           std::string& how, double tol = 1e-3) {
    if (a.size() != b.size() || a.empty()) {
        how = "sizes " + std::to_string(a.size()) + " / " + std::to_string(b.size());
        return false;
    }
    double worst = 0;
    int n_argmax = 0;
    for (size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, std::isfinite(a[i]) ? std::fabs(double{a[i]} - b[i]) : INFINITY);
    for (size_t r = 0; r * n_vocab < a.size(); ++r)
        n_argmax +=
            argmax(a.data() + r * n_vocab, n_vocab) != argmax(b.data() + r * n_vocab, n_vocab);
    const bool bitwise = worst == 0;
    how = fmt("max |d| %.2e, %d argmax differences%s", worst, n_argmax,
              bitwise ? ", bitwise equal" : "");
    return exact ? bitwise : (n_argmax == 0 && worst <= tol);
}

std::vector<int32_t> random_tokens(int n, int32_t n_vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
    return t;
}

struct Data {
    std::vector<int32_t> prefix, draft;
    int32_t next = 0;
};

// Rewinds into a 4-row draft at every k against the run that never went past 23 + k.
void rewind_each(const zm::Model& m, const Mode& mode, const Data& d, const std::string& tag) {
    const int32_t V = m.n_vocab();
    auto ra = make(m, mode, kCkpt), rb = make(m, mode, kCkpt);
    if (!ra || !rb) return report(false, tag + " create: " + (ra ? rb : ra).error().message);
    zm::Runner& a = *ra.value();
    zm::Runner& b = *rb.value();
    std::vector<float> la, lb, chunk_a;
    for (int k = 1; k <= kCkpt; ++k) {
        const int32_t at = kPrefix + k;
        const std::vector<int32_t> part(d.draft.begin(), d.draft.begin() + k);
        Result<void> r = step(a, {{d.prefix, 0, 0}}, V, la);
        if (r) r = step(a, {{d.draft, kPrefix, 0, true, true}}, V, chunk_a);
        if (r) r = a.rewind_state(0, at);
        if (r) r = step(a, {{{d.next}, at, 0}}, V, la);
        if (!r) return report(false, tag + fmt(" rewind to %d: ", at) + r.error().message);
        std::vector<float> chunk_b;
        r = step(b, {{d.prefix, 0, 0}}, V, lb);
        if (r) r = step(b, {{part, kPrefix, 0, false, true}}, V, chunk_b);
        if (r) r = step(b, {{{d.next}, at, 0}}, V, lb);
        if (!r) return report(false, tag + fmt(" reference to %d: ", at) + r.error().message);
        std::string how, how_rows;
        const bool ok = close(la, lb, V, mode.exact, how);
        const std::vector<float> rows_a(chunk_a.begin(), chunk_a.begin() + int64_t{k} * V);
        const bool ok_rows = close(rows_a, chunk_b, V, mode.exact, how_rows, kAcrossShapes);
        report(ok && ok_rows, tag + fmt(" keep 4 rows, rewind to %d (k=%d), continue: ", at, k) +
                                  how + "; the draft's first k rows: " + how_rows);
    }
}

// Two sequences in one step, only one keeping states; each against its own run alone.
void two_sequences(const zm::Model& m, const Mode& mode, const Data& d, const std::string& tag) {
    const int32_t V = m.n_vocab();
    auto rr = make(m, mode, kCkpt), rs = make(m, mode, kCkpt);
    if (!rr || !rs) return report(false, tag + " create: " + (rr ? rs : rr).error().message);
    zm::Runner& r = *rr.value();
    zm::Runner& solo = *rs.value();
    const std::vector<int32_t> other = random_tokens(9, V, 77);
    const int k = 2, at = kPrefix + k;
    std::vector<float> l, ref0, ref1;
    Result<void> e = step(r, {{d.prefix, 0, 2}}, V, l);
    if (e) e = step(r, {{d.draft, kPrefix, 2, true, true}, {other, 0, 1}}, V, l);
    if (e) e = r.rewind_state(2, at);
    if (e) e = step(r, {{{d.next}, at, 2}, {{d.next}, 9, 1}}, V, l);
    if (!e) return report(false, tag + " two sequences: " + e.error().message);
    const std::vector<int32_t> part(d.draft.begin(), d.draft.begin() + k);
    e = step(solo, {{d.prefix, 0, 0}}, V, ref0);
    if (e) e = step(solo, {{part, kPrefix, 0}}, V, ref0);
    if (e) e = step(solo, {{{d.next}, at, 0}}, V, ref0);
    if (e) e = step(solo, {{other, 0, 3}}, V, ref1);
    if (e) e = step(solo, {{{d.next}, 9, 3}}, V, ref1);
    if (!e) return report(false, tag + " two sequences, alone: " + e.error().message);
    ref0.insert(ref0.end(), ref1.begin(), ref1.end());
    std::string how;
    report(close(l, ref0, V, mode.exact, how, kAcrossShapes),
           tag +
               " two sequences in one step (slot 2 keeps and is rewound to 25, slot 1 does "
               "not keep): against each alone: " +
               how);
}

// Decode rows with keep_states (graph-captured steps with and without keep) and the rewind
// rules around them.
void decode_rows(const zm::Model& m, const Mode& mode, const Data& d, const std::string& tag) {
    const int32_t V = m.n_vocab();
    auto rr = make(m, mode, kCkpt), rs = make(m, mode, kCkpt);
    if (!rr || !rs) return report(false, tag + " create: " + (rr ? rs : rr).error().message);
    zm::Runner& r = *rr.value();
    zm::Runner& ref = *rs.value();
    std::vector<float> l, lr;
    bool ok = true;
    std::string why;
    Result<void> e = step(r, {{d.prefix, 0, 0}}, V, l);
    if (e) e = step(ref, {{d.prefix, 0, 0}}, V, lr);
    // 6 decode rows, alternately with and without keep; the reference never keeps
    for (int i = 0; e && i < 6; ++i) {
        const int32_t tok = d.draft[static_cast<size_t>(i % 4)], pos = kPrefix + i;
        e = step(r, {{{tok}, pos, 0, i % 2 == 0}}, V, l);
        if (e && i % 2 == 0) e = r.rewind_state(0, pos + 1);  // where it is: nothing to do
        if (e) e = step(ref, {{{tok}, pos, 0}}, V, lr);
        std::string how;
        if (e && !close(l, lr, V, mode.exact, how)) ok = false, why = fmt("row %d: ", i) + how;
    }
    if (!e) return report(false, tag + " decode rows with keep_states: " + e.error().message);
    report(ok, tag +
                   " 6 decode rows, keep_states on every other one (graphs with and without), "
                   "no-op rewinds: logits as without keep" +
                   (why.empty() ? "" : " (" + why + ")"));
    // the last step (position 28, state now at 29) kept nothing: a rewind to 28 is refused
    const std::string got = msg(r.rewind_state(0, kPrefix + 5));
    report(got == fmt("recurrent state of slot 0: position %d is not checkpointed (the state is "
                      "at %d, no checkpoints; a recurrent state cannot be rewound further)",
                      kPrefix + 5, kPrefix + 6),
           tag + " rewind after a step without keep_states: " + got);
}

// The Context over the CUDA runner: eval(draft, all_logits) + truncate, as `zinc run --spec`.
void context_truncate(const zm::Model& m, const Mode& mode, const Data& d, const std::string& tag) {
    const int32_t V = m.n_vocab();
    auto ra = make(m, mode, kCkpt), rb = make(m, mode, 0);
    if (!ra || !rb) return report(false, tag + " create: " + (ra ? rb : ra).error().message);
    const int n_ctx = kBlock * kBlocksPerSeq;
    auto ca = cu::make_runner_context(std::move(ra.value()), n_ctx, V);
    auto cb = cu::make_runner_context(std::move(rb.value()), n_ctx, V);
    if (!ca || !cb) return report(false, tag + " context: " + (ca ? cb : ca).error().message);
    zm::Context& a = *ca.value();
    zm::Context& b = *cb.value();
    const int k = 2;
    const std::vector<int32_t> part(d.draft.begin(), d.draft.begin() + k), next = {d.next};
    Result<void> e = a.eval(d.prefix);
    if (e) e = a.eval(d.draft, true);
    if (e) {
        a.truncate(kPrefix + k);
        e = a.eval(next);
    }
    if (e) e = b.eval(d.prefix);
    if (e) e = b.eval(part);
    if (e) e = b.eval(next);
    if (!e) return report(false, tag + " context: " + e.error().message);
    std::string how;
    report(close(std::vector<float>(a.logits(-1), a.logits(-1) + V),
                 std::vector<float>(b.logits(-1), b.logits(-1) + V), V, mode.exact, how),
           tag + " Context eval(4-token draft, all logits), truncate(25), eval: " + how);
}

void error_paths(const zm::Model& m, const Mode& mode, const Data& d, const std::string& tag) {
    const int32_t V = m.n_vocab();
    auto expect = [&](const std::string& got, const std::string& want, const std::string& what) {
        report(got == want,
               tag + " " + what + ": " + got + (got == want ? "" : " (want: " + want + ")"));
    };
    for (int bad : {-1, 1025}) {
        auto r = make(m, mode, bad);
        expect(
            r ? "ok" : r.error().message,
            "cuda runner: n_state_checkpoints " + std::to_string(bad) + " out of range [0, 1024]",
            fmt("create with n_state_checkpoints %d", bad));
    }
    auto r4 = make(m, mode, kCkpt), r0 = make(m, mode, 0);
    if (!r4 || !r0) return report(false, tag + " create: " + (r4 ? r0 : r4).error().message);
    zm::Runner& r = *r4.value();
    zm::Runner& none = *r0.value();
    report(r.state_checkpoints() == kCkpt && r.options().n_state_checkpoints == kCkpt &&
               none.state_checkpoints() == 0,
           tag + fmt(" state_checkpoints() %d (options %d), without: %d", r.state_checkpoints(),
                     r.options().n_state_checkpoints, none.state_checkpoints()));
    report(none.state_bytes() > 0 && r.state_bytes() == (1 + kCkpt) * none.state_bytes(),
           tag + fmt(" state_bytes() %zu with 4 checkpoints, %zu without (x5 expected)",
                     r.state_bytes(), none.state_bytes()));
    std::vector<float> l;
    std::vector<int32_t> five = d.draft;
    five.push_back(d.next);
    expect(msg(step(r, {{five, 0, 0, true, true}}, V, l)),
           "cuda forward: sequence 0: keep_states for 5 rows, the state pool keeps at most 4 "
           "(RunnerOptions::n_state_checkpoints)",
           "keep_states for 5 rows");
    expect(msg(r.rewind_state(4, 1)), "rewind_state: slot 4 out of range [0, 4)", "slot 4");
    Result<void> e = step(r, {{d.prefix, 0, 0}}, V, l);
    if (e) e = step(r, {{d.draft, kPrefix, 0, true, true}}, V, l);
    if (!e) return report(false, tag + " error paths' steps: " + e.error().message);
    const std::string cover =
        fmt("(the state is at %d, checkpoints cover (%d, %d]; a recurrent "
            "state cannot be rewound further)",
            kPrefix + 4, kPrefix, kPrefix + 4);
    expect(msg(r.rewind_state(0, kPrefix)),
           fmt("recurrent state of slot 0: position %d is not checkpointed ", kPrefix) + cover,
           "rewind to the chunk's pos0");
    expect(msg(r.rewind_state(0, kPrefix + 5)),
           fmt("recurrent state of slot 0: position %d is not checkpointed ", kPrefix + 5) + cover,
           "rewind past the chunk");
    expect(msg(step(r, {{{d.next}, kPrefix + 2, 0}}, V, l)),
           fmt("cuda forward: sequence 0: the recurrent state of slot 0 is at position %d, the "
               "batch starts at %d (a state goes back only by rewind_state into rows its last "
               "step kept; else restart at 0)",
               kPrefix + 4, kPrefix + 2),
           "continue without the rewind");
    expect(msg(r.rewind_state(0, kPrefix + 2)), "ok", "rewind to 25");
    expect(msg(r.rewind_state(0, kPrefix + 3)),
           fmt("recurrent state of slot 0: position %d is not checkpointed (the state is at %d, "
               "checkpoints cover (%d, %d]; a recurrent state cannot be rewound further)",
               kPrefix + 3, kPrefix + 2, kPrefix, kPrefix + 2),
           "rewind past an earlier rewind");
    expect(msg(step(none, {{d.draft, 0, 0, true, true}}, V, l)),
           "cuda forward: sequence 0: keep_states for 4 rows, the state pool keeps at most 0 "
           "(RunnerOptions::n_state_checkpoints)",
           "keep_states without checkpoints");
    e = step(none, {{d.prefix, 0, 1}}, V, l);
    expect(e ? msg(none.rewind_state(1, 3)) : e.error().message,
           fmt("recurrent state of slot 1: position 3 is not checkpointed (the state is at %d, "
               "no checkpoints; a recurrent state cannot be rewound further)",
               kPrefix),
           "rewind without checkpoints");
}

}  // namespace

int main(int argc, char** argv) {
    ModelTestMain t;
    t.program = "cuda_test_state_ckpt";
    t.model_hint = "a qwen35 file: see the header";
    t.suits = [](const LoadedModel& L, const std::string& file) -> std::string {
        return L.model->recurrent_state_bytes() == 0
                   ? file + ": not a hybrid model (no recurrent state)"
                   : "";
    };
    t.probe = [](const zm::Model& m, const Mode& mode) { return make(m, mode, kCkpt); };
    t.cases = [](const LoadedModel& L, const Mode& mode, const std::string& tag) {
        const int32_t V = L.model->n_vocab();
        Data d;  // (the same seeded tokens for every mode)
        d.prefix = random_tokens(kPrefix, V, 1);
        d.draft = random_tokens(kCkpt, V, 2);
        d.next = random_tokens(1, V, 3)[0];
        rewind_each(*L.model, mode, d, tag);
        two_sequences(*L.model, mode, d, tag);
        decode_rows(*L.model, mode, d, tag);
        context_truncate(*L.model, mode, d, tag);
        error_paths(*L.model, mode, d, tag);
    };
    return model_test_main(argc, argv, t);
}
