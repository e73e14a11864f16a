// tests/tools/exact_digest.cpp — a bit-level fingerprint of the CPU tier's logits, for the
// exactness tests (tests/py/test_exactness.py, docs/exactness.md): the same model and tokens give
// the same digest whatever kernel set (ZINC_SIMD=0, ZINC_AVX512=0), thread count or prefill chunk
// size is used, because every path performs the canonical operations of backend/canon.h.
//
//   exact_digest --model FILE --prompt TEXT [--n N] [--n-batch B] [--threads T] [--n-ctx C]
//
// Evaluates the prompt (BOS added as the tokenizer says), then N greedy steps (lowest id on
// ties). Prints one JSON object: {"digest": "<16 hex>", "greedy": [ids], "steps": N + 1,
// "first": [the first 4 logits of the prompt's last position, as %.9g]}; the digest is FNV-1a
// 64 over the raw bytes of every step's full logits row. Errors: stderr, exit status 2.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

int fail(const std::string& msg) {
    std::fprintf(stderr, "exact_digest: %s\n", msg.c_str());
    return 2;
}

void fnv(uint64_t& h, const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, prompt;
    int n = 16, n_batch = 512, threads = 0, n_ctx = 1024;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--model") model_path = next();
        else if (a == "--prompt") prompt = next();
        else if (a == "--n") n = std::stoi(next());
        else if (a == "--n-batch") n_batch = std::stoi(next());
        else if (a == "--threads") threads = std::stoi(next());
        else if (a == "--n-ctx") n_ctx = std::stoi(next());
        else return fail("unknown argument " + a);
    }
    if (model_path.empty() || prompt.empty()) return fail("--model and --prompt are required");
    auto file = zinc::gguf::File::open(model_path);
    if (!file) return fail(file.error().message);
    auto model = zinc::model::Model::load(*file.value(), {});
    if (!model) return fail(model.error().message);
    auto tok = zinc::tokenizer::Tokenizer::from_gguf(*file.value());
    if (!tok) return fail(tok.error().message);
    zinc::model::ContextOptions co;
    co.n_ctx = n_ctx;
    co.n_threads = threads;
    co.n_batch = n_batch;
    auto ctx = zinc::model::Context::create(*model.value(), co);
    if (!ctx) return fail(ctx.error().message);
    zinc::model::Context& c = *ctx.value();
    const int V = model.value()->n_vocab();
    const std::vector<int32_t> toks = tok.value()->encode(prompt, true, false);
    if (auto r = c.eval(toks); !r) return fail(r.error().message);
    uint64_t h = 1469598103934665603ull;
    std::vector<int32_t> greedy;
    float first[4];
    std::memcpy(first, c.logits(-1), sizeof first);
    for (int s = 0; s <= n; ++s) {
        const float* l = c.logits(-1);
        fnv(h, l, sizeof(float) * V);
        if (s == n) break;
        int32_t best = 0;
        for (int i = 1; i < V; ++i)
            if (l[i] > l[best]) best = i;
        greedy.push_back(best);
        if (auto r = c.eval(std::span<const int32_t>(&best, 1)); !r) return fail(r.error().message);
    }
    std::printf("{\"digest\": \"%016llx\", \"steps\": %d, \"first\": [%.9g, %.9g, %.9g, %.9g], \"greedy\": [",
                static_cast<unsigned long long>(h), n + 1, first[0], first[1], first[2], first[3]);
    for (size_t i = 0; i < greedy.size(); ++i) std::printf("%s%d", i ? ", " : "", greedy[i]);
    std::printf("]}\n");
    return 0;
}
