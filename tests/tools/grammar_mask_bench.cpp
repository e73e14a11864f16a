// grammar_mask_bench — what the token mask of a grammar costs per token, without the model's
// forward pass (the noise of a shared machine's TPOT left out).
//
//   grammar_mask_bench MODEL.gguf [N_TOKENS]
//
// The grammar is bench/grammar_tpot.py's schema as the server generates it (a `story` string of
// 300 to 400 characters, a `title` of at most 60, an integer `year`). A seeded walk takes random
// allowed tokens (letters and spaces preferred, as text would) for N_TOKENS tokens (default
// 128), timing GrammarMatcher::allowed_bits() each token: a cold pass (a fresh mask cache), a warm
// pass (the same cache, another walk: a second request with the same schema), and a cold pass
// with exact-state keys (ZINC_GRAMMAR_ABSTRACT=0). One JSON line a pass: mean and median
// microseconds a token, bucket lookups that missed, masks kept.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

using namespace zinc;

namespace {

const char* kGrammar =
    R"(root ::= "{" ws "\"story\"" ws ":" ws story ws "," ws "\"title\"" ws ":" ws title ws "," ws "\"year\"" ws ":" ws integer ws "}"
story ::= "\"" char{300,400} "\""
title ::= "\"" char{0,60} "\""
ws ::= (" " | "\n" [ ]{0,16})?
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
)";

bool texty(const std::string& p) {
    return !p.empty() && std::all_of(p.begin(), p.end(),
                                     [](char c) { return (c >= 'a' && c <= 'z') || c == ' '; });
}

void pass(const char* name, const std::shared_ptr<const engine::GrammarConstraint>& c, int n_tokens,
          uint32_t seed) {
    const engine::GrammarMaskCache::Stats before = c->masks->stats();
    engine::GrammarMatcher m(c);
    std::mt19937 rng(seed);
    std::vector<double> us;
    std::vector<int32_t> ok, text;
    for (int t = 0; t < n_tokens; ++t) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<uint64_t>& bits = m.allowed_bits();
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
        ok.clear();
        text.clear();
        for (int32_t id = 0; id < c->vocab->n_vocab(); ++id) {
            if (!((bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u) || c->vocab->is_eog(id))
                continue;
            ok.push_back(id);
            if (texty(c->vocab->pieces[static_cast<size_t>(id)])) text.push_back(id);
        }
        if (ok.empty()) break;
        const auto& from = !text.empty() && rng() % 8 != 0 ? text : ok;
        if (!m.accept(from[rng() % from.size()])) {
            std::fprintf(stderr, "grammar_mask_bench: an allowed token was refused\n");
            std::exit(1);
        }
    }
    std::vector<double> sorted = us;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double u : us) sum += u;
    const engine::GrammarMaskCache::Stats after = c->masks->stats();
    std::printf(
        "{\"pass\": \"%s\", \"tokens\": %zu, \"mean_us\": %.1f, \"median_us\": %.1f, "
        "\"max_us\": %.1f, \"misses\": %llu, \"hits\": %llu, \"masks_kept\": %zu}\n",
        name, us.size(), sum / static_cast<double>(us.size()), sorted[sorted.size() / 2],
        sorted.back(), static_cast<unsigned long long>(after.misses - before.misses),
        static_cast<unsigned long long>(after.hits - before.hits), after.entries);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: grammar_mask_bench MODEL.gguf [N_TOKENS]\n");
        return 2;
    }
    const int n_tokens = argc > 2 ? std::atoi(argv[2]) : 128;
    auto file = gguf::File::open(argv[1]);
    if (!file.ok()) {
        std::fprintf(stderr, "grammar_mask_bench: %s\n", file.error().message.c_str());
        return 2;
    }
    auto loaded = tokenizer::Tokenizer::from_gguf(**file);
    if (!loaded.ok()) {
        std::fprintf(stderr, "grammar_mask_bench: %s\n", loaded.error().message.c_str());
        return 2;
    }
    const tokenizer::Tokenizer& tok = **loaded;
    // The server's vocabulary as bytes (server/http_server.cpp, ServingContext::grammar_vocab).
    std::vector<std::string> pieces(static_cast<size_t>(tok.n_vocab()));
    std::vector<int32_t> eog;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
        pieces[static_cast<size_t>(id)] = tok.token_to_piece(id, false);
        if (tok.is_eog(id)) eog.push_back(id);
    }
    auto vocab = std::make_shared<const engine::GrammarVocab>(std::move(pieces), std::move(eog));
    auto g = engine::parse_grammar(kGrammar);
    if (!g.ok()) {
        std::fprintf(stderr, "grammar_mask_bench: %s\n", g.error().message.c_str());
        return 1;
    }
    std::string sizes;
    for (const auto& b : vocab->buckets)
        sizes += (sizes.empty() ? "" : ", ") + std::string("\"") + std::to_string(b.max_len) +
                 "\": " + std::to_string(b.order.size());
    std::printf("{\"vocab\": %d, \"buckets\": {%s}}\n", vocab->n_vocab(), sizes.c_str());
    for (bool abstract : {true, false}) {
        auto c = std::make_shared<engine::GrammarConstraint>();
        c->grammar = std::make_shared<const engine::Grammar>(g.value());
        c->vocab = vocab;
        engine::GrammarMaskCache::Options o;
        o.abstract_keys = abstract;
        c->masks = std::make_shared<engine::GrammarMaskCache>(c->grammar, vocab->pieces.size(), o);
        pass(abstract ? "cold" : "cold_exact_keys", c, n_tokens, 1);
        pass(abstract ? "warm" : "warm_exact_keys", c, n_tokens, 2);
    }
    return 0;
}
