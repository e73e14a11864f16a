// tests/unit/tokenizer/test_wordpiece.cpp — the "bert" WordPiece tokenizer on a tiny vocabulary
// in llama.cpp's phantom-space convention ("▁word" starts a word, "ing" continues one). Parity
// with llama.cpp and the real MiniLM vocabulary: tests/py/test_embeddings.py.
#include <gtest/gtest.h>

#include "tiny_vocab.h"

using namespace zinc::tokenizer;
using zinc::tokenizer::test::SpecOwner;

namespace {

constexpr const char* kSp = "\xE2\x96\x81";  // U+2581

std::unique_ptr<Tokenizer> tiny(bool lowercase = true) {
    static SpecOwner* keep = nullptr;  // the spec's views must outlive the build only
    auto* o = new SpecOwner();
    delete keep;
    keep = o;
    o->spec.model = "bert";
    o->add("[PAD]", TokenType::CONTROL);  // 0
    o->add("[UNK]", TokenType::CONTROL);  // 1
    o->add("[CLS]", TokenType::CONTROL);  // 2
    o->add("[SEP]", TokenType::CONTROL);  // 3
    for (const char* w : {"play", "the", "cafe", ",", "!", "$", "un", "a", "机", "器"})
        o->add(std::string(kSp) + w);                        // 4 .. 13
    for (const char* w : {"ing", "ed", "known"}) o->add(w);  // 14 .. 16
    o->spec.bos_id = 2;
    o->spec.sep_id = 3;
    o->spec.unk_id = 1;
    o->spec.pad_id = 0;
    o->spec.lowercase = lowercase;
    auto t = o->build();
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    return std::move(t.value());
}

}  // namespace

TEST(WordPiece, GreedyLongestPiecesWithClsAndSep) {
    auto t = tiny();
    EXPECT_EQ(t->encode("playing the cafe", true, false),
              (std::vector<TokenId>{2, 4, 14, 5, 6, 3}));
    EXPECT_EQ(t->encode("played unknown", false, false), (std::vector<TokenId>{4, 15, 10, 16}));
}

TEST(WordPiece, PunctuationSymbolsAndCjkAreWordsOfTheirOwn) {
    auto t = tiny();
    EXPECT_EQ(t->encode("the,cafe!$", false, false), (std::vector<TokenId>{5, 7, 6, 8, 9}));
    EXPECT_EQ(t->encode("机器", false, false), (std::vector<TokenId>{12, 13}));
}

TEST(WordPiece, LowercaseAndAccentsAreNormalised) {
    auto t = tiny();
    // "CAFÉ" -> "cafe" (lowercase, NFD, mark dropped), also with a combining accent.
    EXPECT_EQ(t->encode("CAF\xC3\x89 Cafe\xCC\x81", false, false), (std::vector<TokenId>{6, 6}));
    auto cased = tiny(/*lowercase=*/false);
    EXPECT_EQ(cased->encode("CAFE cafe", false, false), (std::vector<TokenId>{1, 6}));
}

TEST(WordPiece, UnmatchedWordIsOneUnknownAndControlsAreDropped) {
    auto t = tiny();
    // "playx": "▁play" matches, "x" does not: the whole word becomes [UNK].
    EXPECT_EQ(t->encode("playx the", false, false), (std::vector<TokenId>{1, 5}));
    // NUL and other control characters vanish; whitespace of any kind separates.
    EXPECT_EQ(t->encode(std::string("the\x01\tcafe\xE3\x80\x80", 12), false, false),
              (std::vector<TokenId>{5, 6}));
    EXPECT_TRUE(t->encode("   ", false, false).empty());
}

TEST(WordPiece, SpecialTextParsedOnlyWhenAsked) {
    auto t = tiny();
    EXPECT_EQ(t->encode("[SEP]the", false, true), (std::vector<TokenId>{3, 5}));
    // As text, "[SEP]" is punctuation + a word without a piece + punctuation.
    EXPECT_EQ(t->encode("[SEP]", false, false).size(), 3u);
    EXPECT_EQ(t->token_to_piece(4), " play");
    EXPECT_EQ(t->token_to_piece(14), "ing");
    EXPECT_EQ(t->bos(), 2);
    EXPECT_EQ(t->eos(), -1);
}
