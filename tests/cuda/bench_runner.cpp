// zinc/tests/cuda/bench_runner.cpp — pp512 / tg128 of the CUDA Runner (as llama-bench defines
// them: a 512-token prompt into an empty KV cache; 128 single-token decode steps from an empty
// cache), median of -r repetitions after a warm-up, plus the bandwidth bound.
//
//   cuda_bench_runner -m MODEL.gguf [-r 5] [-p 512] [-b S] [--copy-bw] [--profile]
//
// -p N: the prompt length of the prefill test (ppN; default 512), one step of N rows.
// -b S: decode S sequences together (default 1): tg128 becomes 128 steps of S rows, one per
//       sequence (each with its own KV blocks), reported as the step time and S x 128 tokens
//       over the run; with --profile, 8 such steps after a 16-token prefill of each sequence.
//
// Prints one line per test: model, test, tok/s, ms, launches per step, host µs per step, and
// decode bytes per token / measured copy bandwidth (percent of the bound). Env opt-outs
// (ZINC_CUDA_GRAPH=0 ...) apply, so before/after numbers come from two runs.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "gguf/gguf.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/model.h"
#include "runtime/expert_load.h"

using namespace zinc;
namespace cu = zinc::cuda;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Device-to-device copy bandwidth (bytes read + written per second), 2 GiB, median of 10.
double copy_bw() {
    const size_t n = size_t(2) << 30;
    void *a = nullptr, *b = nullptr;
    if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess) return 0;
    cudaMemset(a, 1, n);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<double> t;
    for (int i = 0; i < 12; ++i) {
        cudaEventRecord(e0);
        cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 2) t.push_back(ms);
    }
    cudaFree(a);
    cudaFree(b);
    return 2.0 * n / (median(t) * 1e-3);
}

}  // namespace

int main(int argc, char** argv) {
    std::string path;
    int reps = 5, n_prompt = 512, n_seq = 1;
    bool bw = false;
    bool profile = false;  // a 16-token prefill and 8 decode steps only (for ncu)
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-m" && i + 1 < argc)
            path = argv[++i];
        else if (a == "-r" && i + 1 < argc)
            reps = std::atoi(argv[++i]);
        else if (a == "-p" && i + 1 < argc)
            n_prompt = std::atoi(argv[++i]);
        else if (a == "-b" && i + 1 < argc)
            n_seq = std::atoi(argv[++i]);
        else if (a == "--copy-bw")
            bw = true;
        else if (a == "--profile")
            profile = true;
    }
    const cu::Probe p = cu::probe();
    if (p.devices.empty()) {
        std::printf("SKIP: %s\n", p.reason.c_str());
        return 77;
    }
    if (bw) {
        std::printf("copy bandwidth (d2d, read+write): %.0f GB/s\n", copy_bw() / 1e9);
        if (path.empty()) return 0;
    }
    auto f = gguf::File::open(path);
    if (!f) {
        std::printf("error: %s\n", f.error().message.c_str());
        return 2;
    }
    auto m = model::Model::load(*f.value(), {});
    if (!m) {
        std::printf("error: %s\n", m.error().message.c_str());
        return 2;
    }
    const model::Model& model = *m.value();
    const int V = model.n_vocab();
    // Bytes a one-sequence decode step streams: every tensor but the embedding table (one row is
    // read), unless the embedding is also the LM head (tied); of a routed-expert tensor (*_exps)
    // only the n_expert_used / n_expert share one token's routing reads.
    size_t bytes = 0;
    const bool tied = f.value()->find_tensor("output.weight") == nullptr;
    const auto& cfg = model.config();
    for (const auto& t : f.value()->tensors()) {
        if (t.name == "token_embd.weight" && !tied) continue;
        const bool routed = t.name.find("_exps.") != std::string::npos && cfg.n_expert > 0;
        bytes += routed ? t.n_bytes / cfg.n_expert * cfg.n_expert_used : t.n_bytes;
    }

    if (n_prompt < 16 || n_prompt > 65536) {
        std::printf("error: -p %d: the prompt length must be in [16, 65536]\n", n_prompt);
        return 2;
    }
    if (n_seq < 1 || n_seq > 256) {
        std::printf("error: -b %d: the decode batch must be in [1, 256]\n", n_seq);
        return 2;
    }
    model::RunnerOptions ro;
    ro.block_size = 16;
    ro.max_seq_len = std::max(1024, (n_prompt + 15) / 16 * 16);
    const int blocks_per_seq = ro.max_seq_len / 16;
    ro.n_blocks = blocks_per_seq * n_seq;
    ro.max_batch_tokens = std::max(n_prompt, 16 * n_seq);
    ro.max_seqs = n_seq;
    const auto tl0 = Clock::now();
    auto rr = cu::create_runner(model, ro, {});
    if (!rr) {
        std::printf("error: %s\n", rr.error().message.c_str());
        return 1;
    }
    const double load_s = std::chrono::duration<double>(Clock::now() - tl0).count();
    model::Runner& r = *rr.value();
    std::vector<int32_t> table(ro.n_blocks);  // sequence q: blocks [q, q + 1) x blocks_per_seq
    std::iota(table.begin(), table.end(), 0);
    auto seq_table = [&](int q) {
        return std::span<const int32_t>(table.data() + static_cast<size_t>(q) * blocks_per_seq,
                                        blocks_per_seq);
    };
    std::vector<int32_t> prompt(n_prompt);
    for (int i = 0; i < n_prompt; ++i) prompt[i] = (i * 7919 + 13) % V;
    std::vector<int32_t> out(n_prompt);

    auto pp = [&]() -> double {
        model::BatchSeq q;
        q.n_tokens = n_prompt;
        q.block_table = seq_table(0);
        q.state_slot = 0;  // hybrid models: the recurrent state slot (ignored by others)
        model::Batch b{prompt, std::span<const model::BatchSeq>(&q, 1)};
        const auto t0 = Clock::now();
        if (!cu::forward_argmax(r, b, out.data()).ok()) std::exit(1);
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    double launches = 0, host_us = 0;
    // One decode step of every sequence at position pos (tokens in and out: toks).
    std::vector<int32_t> toks(n_seq, 1);
    auto decode_step = [&](int pos) {
        std::vector<model::BatchSeq> qs(n_seq);
        for (int q = 0; q < n_seq; ++q) {
            qs[q].row0 = q;
            qs[q].n_tokens = 1;
            qs[q].pos0 = pos;
            qs[q].block_table = seq_table(q);
            qs[q].state_slot = q;
        }
        model::Batch b{toks, qs};
        return cu::forward_argmax(r, b, toks.data());
    };
    auto tg = [&](bool collect) -> double {
        const auto t0 = Clock::now();
        for (int i = 0; i < 128; ++i) {
            if (auto e = decode_step(i); !e.ok()) {
                std::printf("error: %s\n", e.error().message.c_str());
                std::exit(1);
            }
            if (collect) {
                const auto st = cu::runner_stats(r);
                launches += st.launches_last_step;
                host_us += st.host_us_last_step;
            }
        }
        return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    if (profile) {
        std::vector<model::BatchSeq> qs(n_seq);
        std::vector<int32_t> ptoks;
        for (int q = 0; q < n_seq; ++q) {
            qs[q].row0 = 16 * q;
            qs[q].n_tokens = 16;
            qs[q].block_table = seq_table(q);
            qs[q].state_slot = q;
            ptoks.insert(ptoks.end(), prompt.begin(), prompt.begin() + 16);
        }
        model::Batch b{ptoks, qs};
        std::vector<int32_t> pout(ptoks.size());
        if (!cu::forward_argmax(r, b, pout.data()).ok()) return 1;
        for (int i = 0; i < 8; ++i)
            if (!decode_step(16 + i).ok()) return 1;
        std::printf("profile run done\n");
        return 0;
    }
    pp();
    tg(false);  // warm-up (captures the decode graph)
    std::vector<double> tp, tt;
    for (int i = 0; i < reps; ++i) tp.push_back(pp());
    for (int i = 0; i < reps; ++i) tt.push_back(tg(i == 0));
    const double pp_s = median(tp), tg_s = median(tt);
    const double st_launch = launches / 128, st_host = host_us / 128;
    const std::string base = path.substr(path.find_last_of('/') + 1);
    const char* graph = std::getenv("ZINC_CUDA_GRAPH");
    std::printf("zinc | %s | pp%d | %.1f tok/s | %.2f ms\n", base.c_str(), n_prompt,
                n_prompt / pp_s, pp_s * 1e3);
    if (n_seq == 1)
        std::printf(
            "zinc | %s | tg128 | %.1f tok/s | %.3f ms/tok | %.1f launches/step | %.1f us "
            "host/step (enqueue, before sync) | graph %s | %.1f MiB/token | load %.1f s\n",
            base.c_str(), 128 / tg_s, tg_s / 128 * 1e3, st_launch, st_host,
            graph && std::string(graph) == "0" ? "off" : "on", bytes / 1048576.0, load_s);
    else
        std::printf(
            "zinc | %s | tg128 x %d sequences | %.1f tok/s | %.3f ms/step | %.1f launches/"
            "step | %.1f us host/step | graph %s | %.1f MiB of weights a step\n",
            base.c_str(), n_seq, 128.0 * n_seq / tg_s, tg_s / 128 * 1e3, st_launch, st_host,
            graph && std::string(graph) == "0" ? "off" : "on", bytes / 1048576.0);
    // MoE: how the run (every prefill and decode step above) spread its slots over the experts
    const cu::ExpertLoad load = cu::expert_load(r);
    if (!load.counts.empty()) {
        auto el = runtime::summarize_expert_load(load.counts, load.n_expert);
        std::printf(
            "zinc | %s | %s\n", base.c_str(),
            el.ok() ? runtime::format_expert_load(el.value()).c_str() : el.error().message.c_str());
    }
    return 0;
}
