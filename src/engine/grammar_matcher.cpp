// zinc/engine/grammar_matcher.cpp — see grammar_matcher.h. The stack operations follow
// llama.cpp's llama_grammar_advance_stack / llama_grammar_accept / llama_grammar_match_char.
#include "engine/grammar_matcher.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "util/check.h"

namespace zinc::engine {

using ET = GrammarElemType;

GrammarVocab::GrammarVocab(std::vector<std::string> p, std::vector<int32_t> e)
    : pieces(std::move(p)), eog(std::move(e)) {
    std::sort(eog.begin(), eog.end());
    std::vector<int32_t> order;
    size_t longest = 0;
    for (size_t i = 0; i < pieces.size(); ++i)
        if (!pieces[i].empty() && !is_eog(static_cast<int32_t>(i))) {
            order.push_back(static_cast<int32_t>(i));
            longest = std::max(longest, pieces[i].size());
        }
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)];
    });
    for (uint32_t len = 8;; len *= 2) {
        buckets.push_back(Bucket{len, {}, {}});
        if (len >= longest) break;
    }
    for (int32_t id : order) {
        const size_t n = pieces[static_cast<size_t>(id)].size();
        size_t b = 0;
        while (buckets[b].max_len < n) ++b;
        buckets[b].order.push_back(id);
    }
    for (Bucket& b : buckets) {
        b.lcp.assign(b.order.size(), 0);
        for (size_t k = 1; k < b.order.size(); ++k) {
            const std::string& x = pieces[static_cast<size_t>(b.order[k - 1])];
            const std::string& y = pieces[static_cast<size_t>(b.order[k])];
            uint32_t n = 0;
            while (n < x.size() && n < y.size() && x[n] == y[n]) ++n;
            b.lcp[k] = n;
        }
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

std::shared_ptr<const GrammarConstraint> make_grammar_constraint(
    Grammar g, std::shared_ptr<const GrammarVocab> vocab, std::vector<GrammarTrigger> triggers) {
    auto c = std::make_shared<GrammarConstraint>();
    c->grammar = std::make_shared<const Grammar>(std::move(g));
    c->vocab = std::move(vocab);
    c->masks = std::make_shared<GrammarMaskCache>(c->grammar, c->vocab->pieces.size());
    c->triggers = std::move(triggers);
    for (const GrammarTrigger& t : c->triggers) {
        ZINC_CHECK(!t.text.empty());
        c->max_trigger = std::max(c->max_trigger, t.text.size());
    }
    if (c->triggers.empty()) return c;
    for (int32_t id = 0; id < c->vocab->n_vocab(); ++id) {
        const std::string& p = c->vocab->pieces[static_cast<size_t>(id)];
        bool ends = false;
        for (const GrammarTrigger& tr : c->triggers) {
            const std::string& t = tr.text;
            ends = ends || p.find(t) != std::string::npos;
            for (size_t k = 1; k < t.size() && !ends; ++k)
                ends = p.compare(0, t.size() - k, t, k, t.size() - k) == 0;
        }
        if (ends) c->trigger_ids.push_back(id);
    }
    return c;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const GrammarConstraint> c) : c_(std::move(c)) {
    ZINC_CHECK(c_ && c_->grammar && c_->vocab);
    awaiting_ = !c_->triggers.empty();
    masks_ = c_->masks;
    if (!masks_) masks_ = std::make_shared<GrammarMaskCache>(c_->grammar, c_->vocab->pieces.size());
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

void GrammarMatcher::expand(GrammarStack& stack, State& out) const {
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
    GrammarStack st;
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

bool GrammarMatcher::trigger_fires(const std::string& piece, State& out, bool* refused) const {
    *refused = false;
    if (piece.empty() || !can_fire()) return false;
    const std::string text = tail_ + piece;
    // An at_start trigger counts where it begins at the free text's first non-whitespace byte.
    const size_t base = n_free_ - tail_.size();  // text[0]'s offset in the free text
    size_t first = first_text_;
    if (first == std::string::npos)
        if (const size_t j = text.find_first_not_of(" \t\n\r"); j != std::string::npos)
            first = base + j;
    size_t at = std::string::npos;
    for (const GrammarTrigger& t : c_->triggers) {
        const size_t k = text.find(t.text);
        if (k == std::string::npos || (t.at_start && base + k != first)) continue;
        at = std::min(at, k);
    }
    if (at == std::string::npos) return false;
    // state_ is still the grammar's start while awaiting.
    if (feed(state_, text.substr(at), out)) return true;
    *refused = true;
    return false;
}

bool GrammarMatcher::can_fire() const {
    return first_text_ == std::string::npos || n_free_ - first_text_ < c_->max_trigger ||
           std::any_of(c_->triggers.begin(), c_->triggers.end(),
                       [](const GrammarTrigger& t) { return !t.at_start; });
}

bool GrammarMatcher::complete() const {
    if (awaiting_) return true;  // free text may end anywhere
    if (state_.partial_left) return false;
    return std::any_of(state_.stacks.begin(), state_.stacks.end(),
                       [](const auto& s) { return s.empty(); });
}

bool GrammarMatcher::allows(int32_t id) const {
    const GrammarVocab& v = *c_->vocab;
    if (id < 0 || id >= v.n_vocab()) return false;
    if (v.is_eog(id)) return complete();
    if (awaiting_) {
        State out;
        bool refused = false;
        trigger_fires(v.pieces[static_cast<size_t>(id)], out, &refused);
        return !refused;
    }
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
    if (awaiting_) {
        State out;
        bool refused = false;
        if (trigger_fires(p, out, &refused)) {
            state_ = std::move(out);
            awaiting_ = false;
            tail_.clear();
        } else if (refused) {
            return false;
        } else {
            if (first_text_ == std::string::npos)
                if (const size_t j = p.find_first_not_of(" \t\n\r"); j != std::string::npos)
                    first_text_ = n_free_ + j;
            n_free_ += p.size();
            tail_ += p;
            const size_t keep = c_->max_trigger - 1;
            if (tail_.size() > keep) tail_.erase(0, tail_.size() - keep);
        }
        bits_valid_ = false;
        bytes_valid_ = false;
        return true;
    }
    if (p.empty()) return false;
    State out;
    if (!feed(state_, p, out)) return false;
    state_ = std::move(out);
    bits_valid_ = false;
    bytes_valid_ = false;
    return true;
}

// One mask computation's interned states: states[i] and its 256 transitions trans[i * 256 + b]
// (kUnknown until computed, kDead when the byte kills every stack).
struct GrammarMatcher::Walk {
    static constexpr int32_t kUnknown = -2, kDead = -1;
    std::vector<State> states;
    std::vector<int32_t> trans;
    std::unordered_map<std::string, int32_t> ids;
    std::string key;

    int32_t intern(State&& s) {
        // The exact state, stacks in their (deterministic) order: equal states reached in
        // another order get two ids, which only costs a repeated step.
        key.clear();
        key.push_back(static_cast<char>(s.partial_left));
        key.append(reinterpret_cast<const char*>(&s.partial_bits), sizeof s.partial_bits);
        key.append(reinterpret_cast<const char*>(&s.partial_min), sizeof s.partial_min);
        for (const auto& st : s.stacks) {
            const auto n = static_cast<uint32_t>(st.size());
            key.append(reinterpret_cast<const char*>(&n), sizeof n);
            key.append(reinterpret_cast<const char*>(st.data()), st.size() * sizeof(st[0]));
        }
        auto [it, fresh] = ids.emplace(key, static_cast<int32_t>(states.size()));
        if (fresh) {
            states.push_back(std::move(s));
            trans.resize(states.size() * 256, kUnknown);
        }
        return it->second;
    }
};

void GrammarMatcher::walk(Walk& w, const GrammarVocab::Bucket& b,
                          std::vector<uint64_t>& bits) const {
    const GrammarVocab& v = *c_->vocab;
    std::vector<int32_t> path;  // path[d]: the state after the first d bytes of the last token
    path.reserve(64);
    path.push_back(0);  // w.states[0] is state_
    const size_t n = b.order.size();
    for (size_t k = 0; k < n; ++k) {
        const auto id = static_cast<size_t>(b.order[k]);
        const std::string& piece = v.pieces[id];
        const size_t keep = std::min<size_t>(b.lcp[k], path.size() - 1);
        path.resize(keep + 1);
        size_t dead_len = 0;
        for (size_t d = keep; d < piece.size(); ++d) {
            const auto byte = static_cast<uint8_t>(piece[d]);
            const size_t ti = static_cast<size_t>(path[d]) * 256 + byte;
            int32_t t = w.trans[ti];
            if (t == Walk::kUnknown) {
                State next;
                t = step_byte(w.states[static_cast<size_t>(path[d])], byte, next)
                        ? w.intern(std::move(next))
                        : Walk::kDead;
                w.trans[ti] = t;
            }
            if (t == Walk::kDead) {
                dead_len = d + 1;
                break;
            }
            path.push_back(t);
        }
        if (dead_len == 0) {
            bits[id >> 6] |= uint64_t{1} << (id & 63);
            continue;
        }
        // Every following token that shares the dead prefix is dead too.
        while (k + 1 < n && b.lcp[k + 1] >= dead_len) ++k;
    }
}

const std::vector<uint64_t>& GrammarMatcher::allowed_bits() {
    if (bits_valid_) return bits_;
    const GrammarVocab& v = *c_->vocab;
    if (awaiting_) {
        // Everything (end of generation included), less the trigger-completing tokens whose
        // continuation the grammar refuses.
        bits_.assign(v.n_words(), ~uint64_t{0});
        if (const int32_t r = v.n_vocab() % 64) bits_.back() = (uint64_t{1} << r) - 1;
        if (can_fire())
            for (int32_t id : c_->trigger_ids)
                if (!allows(id)) bits_[static_cast<size_t>(id) >> 6] &= ~(uint64_t{1} << (id & 63));
        bits_valid_ = true;
        return bits_;
    }
    bits_.assign(v.n_words(), 0);
    std::unique_ptr<Walk> w;  // made on the first miss
    for (size_t bi = 0; bi < v.buckets.size(); ++bi) {
        const GrammarVocab::Bucket& b = v.buckets[bi];
        if (b.order.empty()) continue;
        masks_->key(state_, b.max_len, key_);
        if (masks_->or_into(bi, key_, bits_)) continue;
        if (!w) {
            w = std::make_unique<Walk>();
            w->intern(State(state_));
        }
        bucket_bits_.assign(v.n_words(), 0);
        walk(*w, b, bucket_bits_);
        masks_->insert(bi, key_, bucket_bits_);
        for (size_t i = 0; i < bits_.size(); ++i) bits_[i] |= bucket_bits_[i];
    }
    if (complete())
        for (int32_t e : v.eog) bits_[static_cast<size_t>(e) >> 6] |= uint64_t{1} << (e & 63);
    bits_valid_ = true;
    return bits_;
}

const std::vector<uint8_t>& GrammarMatcher::allowed() {
    if (bytes_valid_) return bytes_;
    const std::vector<uint64_t>& bits = allowed_bits();
    bytes_.assign(static_cast<size_t>(c_->vocab->n_vocab()), 0);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = (bits[i >> 6] >> (i & 63)) & 1u;
    bytes_valid_ = true;
    return bytes_;
}

}  // namespace zinc::engine
