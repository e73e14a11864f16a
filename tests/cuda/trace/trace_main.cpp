// tests/cuda/trace/trace_main.cpp — drive the CUDA Runner's host code over the recording stubs
// (trace_stubs.cpp) through a fixed set of step batches and print the launch trace: every kernel
// launch with its arguments (device buffers by name), every copy and sync, and after each step
// the evidence tally, the captured intermediates and the fallbacks.
//
//   trace_runner MODEL.gguf         env: the Runner's own switches (ZINC_EXACT, ZINC_FUSED_*,
//                                   ZINC_CUDA_GRAPH, ...), ZINC_TRACE_CORRUPT=name:il,
//                                   ZINC_TRACE_CPU_OPS=glu, ZINC_TRACE_CUBLAS=0
//
// compare.py builds it twice, with two revisions of src/backend/cuda/runner*, and diffs the
// traces: a refactoring of the Runner must issue the same launches with the same arguments.
// Buffer names differ in nothing but spelling between the revisions it supports (the activation
// buffers are named by role: x, xf, q, k, v, attn, gate, up, proj, xo, logits).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/model.h"
#include "runtime/forward_hooks.h"
#include "trace.h"

// The harness names the Runner's private buffers.
#define private public
#include "backend/cuda/runner_impl.h"
#undef private

namespace zm = zinc::model;
namespace rt = zinc::runtime;
using zinc::cuda::runner_detail::CudaRunner;

namespace {

void name_buffers(CudaRunner& r) {
#ifdef ZINC_TRACE_OLD
    const std::pair<const void*, const char*> acts[] = {
        {r.x_, "x"},       {r.q_, "q"},       {r.k_, "k"},          {r.v_, "v"},
        {r.attn_, "attn"}, {r.gate_, "gate"}, {r.up_, "up"},        {r.h_, "proj"},
        {r.xo_, "xo"},     {r.xf_, "xf"},     {r.logits_, "logits"}};
    for (auto [p, n] : acts) trace::name(p, n);
#else
    for (size_t t = 0; t < r.bufs_.size(); ++t)
        if (r.bufs_[t]) trace::name(r.bufs_[t], r.prog_.tensors[t].role);
    trace::name(r.xf_, "xf");
    trace::name(r.xo_, "xo");
#endif
    const std::pair<const void*, const char*> common[] = {{r.xh_, "xh"},
                                                          {r.aq_, "aq"},
                                                          {r.ad_, "ad"},
                                                          {r.wdq_, "wdq"},
                                                          {r.tok_out_, "tok_out"},
                                                          {r.argmax_scratch_, "argmax_scratch"},
                                                          {r.meta_d_, "meta"},
                                                          {r.k_cache_, "k_cache"},
                                                          {r.v_cache_, "v_cache"},
                                                          {r.attn_part_, "attn_part"},
                                                          {r.attn_cnt_, "attn_cnt"}};
    for (auto [p, n] : common)
        if (p) trace::name(p, n);
    for (size_t il = 0; il < r.rope_cs_.size(); ++il) {
        size_t first = il;  // a shared table is named by the first layer that uses it
        for (size_t j = 0; j < il; ++j)
            if (r.rope_cs_[j] == r.rope_cs_[il]) {
                first = j;
                break;
            }
        if (first == il) trace::name(r.rope_cs_[il], "rope_cs" + std::to_string(il));
    }
}

struct Seq {
    std::vector<int32_t> table;
    int32_t pos = 0;
};

void print_step(const char* what, const rt::ForwardHooks& h, const zinc::cuda::RunnerStats& st) {
    std::printf("== step %s\n", what);
    for (const std::string& l : trace::lines) std::printf("%s\n", l.c_str());
    trace::lines.clear();
    for (int d = 0; d < rt::kNumDevices; ++d) {
        std::printf("tally %s:", rt::device_name(static_cast<rt::Device>(d)));
        for (int o = 0; o < rt::kNumOps; ++o)
            if (h.step.ops[d][o])
                std::printf(" %s=%llu", rt::op_name(static_cast<rt::Op>(o)),
                            static_cast<unsigned long long>(h.step.ops[d][o]));
        std::printf(" w=%llu a=%llu\n", static_cast<unsigned long long>(h.step.weight_bytes[d]),
                    static_cast<unsigned long long>(h.step.act_bytes[d]));
    }
    for (const rt::Captured& c : h.captured)
        std::printf("captured %s rows=%d dim=%lld\n", c.name.c_str(), c.n_rows,
                    static_cast<long long>(c.dim));
    for (const rt::Fallback& f : h.fallbacks) std::printf("fallback %s %d\n", f.op.c_str(), f.il);
    std::printf("launches %d\n", st.launches_last_step);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: trace_runner MODEL.gguf\n");
        return 2;
    }
    auto f = zinc::gguf::File::open(argv[1]);
    if (!f.ok()) {
        std::fprintf(stderr, "%s\n", f.error().message.c_str());
        return 1;
    }
    for (const auto& t : f.value()->tensors())
        trace::host_name(t.data, t.n_bytes, std::string(t.name));
    auto m = zm::Model::load(*f.value(), {});
    if (!m.ok()) {
        std::fprintf(stderr, "%s\n", m.error().message.c_str());
        return 1;
    }
    const zm::Model& model = *m.value();
    rt::ForwardHooks hooks;
    if (const char* c = std::getenv("ZINC_TRACE_CORRUPT")) {
        const std::string s = c;
        hooks.corrupt.name = s.substr(0, s.rfind(':'));
        const std::string il = s.substr(s.rfind(':') + 1);  // "last": the last layer
        hooks.corrupt.il = il == "last" ? -2 : std::atoi(il.c_str());
    }
    if (hooks.corrupt.il == -2) hooks.corrupt.il = model.config().n_layer - 1;
    if (const char* c = std::getenv("ZINC_TRACE_CPU_OPS")) hooks.cpu_ops.push_back(c);
    zm::RunnerOptions ro;
    ro.n_blocks = 64;
    ro.block_size = 16;
    ro.max_batch_tokens = 32;
    ro.max_seqs = 4;
    ro.max_seq_len = 256;
    ro.hooks = &hooks;
    auto rr = zinc::cuda::create_runner(model, ro, {});
    if (!rr.ok()) {
        std::fprintf(stderr, "%s\n", rr.error().message.c_str());
        return 1;
    }
    auto& runner = dynamic_cast<CudaRunner&>(*rr.value());
    name_buffers(runner);
    trace::on = true;
    trace::lines.clear();

    const int32_t n_vocab = model.n_vocab();
    std::vector<Seq> seqs(4);
    for (int s = 0; s < 4; ++s)
        for (int b = 0; b < 16; ++b) seqs[s].table.push_back(s * 16 + b);
    std::vector<float> logits(static_cast<size_t>(32) * n_vocab);
    int next_tok = 11;

    // One step: (seq, n_tokens, want_logits, all_logits) per sequence.
    struct Part {
        int seq, n;
        bool want, all;
    };
    auto step = [&](const char* what, std::vector<Part> parts, bool capture) {
        std::vector<int32_t> toks;
        std::vector<zm::BatchSeq> bs;
        for (const Part& p : parts) {
            zm::BatchSeq q;
            q.row0 = static_cast<int32_t>(toks.size());
            q.n_tokens = p.n;
            q.pos0 = seqs[p.seq].pos;
            q.block_table = seqs[p.seq].table;
            q.want_logits = p.want;
            q.all_logits = p.all;
            for (int i = 0; i < p.n; ++i) toks.push_back(next_tok++ % n_vocab);
            seqs[p.seq].pos += p.n;
            bs.push_back(q);
        }
        zm::Batch b{toks, bs};
        hooks.begin_step(capture);
        hooks.fallbacks.clear();
        auto res = runner.forward(b, logits.data());
        if (!res.ok()) std::printf("error %s\n", res.error().message.c_str());
        print_step(what, hooks, zinc::cuda::runner_stats(runner));
    };
    step("prefill 7 rows, last row's logits", {{0, 7, true, false}}, false);
    step("decode 1 (graph capture)", {{0, 1, true, false}}, false);
    step("decode 1 (graph replay)", {{0, 1, true, false}}, false);
    step("prefill 5 all logits + decode 1", {{1, 5, true, true}, {0, 1, true, false}}, false);
    step("validated decode 2 rows", {{0, 1, true, false}, {1, 1, true, false}}, true);
    step("validated prefill 4 rows, 1 output", {{2, 4, true, false}}, true);
    step("prefill chunk without logits", {{3, 3, false, false}}, false);
    step("validated prefill 20 rows + decode", {{3, 20, true, false}, {2, 1, true, false}}, true);
    step("prefill 18 rows, last row's logits", {{1, 18, true, false}}, false);
    return 0;
}
