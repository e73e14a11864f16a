// zinc/engine/grammar_matcher.cpp — see grammar_matcher.h. The stack operations follow
// llama.cpp's llama_grammar_advance_stack / llama_grammar_accept / llama_grammar_match_char.
#include "engine/grammar_matcher.h"

#include <algorithm>

#include "util/check.h"

namespace zinc::engine {

using ET = GrammarElemType;

GrammarVocab::GrammarVocab(std::vector<std::string> p, std::vector<int32_t> e)
    : pieces(std::move(p)), eog(std::move(e)) {
    std::sort(eog.begin(), eog.end());
    for (size_t i = 0; i < pieces.size(); ++i)
        if (!pieces[i].empty() && !is_eog(static_cast<int32_t>(i)))
            order.push_back(static_cast<int32_t>(i));
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
    });
    lcp.assign(order.size(), 0);
    for (size_t k = 1; k < order.size(); ++k) {
        const std::string& a = pieces[static_cast<size_t>(order[k - 1])];
        const std::string& b = pieces[static_cast<size_t>(order[k])];
        uint32_t n = 0;
        while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
        lcp[k] = n;
    }
}

bool GrammarVocab::is_eog(int32_t id) const {
    return std::binary_search(eog.begin(), eog.end(), id);
}

namespace {

bool is_end(const GrammarElem* p) {
    return p->type == ET::End || p->type == ET::Alt;
}

// Does the character set starting at `pos` match cp? Sets `next` past the set.
bool match_char(const GrammarElem* pos, uint32_t cp, const GrammarElem** next) {
    if (pos->type == ET::CharAny) {
        *next = pos + 1;
        return true;
    }
    const bool negated = pos->type == ET::CharNot;
    bool found = false;
    do {
        if (pos[1].type == ET::CharRngUpper) {
            found = found || (pos->value <= cp && cp <= pos[1].value);
            pos += 2;
        } else {
            found = found || pos->value == cp;
            pos += 1;
        }
    } while (pos->type == ET::CharAlt);
    *next = pos;
    return found != negated;
}

// Could the set at `pos` match some code point in [lo, hi] (an unfinished UTF-8 character)?
// A negated set is refused only when one of its ranges covers [lo, hi] whole.
bool match_range(const GrammarElem* pos, uint32_t lo, uint32_t hi) {
    if (pos->type == ET::CharAny) return true;
    const bool negated = pos->type == ET::CharNot;
    do {
        uint32_t a = pos->value, b = pos->value;
        if (pos[1].type == ET::CharRngUpper) {
            b = pos[1].value;
            pos += 2;
        } else {
            pos += 1;
        }
        if (!negated && a <= hi && lo <= b) return true;
        if (negated && a <= lo && hi <= b) return false;
    } while (pos->type == ET::CharAlt);
    return negated;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const GrammarConstraint> c) : c_(std::move(c)) {
    ZINC_CHECK(c_ && c_->grammar && c_->vocab);
    // The root's alternatives, each expanded to its first character sets.
    const std::vector<GrammarElem>& rule = c_->grammar->rules[c_->grammar->root];
    const GrammarElem* alt = rule.data();
    while (true) {
        std::vector<const GrammarElem*> st;
        if (!is_end(alt)) st.push_back(alt);
        expand(st, state_);
        while (!is_end(alt)) ++alt;
        if (alt->type == ET::End) break;
        ++alt;
    }
}

void GrammarMatcher::expand(std::vector<const GrammarElem*>& stack, State& out) const {
    if (stack.empty()) {
        if (std::find(out.stacks.begin(), out.stacks.end(), stack) == out.stacks.end())
            out.stacks.push_back(stack);
        return;
    }
    const GrammarElem* top = stack.back();
    if (top->type != ET::RuleRef) {
        if (std::find(out.stacks.begin(), out.stacks.end(), stack) == out.stacks.end())
            out.stacks.push_back(stack);
        return;
    }
    const std::vector<GrammarElem>& rule = c_->grammar->rules[top->value];
    stack.pop_back();
    const size_t base = stack.size();
    const GrammarElem* after = top + 1;
    const GrammarElem* alt = rule.data();
    while (true) {
        stack.resize(base);
        if (!is_end(after)) stack.push_back(after);
        if (!is_end(alt)) stack.push_back(alt);
        expand(stack, out);
        while (!is_end(alt)) ++alt;
        if (alt->type == ET::End) break;
        ++alt;  // past Alt
    }
    stack.resize(base);
    stack.push_back(top);
}

void GrammarMatcher::advance_char(const State& in, uint32_t cp, State& out) const {
    out.stacks.clear();
    out.partial_bits = 0;
    out.partial_left = 0;
    out.partial_min = 0;
    std::vector<const GrammarElem*> st;
    for (const auto& s : in.stacks) {
        if (s.empty()) continue;
        const GrammarElem* next = nullptr;
        if (!match_char(s.back(), cp, &next)) continue;
        st.assign(s.begin(), s.end() - 1);
        if (!is_end(next)) st.push_back(next);
        expand(st, out);
    }
}

bool GrammarMatcher::step_byte(const State& in, uint8_t b, State& out) const {
    if (in.partial_left == 0) {
        uint8_t need = 0;
        uint32_t bits = 0;
        if (b < 0x80) {
            advance_char(in, b, out);
            return !out.stacks.empty();
        }
        if (b >= 0xC0 && b < 0xE0) {
            need = 1;
            bits = b & 0x1Fu;
        } else if (b >= 0xE0 && b < 0xF0) {
            need = 2;
            bits = b & 0x0Fu;
        } else if (b >= 0xF0 && b < 0xF8) {
            need = 3;
            bits = b & 0x07u;
        } else {
            return false;  // a stray continuation byte or an invalid lead
        }
        out.stacks = in.stacks;
        out.partial_bits = bits;
        out.partial_left = need;
        out.partial_min = need == 1 ? 0x80u : need == 2 ? 0x800u : 0x10000u;
    } else {
        if ((b & 0xC0u) != 0x80u) return false;
        const uint32_t bits = (in.partial_bits << 6) | (b & 0x3Fu);
        if (in.partial_left == 1) {
            // Overlong encodings, surrogates and values past U+10FFFF are not characters.
            if (bits < in.partial_min || bits > 0x10FFFFu || (bits >= 0xD800u && bits <= 0xDFFFu))
                return false;
            advance_char(in, bits, out);
            return !out.stacks.empty();
        }
        out.stacks = in.stacks;
        out.partial_bits = bits;
        out.partial_left = static_cast<uint8_t>(in.partial_left - 1);
        out.partial_min = in.partial_min;
    }
    // The character is unfinished: alive if some stack can match one of its completions.
    const unsigned shift = 6u * out.partial_left;
    const uint32_t lo = std::max(out.partial_bits << shift, out.partial_min);
    const uint32_t hi = std::min((out.partial_bits << shift) | ((1u << shift) - 1u), 0x10FFFFu);
    if (lo > hi) return false;
    bool any = false;
    for (const auto& s : out.stacks)
        if (!s.empty() && match_range(s.back(), lo, hi)) any = true;
    return any;
}

bool GrammarMatcher::feed(const State& in, const std::string& bytes, State& out) const {
    State a = in, b;
    for (char ch : bytes) {
        if (!step_byte(a, static_cast<uint8_t>(ch), b)) return false;
        std::swap(a, b);
    }
    out = std::move(a);
    return true;
}

bool GrammarMatcher::complete() const {
    if (state_.partial_left) return false;
    return std::any_of(state_.stacks.begin(), state_.stacks.end(),
                       [](const auto& s) { return s.empty(); });
}

bool GrammarMatcher::allows(int32_t id) const {
    const GrammarVocab& v = *c_->vocab;
    if (id < 0 || id >= v.n_vocab()) return false;
    if (v.is_eog(id)) return complete();
    const std::string& p = v.pieces[static_cast<size_t>(id)];
    if (p.empty()) return false;
    State out;
    return feed(state_, p, out);
}

bool GrammarMatcher::accept(int32_t id) {
    const GrammarVocab& v = *c_->vocab;
    if (id < 0 || id >= v.n_vocab()) return false;
    if (v.is_eog(id)) return complete();
    const std::string& p = v.pieces[static_cast<size_t>(id)];
    if (p.empty()) return false;
    State out;
    if (!feed(state_, p, out)) return false;
    state_ = std::move(out);
    mask_valid_ = false;
    return true;
}

std::string GrammarMatcher::cache_key() const {
    std::vector<std::vector<const GrammarElem*>> s = state_.stacks;
    std::sort(s.begin(), s.end());
    std::string k;
    k.push_back(static_cast<char>(state_.partial_left));
    k.append(reinterpret_cast<const char*>(&state_.partial_bits), sizeof(uint32_t));
    k.append(reinterpret_cast<const char*>(&state_.partial_min), sizeof(uint32_t));
    for (const auto& st : s) {
        const auto n = static_cast<uint32_t>(st.size());
        k.append(reinterpret_cast<const char*>(&n), sizeof n);
        k.append(reinterpret_cast<const char*>(st.data()), st.size() * sizeof(st[0]));
    }
    return k;
}

const std::vector<uint8_t>& GrammarMatcher::allowed() {
    if (mask_valid_) return mask_;
    const GrammarVocab& v = *c_->vocab;
    const std::string key = cache_key();
    if (auto it = cache_.find(key); it != cache_.end()) {
        mask_ = it->second;
        mask_valid_ = true;
        return mask_;
    }
    mask_.assign(static_cast<size_t>(v.n_vocab()), 0);
    // path[d]: the state after the first d bytes of the previous token in `order`.
    std::vector<State> path;
    path.reserve(64);
    path.push_back(state_);
    const size_t n = v.order.size();
    for (size_t k = 0; k < n; ++k) {
        const auto id = static_cast<size_t>(v.order[k]);
        const std::string& piece = v.pieces[id];
        const size_t keep = std::min<size_t>(v.lcp[k], path.size() - 1);
        path.resize(keep + 1);
        size_t dead_len = 0;
        for (size_t d = keep; d < piece.size(); ++d) {
            State next;
            if (!step_byte(path[d], static_cast<uint8_t>(piece[d]), next)) {
                dead_len = d + 1;
                break;
            }
            path.push_back(std::move(next));
        }
        if (dead_len == 0) {
            mask_[id] = 1;
            continue;
        }
        // Every following token that shares the dead prefix is dead too.
        while (k + 1 < n && v.lcp[k + 1] >= dead_len) ++k;
    }
    if (complete())
        for (int32_t e : v.eog) mask_[static_cast<size_t>(e)] = 1;
    if (cache_.size() >= 256) cache_.clear();  // bounded: a grammar with many states
    cache_.emplace(key, mask_);
    mask_valid_ = true;
    return mask_;
}

}  // namespace zinc::engine
