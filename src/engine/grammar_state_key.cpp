// zinc/engine/grammar_state_key.cpp — depth-bounded position classes and state keys (see
// grammar_state_key.h).
#include "engine/grammar_state_key.h"

#include <algorithm>

#include "util/check.h"

namespace zinc::engine {

using ET = GrammarElemType;

namespace {

constexpr uint32_t kAny = 0;  // nothing more is read
constexpr uint32_t kEnd = 1;  // the alternative is done
constexpr uint32_t kInf = 1u << 30;

bool is_end(const GrammarElem* p) {
    return p->type == ET::End || p->type == ET::Alt;
}

bool is_set_tail(ET t) {
    return t == ET::CharAlt || t == ET::CharRngUpper;
}

void put_u32(std::string& s, uint32_t v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

int32_t minus(int32_t d, uint32_t n) {
    return n >= static_cast<uint32_t>(d) ? 0 : d - static_cast<int32_t>(n);
}

}  // namespace

GrammarStateKeys::GrammarStateKeys(const Grammar& g) : g_(g) {
    const size_t n_rules = g.rules.size();
    uint32_t n = 0;
    for (const auto& r : g.rules)
        for (const GrammarElem& e : r) index_.emplace(&e, n++);
    pos_min_.assign(n, 0);
    // The fewest characters each rule matches: a fixpoint from "infinite" (a rule that never
    // finishes keeps kInf; nothing after it is ever read).
    rule_min_.assign(n_rules, kInf);
    auto elem_min = [&](const GrammarElem& e) -> uint32_t {
        if (e.type == ET::RuleRef) return rule_min_[e.value];
        if (is_set_tail(e.type)) return 0;
        return 1;
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < n_rules; ++r) {
            uint32_t best = kInf, sum = 0;
            for (const GrammarElem& e : g.rules[r]) {
                if (e.type == ET::Alt || e.type == ET::End) {
                    best = std::min(best, sum);
                    sum = 0;
                } else {
                    sum = std::min(kInf, sum + elem_min(e));
                }
            }
            if (best < rule_min_[r]) {
                rule_min_[r] = best;
                changed = true;
            }
        }
    }
    // Per position: the fewest characters from it to its alternative's end (a backward sum).
    for (const auto& r : g.rules) {
        uint32_t sum = 0;
        for (size_t i = r.size(); i-- > 0;) {
            const GrammarElem& e = r[i];
            if (e.type == ET::Alt || e.type == ET::End) {
                sum = 0;
            } else {
                sum = std::min(kInf, sum + elem_min(e));
            }
            pos_min_[index_.at(&e)] = sum;
        }
    }
}

uint32_t GrammarStateKeys::index(const GrammarElem* p) const {
    auto it = index_.find(p);
    ZINC_CHECK(it != index_.end());
    return it->second;
}

uint32_t GrammarStateKeys::intern(const std::string& tuple) {
    auto [it, fresh] = tuples_.emplace(tuple, static_cast<uint32_t>(tuples_.size() + 2));
    (void)fresh;
    return it->second;
}

uint32_t GrammarStateKeys::pos_class(const GrammarElem* p, int32_t d) {
    if (d <= 0) return kAny;
    if (is_end(p)) return kEnd;
    const uint64_t mk = (static_cast<uint64_t>(index(p)) << 20) | static_cast<uint32_t>(d);
    if (auto it = pos_memo_.find(mk); it != pos_memo_.end()) return it->second;
    std::string t;
    if (p->type == ET::RuleRef) {
        const uint32_t rc = rule_class(p->value, d);
        const uint32_t next = pos_class(p + 1, minus(d, rule_min_[p->value]));
        t.push_back('R');
        put_u32(t, rc);
        put_u32(t, next);
    } else {
        // A character set: its elements (the start, then any CharAlt / CharRngUpper).
        t.push_back('C');
        const GrammarElem* q = p;
        do {
            t.push_back(static_cast<char>(q->type));
            put_u32(t, q->value);
            ++q;
        } while (is_set_tail(q->type));
        put_u32(t, pos_class(q, d - 1));
    }
    const uint32_t c = intern(t);
    pos_memo_.emplace(mk, c);
    return c;
}

uint32_t GrammarStateKeys::rule_class(uint32_t r, int32_t d) {
    if (d <= 0) return kAny;
    const uint64_t mk = (static_cast<uint64_t>(r) << 20) | static_cast<uint32_t>(d);
    if (auto it = rule_memo_.find(mk); it != rule_memo_.end()) return it->second;
    std::string t;
    t.push_back('U');
    const GrammarElem* alt = g_.rules[r].data();
    while (true) {
        put_u32(t, pos_class(alt, d));
        while (!is_end(alt)) ++alt;
        if (alt->type == ET::End) break;
        ++alt;
    }
    const uint32_t c = intern(t);
    rule_memo_.emplace(mk, c);
    return c;
}

void GrammarStateKeys::key(const GrammarState& s, uint32_t depth, std::string& out) {
    ZINC_CHECK(depth > 0 && depth < (1u << 20));
    stack_keys_.resize(s.stacks.size());
    for (size_t i = 0; i < s.stacks.size(); ++i) {
        std::string& k = stack_keys_[i];
        k.clear();
        auto d = static_cast<int32_t>(depth);
        for (auto it = s.stacks[i].rbegin(); it != s.stacks[i].rend() && d > 0; ++it) {
            put_u32(k, pos_class(*it, d));
            d = minus(d, pos_min_[index(*it)]);
        }
    }
    std::sort(stack_keys_.begin(), stack_keys_.end());
    out.clear();
    out.push_back(static_cast<char>(s.partial_left));
    put_u32(out, s.partial_bits);
    put_u32(out, s.partial_min);
    for (size_t i = 0; i < stack_keys_.size(); ++i) {
        if (i > 0 && stack_keys_[i] == stack_keys_[i - 1]) continue;
        put_u32(out, static_cast<uint32_t>(stack_keys_[i].size()));
        out += stack_keys_[i];
    }
}

void GrammarStateKeys::exact_key(const GrammarState& s, std::string& out) {
    std::vector<GrammarStack> st = s.stacks;
    std::sort(st.begin(), st.end());
    out.clear();
    out.push_back(static_cast<char>(s.partial_left));
    put_u32(out, s.partial_bits);
    put_u32(out, s.partial_min);
    for (const auto& x : st) {
        put_u32(out, static_cast<uint32_t>(x.size()));
        out.append(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(x[0]));
    }
}

}  // namespace zinc::engine
