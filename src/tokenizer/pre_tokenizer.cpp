// zinc/tokenizer/pre_tokenizer.cpp — the pre-tokenizer matchers. Each stage maps a list of piece
// lengths to a finer one. Two flavours of character classes exist because llama.cpp runs some
// patterns through hand-written code (Unicode classes for every code point) and others through
// std::regex over a "collapsed" text where ASCII stays ASCII (so \p{N} is [0-9] there, \s is
// [\t\n\v\f\r ]) and each non-ASCII code point becomes one byte standing for its class
// (White_Space first). For the patterns below the two agree except where noted.
#include "tokenizer/pre_tokenizer.h"

#include <string>

#include "tokenizer/unicode.h"

namespace zinc::tokenizer {

Result<PreTokenizerInfo> pre_tokenizer_from_name(std::string_view pre) {
    PreTokenizerInfo info;
    auto is_any = [&](std::initializer_list<std::string_view> names) {
        for (auto n : names)
            if (pre == n) return true;
        return false;
    };
    if (pre.empty() || pre == "default") {
        info.kind = PreTokenizerKind::Default;
    } else if (is_any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                       "midm-2.0", "lfm2", "dbrx", "smaug-bpe"})) {
        info.kind = PreTokenizerKind::Llama3;
        // llama.cpp sets these two for the llama3 family names but not for dbrx / smaug-bpe.
        const bool llama3_family = !is_any({"dbrx", "smaug-bpe"});
        info.ignore_merges = llama3_family;
        info.default_add_bos = llama3_family;
    } else if (is_any({"gpt-2", "gpt2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
                       "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "exaone4", "mpt", "olmo",
                       "jais", "trillion", "granite-docling"})) {
        info.kind = PreTokenizerKind::Gpt2;
    } else if (is_any({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
                       "minerva-7b"})) {
        info.kind = PreTokenizerKind::SmolLm;
    } else if (is_any({"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"})) {
        info.kind = PreTokenizerKind::Qwen2;
    } else {
        return make_error("tokenizer.ggml.pre: unsupported pre-tokenizer '" + std::string(pre) +
                          "' (supported: default, gpt-2, smollm, llama3/llama-bpe, qwen2 and "
                          "their aliases)");
    }
    return info;
}

namespace {

struct Cp {
    uint32_t cp = 0;
    bool valid = false;  // inside the current piece
    bool letter = false, number = false, space = false;
};

// View of one piece [ini, end) of the code point array with out-of-range positions invalid.
class Piece {
  public:
    Piece(const std::vector<uint32_t>& cpts, size_t ini, size_t end)
        : cpts_(cpts), ini_(ini), end_(end) {}
    Cp at(size_t pos) const {
        Cp c;
        if (pos < ini_ || pos >= end_) return c;
        c.cp = cpts_[pos];
        c.valid = true;
        const CpClass k = cp_class(c.cp);
        c.letter = k == CpClass::Letter;
        c.number = k == CpClass::Number;
        c.space = is_white_space(c.cp);
        return c;
    }
    uint32_t cp(size_t pos) const { return (pos >= ini_ && pos < end_) ? cpts_[pos] : 0xFFFFFFFFu; }
    size_t ini() const { return ini_; }
    size_t end() const { return end_; }

  private:
    const std::vector<uint32_t>& cpts_;
    size_t ini_, end_;
};

// Appends pieces as the scan advances; `cut(pos)` closes the piece that ends at pos.
class Cutter {
  public:
    Cutter(std::vector<size_t>& out, size_t start) : out_(out), prev_(start) {}
    void cut(size_t pos) {
        if (pos > prev_) out_.push_back(pos - prev_);
        prev_ = pos;
    }

  private:
    std::vector<size_t>& out_;
    size_t prev_;
};

bool is_contraction_tail(uint32_t a, uint32_t b, bool fold, size_t* len) {
    auto low = [&](uint32_t c) { return (fold && c >= 'A' && c <= 'Z') ? c + 32 : c; };
    const uint32_t x = low(a);
    if (x == 's' || x == 't' || x == 'm' || x == 'd') {
        *len = 2;
        return true;
    }
    const uint32_t y = low(b);
    if ((x == 'r' && y == 'e') || (x == 'v' && y == 'e') || (x == 'l' && y == 'l')) {
        *len = 3;
        return true;
    }
    return false;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const Piece& p, std::vector<size_t>& out) {
    Cutter cut(out, p.ini());
    size_t pos = p.ini();
    while (pos < p.end()) {
        const Cp c = p.at(pos);
        if (c.cp == '\'' && pos + 1 < p.end()) {
            const uint32_t n1 = p.cp(pos + 1);
            const uint32_t n2 = pos + 2 < p.end() ? p.cp(pos + 2) : 0;
            size_t len = 0;
            if (is_contraction_tail(n1, n2, false, &len) && (len == 2 || pos + 2 < p.end())) {
                pos += len;
                cut.cut(pos);
                continue;
            }
        }
        const Cp c2 = c.cp == ' ' ? p.at(pos + 1) : c;
        const size_t skip = c.cp == ' ' ? 1 : 0;
        if (c2.letter) {
            pos += skip;
            while (p.at(pos).letter) ++pos;
            cut.cut(pos);
            continue;
        }
        if (c2.number) {
            pos += skip;
            while (p.at(pos).number) ++pos;
            cut.cut(pos);
            continue;
        }
        auto other = [](const Cp& x) { return x.valid && !x.space && !x.letter && !x.number; };
        if (other(c2)) {
            pos += skip;
            while (other(p.at(pos))) ++pos;
            cut.cut(pos);
            continue;
        }
        size_t n_ws = 0;
        while (p.at(pos + n_ws).space) ++n_ws;
        if (n_ws > 1 && p.at(pos + n_ws).valid) {
            pos += n_ws - 1;  // \s+(?!\S): leave the last space to start the next word
        } else if (n_ws > 0) {
            pos += n_ws;
        } else {
            pos += 1;
        }
        cut.cut(pos);
    }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const Piece& p, size_t max_digits, std::vector<size_t>& out) {
    Cutter cut(out, p.ini());
    size_t pos = p.ini();
    auto is_crlf = [](uint32_t x) { return x == '\r' || x == '\n'; };
    while (pos < p.end()) {
        const Cp c = p.at(pos);
        if (c.cp == '\'' && pos + 1 < p.end()) {
            const uint32_t n1 = p.cp(pos + 1);
            const uint32_t n2 = pos + 2 < p.end() ? p.cp(pos + 2) : 0;
            size_t len = 0;
            if (is_contraction_tail(n1, n2, true, &len) && (len == 2 || pos + 2 < p.end())) {
                pos += len;
                cut.cut(pos);
                continue;
            }
        }
        if (!(is_crlf(c.cp) || c.number) && (c.letter || p.at(pos + 1).letter)) {
            ++pos;  // the letter itself, or the one-character prefix before the letters
            while (p.at(pos).letter) ++pos;
            cut.cut(pos);
            continue;
        }
        if (c.number) {
            size_t run = 0;
            while (p.at(pos).number) {
                ++pos;
                if (++run == max_digits) {
                    cut.cut(pos);
                    run = 0;
                }
            }
            cut.cut(pos);
            continue;
        }
        const Cp c2 = c.cp == ' ' ? p.at(pos + 1) : c;
        if (!(c2.space || c2.letter || c2.number) && c.valid) {
            // ' ?[^\s\p{L}\p{N}]+[\r\n]*' — a lone trailing space also ends up here.
            Cp x = c2;
            pos += c.cp == ' ' ? 1 : 0;
            while (x.valid && !(x.space || x.letter || x.number)) x = p.at(++pos);
            while (is_crlf(p.cp(pos))) ++pos;
            cut.cut(pos);
            continue;
        }
        size_t n_ws = 0, last_crlf_end = 0;
        while (p.at(pos + n_ws).space) {
            if (is_crlf(p.cp(pos + n_ws))) last_crlf_end = pos + n_ws + 1;
            ++n_ws;
        }
        if (last_crlf_end > 0) {
            pos = last_crlf_end;  // \s*[\r\n]+
        } else if (n_ws > 1 && p.at(pos + n_ws).valid) {
            pos += n_ws - 1;  // \s+(?!\S)
        } else if (n_ws > 0) {
            pos += n_ws;  // \s+
        } else {
            pos += 1;
        }
        cut.cut(pos);
    }
}

// Classes as llama.cpp's std::regex fallback sees them (see the file comment).
bool rx_number(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return !is_white_space(cp) && cp_class(cp) == CpClass::Number;
}

// [\p{P}\$\+<=>\^~\|]: ASCII punctuation per llama.cpp's collapsed \p{P} (no '`'), the listed
// symbols, and non-ASCII code points of class Punctuation.
bool rx_default_punct(uint32_t cp) {
    if (cp < 0x80) {
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) ||
               (cp >= 0x5B && cp <= 0x5E) || cp == 0x5F || (cp >= 0x7B && cp <= 0x7E);
    }
    return !is_white_space(cp) && cp_class(cp) == CpClass::Punctuation;
}

// Matches of `pred+` (run) or of a single `pred` character (!run) become pieces; so do gaps.
template <class Pred>
void split_class(const Piece& p, Pred pred, bool run, std::vector<size_t>& out) {
    Cutter cut(out, p.ini());
    size_t pos = p.ini();
    while (pos < p.end()) {
        if (!pred(p.cp(pos))) {
            ++pos;
            continue;
        }
        cut.cut(pos);
        ++pos;
        if (run)
            while (pos < p.end() && pred(p.cp(pos))) ++pos;
        cut.cut(pos);
    }
    cut.cut(p.end());
}

// [0-9][0-9][0-9]: leftmost non-overlapping triples of ASCII digits.
void split_digit_triples(const Piece& p, std::vector<size_t>& out) {
    Cutter cut(out, p.ini());
    auto digit = [&](size_t i) {
        uint32_t c = p.cp(i);
        return c >= '0' && c <= '9';
    };
    size_t pos = p.ini();
    while (pos + 2 < p.end()) {
        if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
            cut.cut(pos);
            pos += 3;
            cut.cut(pos);
        } else {
            ++pos;
        }
    }
    cut.cut(p.end());
}

template <class Fn>
void apply_stage(const std::vector<uint32_t>& cpts, std::vector<size_t>& lengths, Fn fn) {
    std::vector<size_t> next;
    next.reserve(lengths.size() * 2);
    size_t start = 0;
    for (size_t len : lengths) {
        fn(Piece(cpts, start, start + len), next);
        start += len;
    }
    lengths.swap(next);
}

}  // namespace

void pre_tokenize(PreTokenizerKind kind, const std::vector<uint32_t>& cpts,
                  std::vector<size_t>& lengths) {
    lengths.clear();
    if (cpts.empty()) return;
    lengths.push_back(cpts.size());
    auto gpt2 = [](const Piece& p, std::vector<size_t>& o) { split_gpt2(p, o); };
    switch (kind) {
        case PreTokenizerKind::Gpt2:
            apply_stage(cpts, lengths, gpt2);
            break;
        case PreTokenizerKind::SmolLm:
            apply_stage(cpts, lengths, [](const Piece& p, std::vector<size_t>& o) {
                split_class(p, rx_number, false, o);
            });
            apply_stage(cpts, lengths, gpt2);
            break;
        case PreTokenizerKind::Llama3:
            apply_stage(cpts, lengths,
                        [](const Piece& p, std::vector<size_t>& o) { split_llama3(p, 3, o); });
            break;
        case PreTokenizerKind::Qwen2:
            apply_stage(cpts, lengths,
                        [](const Piece& p, std::vector<size_t>& o) { split_llama3(p, 1, o); });
            break;
        case PreTokenizerKind::Default:
            apply_stage(cpts, lengths, [](const Piece& p, std::vector<size_t>& o) {
                split_class(p, rx_default_punct, true, o);
            });
            apply_stage(cpts, lengths, gpt2);
            apply_stage(cpts, lengths, [](const Piece& p, std::vector<size_t>& o) {
                split_class(p, rx_number, true, o);
            });
            apply_stage(cpts, lengths, split_digit_triples);
            break;
    }
}

}  // namespace zinc::tokenizer
