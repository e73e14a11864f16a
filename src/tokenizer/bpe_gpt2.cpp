// zinc/tokenizer/bpe_gpt2.cpp — byte-level BPE (tokenizer.ggml.model = "gpt2").
//
// encode: split on special tokens; for each raw fragment decode code points (llama.cpp's lenient
// UTF-8: bad bytes become U+FFFD), pre-tokenize into words, map each word's UTF-8 bytes through
// the GPT-2 byte map, then merge adjacent symbols by merge rank (lowest rank first, leftmost on
// ties) with a priority queue. A final symbol that is not a token falls back to its single bytes
// as tokens, which for a byte-level vocab silently drops it (llama.cpp does the same).
#include <queue>
#include <unordered_map>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace zinc::tokenizer {

namespace {

class BpeTokenizer final : public TokenizerBase {
  public:
    BpeTokenizer(std::unique_ptr<Vocab> vocab, const SpecialIds& ids, std::vector<TokenId> eog,
                 bool add_bos, bool add_eos, PreTokenizerInfo pre)
        : TokenizerBase(std::move(vocab), Family::ByteLevelBpe, ids, std::move(eog), add_bos,
                        add_eos),
          pre_(pre) {}

    Result<void> load_merges(const std::vector<std::string_view>& merges);

    std::vector<TokenId> encode_impl(std::string_view text, bool add_special, bool parse_special,
                                     const std::vector<TextRange>* plain) const override;

  private:
    struct Symbol {
        int prev, next;
        uint32_t off, len;  // bytes in the word buffer
    };
    struct Bigram {
        int rank;
        int left, right;
        uint32_t size;
    };
    struct BigramOrder {  // top() = lowest rank, then leftmost
        bool operator()(const Bigram& a, const Bigram& b) const {
            return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
        }
    };

    int rank_of(std::string_view left, std::string_view right, std::string& scratch) const;
    void encode_word(const std::string& word, std::vector<TokenId>& out) const;

    PreTokenizerInfo pre_;
    std::vector<char> merge_arena_;  // "left right" lines back to back
    // full merge line -> (rank, length of the left part)
    std::unordered_map<std::string_view, std::pair<int, uint32_t>> merges_;
};

Result<void> BpeTokenizer::load_merges(const std::vector<std::string_view>& merges) {
    size_t total = 0;
    for (auto m : merges) total += m.size();
    merge_arena_.reserve(total);
    for (auto m : merges) merge_arena_.insert(merge_arena_.end(), m.begin(), m.end());
    merges_.reserve(merges.size());
    size_t off = 0;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string_view line(merge_arena_.data() + off, merges[i].size());
        off += merges[i].size();
        // llama.cpp splits at the first space after the first byte; a line without one is
        // the pair ("", "") and can never match.
        const size_t sp = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
        if (sp == std::string_view::npos) continue;
        merges_.emplace(line, std::make_pair(static_cast<int>(i), static_cast<uint32_t>(sp)));
    }
    return {};
}

int BpeTokenizer::rank_of(std::string_view left, std::string_view right,
                          std::string& scratch) const {
    scratch.assign(left);
    scratch.push_back(' ');
    scratch.append(right);
    auto it = merges_.find(scratch);
    if (it == merges_.end() || it->second.second != left.size()) return -1;
    return it->second.first;
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<TokenId>& out) const {
    if (pre_.ignore_merges) {
        const TokenId t = vocab_->find(word);
        if (t >= 0) {
            out.push_back(t);
            return;
        }
    }
    std::vector<Symbol> syms;
    for (uint32_t off = 0; off < word.size();) {
        const uint32_t len = static_cast<uint32_t>(std::min<size_t>(
            utf8_len_from_lead(static_cast<uint8_t>(word[off])), word.size() - off));
        const int idx = static_cast<int>(syms.size());
        syms.push_back({idx - 1, off + len == word.size() ? -1 : idx + 1, off, len});
        off += len;
    }
    std::string scratch;
    auto view = [&](const Symbol& s) { return std::string_view(word).substr(s.off, s.len); };
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto add_bigram = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        const int rank = rank_of(view(syms[l]), view(syms[r]), scratch);
        if (rank < 0) return;
        queue.push({rank, l, r, syms[l].len + syms[r].len});
    };
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) add_bigram(i - 1, i);
    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol& l = syms[b.left];
        Symbol& r = syms[b.right];
        // Stale entry: one side was merged away or has grown since it was queued.
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) syms[r.next].prev = b.left;
        add_bigram(l.prev, b.left);
        add_bigram(b.left, l.next);
    }
    for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
        const auto s = view(syms[i]);
        const TokenId t = vocab_->find(s);
        if (t >= 0) {
            out.push_back(t);
            continue;
        }
        for (char c : s) {
            const TokenId bt = vocab_->find(std::string_view(&c, 1));
            if (bt >= 0) out.push_back(bt);
        }
    }
}

std::vector<TokenId> BpeTokenizer::encode_impl(std::string_view text, bool add_special,
                                               bool parse_special,
                                               const std::vector<TextRange>* plain) const {
    std::vector<TokenId> out;
    if (add_special && add_bos_) out.push_back(bos_);
    std::vector<uint32_t> cpts;
    std::vector<size_t> lengths;
    std::string word;
    for (const Fragment& f : matcher_.partition(text, parse_special, plain)) {
        if (f.is_token) {
            out.push_back(f.token);
            continue;
        }
        decode_utf8_lenient(text.substr(f.offset, f.length), cpts);
        pre_tokenize(pre_.kind, cpts, lengths);
        size_t start = 0;
        std::string utf8;
        for (size_t len : lengths) {
            utf8.clear();
            for (size_t k = start; k < start + len; ++k) append_utf8(cpts[k], utf8);
            start += len;
            word.clear();
            for (unsigned char c : utf8) append_utf8(byte_to_gpt2_cp(c), word);
            encode_word(word, out);
        }
    }
    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(const VocabSpec& spec) {
    auto pre = pre_tokenizer_from_name(spec.pre);
    if (!pre.ok()) return pre.error();
    auto vocab = Vocab::build(spec);
    if (!vocab.ok()) return vocab.error();
    if (spec.merges.empty()) return make_error("tokenizer.ggml.merges: missing (needed for gpt2)");
    SpecialIds ids;
    std::vector<TokenId> eog = resolve_specials(spec, /*is_spm=*/false, **vocab, ids);
    const bool add_bos = spec.add_bos.value_or(pre->default_add_bos);
    const bool add_eos = spec.add_eos.value_or(false);
    if (add_bos && ids.bos < 0)
        return make_error("tokenizer.ggml.add_bos_token is true but there is no BOS token");
    if (add_eos && ids.eos < 0)
        return make_error("tokenizer.ggml.add_eos_token is true but there is no EOS token");
    auto tok = std::make_unique<BpeTokenizer>(std::move(vocab).value(), ids, std::move(eog),
                                              add_bos, add_eos, *pre);
    auto r = tok->load_merges(spec.merges);
    if (!r.ok()) return r.error();
    return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace zinc::tokenizer
