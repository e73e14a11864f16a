// tests/tools/logits_tool.cpp — evaluate token ids with zinc's CPU forward pass and print JSON,
// for the Python golden tests (tests/py/test_model_goldens.py).
//
//   logits_tool --model FILE --tokens 1,2,3 [--top-positions P] [--top-k K] [--n-predict N]
//               [--threads T] [--n-batch B] [--n-ctx C] [--dump-logits FILE]
//
// Output (one JSON object on stdout):
//   "prompt_top":  for each of the first P prompt positions, the top-K [id, logit] pairs
//   "greedy":      N greedily generated ids (argmax, lowest id on ties)
//   "greedy_top":  per generated step, the five best [id, logit] pairs
//   "forced_top":  with --forced a,b,c: after the prompt, the five best [id, logit] pairs before
//                  each forced token is fed (teacher forcing along another engine's output)
//   "logits_at_ids": with --logit-ids a,b,c: for each of the first P positions, the logits of
//                    those ids (to compare against another engine's top-K list)
//   --dump-logits FILE: the full logits of the first P positions, (P, n_vocab) raw f32 rows, for
//                  distribution comparisons (bench/agreement_floor.py)
// The first P prompt tokens are evaluated with all logits kept, the rest of the prompt in a
// second eval call, then one token per call. Errors go to stderr with exit status 2.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"

namespace {

int fail(const std::string& msg) {
    std::fprintf(stderr, "logits_tool: %s\n", msg.c_str());
    return 2;
}

std::vector<int> top_k(const float* logits, int n_vocab, int k) {
    std::vector<int> idx(n_vocab);
    std::iota(idx.begin(), idx.end(), 0);
    k = std::min(k, n_vocab);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    idx.resize(k);
    return idx;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path;
    std::vector<int32_t> tokens;
    std::vector<int32_t> logit_ids;
    std::vector<int32_t> forced;
    std::string dump_path;
    int top_positions = 0, k = 20, n_predict = 0, threads = 0, n_batch = 512, n_ctx = 2048;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "logits_tool: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        auto parse_ids = [](const std::string& s, std::vector<int32_t>& out) {
            size_t p = 0;
            while (p < s.size()) {
                size_t q = s.find(',', p);
                if (q == std::string::npos) q = s.size();
                out.push_back(static_cast<int32_t>(std::stol(s.substr(p, q - p))));
                p = q + 1;
            }
        };
        if (a == "--model") {
            model_path = next();
        } else if (a == "--tokens") {
            parse_ids(next(), tokens);
        } else if (a == "--forced") {
            parse_ids(next(), forced);
        } else if (a == "--logit-ids") {
            parse_ids(next(), logit_ids);
        } else if (a == "--top-positions") {
            top_positions = std::stoi(next());
        } else if (a == "--top-k") {
            k = std::stoi(next());
        } else if (a == "--n-predict") {
            n_predict = std::stoi(next());
        } else if (a == "--threads") {
            threads = std::stoi(next());
        } else if (a == "--n-batch") {
            n_batch = std::stoi(next());
        } else if (a == "--dump-logits") {
            dump_path = next();
        } else if (a == "--n-ctx") {
            n_ctx = std::stoi(next());
        } else {
            return fail("unknown argument " + a);
        }
    }
    if (model_path.empty() || tokens.empty()) return fail("--model and --tokens are required");

    auto file = zinc::gguf::File::open(model_path);
    if (!file.ok()) return fail(file.error().message);
    auto model = zinc::model::Model::load(*file.value(), {});
    if (!model.ok()) return fail(model.error().message);
    zinc::model::ContextOptions co;
    co.n_ctx = n_ctx;
    co.n_threads = threads;
    co.n_batch = n_batch;
    auto ctx = zinc::model::Context::create(*model.value(), co);
    if (!ctx.ok()) return fail(ctx.error().message);
    zinc::model::Context& c = *ctx.value();
    const int n_vocab = model.value()->n_vocab();

    std::string out = "{\"n_vocab\": " + std::to_string(n_vocab) + ", \"prompt_top\": [";
    const int n_prompt = static_cast<int>(tokens.size());
    const int p = std::min(top_positions, n_prompt);
    char buf[64];
    if (p > 0) {
        auto r = c.eval(std::span<const int32_t>(tokens.data(), p), true);
        if (!r.ok()) return fail(r.error().message);
        if (!dump_path.empty()) {
            FILE* f = std::fopen(dump_path.c_str(), "wb");
            if (!f) return fail("cannot write " + dump_path);
            for (int i = 0; i < p; ++i) std::fwrite(c.logits(i), sizeof(float), n_vocab, f);
            if (std::fclose(f) != 0) return fail("cannot write " + dump_path);
        }
        for (int i = 0; i < p; ++i) {
            const float* l = c.logits(i);
            out += i ? ", [" : "[";
            const std::vector<int> top = top_k(l, n_vocab, k);
            for (size_t j = 0; j < top.size(); ++j) {
                std::snprintf(buf, sizeof buf, "%s[%d, %.6f]", j ? ", " : "", top[j], l[top[j]]);
                out += buf;
            }
            out += "]";
        }
    }
    out += "], \"logits_at_ids\": [";
    for (int i = 0; i < p && !logit_ids.empty(); ++i) {
        const float* l = c.logits(i);
        out += i ? ", [" : "[";
        for (size_t j = 0; j < logit_ids.size(); ++j) {
            if (logit_ids[j] < 0 || logit_ids[j] >= n_vocab)
                return fail("--logit-ids out of range");
            std::snprintf(buf, sizeof buf, "%s%.6f", j ? ", " : "", l[logit_ids[j]]);
            out += buf;
        }
        out += "]";
    }
    out += "], \"greedy\": [";
    if (p < n_prompt) {
        auto r = c.eval(std::span<const int32_t>(tokens.data() + p, n_prompt - p), false);
        if (!r.ok()) return fail(r.error().message);
    }
    auto top_json = [&](const float* l, int kk) {
        std::string j = "[";
        const std::vector<int> top = top_k(l, n_vocab, kk);
        for (size_t i = 0; i < top.size(); ++i) {
            std::snprintf(buf, sizeof buf, "%s[%d, %.6f]", i ? ", " : "", top[i], l[top[i]]);
            j += buf;
        }
        return j + "]";
    };
    const int n_past_prompt = c.n_past();
    std::string steps = "], \"greedy_top\": [";
    for (int s = 0; s < n_predict; ++s) {
        const float* l = c.logits(-1);
        const std::vector<int> top = top_k(l, n_vocab, 1);
        std::snprintf(buf, sizeof buf, "%s%d", s ? ", " : "", top[0]);
        out += buf;
        steps += (s ? ", " : "") + top_json(l, 5);
        if (s + 1 < n_predict) {
            const int32_t t = top[0];
            auto r = c.eval(std::span<const int32_t>(&t, 1), false);
            if (!r.ok()) return fail(r.error().message);
        }
    }
    out += steps + "], \"forced_top\": [";
    if (!forced.empty()) {
        // Back to the end of the prompt: the whole prompt again from position 0 (a recurrent
        // model's state cannot be rewound to n_past_prompt - 1; the bits are the same as a
        // rewind for attention models, whose results do not depend on the chunking).
        (void)n_past_prompt;
        c.truncate(0);
        auto r = c.eval(std::span<const int32_t>(tokens.data(), n_prompt), false);
        if (!r.ok()) return fail(r.error().message);
        for (size_t s = 0; s < forced.size(); ++s) {
            out += (s ? ", " : "") + top_json(c.logits(-1), 5);
            if (s + 1 < forced.size()) {
                auto e = c.eval(std::span<const int32_t>(&forced[s], 1), false);
                if (!e.ok()) return fail(e.error().message);
            }
        }
    }
    out += "]}\n";
    std::fputs(out.c_str(), stdout);
    return 0;
}
