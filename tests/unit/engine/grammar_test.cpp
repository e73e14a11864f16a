// Tests for the GBNF parser (engine/grammar.h) and the token matcher (engine/grammar_matcher.h).
#include "engine/grammar.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/grammar_matcher.h"

namespace zinc::engine {
namespace {

std::string parse_error(const std::string& g) {
    auto r = parse_grammar(g);
    EXPECT_FALSE(r.ok()) << "parsed: " << g;
    return r.ok() ? "" : r.error().message;
}

// A vocabulary of single bytes (ids 0..255 are bytes 0..255), a few multi-byte tokens, one
// control token ("") and an end-of-generation token.
struct TestVocab {
    std::vector<std::string> pieces;
    int32_t eog = 0;
    TestVocab(const std::vector<std::string>& extra) {
        for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
        pieces[0] = "";  // a control token
        for (const auto& e : extra) pieces.push_back(e);
        eog = static_cast<int32_t>(pieces.size());
        pieces.emplace_back("");
    }
    int32_t id(const std::string& piece) const {
        for (size_t i = 1; i < pieces.size(); ++i)
            if (pieces[i] == piece) return static_cast<int32_t>(i);
        return -1;
    }
};

struct Fixture {
    TestVocab tv;
    std::shared_ptr<GrammarConstraint> c;
    Fixture(const std::string& grammar, const std::vector<std::string>& extra = {}) : tv(extra) {
        auto g = parse_grammar(grammar);
        EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
        c = std::make_shared<GrammarConstraint>();
        c->grammar = std::make_shared<Grammar>(std::move(g.value()));
        c->vocab = std::make_shared<GrammarVocab>(tv.pieces, std::vector<int32_t>{tv.eog});
    }
    // Feed text token by token (pieces as given); true if every one was accepted.
    bool feed(GrammarMatcher& m, const std::vector<std::string>& toks) const {
        for (const auto& t : toks) {
            const int32_t id = tv.id(t);
            EXPECT_GE(id, 0) << t;
            EXPECT_EQ(m.allows(id), m.allowed()[static_cast<size_t>(id)] != 0) << t;
            if (!m.accept(id)) return false;
        }
        return true;
    }
    bool matches(const std::string& text) const {
        GrammarMatcher m(c);
        std::vector<std::string> toks;
        for (char ch : text) toks.emplace_back(1, ch);
        return feed(m, toks) && m.complete();
    }
};

TEST(GrammarParse, Basics) {
    Fixture f(R"(root ::= "a" b+ | [x-z]{2,3}   # comment
b ::= "b" | "c")");
    EXPECT_TRUE(f.matches("ab"));
    EXPECT_TRUE(f.matches("abcb"));
    EXPECT_FALSE(f.matches("a"));
    EXPECT_TRUE(f.matches("xy"));
    EXPECT_TRUE(f.matches("xyz"));
    EXPECT_FALSE(f.matches("x"));
    EXPECT_FALSE(f.matches("xyzz"));
}

TEST(GrammarParse, RepetitionForms) {
    Fixture f(R"(root ::= "a"? "b"* "c"{2} "d"{1,} "e"{0,2} ("fg")*)");
    EXPECT_TRUE(f.matches("ccd"));
    EXPECT_TRUE(f.matches("abbbccdddee"));
    EXPECT_TRUE(f.matches("ccdfgfg"));
    EXPECT_FALSE(f.matches("ccdeee"));
    EXPECT_FALSE(f.matches("cd"));
    EXPECT_FALSE(f.matches("ccdf"));  // "fg" repeats as a unit
}

TEST(GrammarParse, ClassesEscapesAndAny) {
    Fixture f(R"(root ::= [^"\\\n] "\x41" [\u00e9] . "\t" [\]a-])");
    EXPECT_TRUE(f.matches("qA\xC3\xA9z\t]"));
    EXPECT_TRUE(f.matches("qA\xC3\xA9z\t-"));
    EXPECT_FALSE(f.matches("\"A\xC3\xA9z\ta"));
    EXPECT_FALSE(f.matches("qAez\ta"));
}

TEST(GrammarParse, MultiLineAlternativesAndGroups) {
    Fixture f("root ::= (\n  \"a\"\n  | \"b\"\n) x\nx ::= \"1\"\n    | \"2\"\n");
    EXPECT_TRUE(f.matches("a1"));
    EXPECT_TRUE(f.matches("b2"));
    EXPECT_FALSE(f.matches("c1"));
}

TEST(GrammarParse, Errors) {
    EXPECT_EQ(parse_error("root ::= foo"),
              "line 1, column 10: rule 'foo' is referenced but never defined");
    EXPECT_EQ(parse_error("a ::= \"x\""),
              "line 1, column 1: the grammar has no 'root' rule; expected 'root ::= ...'");
    EXPECT_EQ(parse_error("root ::= \"abc"),
              "line 1, column 14: unterminated string literal; expected '\"'");
    EXPECT_EQ(parse_error("root ::= [a-"),
              "line 1, column 13: unterminated character class; expected ']'");
    EXPECT_EQ(parse_error("root ::= (\"a\" \n"),
              "line 2, column 1: expected ')' to close the group opened at line 1, column 10, "
              "found the end of the text");
    EXPECT_EQ(parse_error("root ::= \"a\"{3,1}"),
              "line 1, column 13: repetition {3,1} has max below min");
    EXPECT_EQ(parse_error("root ::= * \"a\""),
              "line 1, column 10: '*' has nothing to repeat before it");
    EXPECT_EQ(parse_error("root = \"a\""),
              "line 1, column 6: expected '::=' after rule name 'root', found '='");
    EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""),
              "line 2, column 1: rule 'root' is defined twice");
    EXPECT_EQ(parse_error("root ::= [z-a]"),
              "line 1, column 13: range end is below its start in a character class");
    EXPECT_EQ(parse_error("root ::= \"\\q\""),
              "line 1, column 11: unknown escape '\\q'; expected one of \\n \\r \\t \\\\ \\\" "
              "\\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH");
    EXPECT_NE(parse_error("root ::= root \"a\"").find("left-recursive"), std::string::npos);
    EXPECT_NE(parse_error("root ::= (\"\")* \"a\"").find("left-recursive"), std::string::npos);
    EXPECT_NE(parse_error("root ::= x\nx ::= \"\" root").find("left-recursive"), std::string::npos);
}

TEST(GrammarMatcher, MultiByteTokensAndMask) {
    Fixture f(R"(root ::= "{" ws "\"a\"" ws ":" ws [0-9]+ ws "}"
ws ::= [ ]?)",
              {"{\"", "a\"", "{ \"a\":", "12", "1}", "}}", "\":"});
    GrammarMatcher m(f.c);
    const auto& mask = m.allowed();
    EXPECT_TRUE(mask[static_cast<size_t>(f.tv.id("{"))]);
    EXPECT_TRUE(mask[static_cast<size_t>(f.tv.id("{\""))]);
    EXPECT_TRUE(mask[static_cast<size_t>(f.tv.id("{ \"a\":"))]);
    EXPECT_FALSE(mask[static_cast<size_t>(f.tv.id("}}"))]);
    EXPECT_FALSE(mask[static_cast<size_t>(f.tv.eog)]);  // not complete yet
    EXPECT_FALSE(mask[0]);                              // control token
    EXPECT_TRUE(f.feed(m, {"{\"", "a\"", ":", "12", "1}"}));
    EXPECT_TRUE(m.complete());
    const auto& end = m.allowed();
    EXPECT_TRUE(end[static_cast<size_t>(f.tv.eog)]);
    size_t n_allowed = 0;
    for (uint8_t b : end) n_allowed += b;
    EXPECT_EQ(n_allowed, 1u);  // only the end of generation
    EXPECT_FALSE(m.accept(f.tv.id("}")));
}

TEST(GrammarMatcher, SplitUtf8Characters) {
    // "é" is C3 A9; byte tokens split it. [^a] admits it; [a-z] does not.
    Fixture f(R"(root ::= [^a] "x")");
    GrammarMatcher m(f.c);
    EXPECT_TRUE(m.accept(0xC3));
    EXPECT_FALSE(m.complete());
    EXPECT_FALSE(m.allows('x'));  // the character is unfinished
    EXPECT_TRUE(m.accept(0xA9));
    EXPECT_TRUE(m.accept('x'));
    EXPECT_TRUE(m.complete());

    Fixture g(R"(root ::= [a-z\u00e0-\u00ff])");
    GrammarMatcher m2(g.c);
    EXPECT_TRUE(m2.allows(0xC3));   // U+00C0..U+00FF overlaps the class
    EXPECT_FALSE(m2.allows(0xE2));  // U+2000.. does not
    EXPECT_FALSE(m2.allows(0xA9));  // a stray continuation byte

    // Overlong encodings of ASCII (E0 81 A6 would be 'f', C1 A6 too) are not characters.
    Fixture h(R"(root ::= "f" | [\u0800-\uffff])");
    GrammarMatcher m3(h.c);
    EXPECT_FALSE(m3.allows(0xC1));
    ASSERT_TRUE(m3.accept(0xE0));
    EXPECT_FALSE(m3.allows(0x81));  // below U+0800 whatever follows
    EXPECT_TRUE(m3.allows(0xA0));
}

TEST(GrammarMatcher, MaskAgreesWithSingleChecks) {
    Fixture f(R"(root ::= "[" (item ("," item)*)? "]"
item ::= "\"" [a-c]* "\"" | [0-9]+)",
              {"[\"", "\",", "ab", "abc\"", "12", ",1", "\"]", "]]", "[1", "[]"});
    GrammarMatcher m(f.c);
    for (const auto& t : std::vector<std::string>{"[\"", "ab", "\",", "12", ",1", "]"}) {
        const auto& mask = m.allowed();
        for (int32_t id = 0; id < f.c->vocab->n_vocab(); ++id)
            ASSERT_EQ(mask[static_cast<size_t>(id)] != 0, m.allows(id)) << "token " << id;
        ASSERT_TRUE(m.accept(f.tv.id(t))) << t;
    }
    EXPECT_TRUE(m.complete());
}

// A lazy constraint (tool_choice auto): free text until the trigger, the grammar from the
// trigger's first byte on. The mask agrees with the single checks in every state.
struct LazyFixture : Fixture {
    std::shared_ptr<const GrammarConstraint> lazy;
    LazyFixture()
        : Fixture(R"(root ::= "<tc>" [0-9]+ "</tc>")",
                  {"<tc>", "<t", "c>", "x<tc>1", "x<tc>a", "</tc>", "12", "ab"}) {
        lazy = make_grammar_constraint(Grammar(*c->grammar), c->vocab, {{"<tc>", false}});
    }
    void check_mask(GrammarMatcher& m) const {
        const auto& mask = m.allowed();
        for (int32_t id = 0; id < lazy->vocab->n_vocab(); ++id)
            ASSERT_EQ(mask[static_cast<size_t>(id)] != 0, m.allows(id)) << "token " << id;
    }
};

TEST(GrammarMatcherLazy, TriggerIdsAreTheTokensThatCanEndAnOccurrence) {
    LazyFixture f;
    std::vector<std::string> got;
    for (int32_t id : f.lazy->trigger_ids) got.push_back(f.tv.pieces[static_cast<size_t>(id)]);
    // ">" (a byte token), "<tc>", "c>", "x<tc>1", "x<tc>a": each ends "<tc>" after some tail.
    EXPECT_EQ(got, (std::vector<std::string>{">", "<tc>", "c>", "x<tc>1", "x<tc>a"}));
}

TEST(GrammarMatcherLazy, FreeUntilTheTriggerThenTheGrammar) {
    LazyFixture f;
    GrammarMatcher m(f.lazy);
    EXPECT_TRUE(m.awaiting());
    EXPECT_TRUE(m.complete());  // free text may end anywhere
    f.check_mask(m);
    EXPECT_TRUE(m.allows(f.tv.eog));
    EXPECT_TRUE(m.allows(0));  // a control token: free text
    EXPECT_TRUE(m.allows(f.tv.id("ab")));
    EXPECT_TRUE(m.allows(f.tv.id("x<tc>1")));
    EXPECT_FALSE(m.allows(f.tv.id("x<tc>a")));  // completes the trigger, then 'a' is refused
    EXPECT_FALSE(m.accept(f.tv.id("x<tc>a")));
    EXPECT_TRUE(m.awaiting());
    ASSERT_TRUE(f.feed(m, {"ab", " ", "<t"}));
    f.check_mask(m);
    EXPECT_TRUE(m.awaiting());
    ASSERT_TRUE(f.feed(m, {"c>"}));  // "<t" + "c>": the trigger, across two tokens
    EXPECT_FALSE(m.awaiting());
    EXPECT_FALSE(m.complete());
    f.check_mask(m);
    EXPECT_FALSE(m.allows(f.tv.id("ab")));
    EXPECT_FALSE(m.allows(f.tv.eog));
    ASSERT_TRUE(f.feed(m, {"12", "3", "</tc>"}));
    EXPECT_TRUE(m.complete());
    f.check_mask(m);
}

TEST(GrammarMatcherLazy, TheTokenThatCompletesTheTriggerStartsTheGrammarInside) {
    LazyFixture f;
    GrammarMatcher m(f.lazy);
    ASSERT_TRUE(f.feed(m, {"c>", "x<tc>1"}));  // "c>" alone is free text; "x" stays free
    EXPECT_FALSE(m.awaiting());
    f.check_mask(m);
    EXPECT_TRUE(m.allows(f.tv.id("12")));
    EXPECT_TRUE(m.allows(f.tv.id("</tc>")));
    ASSERT_TRUE(f.feed(m, {"</tc>"}));
    EXPECT_TRUE(m.complete());
}

TEST(GrammarMatcherLazy, AnAtStartTriggerCountsOnlyAfterWhitespace) {
    // Bare calls: `{"n` starts the grammar only at the start of the text (after whitespace).
    Fixture f(R"(root ::= "{\"n\":" [0-9] "}")", {"{\"", "n\":", "{\"n\":1}", "nx"});
    auto lazy = make_grammar_constraint(Grammar(*f.c->grammar), f.c->vocab, {{"{\"n", true}});
    auto check_mask = [&](GrammarMatcher& m) {
        const auto& mask = m.allowed();
        for (int32_t id = 0; id < lazy->vocab->n_vocab(); ++id)
            ASSERT_EQ(mask[static_cast<size_t>(id)] != 0, m.allows(id)) << "token " << id;
    };
    GrammarMatcher m(lazy);
    ASSERT_TRUE(f.feed(m, {" ", "\n", "{\""}));
    check_mask(m);
    EXPECT_TRUE(m.awaiting());
    EXPECT_TRUE(m.allows(f.tv.id("n")));          // completes the trigger, which the grammar allows
    EXPECT_FALSE(m.allows(f.tv.id("nx")));        // completes it, and then the grammar refuses 'x'
    EXPECT_TRUE(m.allows(f.tv.id("{\"n\":1}")));  // `{"{"n...`: not at the start, free text
    ASSERT_TRUE(f.feed(m, {"n\":"}));
    EXPECT_FALSE(m.awaiting());
    check_mask(m);
    ASSERT_TRUE(f.feed(m, {"7", "}"}));
    EXPECT_TRUE(m.complete());
    // After other text the trigger is free text: `x {"n":` does not start the grammar.
    GrammarMatcher later(lazy);
    ASSERT_TRUE(f.feed(later, {"x", " ", "{\"", "n\":", "a"}));
    EXPECT_TRUE(later.awaiting());
    check_mask(later);
    EXPECT_TRUE(later.complete());
}

}  // namespace
}  // namespace zinc::engine
