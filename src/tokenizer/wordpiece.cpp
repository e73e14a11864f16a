// zinc/tokenizer/wordpiece.cpp — WordPiece (tokenizer.ggml.model = "bert"; Wu et al. 2016, as
// BERT's BasicTokenizer + WordpieceTokenizer), matching llama.cpp's WPM tokenizer id for id.
//
// encode: split on special tokens; each raw fragment is cut into words: whitespace ends a word;
// NUL, U+FFFD and control characters are dropped; with strip_accents every code point is first
// replaced by the first code point of its NFD decomposition and marks (\p{M}) are dropped; with
// lowercase it is lowercased; punctuation, ASCII symbols and CJK ideographs are words of their
// own. Each word, with the phantom space "▁" in front (the GGUF vocab marks word-initial pieces
// with it, and continuation pieces carry no "##", scripts/convert-bert-gguf.py), is split
// greedily into the longest vocabulary pieces from the left; a word with any unmatched position
// becomes the unknown token. add_special: [CLS] (BOS) first, [SEP] last (add_sep_token).
#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace zinc::tokenizer {

namespace {

// llama.cpp's is_chinese_char (the CJK blocks BERT treats as single-character words, including
// its 0x2B920 upper block start, which follows Hugging Face's Rust tokenizer).
bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class WordPieceTokenizer final : public TokenizerBase {
  public:
    WordPieceTokenizer(std::unique_ptr<Vocab> vocab, const SpecialIds& ids,
                       std::vector<TokenId> eog, bool add_bos, bool add_sep, bool lowercase,
                       bool strip_accents)
        : TokenizerBase(std::move(vocab), Family::SentencePiece, ids, std::move(eog), add_bos,
                        false),
          add_sep_(add_sep),
          lowercase_(lowercase),
          strip_accents_(strip_accents) {
        for (TokenId t = 0; t < vocab_->size(); ++t)
            max_len_ = std::max(max_len_, vocab_->text(t).size());
    }

    std::vector<TokenId> encode_impl(std::string_view text, bool add_special, bool parse_special,
                                     const std::vector<TextRange>* plain) const override {
        std::vector<TokenId> out;
        if (add_special && add_bos_) out.push_back(bos_);
        for (const Fragment& f : matcher_.partition(text, parse_special, plain)) {
            if (f.is_token) {
                out.push_back(f.token);
                continue;
            }
            for (const std::string& w : words(text.substr(f.offset, f.length))) encode_word(w, out);
        }
        if (add_special && add_sep_) out.push_back(ids_.sep);
        return out;
    }

  private:
    std::vector<std::string> words(std::string_view text) const {
        std::vector<uint32_t> cps;
        decode_utf8_lenient(text, cps);
        std::vector<std::string> ws(1);
        for (uint32_t cp : cps) {
            if (strip_accents_) cp = nfd_base(cp);
            if (is_white_space(cp)) {
                if (!ws.back().empty()) ws.emplace_back();
                continue;
            }
            const CpClass cls = cp_class(cp);
            if (cp == 0 || cp == kReplacementChar || cls == CpClass::Control) continue;
            if (strip_accents_ && cls == CpClass::Mark) continue;
            std::string s;
            append_utf8(lowercase_ ? to_lower(cp) : cp, s);
            if (cls == CpClass::Punctuation || (cp < 0x7F && cls == CpClass::Symbol) ||
                is_cjk(cp)) {
                if (!ws.back().empty()) ws.emplace_back();
                ws.back() = std::move(s);
                ws.emplace_back();
            } else {
                ws.back() += s;
            }
        }
        if (ws.back().empty()) ws.pop_back();
        return ws;
    }

    // Greedy longest-match-first over the word with its phantom space.
    void encode_word(const std::string& word, std::vector<TokenId>& out) const {
        if (word.empty()) return;
        const std::string w = "\xE2\x96\x81" + word;
        const size_t n = w.size(), start = out.size();
        for (size_t i = 0; i < n;) {
            TokenId found = -1;
            size_t j = std::min(n, i + max_len_ + 1);
            for (; j > i; --j) {
                found = vocab_->find(std::string_view(w).substr(i, j - i));
                if (found >= 0) break;
            }
            if (found < 0) {
                out.resize(start);
                break;
            }
            out.push_back(found);
            i = j;
        }
        if (out.size() == start) out.push_back(ids_.unk);
    }

    bool add_sep_, lowercase_, strip_accents_;
    size_t max_len_ = 0;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(const VocabSpec& spec) {
    auto vocab = Vocab::build(spec);
    if (!vocab.ok()) return vocab.error();
    SpecialIds ids;
    std::vector<TokenId> eog = resolve_specials(spec, /*is_spm=*/false, **vocab, ids);
    // llama.cpp's "bert" defaults where the file names no id: [CLS] 101 is BOS, no EOS,
    // [UNK] 100, [SEP] 102, [PAD] 0, [MASK] 103.
    const int32_t n = (*vocab)->size();
    auto dflt = [&](TokenId& id, const std::optional<int64_t>& key, TokenId d) {
        if (!key || *key < 0 || *key >= n) id = d < n ? d : -1;
    };
    dflt(ids.bos, spec.bos_id, 101);
    dflt(ids.eos, spec.eos_id, -1);
    dflt(ids.unk, spec.unk_id, 100);
    dflt(ids.sep, spec.sep_id, 102);
    dflt(ids.pad, spec.pad_id, 0);
    dflt(ids.mask, spec.mask_id, 103);
    if (!spec.eos_id) eog.erase(std::remove(eog.begin(), eog.end(), 11), eog.end());
    const bool add_bos = spec.add_bos.value_or(true);
    const bool add_sep = spec.add_sep.value_or(true);
    if (add_bos && ids.bos < 0)
        return make_error("tokenizer.ggml.add_bos_token is true but there is no BOS ([CLS]) token");
    if (add_sep && ids.sep < 0)
        return make_error("tokenizer.ggml.add_sep_token is true but there is no SEP token");
    if (ids.unk < 0)
        return make_error("tokenizer.ggml.unknown_token_id: a WordPiece vocab needs one");
    // llama.cpp: lowercase defaults to false, strip_accents to lowercase.
    const bool lower = spec.lowercase.value_or(false);
    return std::unique_ptr<Tokenizer>(
        std::make_unique<WordPieceTokenizer>(std::move(vocab).value(), ids, std::move(eog), add_bos,
                                             add_sep, lower, spec.strip_accents.value_or(lower)));
}

}  // namespace zinc::tokenizer
