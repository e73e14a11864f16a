// zinc/tokenizer/spm_bpe.cpp — SentencePiece-style BPE (tokenizer.ggml.model = "llama").
//
// encode: split on special tokens; each raw fragment gets a leading space when add_space_prefix
// is set and it is the first fragment or follows a special token, spaces become "▁" (U+2581),
// the text is cut into characters by their UTF-8 lead byte (no validation, so bad bytes stay
// single symbols), and adjacent symbols whose concatenation is a vocabulary piece are merged
// highest score first (leftmost on ties) with a priority queue. A symbol that is not a piece is
// emitted as byte tokens <0xXX> (byte fallback), or as the unknown token when those are missing.
#include <queue>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace zinc::tokenizer {

namespace {

class SpmTokenizer final : public TokenizerBase {
  public:
    SpmTokenizer(std::unique_ptr<Vocab> vocab, const SpecialIds& ids, std::vector<TokenId> eog,
                 bool add_bos, bool add_eos, bool add_space_prefix)
        : TokenizerBase(std::move(vocab), Family::SentencePiece, ids, std::move(eog), add_bos,
                        add_eos),
          add_space_prefix_(add_space_prefix) {
        static const char kHex[] = "0123456789ABCDEF";
        for (int b = 0; b < 256; ++b) {
            const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
            TokenId t = vocab_->find(std::string_view(name, 6));
            if (t < 0) t = vocab_->find(std::string_view(reinterpret_cast<const char*>(&b), 1));
            byte_tokens_[b] = t >= 0 ? t : ids.unk;
        }
    }

    std::vector<TokenId> encode_impl(std::string_view text, bool add_special, bool parse_special,
                                     const std::vector<TextRange>* plain) const override;

  private:
    struct Symbol {
        int prev, next;
        uint32_t off, len;
    };
    struct Bigram {
        float score;
        int left, right;
        uint32_t size;
    };
    struct BigramOrder {  // top() = highest score, then leftmost
        bool operator()(const Bigram& a, const Bigram& b) const {
            return a.score < b.score || (a.score == b.score && a.left > b.left);
        }
    };

    void encode_text(const std::string& text, std::vector<TokenId>& out) const;

    bool add_space_prefix_;
    TokenId byte_tokens_[256];
};

void SpmTokenizer::encode_text(const std::string& text, std::vector<TokenId>& out) const {
    std::vector<Symbol> syms;
    for (uint32_t off = 0; off < text.size();) {
        const uint32_t len = static_cast<uint32_t>(std::min<size_t>(
            utf8_len_from_lead(static_cast<uint8_t>(text[off])), text.size() - off));
        const int idx = static_cast<int>(syms.size());
        syms.push_back({idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
        off += len;
    }
    const std::string_view tv(text);
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto add_bigram = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        const uint32_t size = syms[l].len + syms[r].len;
        const TokenId t = vocab_->find(tv.substr(syms[l].off, size));
        if (t < 0) return;
        queue.push({vocab_->score(t), l, r, size});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) add_bigram(i - 1, i);
    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol& l = syms[b.left];
        Symbol& r = syms[b.right];
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) syms[r.next].prev = b.left;
        add_bigram(l.prev, b.left);
        add_bigram(b.left, l.next);
    }
    for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
        const auto s = tv.substr(syms[i].off, syms[i].len);
        const TokenId t = vocab_->find(s);
        if (t >= 0) {
            out.push_back(t);
            continue;
        }
        for (unsigned char c : s) {
            const TokenId bt = byte_tokens_[c];
            if (bt >= 0) out.push_back(bt);
        }
    }
}

std::vector<TokenId> SpmTokenizer::encode_impl(std::string_view text, bool add_special,
                                               bool parse_special,
                                               const std::vector<TextRange>* plain) const {
    std::vector<TokenId> out;
    if (add_special && add_bos_) out.push_back(bos_);
    bool prev_special = true;  // the first fragment counts as following a special token
    std::string buf;
    for (const Fragment& f : matcher_.partition(text, parse_special, plain)) {
        if (f.is_token) {
            out.push_back(f.token);
            prev_special = true;
            continue;
        }
        buf.clear();
        if (add_space_prefix_ && prev_special) buf += "\xE2\x96\x81";
        for (char c : text.substr(f.offset, f.length)) {
            if (c == ' ')
                buf += "\xE2\x96\x81";
            else
                buf.push_back(c);
        }
        encode_text(buf, out);
        prev_special = false;
    }
    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(const VocabSpec& spec) {
    auto vocab = Vocab::build(spec);
    if (!vocab.ok()) return vocab.error();
    SpecialIds ids;
    std::vector<TokenId> eog = resolve_specials(spec, /*is_spm=*/true, **vocab, ids);
    const bool add_bos = spec.add_bos.value_or(true);
    const bool add_eos = spec.add_eos.value_or(false);
    if (add_bos && ids.bos < 0)
        return make_error("tokenizer.ggml.add_bos_token is true but there is no BOS token");
    if (add_eos && ids.eos < 0)
        return make_error("tokenizer.ggml.add_eos_token is true but there is no EOS token");
    return std::unique_ptr<Tokenizer>(
        std::make_unique<SpmTokenizer>(std::move(vocab).value(), ids, std::move(eog), add_bos,
                                       add_eos, spec.add_space_prefix.value_or(true)));
}

}  // namespace zinc::tokenizer
