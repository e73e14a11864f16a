// Unit tests for TextStream (streaming detokenizer with stop strings) against the real SmolLM2
// and Gemma 3 tokenizers: byte-exact streaming of CJK/emoji/combining text under many token
// segmentations, stop strings across token boundaries, EOG tokens, invalid UTF-8. Expectations
// come from independent oracles computed on the whole decoded text (std::string::find of each
// stop string, a test-local UTF-8 validator) or are written out by hand.
#include "tokenizer/text_stream.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

using namespace zinc::tokenizer;
using Ids = std::vector<TokenId>;

namespace {

constexpr const char* kSmol = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* kGemma = "gemma-3-270m-q4_k_m.gguf";
const std::string kFffd = "\xEF\xBF\xBD";

struct Model {
    std::unique_ptr<zinc::gguf::File> file;
    std::unique_ptr<Tokenizer> tok;
    std::map<std::string, TokenId> piece_to_id;  // plain (NORMAL/BYTE) tokens only, lowest id
};

std::unique_ptr<Model> load_model(const char* name) {
    const char* src = std::getenv("ZINC_SOURCE_DIR");
    const std::filesystem::path p =
        std::filesystem::path(src ? src : ZINC_SOURCE_DIR) / "models" / name;
    if (!std::filesystem::exists(p)) return nullptr;
    auto f = zinc::gguf::File::open(p.string());
    if (!f.ok()) return nullptr;
    auto m = std::make_unique<Model>();
    m->file = std::move(f).value();
    auto t = Tokenizer::from_gguf(*m->file);
    if (!t.ok()) return nullptr;
    m->tok = std::move(t).value();
    for (TokenId id = 0; id < m->tok->n_vocab(); ++id) {
        const TokenType ty = m->tok->token_type(id);
        if (ty != TokenType::NORMAL && ty != TokenType::BYTE) continue;
        m->piece_to_id.emplace(m->tok->token_to_piece(id), id);
    }
    return m;
}

// Strict UTF-8 check written independently of the library (RFC 3629 table 3-7).
bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
        const unsigned c = b(i);
        size_t n;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            n = 1;
        } else if (c >= 0xC2 && c <= 0xDF) {
            n = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return false;
        }
        if (i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k) {
            const unsigned d = b(i + k);
            if (k == 1 ? (d < lo || d > hi) : (d & 0xC0) != 0x80) return false;
        }
        i += n;
    }
    return true;
}

// Drop an incomplete character at the end of otherwise valid UTF-8 text.
std::string complete_prefix(const std::string& s) {
    for (size_t cut = s.size(); cut + 4 > s.size() && cut > 0; --cut)
        if (valid_utf8(s.substr(0, cut))) return s.substr(0, cut);
    return valid_utf8(s) ? s : std::string();
}

// Oracle: the stop string that completes first in `full` (ties: the longer); via find().
struct Expected {
    std::string text;
    int index = -1;
};
Expected oracle(const std::string& full, const std::vector<std::string>& stops) {
    Expected e{full, -1};
    size_t best_end = std::string::npos, best_len = 0;
    for (size_t i = 0; i < stops.size(); ++i) {
        if (stops[i].empty()) continue;
        const size_t pos = full.find(stops[i]);
        if (pos == std::string::npos) continue;
        // find() gives the first start; the first *end* of this string is at that start too.
        const size_t end = pos + stops[i].size();
        if (end < best_end || (end == best_end && stops[i].size() > best_len)) {
            best_end = end;
            best_len = stops[i].size();
            e = {full.substr(0, pos), static_cast<int>(i)};
        }
    }
    return e;
}

// Oracle for how much must be held back at a step: the longest tail of `t` that is a proper
// prefix of some stop string.
size_t hold_oracle(const std::string& t, const std::vector<std::string>& stops) {
    size_t keep = 0;
    for (const auto& s : stops)
        for (size_t k = 1; k < s.size() && k <= t.size(); ++k)
            if (t.substr(t.size() - k) == s.substr(0, k) && k > keep) keep = k;
    return keep;
}

// Token ids for `text`, one single-byte token per byte.
Ids byte_ids(const Model& m, const std::string& text) {
    Ids ids;
    for (char c : text) {
        auto it = m.piece_to_id.find(std::string(1, c));
        EXPECT_NE(it, m.piece_to_id.end())
            << "no byte token for " << int(static_cast<unsigned char>(c));
        if (it != m.piece_to_id.end()) ids.push_back(it->second);
    }
    return ids;
}

// Exactly one token per listed piece (the piece must exist in the vocab).
Ids piece_ids(const Model& m, const std::vector<std::string>& pieces) {
    Ids ids;
    for (const auto& p : pieces) {
        auto it = m.piece_to_id.find(p);
        EXPECT_NE(it, m.piece_to_id.end()) << "no token with piece '" << p << "'";
        if (it != m.piece_to_id.end()) ids.push_back(it->second);
    }
    return ids;
}

// Cut `text` at pseudo-random byte positions; each chunk is encoded normally if it is valid
// UTF-8, else as byte tokens. decode(ids) == text by construction (checked by the caller).
Ids random_segmentation(const Model& m, const std::string& text, uint64_t seed) {
    uint64_t st = seed * 0x9E3779B97F4A7C15ull + 1;
    auto next = [&] {
        st ^= st >> 12;
        st ^= st << 25;
        st ^= st >> 27;
        return st * 0x2545F4914F6CDD1Dull;
    };
    Ids ids;
    size_t i = 0;
    while (i < text.size()) {
        const size_t len = std::min<size_t>(text.size() - i, 1 + next() % 7);
        const std::string chunk = text.substr(i, len);
        const Ids part =
            valid_utf8(chunk) ? m.tok->encode(chunk, false, false) : byte_ids(m, chunk);
        ids.insert(ids.end(), part.begin(), part.end());
        i += len;
    }
    return ids;
}

struct StreamRun {
    std::vector<std::string> steps;
    std::string all;  // concatenation of push() and finish() output
    StreamStatus status = StreamStatus::Continue;
    int index = -1;
};

// Stream `ids`, checking per step: output is valid UTF-8, nothing comes after a stop, and (for
// valid text) exactly the text that is provably safe has been emitted so far.
StreamRun stream(const Model& m, const Ids& ids, const std::vector<std::string>& stops,
                 bool check_hold = true) {
    TextStream ts(*m.tok, stops);
    StreamRun r;
    Ids seen;
    for (TokenId id : ids) {
        const bool was_stopped = ts.stopped();
        StreamStep st = ts.push(id);
        seen.push_back(id);
        EXPECT_TRUE(valid_utf8(st.text)) << "step " << seen.size();
        if (was_stopped) {
            EXPECT_EQ(st.text, "");
        }
        r.steps.push_back(st.text);
        r.all += st.text;
        EXPECT_EQ(r.all, ts.text());
        EXPECT_EQ(st.status, ts.status());
        if (check_hold && !ts.stopped()) {
            const std::string so_far = complete_prefix(m.tok->decode(seen));
            if (oracle(so_far, stops).index < 0) {
                const size_t keep = hold_oracle(so_far, stops);
                EXPECT_EQ(r.all, so_far.substr(0, so_far.size() - keep)) << "step " << seen.size();
            }
        }
    }
    const std::string tail = ts.finish();
    EXPECT_TRUE(valid_utf8(tail));
    r.all += tail;
    EXPECT_EQ(r.all, ts.text());
    EXPECT_EQ(ts.finish(), "");
    r.status = ts.status();
    r.index = ts.stop_index();
    if (r.index >= 0) {
        EXPECT_EQ(ts.stop_string(), stops[r.index]);
    }
    return r;
}

const std::vector<std::string> kUnicodeTexts = {
    "日本語のテキストです。中文文本，한국어 텍스트도 있습니다。",
    "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flag 🇯🇵 math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 "
    "done",
    "combining: e\xCC\x81 a\xCC\x88 n\xCC\x83 Z\xCC\xA4\xCD\x94\xCD\xA7\xCC\x91\xCC\x93 "
    "Hindi हिन्दी, Thai ภาษาไทย, Arabic العربية",
    "mixed 漢字😀x\xCC\x81\n\tＦｕｌｌｗｉｄｔｈ ｶﾀｶﾅ ✓ € ∑ "
    "🧑🏿‍🚀",
};

}  // namespace

TEST(TextStream, CjkEmojiCombiningStreamByteExact) {
    for (const char* name : {kSmol, kGemma}) {
        auto m = load_model(name);
        if (!m) GTEST_SKIP() << name << " not present";
        int split_tokens = 0;
        for (const auto& text : kUnicodeTexts) {
            ASSERT_TRUE(valid_utf8(text));
            std::vector<Ids> segs = {m->tok->encode(text, false, false), byte_ids(*m, text)};
            for (uint64_t seed = 1; seed <= 20; ++seed)
                segs.push_back(random_segmentation(*m, text, seed));
            for (TokenId id : segs[0])
                if (!valid_utf8(m->tok->token_to_piece(id))) ++split_tokens;
            for (const Ids& ids : segs) {
                ASSERT_EQ(m->tok->decode(ids), text) << name;
                const StreamRun r = stream(*m, ids, {});
                EXPECT_EQ(r.all, text) << name;
                EXPECT_EQ(r.status, StreamStatus::Continue);
            }
        }
        // The real tokenization must actually have split characters across tokens (else this
        // test would not exercise holding). SmolLM2's byte-level BPE always does on this text.
        if (std::string(name) == kSmol) {
            EXPECT_GT(split_tokens, 5) << name;
        }
        std::printf("%s: %d real tokens are partial characters\n", name, split_tokens);
    }
}

TEST(TextStream, StopStringsMatchOracleUnderAnySegmentation) {
    const std::string text =
        "Sure! Here is the answer: 42.\nUser: next question\n日本語です。ababcabcd おわり";
    const std::vector<std::vector<std::string>> cases = {{"\nUser:"},
                                                         {"User", "Use"},
                                                         {"本語"},
                                                         {"ab", "abc"},
                                                         {"abc", "ab"},
                                                         {"abcd", "bc"},
                                                         {"Sure"},
                                                         {"おわり"},
                                                         {"xyz", "zzz"},
                                                         {"answer: 4", "answer"},
                                                         {"42.\n", "2."},
                                                         {"です。a", "。"},
                                                         {""},
                                                         {"question\n日本", "ques"},
                                                         {"ababcabcd おわり!"}};
    for (const char* name : {kSmol, kGemma}) {
        auto m = load_model(name);
        if (!m) GTEST_SKIP() << name << " not present";
        std::vector<Ids> segs = {m->tok->encode(text, false, false), byte_ids(*m, text)};
        for (uint64_t seed = 1; seed <= 12; ++seed)
            segs.push_back(random_segmentation(*m, text, seed));
        for (const auto& stops : cases) {
            const Expected want = oracle(text, stops);
            for (const Ids& ids : segs) {
                ASSERT_EQ(m->tok->decode(ids), text);
                const StreamRun r = stream(*m, ids, stops);
                EXPECT_EQ(r.all, want.text) << name << " stop[0]='" << stops[0] << "'";
                EXPECT_EQ(r.index, want.index) << name << " stop[0]='" << stops[0] << "'";
                EXPECT_EQ(r.status,
                          want.index >= 0 ? StreamStatus::StopString : StreamStatus::Continue);
            }
        }
    }
}

TEST(TextStream, StopStringAcrossTokensHandWritten) {
    auto m = load_model(kSmol);
    if (!m) GTEST_SKIP() << kSmol << " not present";
    using V = std::vector<std::string>;
    // Split over 4 single-byte tokens: nothing of "STOP" is ever emitted.
    StreamRun r = stream(*m, piece_ids(*m, {"Hello", "S", "T", "O", "P", " more"}), {"STOP"});
    EXPECT_EQ(r.steps, (V{"Hello", "", "", "", "", ""}));
    EXPECT_EQ(r.status, StreamStatus::StopString);
    EXPECT_EQ(r.all, "Hello");
    // Over 2 tokens, with text before it in the first token.
    r = stream(*m, piece_ids(*m, {"Hello", " ST", "OP", " more"}), {"STOP"});
    EXPECT_EQ(r.steps, (V{"Hello", " ", "", ""}));
    EXPECT_EQ(r.all, "Hello ");
    // Over 3 tokens.
    r = stream(*m, piece_ids(*m, {"Hi", " ST", "O", "P"}), {" STOP"});
    EXPECT_EQ(r.steps, (V{"Hi", "", "", ""}));
    EXPECT_EQ(r.all, "Hi");
    // A partial match that fails is released at the token that rules it out.
    r = stream(*m, piece_ids(*m, {"Hello", " ST", "OR", "Y"}), {"STOP"});
    EXPECT_EQ(r.steps, (V{"Hello", " ", "STOR", "Y"}));
    EXPECT_EQ(r.status, StreamStatus::Continue);
    EXPECT_EQ(r.all, "Hello STORY");
    // Self-overlapping prefix: "aaab" with stop "aab" releases exactly one "a".
    r = stream(*m, piece_ids(*m, {"a", "a", "a", "b"}), {"aab"});
    EXPECT_EQ(r.steps, (V{"", "", "a", ""}));
    EXPECT_EQ(r.all, "a");
    EXPECT_EQ(r.status, StreamStatus::StopString);
    // Overlapping candidates: "ab" completes before "abc" could.
    r = stream(*m, piece_ids(*m, {"xx", "a", "b", "c"}), {"abc", "ab"});
    EXPECT_EQ(r.steps, (V{"xx", "", "", ""}));
    EXPECT_EQ(r.index, 1);
    r = stream(*m, piece_ids(*m, {"xx", "ab", "c"}), {"abd", "abc"});
    EXPECT_EQ(r.steps, (V{"xx", "", ""}));
    EXPECT_EQ(r.index, 1);
    // Same end: the longer (earlier-starting) one wins, whatever the list order.
    r = stream(*m, piece_ids(*m, {"xx", "ab"}), {"b", "ab"});
    EXPECT_EQ(r.all, "xx");
    EXPECT_EQ(r.index, 1);
    // Stop string at the very start.
    r = stream(*m, piece_ids(*m, {"Hello", " world"}), {"Hello"});
    EXPECT_EQ(r.steps, (V{"", ""}));
    EXPECT_EQ(r.all, "");
    EXPECT_EQ(r.status, StreamStatus::StopString);
    // Held prefix released by finish().
    r = stream(*m, piece_ids(*m, {"Hi", " the"}), {" there"});
    EXPECT_EQ(r.steps, (V{"Hi", ""}));
    EXPECT_EQ(r.all, "Hi the");
    EXPECT_EQ(r.status, StreamStatus::Continue);
}

TEST(TextStream, StopStringsAndMultiByteCharacters) {
    auto m = load_model(kSmol);
    if (!m) GTEST_SKIP() << kSmol << " not present";
    using V = std::vector<std::string>;
    // "日" (E6 97 A5) is a prefix of the stop "日本"; "曜" (E6 9B 9C) arrives byte by byte: nothing
    // is emitted until "曜" is complete, then both characters are released together.
    StreamRun r = stream(*m, byte_ids(*m, "日曜"), {"日本"});
    EXPECT_EQ(r.steps, (V{"", "", "", "", "", "日曜"}));
    // "旦" (E6 97 A6) shares two bytes with "日": no byte-level false match or early release.
    r = stream(*m, byte_ids(*m, "日旦"), {"日日"});
    EXPECT_EQ(r.steps, (V{"", "", "", "", "", "日旦"}));
    // Stop string made of one multi-byte character split over 3 byte tokens.
    r = stream(*m, byte_ids(*m, "日本語です"), {"語"});
    EXPECT_EQ(r.steps, (V{"", "", "日", "", "", "本", "", "", "", "", "", "", "", "", ""}));
    EXPECT_EQ(r.all, "日本");
    EXPECT_EQ(r.status, StreamStatus::StopString);
    // Emoji with a skin-tone modifier: the stop is the modifier only.
    r = stream(*m, byte_ids(*m, "ok👍🏽!"), {"🏽"});
    EXPECT_EQ(r.all, "ok👍");
    // A stop string that is not valid UTF-8 (a lone continuation byte) never splits a character.
    r = stream(*m, byte_ids(*m, "a日b"),
               {"\x97\xA5"
                "b"},
               /*check_hold=*/false);
    EXPECT_EQ(r.all, "a");
    EXPECT_TRUE(valid_utf8(r.all));
}

TEST(TextStream, EndOfGenerationTokens) {
    for (const char* name : {kSmol, kGemma}) {
        auto m = load_model(name);
        if (!m) GTEST_SKIP() << name << " not present";
        const Tokenizer& tok = *m->tok;
        const TokenId eot = tok.eot() >= 0 ? tok.eot() : tok.eos();
        ASSERT_GE(eot, 0) << name;
        ASSERT_TRUE(tok.is_eog(eot));
        for (bool special : {false, true}) {
            TextStream ts(tok, {"never"}, special);
            const Ids ids = tok.encode("Hi there", false, false);
            std::string out;
            for (TokenId id : ids) out += ts.push(id).text;
            StreamStep st = ts.push(eot);
            out += st.text;
            EXPECT_EQ(st.status, StreamStatus::Eog) << name;
            EXPECT_EQ(out, "Hi there") << name << " special=" << special;  // no "<end_of_turn>"
            EXPECT_EQ(ts.eog_token(), eot);
            EXPECT_EQ(ts.stop_index(), -1);
            // Nothing after the stop.
            st = ts.push(ids[0]);
            EXPECT_EQ(st.text, "");
            EXPECT_EQ(st.status, StreamStatus::Eog);
            EXPECT_EQ(ts.finish(), "");
            EXPECT_EQ(ts.text(), "Hi there");
        }
        // A held stop-string prefix and a truncated character are released with the EOG.
        TextStream ts(tok, {"Hi there!"});
        std::string out;
        for (TokenId id : tok.encode("Hi there", false, false)) out += ts.push(id).text;
        EXPECT_EQ(out, "");
        for (TokenId id : byte_ids(*m, "\xE6\x97")) out += ts.push(id).text;
        EXPECT_EQ(out, "");
        const StreamStep st = ts.push(eot);
        EXPECT_EQ(st.text, "Hi there" + kFffd);
        EXPECT_EQ(st.status, StreamStatus::Eog);
        // A non-EOG control token is rendered when special=true and can be part of a stop.
        const TokenId bos = tok.bos();
        if (bos >= 0 && !tok.is_eog(bos)) {
            const std::string bos_text(tok.token_text(bos));
            TextStream sp(tok, {}, true);
            EXPECT_EQ(sp.push(bos).text, bos_text);
            TextStream plain(tok, {}, false);
            EXPECT_EQ(plain.push(bos).text, "");
            TextStream stop(tok, {bos_text}, true);
            EXPECT_EQ(stop.push(bos).status, StreamStatus::StopString);
        }
    }
}

TEST(TextStream, InvalidUtf8BecomesReplacementCharacter) {
    using V = std::vector<std::string>;
    for (const char* name : {kSmol, kGemma}) {
        auto m = load_model(name);
        if (!m) GTEST_SKIP() << name << " not present";
        // Truncated character at the end: U+FFFD only at finish() (Python: b"ok\xe6\x97" ->
        // "ok\ufffd").
        TextStream ts(*m->tok, {});
        std::vector<std::string> steps;
        for (TokenId id : byte_ids(*m, "ok\xE6\x97")) steps.push_back(ts.push(id).text);
        EXPECT_EQ(steps, (V{"o", "k", "", ""}));
        EXPECT_EQ(ts.finish(), kFffd);
        EXPECT_EQ(ts.text(), "ok" + kFffd);
        EXPECT_EQ(ts.status(), StreamStatus::Continue);
        // Proven invalid mid-stream: replaced at once, not held.
        StreamRun r = stream(*m,
                             byte_ids(*m,
                                      "a\x80"
                                      "b"),
                             {}, false);
        EXPECT_EQ(r.steps, (V{"a", kFffd, "b"}));
        r = stream(*m,
                   byte_ids(*m,
                            "\xE6"
                            "A"),
                   {}, false);
        EXPECT_EQ(r.steps, (V{"", kFffd + "A"}));
        // Surrogate encoding ED A0 80: three maximal subparts -> three U+FFFD (Python agrees).
        r = stream(*m, byte_ids(*m, "\xED\xA0\x80"), {}, false);
        EXPECT_EQ(r.all, kFffd + kFffd + kFffd);
        // A stop string can match the replacement character (it matches emitted text).
        r = stream(*m,
                   byte_ids(*m,
                            "x\x80"
                            "y"),
                   {kFffd}, false);
        EXPECT_EQ(r.all, "x");
        EXPECT_EQ(r.status, StreamStatus::StopString);
        // finish() that completes a stop string with the flushed U+FFFD still stops.
        TextStream t2(*m->tok, {"a" + kFffd});
        for (TokenId id : byte_ids(*m, "ba\xE6")) t2.push(id);
        EXPECT_EQ(t2.text(), "b");
        EXPECT_EQ(t2.finish(), "");
        EXPECT_EQ(t2.text(), "b");
        EXPECT_EQ(t2.status(), StreamStatus::StopString);
    }
}
