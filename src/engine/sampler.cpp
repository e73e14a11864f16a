// zinc/engine/sampler.cpp — logits -> next token: penalties, top-k, top-p, min-p, temperature,
// seeded draw (the chain order documented in sampler.h).
//
// Candidates are (logit, id) pairs. Wherever order matters they are ordered by logit descending
// and then id ascending, a total order, so the result never depends on sort stability and the
// same seed + settings + logits always give the same token. NaN logits are treated as -inf.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/check.h"

namespace zinc::engine {

namespace {

using Cand = std::pair<float, int32_t>;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Logit descending, id ascending.
bool cand_before(const Cand& a, const Cand& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
}

// Apply repetition / presence / frequency penalties to cand (indexed by token id) over the last
// `last_n` entries of history (last_n < 0: all of it; 0: none). Follows llama.cpp's
// llama_sampler_penalties: a token seen c > 0 times has its logit divided by `repeat` when
// positive and multiplied by it otherwise, then reduced by c * frequency + presence
// (OpenAI's presence/frequency penalty definitions).
bool any_penalty(const SamplerOptions& o) {
    return o.repeat_penalty != 1.0f || o.presence_penalty != 0.0f || o.frequency_penalty != 0.0f;
}

// The penalty window (the last `penalty_last_n` tokens of history) as distinct ids in
// [0, n_vocab), ascending, with their counts; empty when no penalty is on.
void penalty_window(std::span<const int32_t> history, const SamplerOptions& o, int32_t n_vocab,
                    std::vector<int32_t>& ids, std::vector<int32_t>& counts) {
    ids.clear();
    counts.clear();
    if (!any_penalty(o) || o.penalty_last_n == 0 || history.empty()) return;
    size_t n = history.size();
    if (o.penalty_last_n > 0) n = std::min(n, static_cast<size_t>(o.penalty_last_n));
    std::vector<int32_t> window(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
    std::sort(window.begin(), window.end());
    for (size_t i = 0; i < window.size();) {
        size_t j = i;
        while (j < window.size() && window[j] == window[i]) ++j;
        const int32_t id = window[i];
        const auto count = static_cast<int32_t>(j - i);
        i = j;
        if (id < 0 || id >= n_vocab) continue;  // ids from another vocabulary: ignore
        ids.push_back(id);
        counts.push_back(count);
    }
}

void apply_penalties(std::vector<float>& logit, std::span<const int32_t> history,
                     const SamplerOptions& o) {
    std::vector<int32_t> ids, counts;
    penalty_window(history, o, static_cast<int32_t>(logit.size()), ids, counts);
    for (size_t k = 0; k < ids.size(); ++k) {
        const auto count = static_cast<float>(counts[k]);
        float& l = logit[static_cast<size_t>(ids[k])];
        if (std::isinf(l)) continue;  // -inf stays -inf
        l = l <= 0.0f ? l * o.repeat_penalty : l / o.repeat_penalty;
        l -= count * o.frequency_penalty + o.presence_penalty;
    }
}

// The k best finite entries of `logit` into `out`, sorted best-first. A bounded heap whose top
// is the worst kept candidate: one comparison for most tokens, so O(n) for a 262k vocabulary.
void select_top_k(const std::vector<float>& logit, size_t k, std::vector<Cand>& out) {
    out.clear();
    out.reserve(k);
    for (size_t i = 0; i < logit.size(); ++i) {
        const float l = logit[i];
        if (l == kNegInf) continue;
        const Cand c{l, static_cast<int32_t>(i)};
        if (out.size() < k) {
            out.push_back(c);
            if (out.size() == k) std::make_heap(out.begin(), out.end(), cand_before);
        } else if (cand_before(c, out.front())) {
            std::pop_heap(out.begin(), out.end(), cand_before);
            out.back() = c;
            std::push_heap(out.begin(), out.end(), cand_before);
        }
    }
    std::sort(out.begin(), out.end(), cand_before);
}

// Sort so that cand[0 .. k) holds the best k of cand[0 .. n), in order (k <= n <= size).
void sort_prefix(std::vector<Cand>& cand, size_t k, size_t n) {
    n = std::min(n, cand.size());
    k = std::min(k, n);
    if (k == 0) return;
    // nth_element is linear on average; then only the k best are sorted.
    const auto end = cand.begin() + static_cast<std::ptrdiff_t>(n);
    const auto mid = cand.begin() + static_cast<std::ptrdiff_t>(k);
    if (mid != end) std::nth_element(cand.begin(), mid - 1, end, cand_before);
    std::sort(cand.begin(), mid, cand_before);
}

}  // namespace

Sampler::Sampler(const SamplerOptions& opts) : opts_(opts), rng_(opts.seed) {}

double Sampler::next_uniform() {
    if (pending_) {
        const double u = *pending_;
        pending_.reset();
        return u;
    }
    // Uniform double in [0, 1) from the top 53 bits: the same on every platform, unlike
    // std::uniform_real_distribution whose algorithm is implementation-defined.
    return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

model::RowSampling Sampler::device_row(std::span<const int32_t> history, int32_t n_vocab) {
    model::RowSampling r;
    r.temperature = opts_.temperature;
    r.top_k = opts_.top_k;
    r.top_p = opts_.top_p;
    r.min_p = opts_.min_p;
    r.repeat_penalty = opts_.repeat_penalty;
    r.presence_penalty = opts_.presence_penalty;
    r.frequency_penalty = opts_.frequency_penalty;
    penalty_window(history, opts_, n_vocab, pen_ids_, pen_counts_);
    r.penalty_ids = pen_ids_;
    r.penalty_counts = pen_counts_;
    if (opts_.temperature > 0.0f) {
        if (!pending_) pending_ = next_uniform();
        r.uniform = *pending_;
    }
    return r;
}

void Sampler::device_done(const model::SampledToken& t) {
    if (t.used_uniform) pending_.reset();
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
    return sample_impl(logits, history, {}, true, nullptr);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history,
                        std::span<const uint64_t> allowed) {
    ZINC_CHECK(allowed.size() == (logits.size() + 63) / 64);
    return sample_impl(logits, history, allowed, true, nullptr);
}

double Sampler::distribution(std::span<const float> logits, std::span<const int32_t> history,
                             std::vector<std::pair<float, int32_t>>& out) {
    ZINC_CHECK(opts_.temperature > 0.0f);
    double z = 0.0;
    out.clear();
    if (sample_impl(logits, history, {}, false, &z) == 0) return 0.0;  // no finite logit
    out.assign(cand_.begin(), cand_.end());
    return z;
}

int32_t Sampler::sample_impl(std::span<const float> logits, std::span<const int32_t> history,
                             std::span<const uint64_t> allowed, bool draw, double* z_out) {
    ZINC_CHECK(!logits.empty());
    const size_t n_vocab = logits.size();
    work_.resize(n_vocab);
    if (allowed.empty()) {
        for (size_t i = 0; i < n_vocab; ++i) work_[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
    } else {
        // The mask, a word (64 tokens) at a time: a refused word is one fill.
        for (size_t w = 0; w * 64 < n_vocab; ++w) {
            const size_t b = w * 64, e = std::min(n_vocab, b + 64);
            const uint64_t m = allowed[w];
            if (m == 0) {
                std::fill(work_.begin() + static_cast<std::ptrdiff_t>(b),
                          work_.begin() + static_cast<std::ptrdiff_t>(e), kNegInf);
                continue;
            }
            for (size_t i = b; i < e; ++i)
                work_[i] = ((m >> (i - b)) & 1u) && !std::isnan(logits[i]) ? logits[i] : kNegInf;
        }
    }
    apply_penalties(work_, history, opts_);

    // Greedy: argmax, lowest id on ties (strict > while scanning ids upwards).
    if (opts_.temperature <= 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < n_vocab; ++i)
            if (work_[i] > work_[best]) best = i;
        return static_cast<int32_t>(best);
    }

    // Candidates: the top-k, or every possible (finite) token. If none is possible (all -inf or
    // NaN), fall back to id 0 rather than dividing by zero: the logits are broken, but the
    // caller still gets a valid id.
    size_t n_sorted = 0;  // cand_[0 .. n_sorted) is sorted best-first
    if (opts_.top_k > 0 && static_cast<size_t>(opts_.top_k) < n_vocab) {
        select_top_k(work_, static_cast<size_t>(opts_.top_k), cand_);
        n_sorted = cand_.size();
    } else {
        cand_.clear();
        for (size_t i = 0; i < n_vocab; ++i)
            if (work_[i] != kNegInf) cand_.emplace_back(work_[i], static_cast<int32_t>(i));
    }
    if (cand_.empty()) return 0;

    // top-p: keep the smallest best-first prefix whose probability mass reaches p (at least one
    // token). For a large unsorted set, a histogram of probability mass over logit buckets first
    // finds the logit above which the prefix must end, so only those candidates are sorted; the
    // sort then runs on a growing prefix of them.
    if (opts_.top_p < 1.0f) {
        constexpr int kBuckets = 512;
        constexpr float kRange = 32.0f;  // logits below max - 32 carry < 1.3e-14 each
        constexpr float kWidth = kRange / kBuckets;
        float max_l = kNegInf;
        for (const auto& c : cand_) max_l = std::max(max_l, c.first);
        const bool bucketed = n_sorted == 0 && cand_.size() > 4096;
        std::vector<double> mass(bucketed ? kBuckets : 0, 0.0);
        double z = 0.0;
        for (const auto& c : cand_) {
            const double e = std::exp(static_cast<double>(c.first - max_l));
            z += e;
            if (bucketed) {
                const float d = (max_l - c.first) / kWidth;  // >= 0
                mass[d >= kBuckets - 1 ? kBuckets - 1 : static_cast<size_t>(d)] += e;
            }
        }
        const double target = static_cast<double>(opts_.top_p) * z;
        size_t active = cand_.size();  // the prefix is searched within cand_[0 .. active)
        bool done = false;
        if (bucketed) {
            double cum = 0.0;
            int b = 0;
            for (; b < kBuckets; ++b) {
                cum += mass[static_cast<size_t>(b)];
                if (cum >= target) break;
            }
            const int last = b + 1;  // one bucket of margin for rounding at the edges
            if (last < kBuckets - 1) {
                const float thr = max_l - static_cast<float>(last + 1) * kWidth;
                active = static_cast<size_t>(
                    std::partition(cand_.begin(), cand_.end(),
                                   [thr](const Cand& c) { return c.first >= thr; }) -
                    cand_.begin());
                // Tokens in buckets 0 .. b-3 are surely inside the prefix (the mass through
                // bucket b-1 is below the target, with a bucket to spare for rounding), so only
                // the few buckets around the crossing need sorting; the kept set is the same as
                // a full sort would give, in a different (still deterministic) order.
                if (b >= 3) {
                    const float thr_hi = max_l - static_cast<float>(b - 2) * kWidth;
                    const auto hi_end = std::partition(
                        cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(active),
                        [thr_hi](const Cand& c) { return c.first >= thr_hi; });
                    double cum = 0.0;
                    for (auto it = cand_.begin(); it != hi_end; ++it)
                        cum += std::exp(static_cast<double>(it->first - max_l));
                    std::sort(hi_end, cand_.begin() + static_cast<std::ptrdiff_t>(active),
                              cand_before);
                    size_t keep = 0;
                    for (size_t i = static_cast<size_t>(hi_end - cand_.begin());
                         cum < target && i < active; ++i) {
                        cum += std::exp(static_cast<double>(cand_[i].first - max_l));
                        if (cum >= target) keep = i + 1;
                    }
                    if (keep > 0) {
                        cand_.resize(keep);
                        n_sorted = 0;  // the sure part is unordered
                        done = true;
                    }
                    // otherwise (rounding): fall through to the sorted search below
                }
            }
        }
        size_t m = std::min<size_t>(active, 64);
        while (!done) {
            if (n_sorted < m) {
                sort_prefix(cand_, m, active);
                n_sorted = m;
            }
            double cum = 0.0;
            size_t keep = 0;
            for (size_t i = 0; i < m; ++i) {
                cum += std::exp(static_cast<double>(cand_[i].first - max_l));
                if (cum >= target) {
                    keep = i + 1;
                    break;
                }
            }
            if (keep > 0) {
                cand_.resize(keep);
                n_sorted = keep;
                break;
            }
            if (m == active) {
                if (active == cand_.size()) break;  // rounding: the whole set is needed
                active = cand_.size();              // the margin was not enough: widen
                n_sorted = 0;
            }
            m = std::min(active, m * 4);
        }
    }

    // min-p: keep tokens with prob >= min_p * max prob, i.e. logit >= max logit + log(min_p).
    if (opts_.min_p > 0.0f) {
        float max_l = kNegInf;
        for (const auto& c : cand_) max_l = std::max(max_l, c.first);
        const float thr = max_l + std::log(std::min(opts_.min_p, 1.0f));
        // The max itself always satisfies l >= thr (log(min_p) <= 0), so one token remains.
        cand_.erase(std::remove_if(cand_.begin(), cand_.end(),
                                   [thr](const Cand& c) { return c.first < thr; }),
                    cand_.end());
        // remove_if keeps relative order, so a sorted prefix stays sorted.
        n_sorted = std::min(n_sorted, cand_.size());
    }

    // The draw walks the candidates in ascending id (a device sampler's natural order); only
    // the top-k / top-p paths leave them in another order.
    auto by_id = [](const Cand& a, const Cand& b) { return a.second < b.second; };
    if (!std::is_sorted(cand_.begin(), cand_.end(), by_id)) {
        if (cand_.size() > 4096) {
            // Large kept sets (a flat distribution under top-p): one O(n_vocab) pass over a mask
            // instead of an O(m log m) sort; the values are the penalised logits in work_.
            std::vector<uint8_t> kept(n_vocab, 0);
            for (const auto& c : cand_) kept[static_cast<size_t>(c.second)] = 1;
            cand_.clear();
            for (size_t i = 0; i < n_vocab; ++i)
                if (kept[i]) cand_.emplace_back(work_[i], static_cast<int32_t>(i));
        } else {
            std::sort(cand_.begin(), cand_.end(), by_id);
        }
    }

    // temperature, softmax, draw.
    const float inv_t = 1.0f / opts_.temperature;
    float max_l = kNegInf;
    for (const auto& c : cand_) max_l = std::max(max_l, c.first);
    double z = 0.0;
    for (auto& c : cand_) {
        // Stored as the unnormalised probability from here on.
        // (d == 0 is special-cased: a tiny temperature makes inv_t infinite, and 0 * inf is NaN.)
        const double d = static_cast<double>(c.first - max_l);
        c.first = d == 0.0 ? 1.0f : static_cast<float>(std::exp(d * inv_t));
        z += c.first;
    }
    if (!draw) {
        *z_out = z;
        return -1;
    }
    const double u = next_uniform();
    const double target = u * z;
    double cum = 0.0;
    for (const auto& c : cand_) {
        cum += c.first;
        if (target < cum) return c.second;
    }
    // Rounding left target at the very end: the last candidate with nonzero mass.
    for (auto it = cand_.rbegin(); it != cand_.rend(); ++it)
        if (it->first > 0.0f) return it->second;
    return cand_.front().second;
}

}  // namespace zinc::engine
