// Unit tests for tokenizer/unicode: classes, lenient decoding, strict validity, GPT-2 byte map.
#include <gtest/gtest.h>

#include "tokenizer/unicode.h"

using namespace zinc::tokenizer;

TEST(Unicode, Classes) {
    EXPECT_EQ(cp_class('a'), CpClass::Letter);
    EXPECT_EQ(cp_class('7'), CpClass::Number);
    EXPECT_EQ(cp_class(' '), CpClass::Separator);
    EXPECT_EQ(cp_class('\n'), CpClass::Control);
    EXPECT_EQ(cp_class('$'), CpClass::Symbol);
    EXPECT_EQ(cp_class('!'), CpClass::Punctuation);
    EXPECT_EQ(cp_class(0x0301), CpClass::Mark);     // combining acute
    EXPECT_EQ(cp_class(0x0663), CpClass::Number);   // Arabic-Indic three
    EXPECT_EQ(cp_class(0x65E5), CpClass::Letter);   // 日
    EXPECT_EQ(cp_class(0x1F600), CpClass::Symbol);  // 😀
    EXPECT_EQ(cp_class(0x2EBF0), CpClass::Letter);  // CJK Ext I, new in Unicode 15.1
    EXPECT_EQ(cp_class(0x0378), CpClass::Undefined);
    EXPECT_EQ(cp_class(0xE000), CpClass::Control);  // private use
    EXPECT_EQ(cp_class(0x110000), CpClass::Undefined);
}

TEST(Unicode, WhiteSpaceIsTheUnicodeProperty) {
    for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u,
                       0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
        EXPECT_TRUE(is_white_space(c)) << std::hex << c;
    // File/group/record/unit separators are not White_Space (Python's isspace says they are).
    for (uint32_t c : {0x1Cu, 0x1Du, 0x1Eu, 0x1Fu, 0x200Bu, 0x180Eu, uint32_t('a')})
        EXPECT_FALSE(is_white_space(c)) << std::hex << c;
}

TEST(Unicode, LenientDecodeMatchesLlamaCpp) {
    std::vector<uint32_t> cp;
    decode_utf8_lenient("a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80", cp);
    EXPECT_EQ(cp, (std::vector<uint32_t>{'a', 0xE9, 0x65E5, 0x1F600}));
    // Overlong forms and surrogates are accepted as decoded values.
    decode_utf8_lenient("\xC1\x81\xED\xA0\x80", cp);
    EXPECT_EQ(cp, (std::vector<uint32_t>{0x41, 0xD800}));
    // Stray continuation, truncated sequence, invalid lead: one U+FFFD per bad byte.
    decode_utf8_lenient(
        "\x80"
        "\xE2\x82"
        "x\xFF",
        cp);
    EXPECT_EQ(cp, (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD, 'x', 0xFFFD}));
    // Above U+10FFFF: llama.cpp throws on these; we replace the lead byte.
    decode_utf8_lenient("\xF7\xBF\xBF\xBF", cp);
    EXPECT_EQ(cp, (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));
}

TEST(Unicode, StrictPrefixAndMaximalSubpart) {
    bool stuck = false;
    EXPECT_EQ(utf8_valid_prefix("ab\xE2\x82", &stuck), 2u);
    EXPECT_FALSE(stuck);  // incomplete, could still complete
    EXPECT_EQ(utf8_valid_prefix("ab\xE2(", &stuck), 2u);
    EXPECT_TRUE(stuck);
    EXPECT_EQ(utf8_valid_prefix("\xED\xA0\x80", &stuck), 0u);  // surrogate: invalid at once
    EXPECT_TRUE(stuck);
    EXPECT_EQ(utf8_maximal_subpart("\xE2\x82(x"), 2u);
    EXPECT_EQ(utf8_maximal_subpart("\xE0\x80"), 1u);  // E0 needs A0..BF next
    EXPECT_EQ(utf8_maximal_subpart("\xF4\x90"), 1u);  // above U+10FFFF
}

TEST(Unicode, Gpt2ByteMapIsABijection) {
    EXPECT_EQ(byte_to_gpt2_cp(' '), 0x120u);   // 'Ġ'
    EXPECT_EQ(byte_to_gpt2_cp('\n'), 0x10Au);  // 'Ċ'
    EXPECT_EQ(byte_to_gpt2_cp('A'), uint32_t('A'));
    for (int b = 0; b < 256; ++b) EXPECT_EQ(gpt2_cp_to_byte(byte_to_gpt2_cp(uint8_t(b))), b);
    EXPECT_EQ(gpt2_cp_to_byte(0x20), -1);
    EXPECT_EQ(gpt2_cp_to_byte(0x1000), -1);
}
