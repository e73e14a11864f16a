// Unit tests for the two tokenizer families on tiny in-memory vocabularies, special tokens,
// errors, the detokenizers, and (when the models are present) the real GGUF files.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "tiny_vocab.h"

using namespace zinc::tokenizer;
using namespace zinc::tokenizer::test;
using Ids = std::vector<TokenId>;

namespace {

// A byte-level BPE vocab: all 256 byte symbols, then merged tokens and specials.
SpecOwner tiny_bpe(const std::string& pre = "gpt-2") {
    SpecOwner o;
    o.spec.model = "gpt2";
    o.spec.pre = pre;
    for (int b = 0; b < 256; ++b) o.add(byte_level(std::string(1, char(b))));  // ids 0..255
    o.add(byte_level("he"));                                                   // 256
    o.add(byte_level("ll"));                                                   // 257
    o.add(byte_level("hell"));                                                 // 258
    o.add(byte_level("hello"));                                                // 259
    o.add(byte_level(" w"));                                                   // 260
    o.add("<|end|>", TokenType::CONTROL);                                      // 261
    o.add("<tool>", TokenType::USER_DEFINED);                                  // 262
    o.add("<|endoftext|>", TokenType::CONTROL);                                // 263
    o.merge(byte_level("l") + " " + byte_level("l"));
    o.merge(byte_level("h") + " " + byte_level("e"));
    o.merge(byte_level("he") + " " + byte_level("ll"));
    o.merge(byte_level("hell") + " " + byte_level("o"));
    o.merge(byte_level(" ") + " " + byte_level("w"));
    o.spec.bos_id = 263;
    o.spec.eos_id = 263;
    return o;
}

// A SentencePiece vocab: specials, byte pieces, and scored pieces.
SpecOwner tiny_spm() {
    SpecOwner o;
    o.spec.model = "llama";
    o.add("<unk>", TokenType::UNKNOWN);  // 0
    o.add("<s>", TokenType::CONTROL);    // 1
    o.add("</s>", TokenType::CONTROL);   // 2
    for (int b = 0; b < 256; ++b) {      // 3..258
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        o.add(name, TokenType::BYTE);
    }
    o.add("\xE2\x96\x81", TokenType::NORMAL, -1);  // 259 ▁
    o.add("a", TokenType::NORMAL, -2);             // 260
    o.add("b", TokenType::NORMAL, -2);             // 261
    o.add("ab", TokenType::NORMAL, -3);            // 262
    o.add(
        "\xE2\x96\x81"
        "a",
        TokenType::NORMAL, -1.5f);  // 263 ▁a
    o.add(
        "\xE2\x96\x81"
        "ab",
        TokenType::NORMAL, -4);               // 264 ▁ab
    o.add("<sep>", TokenType::USER_DEFINED);  // 265
    o.add("\n", TokenType::USER_DEFINED);     // 266
    return o;
}

}  // namespace

TEST(BpeTokenizer, MergesByRank) {
    auto o = tiny_bpe();
    auto tok = o.build();
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    EXPECT_EQ((*tok)->encode("hello", false, false), (Ids{259}));
    // " w" merges; "orld" has no merges so it stays bytes.
    EXPECT_EQ((*tok)->encode("hello world", false, false), (Ids{259, 260, 'o', 'r', 'l', 'd'}));
    EXPECT_EQ((*tok)->decode((*tok)->encode("hello world", false, false)), "hello world");
    EXPECT_FALSE((*tok)->add_bos());
    EXPECT_EQ((*tok)->encode("he", true, false), (Ids{256}));  // add_bos defaults off for gpt2
}

TEST(BpeTokenizer, SpecialTokens) {
    auto o = tiny_bpe();
    auto tok = std::move(o.build()).value();
    // parse_special: control text becomes the token.
    EXPECT_EQ(tok->encode("he<|end|>he", false, true), (Ids{256, 261, 256}));
    // not parsed: control text is plain text, but user-defined tokens are still split out.
    const Ids plain = tok->encode("<|end|><tool>", false, false);
    EXPECT_EQ(plain.back(), 262);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), 261), 0);
    EXPECT_EQ(tok->decode(plain), "<|end|><tool>");
    // Control tokens render only with special=true; user-defined ones always.
    EXPECT_EQ(tok->token_to_piece(261), "");
    EXPECT_EQ(tok->token_to_piece(261, true), "<|end|>");
    EXPECT_EQ(tok->token_to_piece(262), "<tool>");
    // EOG: eos, and "<|end|>" / "<|endoftext|>" by their text; eot is detected by text too.
    EXPECT_TRUE(tok->is_eog(261));
    EXPECT_TRUE(tok->is_eog(263));
    EXPECT_FALSE(tok->is_eog(262));
    // Both texts are EOT candidates; which one wins follows llama.cpp's hash-map order (checked
    // against llama.cpp by the parity test).
    EXPECT_TRUE(tok->eot() == 261 || tok->eot() == 263);
}

TEST(BpeTokenizer, Gemma4TurnAndToolResponseEndGeneration) {
    // Gemma 4 ends a turn with <turn|> and, after a tool call, starts the results with
    // <|tool_response>: both end generation, as in llama.cpp's list (its eos is <eos>).
    auto o = tiny_bpe();
    o.add("<turn|>", TokenType::CONTROL);           // 264
    o.add("<|tool_response>", TokenType::CONTROL);  // 265
    o.add("<|tool_call>", TokenType::CONTROL);      // 266
    o.add("</s>", TokenType::CONTROL);              // 267: a normal token in Gemma 4
    auto tok = std::move(o.build()).value();
    EXPECT_TRUE(tok->is_eog(264));
    EXPECT_TRUE(tok->is_eog(265));
    EXPECT_FALSE(tok->is_eog(266));
    EXPECT_FALSE(tok->is_eog(267));
    auto other = tiny_bpe();                // elsewhere "</s>" ends generation
    other.add("</s>", TokenType::CONTROL);  // 264
    EXPECT_TRUE(std::move(other.build()).value()->is_eog(264));
}

TEST(BpeTokenizer, AddSpecialFollowsMetadata) {
    auto o = tiny_bpe();
    o.spec.add_bos = true;
    o.spec.add_eos = true;
    auto tok = std::move(o.build()).value();
    EXPECT_EQ(tok->encode("he", true, false), (Ids{263, 256, 263}));
    EXPECT_EQ(tok->encode("he", false, false), (Ids{256}));
}

TEST(BpeTokenizer, InvalidUtf8NeverCrashes) {
    auto o = tiny_bpe();
    auto tok = std::move(o.build()).value();
    // Lone bad bytes become U+FFFD (EF BF BD), which this vocab spells as three byte tokens.
    EXPECT_EQ(tok->encode("\xFF", false, false), (Ids{0xEF, 0xBF, 0xBD}));
    for (const char* s : {"\xF7\xBF\xBF\xBF", "\xF4\x90\x80\x80", "\xC0\x80", "\xED\xA0\x80x",
                          "\xE2\x82", "\x80\x80\x80"}) {
        const Ids ids = tok->encode(s, true, true);
        EXPECT_FALSE(ids.empty()) << s;
    }
}

TEST(BpeTokenizer, Errors) {
    {
        auto o = tiny_bpe("klingon");
        auto r = o.build();
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("klingon"), std::string::npos);
    }
    {
        auto o = tiny_bpe();
        o.merges.clear();
        EXPECT_FALSE(o.build().ok());
    }
    {
        auto o = tiny_bpe();
        o.add(byte_level("he"));  // duplicate text
        auto r = o.build();
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("duplicate"), std::string::npos);
    }
    {
        auto o = tiny_bpe();
        o.spec.model = "wordpiece";
        EXPECT_FALSE(o.build().ok());
    }
    {
        auto o = tiny_bpe();
        o.spec.bos_id = 99999;  // out of range: default 11 is used instead
        o.spec.add_bos = true;
        auto r = o.build();
        ASSERT_TRUE(r.ok());
        EXPECT_EQ((*r)->bos(), 11);
    }
}

TEST(SpmTokenizer, ScoresAndSpacePrefix) {
    auto o = tiny_spm();
    auto tok = std::move(o.build()).value();
    EXPECT_TRUE(tok->add_bos());  // SPM default
    EXPECT_EQ(tok->bos(), 1);
    EXPECT_EQ(tok->eos(), 2);
    // "▁ab": "▁a" (-1.5) beats "ab" (-3); then "▁a"+"b" = "▁ab" (-4) is the only merge left.
    EXPECT_EQ(tok->encode("ab", true, false), (Ids{1, 264}));
    EXPECT_EQ(tok->encode("ab", false, false), (Ids{264}));
    EXPECT_EQ(tok->decode({264}), " ab");
}

TEST(SpmTokenizer, NoSpacePrefixAndByteFallback) {
    auto o = tiny_spm();
    o.spec.add_space_prefix = false;
    auto tok = std::move(o.build()).value();
    EXPECT_EQ(tok->encode("ab", false, false), (Ids{262}));
    // 'c' and 'é' are not pieces: byte fallback <0x63>, <0xC3> <0xA9>.
    EXPECT_EQ(tok->encode("c\xC3\xA9", false, false), (Ids{3 + 0x63, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_EQ(tok->decode({3 + 0xC3, 3 + 0xA9}), "\xC3\xA9");
    // Invalid UTF-8 goes to bytes too. Characters are cut by lead byte only, so 0xFF (a "4-byte"
    // lead) swallows the following 'a' into one symbol, which then falls back to bytes as well.
    EXPECT_EQ(tok->encode("\xFF"
                          "a",
                          false, false),
              (Ids{3 + 0xFF, 3 + 'a'}));
    EXPECT_EQ(tok->encode("a\x80"
                          "a",
                          false, false),
              (Ids{260, 3 + 0x80, 260}));
    // User-defined "\n" and "<sep>" split out even without parse_special; control "<s>" not.
    EXPECT_EQ(tok->encode("a\na<sep>", false, false), (Ids{260, 266, 260, 265}));
    const Ids s = tok->encode("<s>", false, false);
    EXPECT_EQ(std::count(s.begin(), s.end(), 1), 0);
    EXPECT_EQ(tok->encode("<s>", false, true), (Ids{1}));
    EXPECT_EQ(tok->token_to_piece(0), "");  // unknown renders only when special
    EXPECT_EQ(tok->token_to_piece(0, true), "<unk>");
}

TEST(SpmTokenizer, PlainRangesAndSpacePrefix) {
    auto o = tiny_spm();
    auto tok = std::move(o.build()).value();
    // "a</s>a" with "</s>" in data: one raw fragment, so one space prefix; no id 2.
    const Ids ids = tok->encode_mixed("a</s>a", false, {{1, 5}});
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);
    EXPECT_EQ(ids, tok->encode("a</s>a", false, false));
}

TEST(SpmTokenizer, SpacePrefixAfterSpecialTokens) {
    auto o = tiny_spm();
    auto tok = std::move(o.build()).value();
    // Each raw fragment after a special token gets "▁" again (llama.cpp's is_prev_special).
    EXPECT_EQ(tok->encode("a</s>a", false, true), (Ids{263, 2, 263}));
}

TEST(SpecialTokens, PlainRangesNeverYieldControlTokens) {
    auto o = tiny_bpe();
    auto tok = std::move(o.build()).value();
    // "he<|end|>he<|end|>": bytes 2..9 are plain (data), the second "<|end|>" (11..18) control.
    const std::string text = "he<|end|>he<|end|>";
    const std::vector<TextRange> plain = {{2, 9}};
    const Ids ids = tok->encode_mixed(text, false, plain);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 261), 1);
    EXPECT_EQ(ids.back(), 261);
    EXPECT_EQ(tok->decode(ids, true), text);
    // The data part tokenizes as with parse_special=false, the rest as with true.
    Ids want = tok->encode("he", false, true);
    for (int32_t id : tok->encode("<|end|>", false, false)) want.push_back(id);
    want.push_back(256);
    want.push_back(261);
    EXPECT_EQ(ids, want);
    // A control token with a single data byte is plain text, at either edge.
    for (TextRange r : {TextRange{2, 3}, TextRange{8, 9}, TextRange{5, 6}}) {
        const Ids x = tok->encode_mixed("he<|end|>", false, {r});
        EXPECT_EQ(std::count(x.begin(), x.end(), 261), 0) << r.begin;
    }
    // Without plain ranges (or with ranges holding no special text) it is encode(.., true).
    EXPECT_EQ(tok->encode_mixed(text, false, {}), tok->encode(text, false, true));
    EXPECT_EQ(tok->encode_mixed("hello<|end|>", false, {{0, 5}}),
              tok->encode("hello<|end|>", false, true));
    // User-defined tokens are split out in data too (parse_special=false semantics).
    const Ids u = tok->encode_mixed("<tool>", false, {{0, 6}});
    EXPECT_EQ(u, (Ids{262}));
}

TEST(SpecialTokens, LongestFirst) {
    SpecOwner o = tiny_bpe();
    o.add("<|end|>x", TokenType::CONTROL);  // 264: longer, overlaps "<|end|>"
    auto tok = std::move(o.build()).value();
    EXPECT_EQ(tok->encode("<|end|>x<|end|>", false, true), (Ids{264, 261}));
}

TEST(IncrementalDetokenizer, HoldsPartialCharacters) {
    auto o = tiny_bpe();
    auto tok = std::move(o.build()).value();
    // "é" = C3 A9 split over two byte tokens; "😀" = F0 9F 98 80 over four.
    IncrementalDetokenizer det(*tok);
    EXPECT_EQ(det.push(0xC3), "");
    EXPECT_EQ(det.push(0xA9), "\xC3\xA9");
    EXPECT_EQ(det.push(0xF0), "");
    EXPECT_EQ(det.push(0x9F), "");
    EXPECT_EQ(det.push(0x98), "");
    EXPECT_EQ(det.push(0x80), "\xF0\x9F\x98\x80");
    EXPECT_EQ(det.push(259), "hello");
    EXPECT_EQ(det.finish(), "");
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacementChars) {
    auto o = tiny_bpe();
    auto tok = std::move(o.build()).value();
    IncrementalDetokenizer det(*tok);
    EXPECT_EQ(det.push(0xFF), "\xEF\xBF\xBD");
    EXPECT_EQ(det.push(0xE2), "");
    EXPECT_EQ(det.push('x'), "\xEF\xBF\xBDx");  // E2 then 'x': E2 can never complete
    EXPECT_EQ(det.push(0xE2), "");
    EXPECT_EQ(det.push(0x82), "");
    EXPECT_EQ(det.finish(), "\xEF\xBF\xBD");  // truncated E2 82 -> one U+FFFD
    EXPECT_EQ(det.finish(), "");
}

// --- real models ---------------------------------------------------------------------------------

namespace {

std::unique_ptr<zinc::gguf::File> open_model(const char* name) {
    const char* src = std::getenv("ZINC_SOURCE_DIR");
    const std::filesystem::path p =
        std::filesystem::path(src ? src : ZINC_SOURCE_DIR) / "models" / name;
    if (!std::filesystem::exists(p)) return nullptr;
    auto f = zinc::gguf::File::open(p.string());
    if (!f.ok()) return nullptr;
    return std::move(f).value();
}

}  // namespace

TEST(RealModels, SmolLm2AndGemma3LoadAndAreFast) {
    for (const char* name : {"SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"}) {
        auto file = open_model(name);
        if (!file) GTEST_SKIP() << name << " not present";
        auto tok = Tokenizer::from_gguf(*file);
        ASSERT_TRUE(tok.ok()) << tok.error().message;
        // ~64 KiB of mixed text; a quadratic merge loop or per-special-token rescans would take
        // seconds here. The bound is loose on purpose (shared 2-core machine).
        std::string text;
        while (text.size() < 64 * 1024)
            text +=
                "The quick brown fox jumps over the lazy dog; 日本語 😀 x=1234567\n\t"
                "<|im_start|>user<end_of_turn>  int main() { return 0; }\n";
        const auto t0 = std::chrono::steady_clock::now();
        const Ids ids = (*tok)->encode(text, true, true);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        EXPECT_GT(ids.size(), 1000u);
        EXPECT_LT(ms, 2000.0) << name;
        // Round trip without specials: decode(encode(x)) == x for valid UTF-8 text.
        const std::string plain = "Hello world, 日本語 😀\n\tx = 12345;";
        EXPECT_EQ((*tok)->decode((*tok)->encode(plain, false, false)), plain) << name;
        std::printf("%s: %zu bytes -> %zu tokens in %.1f ms\n", name, text.size(), ids.size(), ms);
    }
}

TEST(RealModels, MissingTokenizerKeysAreErrors) {
    // A GGUF without tokenizer metadata: built in memory with the minimal header.
    std::vector<uint8_t> buf = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    buf.resize(buf.size() + 16, 0);  // n_tensors = 0, n_kv = 0
    auto f = zinc::gguf::File::from_buffer(buf.data(), buf.size(), "empty.gguf");
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto tok = Tokenizer::from_gguf(**f);
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.error().message.find("tokenizer.ggml.model"), std::string::npos);
}

namespace {

bool is_valid_utf8(const std::string& s) {
    bool stuck = false;
    return utf8_valid_prefix(s, &stuck) == s.size();
}

}  // namespace

TEST(RealModels, RandomBytesAndIdsNeverCrash) {
    for (const char* name : {"SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"}) {
        auto file = open_model(name);
        if (!file) GTEST_SKIP() << name << " not present";
        auto tok = std::move(Tokenizer::from_gguf(*file)).value();
        uint64_t state = 0x9E3779B97F4A7C15ull;
        auto next = [&] {  // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            return state * 0x2545F4914F6CDD1Dull;
        };
        const char* frags[] = {"<|im_start|>",
                               "<end_of_turn>",
                               "\xF7\xBF\xBF\xBF",
                               "\xF4\x90",
                               "\n\n",
                               " ",
                               "\xC3",
                               "\xE2\x82",
                               "a",
                               "1"};
        for (int iter = 0; iter < 2000; ++iter) {
            std::string text;
            const int n = static_cast<int>(next() % 40);
            for (int k = 0; k < n; ++k) {
                if (next() % 3 == 0)
                    text += frags[next() % (sizeof frags / sizeof frags[0])];
                else
                    text.push_back(static_cast<char>(next() & 0xFF));
            }
            const Ids ids = tok->encode(text, iter & 1, iter & 2);
            for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab());
            IncrementalDetokenizer det(*tok, iter & 4);
            std::string out;
            for (TokenId id : ids) out += det.push(id);
            out += det.finish();
            EXPECT_TRUE(is_valid_utf8(out));
        }
        // Arbitrary ids, including out-of-range ones, decode to something without crashing.
        IncrementalDetokenizer det(*tok, true);
        std::string out;
        for (int k = 0; k < 5000; ++k) {
            const TokenId id = static_cast<TokenId>(next() % (tok->n_vocab() + 100)) - 50;
            (void)tok->token_to_piece(id, k & 1);
            out += det.push(id);
        }
        out += det.finish();
        EXPECT_TRUE(is_valid_utf8(out));
    }
}

namespace {

// A Gemma-like SentencePiece vocab as GGUF bytes: ids 0 <pad>, 1 <eos>, 2 <bos>, 3 "a".
std::vector<uint8_t> gemma_like_gguf(bool with_bos_key) {
    zinc::gguf::Writer w;
    w.add_kv("tokenizer.ggml.model", zinc::gguf::OwnedValue::string("llama"));
    w.add_kv("tokenizer.ggml.tokens",
             zinc::gguf::OwnedValue::string_array({"<pad>", "<eos>", "<bos>", "a"}));
    w.add_kv("tokenizer.ggml.token_type", zinc::gguf::OwnedValue::i32_array({3, 3, 3, 1}));
    w.add_kv("tokenizer.ggml.scores", zinc::gguf::OwnedValue::f32_array({0, 0, 0, -1}));
    w.add_kv("tokenizer.ggml.eos_token_id", zinc::gguf::OwnedValue::u32(1));
    if (with_bos_key) w.add_kv("tokenizer.ggml.bos_token_id", zinc::gguf::OwnedValue::u32(2));
    return w.serialize();
}

}  // namespace

TEST(TokenizerLoad, MissingBosIdWarnsNamingTheDefault) {
    const auto bytes = gemma_like_gguf(false);
    auto f = zinc::gguf::File::from_buffer(bytes.data(), bytes.size(), "nobos.gguf");
    ASSERT_TRUE(f.ok()) << f.error().message;
    auto tok = Tokenizer::from_gguf(**f);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    EXPECT_EQ((*tok)->bos(), 1);  // llama.cpp's SPM default, kept for parity
    ASSERT_EQ((*tok)->warnings().size(), 1u);
    const std::string& w = (*tok)->warnings()[0];
    EXPECT_NE(w.find("tokenizer.ggml.bos_token_id is missing"), std::string::npos) << w;
    EXPECT_NE(w.find("id 1 \"<eos>\""), std::string::npos) << w;

    const auto good = gemma_like_gguf(true);
    auto g = zinc::gguf::File::from_buffer(good.data(), good.size(), "bos.gguf");
    ASSERT_TRUE(g.ok());
    auto tg = Tokenizer::from_gguf(**g);
    ASSERT_TRUE(tg.ok()) << tg.error().message;
    EXPECT_EQ((*tg)->bos(), 2);
    EXPECT_TRUE((*tg)->warnings().empty());
}
