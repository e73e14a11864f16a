// tests/tools/tp_check.cpp — the tensor-parallel CPU runner (backend/cpu/tp_runner.h) against
// the plain CPU runner on one model, for tests/py/test_tensor_parallel.py.
//
//   tp_check --model FILE --tp N [--fault none|drop|shift] [--threads T] [--steps S] [--embed]
//
// Two sequences (prompts of 21 and 13 pseudo-random token ids, every row's logits kept) run as
// one prefill batch, then S decode steps of both (greedy on the plain runner's logits), on both
// runners. Output (one JSON line): {"tp": N, "rows": R, "bitwise": b, "max_abs": a,
// "max_rel": r, "golden_excess": e} with max_rel the largest |difference| / max |logit| of its
// row and e the largest |difference| - (1.0 + 0.06 |logit|) (<= 0: within the golden bar) over
// the whole vocabulary, "top20_excess" the same at each row's 20 best reference ids (the golden
// tests' comparison, docs/architecture.md); or
// {"tp": N, "error": "..."} when sharding is refused (exit status 0: the error is the result).
// --embed: Runner::forward_embed instead (the /v1/embeddings path): the two prompts as one batch,
// then S chunks of 3 more ids per sequence (pos0 > 0), every row's hidden state (Program::embd,
// n_embd wide) compared; the golden bars do not apply to hidden states and are not printed.
// --fault (test-only, N >= 2): drop zeroes the input-column slices of the last rank (its
// attention-output and FFN-down partial sums vanish); shift re-copies rank 1's slice of
// blk.0.ffn_down.weight one quant block to the left. Both must be caught by the comparison.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/tp_runner.h"
#include "gguf/gguf.h"
#include "model/arch_model.h"
#include "model/batch.h"
#include "model/model.h"
#include "model/shard.h"
#include "quant/types.h"

namespace zm = zinc::model;

namespace {

int fail(const std::string& msg) {
    std::fprintf(stderr, "tp_check: %s\n", msg.c_str());
    return 2;
}

std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o + "\"";
}

void apply_fault(const std::string& fault, const zm::ArchModel& am, zm::ShardSet& set) {
    const int n = set.n_shards;
    std::set<const uint8_t*> copies;
    for (const auto& c : set.copies) copies.insert(c.get());
    if (fault == "drop") {
        const std::string tag = "[tp" + std::to_string(n - 1) + "/" + std::to_string(n) + "]";
        for (zm::Weight& v : set.views) {
            if (!copies.count(v.data) || v.name.find(tag) == std::string::npos) continue;
            std::memset(const_cast<uint8_t*>(v.data), 0, v.bytes());
        }
        return;
    }
    // shift: rank 1's columns of blk.0.ffn_down.weight taken one block to the left.
    const std::string name = "blk.0.ffn_down.weight";
    const zm::Weight* src = nullptr;
    for (const zm::Weight* w : am.program().weights())
        if (w->name == name) src = w;
    for (zm::Weight& v : set.views) {
        if (v.name != name + "[tp1/" + std::to_string(n) + "]" || !src) continue;
        const auto& tt = zinc::quant::type_traits(v.type);
        const size_t off = static_cast<size_t>(v.ne[0] / tt.block_size) * tt.type_size;  // rank 1
        for (int64_t r = 0; r < v.n_rows; ++r)
            std::memcpy(const_cast<uint8_t*>(v.data) + r * v.row_bytes,
                        src->data + r * src->row_bytes + off - tt.type_size, v.row_bytes);
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string path, fault = "none";
    int n_tp = 1, threads = 2, steps = 4;
    bool embed = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--model")
            path = next();
        else if (a == "--tp")
            n_tp = std::atoi(next().c_str());
        else if (a == "--fault")
            fault = next();
        else if (a == "--threads")
            threads = std::atoi(next().c_str());
        else if (a == "--steps")
            steps = std::atoi(next().c_str());
        else if (a == "--embed")
            embed = true;
        else
            return fail("unknown argument " + a);
    }
    if (fault != "none" && fault != "drop" && fault != "shift") return fail("bad --fault " + fault);
    auto f = zinc::gguf::File::open(path);
    if (!f) return fail(f.error().message);
    auto m = zm::Model::load(*f.value(), {});
    if (!m) return fail(m.error().message);
    const auto& am = dynamic_cast<const zm::ArchModel&>(*m.value());
    const int32_t n_vocab = am.config().n_vocab;
    // Width of a compared row: logits, or the embeddings' hidden state.
    const int64_t width = embed ? am.program().width(am.program().embd) : n_vocab;
    if (embed && am.program().embd == zm::kNoTensor) return fail("the model marks no embeddings");

    zm::RunnerOptions ro;
    ro.block_size = 16;
    ro.n_blocks = 8;
    ro.max_batch_tokens = 64;
    ro.max_seqs = 2;
    ro.max_seq_len = 64;
    ro.n_threads = threads;
    auto ref = zm::Runner::create_cpu(am, ro);
    if (!ref) return fail(ref.error().message);
    auto set = zm::shard_program(am.program(), am.config(), n_tp);
    if (!set) {
        std::printf("{\"tp\": %d, \"error\": %s}\n", n_tp, json_str(set.error().message).c_str());
        return 0;
    }
    if (fault != "none") {
        if (n_tp < 2) return fail("--fault needs --tp >= 2");
        apply_fault(fault, am, *set.value());
    }
    auto tp = zinc::cpu::create_tensor_parallel_runner(am, ro, std::move(set.value()));
    if (!tp) return fail(tp.error().message);

    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> d(1, n_vocab - 1);
    std::vector<std::vector<int32_t>> prompt(2);
    prompt[0].resize(21);
    prompt[1].resize(13);
    for (auto& p : prompt)
        for (int32_t& t : p) t = d(rng);
    const std::vector<std::vector<int32_t>> tables = {{0, 1, 2, 3}, {4, 5, 6, 7}};

    double max_abs = 0, max_rel = 0, max_excess = -1e30, top_excess = -1e30;
    bool bitwise = true;
    int rows = 0;
    std::vector<int32_t> pos = {0, 0}, last(2);
    for (int step = 0; step <= steps; ++step) {
        std::vector<int32_t> toks;
        std::vector<zm::BatchSeq> seqs;
        for (int s = 0; s < 2; ++s) {
            zm::BatchSeq bs;
            bs.row0 = static_cast<int32_t>(toks.size());
            bs.pos0 = pos[s];
            bs.block_table = tables[s];
            if (step == 0) {
                toks.insert(toks.end(), prompt[s].begin(), prompt[s].end());
                bs.all_logits = true;
            } else if (embed) {  // a causal input's next chunk
                for (int k = 0; k < 3; ++k) toks.push_back(d(rng));
            } else {
                toks.push_back(last[s]);
            }
            bs.n_tokens = static_cast<int32_t>(toks.size()) - bs.row0;
            seqs.push_back(bs);
        }
        const size_t n_rows = toks.size();
        std::vector<float> a(n_rows * width), b(n_rows * width);
        zm::Batch batch{toks, seqs};
        auto ra = embed ? ref.value()->forward_embed(batch, a.data())
                        : ref.value()->forward(batch, a.data());
        if (!ra) return fail(ra.error().message);
        auto rb = embed ? tp.value()->forward_embed(batch, b.data())
                        : tp.value()->forward(batch, b.data());
        if (!rb) return fail(rb.error().message);
        for (size_t r = 0; r < n_rows; ++r) {
            double row_max = 0, row_diff = 0;
            for (int64_t v = 0; v < width; ++v) {
                const float x = a[r * width + v], y = b[r * width + v];
                if (std::memcmp(&x, &y, sizeof x) != 0) bitwise = false;
                row_max = std::max(row_max, std::fabs(static_cast<double>(x)));
                const double d = std::fabs(static_cast<double>(x) - y);
                row_diff = std::max(row_diff, d);
                // The golden tests' bar (docs/architecture.md): |d| <= 1.0 + 0.06 |logit|.
                max_excess = std::max(max_excess, d - (1.0 + 0.06 * std::fabs(x)));
            }
            max_abs = std::max(max_abs, row_diff);
            max_rel = std::max(max_rel, row_diff / std::max(row_max, 1e-30));
            ++rows;
            if (embed) continue;
            // The golden tests' comparison proper: at the reference's 20 best ids of the row.
            std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
            for (int32_t v = 0; v < n_vocab; ++v) ids[static_cast<size_t>(v)] = v;
            const float* ar = a.data() + r * n_vocab;
            const float* br = b.data() + r * n_vocab;
            std::partial_sort(ids.begin(), ids.begin() + std::min(20, n_vocab), ids.end(),
                              [&](int32_t x, int32_t y) { return ar[x] > ar[y]; });
            for (int k = 0; k < std::min(20, n_vocab); ++k) {
                const int32_t v = ids[static_cast<size_t>(k)];
                top_excess = std::max(top_excess, std::fabs(static_cast<double>(ar[v]) - br[v]) -
                                                      (1.0 + 0.06 * std::fabs(ar[v])));
            }
        }
        size_t row = 0;
        for (int s = 0; s < 2; ++s) {
            pos[s] += seqs[s].n_tokens;
            row += static_cast<size_t>(seqs[s].n_tokens);
            if (embed) continue;
            const float* lr = a.data() + (row - 1) * n_vocab;
            last[s] = static_cast<int32_t>(std::max_element(lr, lr + n_vocab) - lr);
        }
    }
    if (embed) {
        std::printf(
            "{\"tp\": %d, \"rows\": %d, \"bitwise\": %s, \"max_abs\": %.9g, "
            "\"max_rel\": %.9g}\n",
            n_tp, rows, bitwise ? "true" : "false", max_abs, max_rel);
        return 0;
    }
    std::printf(
        "{\"tp\": %d, \"rows\": %d, \"bitwise\": %s, \"max_abs\": %.9g, \"max_rel\": %.9g, "
        "\"golden_excess\": %.9g, \"top20_excess\": %.9g}\n",
        n_tp, rows, bitwise ? "true" : "false", max_abs, max_rel, max_excess, top_excess);
    return 0;
}
