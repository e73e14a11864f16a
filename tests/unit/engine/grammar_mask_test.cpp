// The cached token mask (GrammarMatcher::allowed_bits: length buckets, abstract state keys,
// interned walk) against the per-token check (GrammarMatcher::allows) on random grammars,
// vocabularies and states: they must be identical, token for token.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"

namespace zinc::engine {
namespace {

// Characters the random grammars and tokens are made of: ASCII, a 2-byte and a 3-byte UTF-8
// character, and the grammar-text escape for a quote.
const std::vector<std::string> kChars = {"a", "b", "c", "{", "\"", "\xC3\xA9", "\xE4\xB8\xAD"};

std::string gbnf_char(const std::string& c) {
    return c == "\"" ? "\\\"" : c;
}

class RandomGrammar {
  public:
    explicit RandomGrammar(uint32_t seed) : rng_(seed) {}

    std::string text(int n_rules) {
        n_rules_ = n_rules;
        std::string out;
        for (int r = 0; r < n_rules; ++r)
            out += (r == 0 ? std::string("root") : "r" + std::to_string(r)) +
                   " ::= " + alternatives(2) + "\n";
        return out;
    }

  private:
    int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

    std::string alternatives(int depth) {
        std::string s;
        const int n = 1 + pick(3);
        for (int a = 0; a < n; ++a) {
            if (a) s += " | ";
            const int m = 1 + pick(3);
            for (int i = 0; i < m; ++i) s += (i ? " " : "") + item(depth);
        }
        return s;
    }

    std::string item(int depth) {
        std::string s;
        // (The stack-set matcher is exponential in ambiguity, e.g. .+ .+, so "." is rare.)
        switch (pick(depth > 0 ? 8 : 7)) {
            case 0:
            case 1:
            case 2:
            case 3: {
                s = "\"";
                for (int k = 0, n = 1 + pick(3); k < n; ++k)
                    s += gbnf_char(kChars[static_cast<size_t>(pick(7))]);
                s += "\"";
                break;
            }
            case 4:
                s = std::vector<std::string>{"[a-c]", "[^a\"]", "[b\\u00e0-\\u00ff]",
                                             "[^\\u4e00-\\u4fff]",
                                             "[\"{]"}[static_cast<size_t>(pick(5))];
                break;
            case 5:
                s = pick(3) == 0 ? "." : "[ab]";
                break;
            case 6:
                s = n_rules_ > 1 ? "r" + std::to_string(1 + pick(n_rules_ - 1)) : "\"a\"";
                break;
            default:
                s = "(" + alternatives(depth - 1) + ")";
        }
        switch (pick(14)) {
            case 0:
                return s + "*";
            case 1:
                return s + "+";
            case 2:
                return s + "?";
            case 3:
                return s + "{" + std::to_string(pick(4)) + "," + std::to_string(4 + pick(30)) + "}";
            case 4:
                return s + "{" + std::to_string(1 + pick(12)) + "}";
            default:
                return s;
        }
    }

    std::mt19937 rng_;
    int n_rules_ = 1;
};

// All 256 bytes (0 a control token), then random strings of kChars, some cut inside a
// character, 1 to 20 bytes long (so several length buckets are used), and an end-of-generation
// token.
std::vector<std::string> random_pieces(std::mt19937& rng, int n) {
    std::vector<std::string> p;
    for (int b = 0; b < 256; ++b) p.emplace_back(1, static_cast<char>(b));
    p[0] = "";
    std::uniform_int_distribution<int> ch(0, 6), len(1, 20), cut(0, 3);
    for (int i = 0; i < n; ++i) {
        std::string s;
        const int want = len(rng);
        while (static_cast<int>(s.size()) < want) s += kChars[static_cast<size_t>(ch(rng))];
        if (cut(rng) == 0) s.resize(static_cast<size_t>(want));  // may split a character
        if (cut(rng) == 0 && s.size() > 1) s.erase(0, 1);        // may start inside one
        p.push_back(s);
    }
    p.emplace_back("");  // end of generation
    return p;
}

// The mask against the per-token check, then a random allowed token accepted, `steps` times.
// Returns how many states were compared.
int walk_and_compare(const std::shared_ptr<const GrammarConstraint>& c, std::mt19937& rng,
                     int steps, const std::string& what) {
    GrammarMatcher m(c);
    const int32_t n = c->vocab->n_vocab();
    int compared = 0;
    for (int step = 0; step < steps; ++step) {
        const std::vector<uint64_t>& bits = m.allowed_bits();
        std::vector<int32_t> ok;
        for (int32_t id = 0; id < n; ++id) {
            const bool fast = (bits[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u;
            const bool slow = m.allows(id);
            EXPECT_EQ(fast, slow) << what << " step " << step << " token " << id << " '"
                                  << c->vocab->pieces[static_cast<size_t>(id)] << "'";
            if (fast != slow) return compared;
            if (slow && !c->vocab->is_eog(id)) ok.push_back(id);
        }
        ++compared;
        // Ambiguous random grammars can grow the stack set exponentially: stop the walk.
        if (ok.empty() || m.n_stacks() > 48) break;
        EXPECT_TRUE(m.accept(ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)]));
    }
    return compared;
}

TEST(GrammarMask, RandomGrammarsMatchPerTokenCheck) {
    int n_grammars = 0, n_states = 0;
    for (uint32_t seed = 1; n_grammars < 150 && seed < 2000; ++seed) {
        RandomGrammar rg(seed);
        const std::string text = rg.text(1 + static_cast<int>(seed % 4));
        auto g = parse_grammar(text);
        if (!g.ok()) continue;  // left recursion or a nullable repetition: refused, fine
        ++n_grammars;
        if (std::getenv("DBG")) fprintf(stderr, "DBG seed %u\n%s\n", seed, text.c_str());
        std::mt19937 rng(seed);
        auto pieces = random_pieces(rng, 300);
        const auto eog = static_cast<int32_t>(pieces.size() - 1);
        auto vocab = std::make_shared<GrammarVocab>(pieces, std::vector<int32_t>{eog});
        for (bool abstract : {true, false}) {
            // One constraint (one mask cache) for several walks: masks cached in one state are
            // served to the other states with the same key.
            auto c = std::make_shared<GrammarConstraint>();
            c->grammar = std::make_shared<const Grammar>(g.value());
            c->vocab = vocab;
            GrammarMaskCache::Options o;
            o.abstract_keys = abstract;
            c->masks = std::make_shared<GrammarMaskCache>(c->grammar, pieces.size(), o);
            for (int w = 0; w < 4; ++w)
                n_states += walk_and_compare(c, rng, 40, "grammar:\n" + text);
            if (HasFailure()) return;
        }
    }
    EXPECT_GE(n_grammars, 100);
    EXPECT_GE(n_states, 3000);
}

// A length-bounded string (JSON Schema's minLength / maxLength) has a new grammar position at
// every character; the masks of its tokens up to 8 bytes are shared once the bound is 8 or more
// characters away, so walking 300 characters adds few cache entries, and every mask is exact.
TEST(GrammarMask, BoundedRepetitionSharesMasks) {
    auto g = parse_grammar(R"(root ::= "\"" c{100,300} "\"" "}"
c ::= [^"\\] | "\\" ["n])");
    ASSERT_TRUE(g.ok()) << g.error().message;
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    pieces[0] = "";
    for (const char* s : {"ab", "abcd", "\"}", "\\n", "abcdefgh", "abcdefghijkl",
                          "abcdefghijklmnopqrstuvwxyz", "a\"}", "\xC3", "\xC3\xA9"})
        pieces.emplace_back(s);
    const auto eog = static_cast<int32_t>(pieces.size());
    pieces.emplace_back("");
    auto c = make_grammar_constraint(
        std::move(g.value()), std::make_shared<GrammarVocab>(pieces, std::vector<int32_t>{eog}));
    GrammarMatcher m(c);
    const auto id = [&](const std::string& s) {
        for (size_t i = 1; i < pieces.size(); ++i)
            if (pieces[i] == s) return static_cast<int32_t>(i);
        return int32_t{-1};
    };
    ASSERT_TRUE(m.accept(id("\"")));
    // 300 characters: mostly "x", some "é" split over two byte tokens (a partial state).
    for (int i = 0, chars = 0; chars < 300; ++i) {
        const std::vector<uint64_t>& bits = m.allowed_bits();
        for (int32_t t = 0; t < static_cast<int32_t>(pieces.size()); ++t)
            ASSERT_EQ(((bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1u) != 0, m.allows(t))
                << "after " << chars << " characters, token '" << pieces[static_cast<size_t>(t)]
                << "'";
        const bool lead = i % 7 == 3, cont = i % 7 == 4;
        ASSERT_TRUE(m.accept(id(lead ? "\xC3" : cont ? "\xA9" : "x")));
        if (!lead) ++chars;
    }
    EXPECT_FALSE(m.allows(id("x")));  // the 300 characters are the maximum
    EXPECT_TRUE(m.allows(id("\"}")));
    // Exact keys would need a mask per character and bucket (300 x 3); the abstract keys need
    // about one per character near a bound, per bucket.
    const GrammarMaskCache::Stats st = c->masks->stats();
    EXPECT_LT(st.entries, 160u) << "hits " << st.hits << " misses " << st.misses;
}

}  // namespace
}  // namespace zinc::engine
