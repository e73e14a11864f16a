// Unit tests for the pre-tokenizers: pieces for hand-checked inputs against each pattern.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

using namespace zinc::tokenizer;

namespace {

std::vector<std::string> split(PreTokenizerKind kind, const std::string& text) {
    std::vector<uint32_t> cpts;
    decode_utf8_lenient(text, cpts);
    std::vector<size_t> lens;
    pre_tokenize(kind, cpts, lens);
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t len : lens) {
        std::string s;
        for (size_t i = start; i < start + len; ++i) append_utf8(cpts[i], s);
        out.push_back(s);
        start += len;
    }
    return out;
}

using V = std::vector<std::string>;

}  // namespace

TEST(PreTokenizer, Gpt2) {
    EXPECT_EQ(split(PreTokenizerKind::Gpt2, "Hello world's 2024 !!"),
              (V{"Hello", " world", "'s", " 2024", " !!"}));
    // \s+(?!\S): the last space of a run goes with the next word.
    EXPECT_EQ(split(PreTokenizerKind::Gpt2, "a   b"), (V{"a", "  ", " b"}));
    EXPECT_EQ(split(PreTokenizerKind::Gpt2, "a  \n"), (V{"a", "  \n"}));
    EXPECT_EQ(split(PreTokenizerKind::Gpt2, "I'M"), (V{"I", "'", "M"}));  // case-sensitive
}

TEST(PreTokenizer, SmolLmSplitsEveryDigit) {
    EXPECT_EQ(split(PreTokenizerKind::SmolLm, "x 123"), (V{"x", " ", "1", "2", "3"}));
    EXPECT_EQ(split(PreTokenizerKind::SmolLm, "\xD9\xA3\xD9\xA4"),  // ٣٤: \p{N} outside ASCII
              (V{"\xD9\xA3", "\xD9\xA4"}));
}

TEST(PreTokenizer, Llama3) {
    EXPECT_EQ(split(PreTokenizerKind::Llama3, "I'M 1234567 (x)\n\n  y"),
              (V{"I", "'M", " ", "123", "456", "7", " (", "x", ")\n\n", " ", " y"}));
    EXPECT_EQ(split(PreTokenizerKind::Llama3, "a \n\n b"), (V{"a", " \n\n", " b"}));
    EXPECT_EQ(split(PreTokenizerKind::Llama3, "\tword"), (V{"\tword"}));
}

TEST(PreTokenizer, Qwen2SplitsSingleDigits) {
    EXPECT_EQ(split(PreTokenizerKind::Qwen2, "x1234"), (V{"x", "1", "2", "3", "4"}));
}

TEST(PreTokenizer, Default) {
    // Punctuation runs first (no '`' in llama.cpp's class), then gpt2, then digit runs, then
    // triples of ASCII digits.
    EXPECT_EQ(split(PreTokenizerKind::Default, "a+=b `c` 1234567"),
              (V{"a", "+=", "b", " `", "c", "`", " ", "123", "456", "7"}));
}

TEST(PreTokenizer, NamesAndErrors) {
    EXPECT_EQ(pre_tokenizer_from_name("smollm")->kind, PreTokenizerKind::SmolLm);
    EXPECT_EQ(pre_tokenizer_from_name("llama-bpe")->kind, PreTokenizerKind::Llama3);
    EXPECT_TRUE(pre_tokenizer_from_name("llama-bpe")->ignore_merges);
    EXPECT_EQ(pre_tokenizer_from_name("qwen2")->kind, PreTokenizerKind::Qwen2);
    EXPECT_EQ(pre_tokenizer_from_name("gpt-2")->kind, PreTokenizerKind::Gpt2);
    EXPECT_EQ(pre_tokenizer_from_name("")->kind, PreTokenizerKind::Default);
    auto bad = pre_tokenizer_from_name("klingon-bpe");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("'klingon-bpe'"), std::string::npos);
}

TEST(PreTokenizer, PiecesCoverTheInput) {
    const std::string text = "Mixed 日本 text\t\t123 😀!!\r\n  \xFF end";
    for (auto kind : {PreTokenizerKind::Gpt2, PreTokenizerKind::SmolLm, PreTokenizerKind::Llama3,
                      PreTokenizerKind::Qwen2, PreTokenizerKind::Default}) {
        std::vector<uint32_t> cpts;
        decode_utf8_lenient(text, cpts);
        std::vector<size_t> lens;
        pre_tokenize(kind, cpts, lens);
        size_t total = 0;
        for (size_t l : lens) {
            EXPECT_GT(l, 0u);
            total += l;
        }
        EXPECT_EQ(total, cpts.size());
    }
}
