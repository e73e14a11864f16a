// zinc/tests/cuda/test_agreement.cpp — the CUDA tier's default (fast) path against the CPU tier,
// statistically (issue 14, docs/cuda.md "Fast path agreement").
//
//   cuda_test_agreement [--positions N] [--decode D] [--batch S] [--batch-steps T]
//                       [--min-top1 F] [--max-kl F] [--exact] MODEL.gguf ...
//
// The fast kernels do not compute the CPU tier's bits (other summation orders, tensor-core
// GEMMs), so they are held to agreement rather than equality, teacher-forced on one token stream
// (both tiers always see the same tokens, so one early difference cannot snowball):
//   prefill  N positions (default 2048) evaluated in chunks of 256 rows with every row's logits:
//            the multi-row GEMM path;
//   decode   D positions (default 256) after a 64-token prompt, one token per step: the
//            matrix-vector path and the replayed CUDA graph;
//   batched  S sequences (default 32, above the matrix-vector row limit) decoded together for T
//            steps (default 8), each against the CPU tier run alone: the batched-decode path.
// Per position: top-1 agreement (argmax equal) and KL(p_cpu || p_cuda) of the softmaxed logits
// in double. A disagreement whose CPU top-2 gap is under 1e-2 logits (relative to the logit
// scale) is reported as a near-tie. Pass: top-1 >= --min-top1 (0.99) and mean KL <= --max-kl
// (1e-3) over all positions of every path, and no NaN. The batched path also reports how far its
// rows are from the same sequences decoded alone on CUDA (batch invariance, informational).
// Without a usable device it prints the reason and exits 77 (ctest: skipped).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "gguf/gguf.h"
#include "gpu_model.h"
#include "gpu_test.h"
#include "model/batch.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

using namespace zinc;
namespace cu = zinc::cuda;
using namespace zinc::gpu_test;

namespace {

int g_fail = 0;
void report(bool ok, const std::string& what) {
    std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    if (!ok) ++g_fail;
}

struct Settings {
    int positions = 2048, decode = 256, batch = 32, batch_steps = 8;
    double min_top1 = 0.99, max_kl = 1e-3;
};

// A varied English/code text, repeated with a counter until it covers the positions asked for.
const char* kCorpus =
    "The history of the printing press begins long before Gutenberg. Block printing was used in "
    "China by the ninth century, and movable type made of fired clay appeared there around 1040. "
    "def merge_sort(xs):\n    if len(xs) <= 1:\n        return xs\n    mid = len(xs) // 2\n"
    "    return merge(merge_sort(xs[:mid]), merge_sort(xs[mid:]))\n"
    "In Europe, the combination of a screw press, oil-based ink and a hand mould for casting "
    "metal type made printing fast enough to change how knowledge travelled. Within fifty years, "
    "presses in more than two hundred cities had produced millions of books. 1, 1, 2, 3, 5, 8, "
    "13, 21, 34, 55. SELECT name, count(*) FROM orders GROUP BY name HAVING count(*) > 3; "
    "Rain fell on the harbour all night, and by morning the fishing boats rocked gently against "
    "the stone quay while the gulls argued over the remains of yesterday's catch. ";

std::vector<int32_t> token_stream(const tokenizer::Tokenizer& tok, int n, int32_t n_vocab) {
    std::vector<int32_t> t = tok.encode(kCorpus, true, false);
    for (int rep = 1; static_cast<int>(t.size()) < n; ++rep) {
        std::vector<int32_t> more =
            tok.encode(std::string("Part ") + std::to_string(rep) + ". " + kCorpus, false, false);
        t.insert(t.end(), more.begin(), more.end());
    }
    t.resize(n);
    for (int32_t& id : t) id = std::min(id, n_vocab - 1);
    return t;
}

// Running agreement statistics of one path.
struct Agree {
    long n = 0, top1 = 0, near_ties = 0, nan = 0;
    double kl_sum = 0, kl_max = 0;
    void add(const float* ref, const float* got, int V) {
        ++n;
        double mr = -INFINITY, mg = -INFINITY;
        int ar = 0, ag = 0;
        bool bad = false;
        for (int i = 0; i < V; ++i) {
            if (!std::isfinite(got[i]) && !std::isinf(ref[i])) bad = true;
            if (ref[i] > mr) mr = ref[i], ar = i;
            if (got[i] > mg) mg = got[i], ag = i;
        }
        if (bad) {
            ++nan;
            kl_sum += INFINITY;
            return;
        }
        double zr = 0, zg = 0;
        for (int i = 0; i < V; ++i) {
            zr += std::exp(static_cast<double>(ref[i]) - mr);
            zg += std::exp(static_cast<double>(got[i]) - mg);
        }
        const double lzr = std::log(zr) + mr, lzg = std::log(zg) + mg;
        double kl = 0;
        for (int i = 0; i < V; ++i) {
            const double lp = ref[i] - lzr, lq = got[i] - lzg;
            kl += std::exp(lp) * (lp - lq);
        }
        kl = std::max(kl, 0.0);
        kl_sum += kl;
        kl_max = std::max(kl_max, kl);
        if (ar == ag) {
            ++top1;
        } else {
            // CPU's gap between its top-1 and the CUDA pick: a near-tie when tiny.
            const double gap = static_cast<double>(ref[ar]) - ref[ag];
            if (gap < 1e-2 * std::max(1.0, std::fabs(mr))) ++near_ties;
        }
    }
    double top1_rate() const { return n ? static_cast<double>(top1) / n : 0; }
    double kl_mean() const { return n ? kl_sum / n : 0; }
    std::string line() const {
        return fmt(
            "%ld positions, top-1 %.4f (%ld differ, %ld near-ties), mean KL %.3g, max KL "
            "%.3g%s",
            n, top1_rate(), n - top1, near_ties, kl_mean(), kl_max,
            nan ? fmt(", %ld rows with NaN/Inf", nan).c_str() : "");
    }
};

using Loaded = LoadedModel;
bool load(const std::string& path, Loaded& L) {
    const std::string err = load_model(path, L);
    if (!err.empty()) report(false, err);
    return err.empty();
}

int argmax(const float* l, int n) {
    return static_cast<int>(std::max_element(l, l + n) - l);
}

// Prefill (chunks of 256 rows, all logits) and teacher-forced single-token decode.
void single_sequence(const Loaded& L, const Settings& s, Agree& prefill, Agree& decode) {
    const int V = L.model->n_vocab();
    const int chunk = 256;
    const int n_ctx = std::max(s.positions, 64 + s.decode) + chunk;
    const std::vector<int32_t> toks = token_stream(*L.tok, std::max(s.positions, 64 + s.decode), V);
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = n_ctx;
    ro.n_blocks = (n_ctx + 15) / 16;
    ro.max_batch_tokens = chunk;
    ro.max_seqs = 4;
    auto rr = cu::create_runner(*L.model, ro, {});
    if (!rr) return report(false, "cuda runner: " + rr.error().message);
    auto gr = cu::make_runner_context(std::move(rr.value()), n_ctx, V);
    if (!gr) return report(false, gr.error().message);
    auto cr = model::Context::create(*L.model, {n_ctx, 0, chunk});
    if (!cr) return report(false, cr.error().message);
    model::Context& gpu = *gr.value();
    model::Context& cpu = *cr.value();
    for (int p0 = 0; p0 < s.positions; p0 += chunk) {
        const int n = std::min(chunk, s.positions - p0);
        std::span<const int32_t> c(toks.data() + p0, n);
        if (!cpu.eval(c, true).ok() || !gpu.eval(c, true).ok())
            return report(false, "prefill eval failed");
        for (int i = 0; i < n; ++i) prefill.add(cpu.logits(i), gpu.logits(i), V);
    }
    cpu.reset();
    gpu.reset();
    std::span<const int32_t> prompt(toks.data(), 64);
    if (!cpu.eval(prompt).ok() || !gpu.eval(prompt).ok()) return report(false, "prompt eval");
    for (int t = 0; t < s.decode; ++t) {
        decode.add(cpu.logits(-1), gpu.logits(-1), V);
        const int32_t one[1] = {toks[64 + t]};
        if (!cpu.eval(one).ok() || !gpu.eval(one).ok()) return report(false, "decode eval");
    }
}

// S sequences decoded together on CUDA (teacher-forced by the CPU tier's argmax), each against
// the CPU tier alone; and against the same sequence decoded alone on CUDA (batch invariance).
void batched(const Loaded& L, const Settings& s, Agree& agree, Agree& invariance) {
    const int V = L.model->n_vocab();
    const int S = s.batch, n_ctx = 256;
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = n_ctx;
    ro.n_blocks = S * (n_ctx / 16);
    ro.max_batch_tokens = 256;
    ro.max_seqs = S;
    auto rr = cu::create_runner(*L.model, ro, {});
    if (!rr) return report(false, "cuda runner: " + rr.error().message);
    model::Runner& r = *rr.value();
    std::vector<std::vector<int32_t>> bt(S);
    std::vector<int> perm(ro.n_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(5);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int q = 0; q < S; ++q)
        for (int b = 0; b < n_ctx / 16; ++b) bt[q].push_back(perm[q * (n_ctx / 16) + b]);
    const std::vector<int32_t> base = token_stream(*L.tok, 64 + S * 3, V);
    std::vector<std::unique_ptr<model::Context>> cpus;
    std::vector<std::vector<int32_t>> hist(S);  // every token fed to sequence q
    std::vector<float> logits(static_cast<size_t>(S) * V);
    std::vector<int32_t> next(S);
    for (int q = 0; q < S; ++q) {
        hist[q].assign(base.begin() + 3 * q, base.begin() + 3 * q + 24 + q % 7);
        auto c = model::Context::create(*L.model, {n_ctx, 0, n_ctx});
        if (!c) return report(false, c.error().message);
        cpus.push_back(std::move(c.value()));
        if (!cpus[q]->eval(hist[q]).ok()) return report(false, "cpu prompt eval");
        model::BatchSeq b;
        b.n_tokens = static_cast<int>(hist[q].size());
        b.block_table = bt[q];
        b.state_slot = q;  // hybrid models: sequence q's recurrent state (ignored by others)
        model::Batch batch{hist[q], std::span<const model::BatchSeq>(&b, 1)};
        if (!r.forward(batch, logits.data()).ok()) return report(false, "cuda prefill");
        next[q] = argmax(cpus[q]->logits(-1), V);
    }
    std::vector<std::vector<float>> batched_rows;  // (steps * S) rows, for the invariance check
    for (int t = 0; t < s.batch_steps; ++t) {
        std::vector<model::BatchSeq> seqs(S);
        for (int q = 0; q < S; ++q) {
            seqs[q].row0 = q;
            seqs[q].n_tokens = 1;
            seqs[q].pos0 = static_cast<int>(hist[q].size());
            seqs[q].block_table = bt[q];
            seqs[q].state_slot = q;
        }
        model::Batch b{next, seqs};
        std::fill(logits.begin(), logits.end(), NAN);
        if (!r.forward(b, logits.data()).ok()) return report(false, "cuda batched decode");
        for (int q = 0; q < S; ++q) {
            hist[q].push_back(next[q]);
            const int32_t one[1] = {next[q]};
            if (!cpus[q]->eval(one).ok()) return report(false, "cpu eval");
            const float* lg = logits.data() + static_cast<size_t>(q) * V;
            agree.add(cpus[q]->logits(-1), lg, V);
            batched_rows.emplace_back(lg, lg + V);
            next[q] = argmax(cpus[q]->logits(-1), V);
        }
    }
    // Batch invariance: sequence q alone (one row per step, on freshly written blocks of its own).
    for (int q = 0; q < S; ++q) {
        const int n_prompt = static_cast<int>(hist[q].size()) - s.batch_steps;
        model::BatchSeq b;
        b.n_tokens = n_prompt;
        b.block_table = bt[q];
        b.state_slot = q;
        model::Batch pb{std::span<const int32_t>(hist[q].data(), n_prompt),
                        std::span<const model::BatchSeq>(&b, 1)};
        if (!r.forward(pb, logits.data()).ok()) return report(false, "cuda prefill (alone)");
        for (int t = 0; t < s.batch_steps; ++t) {
            model::BatchSeq one;
            one.n_tokens = 1;
            one.pos0 = n_prompt + t;
            one.block_table = bt[q];
            one.state_slot = q;
            model::Batch ob{std::span<const int32_t>(hist[q].data() + n_prompt + t, 1),
                            std::span<const model::BatchSeq>(&one, 1)};
            if (!r.forward(ob, logits.data()).ok()) return report(false, "cuda decode (alone)");
            invariance.add(logits.data(), batched_rows[static_cast<size_t>(t) * S + q].data(), V);
        }
    }
}

bool judge(const char* what, const std::string& model, const Agree& a, const Settings& s) {
    const bool ok = a.n > 0 && a.nan == 0 && a.top1_rate() >= s.min_top1 && a.kl_mean() <= s.max_kl;
    report(ok, fmt("agreement %s %s: ", model.c_str(), what) + a.line());
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP cuda_test_agreement: %s\n", p.reason.c_str());
        return 77;
    }
    Settings s;
    std::vector<std::string> models;
    bool exact = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto num = [&](double& v) {
            if (i + 1 >= argc) {
                std::printf("FAIL %s needs a value\n", a.c_str());
                std::exit(2);
            }
            v = std::atof(argv[++i]);
        };
        double v = 0;
        if (a == "--ctest") continue;
        if (a == "--exact")
            exact = true;
        else if (a == "--positions")
            num(v), s.positions = static_cast<int>(v);
        else if (a == "--decode")
            num(v), s.decode = static_cast<int>(v);
        else if (a == "--batch")
            num(v), s.batch = static_cast<int>(v);
        else if (a == "--batch-steps")
            num(v), s.batch_steps = static_cast<int>(v);
        else if (a == "--min-top1")
            num(s.min_top1);
        else if (a == "--max-kl")
            num(s.max_kl);
        else
            models.push_back(a);
    }
    if (models.empty()) {
        const std::string def = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
        if (FILE* f = std::fopen(def.c_str(), "rb")) {
            std::fclose(f);
            models.push_back(def);
        } else {
            std::printf("SKIP cuda_test_agreement: no model given and %s is missing\n",
                        def.c_str());
            return 77;
        }
    }
    // The path under test: the default (fast) kernels unless --exact.
    setenv("ZINC_EXACT", exact ? "1" : "0", 1);
    std::printf("ZINC_EXACT=%d, thresholds: top-1 >= %.4f, mean KL <= %.3g\n", exact ? 1 : 0,
                s.min_top1, s.max_kl);
    for (const std::string& m : models) {
        Loaded L;
        if (!load(m, L)) continue;
        const std::string name = base_name(m);
        Agree prefill, decode, batch, inv;
        single_sequence(L, s, prefill, decode);
        if (s.batch > 0 && s.batch_steps > 0) batched(L, s, batch, inv);
        Agree all;
        for (const Agree* a : {&prefill, &decode, &batch}) {
            all.n += a->n, all.top1 += a->top1, all.near_ties += a->near_ties, all.nan += a->nan;
            all.kl_sum += a->kl_sum, all.kl_max = std::max(all.kl_max, a->kl_max);
        }
        std::printf("     %s prefill: %s\n", name.c_str(), prefill.line().c_str());
        std::printf("     %s decode:  %s\n", name.c_str(), decode.line().c_str());
        if (batch.n)
            std::printf("     %s batch%d: %s\n", name.c_str(), s.batch, batch.line().c_str());
        if (inv.n)
            std::printf("     %s batch invariance (batched vs alone, CUDA): %s\n", name.c_str(),
                        inv.line().c_str());
        judge("all paths", name, all, s);
    }
    std::printf("%s: %d failure%s\n", g_fail ? "FAIL" : "PASS", g_fail, g_fail == 1 ? "" : "s");
    return g_fail ? 1 : 0;
}
