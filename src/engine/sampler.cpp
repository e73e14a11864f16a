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
void apply_penalties(std::vector<Cand>& cand, std::span<const int32_t> history,
                     const SamplerOptions& o) {
    const bool any =
        o.repeat_penalty != 1.0f || o.presence_penalty != 0.0f || o.frequency_penalty != 0.0f;
    if (!any || o.penalty_last_n == 0 || history.empty()) return;
    size_t n = history.size();
    if (o.penalty_last_n > 0) n = std::min(n, static_cast<size_t>(o.penalty_last_n));
    std::vector<int32_t> window(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
    std::sort(window.begin(), window.end());
    const auto n_vocab = static_cast<int32_t>(cand.size());
    for (size_t i = 0; i < window.size();) {
        size_t j = i;
        while (j < window.size() && window[j] == window[i]) ++j;
        const int32_t id = window[i];
        const auto count = static_cast<float>(j - i);
        i = j;
        if (id < 0 || id >= n_vocab) continue;  // ids from another vocabulary: ignore
        float& l = cand[static_cast<size_t>(id)].first;
        if (std::isinf(l)) continue;  // -inf stays -inf
        l = l <= 0.0f ? l * o.repeat_penalty : l / o.repeat_penalty;
        l -= count * o.frequency_penalty + o.presence_penalty;
    }
}

// Sort so that the first min(k, size) candidates are the best, in order.
void sort_prefix(std::vector<Cand>& cand, size_t k) {
    k = std::min(k, cand.size());
    if (k == 0) return;
    // nth_element is linear on average; then only the k best are sorted.
    const auto mid = cand.begin() + static_cast<std::ptrdiff_t>(k);
    if (mid != cand.end()) std::nth_element(cand.begin(), mid - 1, cand.end(), cand_before);
    std::sort(cand.begin(), mid, cand_before);
}

}  // namespace

Sampler::Sampler(const SamplerOptions& opts) : opts_(opts), rng_(opts.seed) {}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
    ZINC_CHECK(!logits.empty());
    const size_t n_vocab = logits.size();
    cand_.resize(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) {
        const float l = logits[i];
        cand_[i] = {std::isnan(l) ? kNegInf : l, static_cast<int32_t>(i)};
    }
    apply_penalties(cand_, history, opts_);

    // Greedy: argmax, lowest id on ties (strict > while scanning ids upwards).
    if (opts_.temperature <= 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < n_vocab; ++i)
            if (cand_[i].first > cand_[best].first) best = i;
        return cand_[best].second;
    }

    // Drop impossible tokens. If none is possible (all -inf / NaN), fall back to id 0 rather
    // than dividing by zero: the logits are broken, but the caller still gets a valid id.
    cand_.erase(std::remove_if(cand_.begin(), cand_.end(),
                               [](const Cand& c) { return c.first == kNegInf; }),
                cand_.end());
    if (cand_.empty()) return 0;
    size_t n_sorted = 0;  // cand_[0 .. n_sorted) is sorted best-first

    // top-k
    if (opts_.top_k > 0 && static_cast<size_t>(opts_.top_k) < cand_.size()) {
        sort_prefix(cand_, static_cast<size_t>(opts_.top_k));
        cand_.resize(static_cast<size_t>(opts_.top_k));
        n_sorted = cand_.size();
    }

    // top-p: keep the smallest best-first prefix whose probability mass reaches p (at least one
    // token). Sorting is done on a growing prefix so a 262k vocabulary is rarely sorted whole.
    if (opts_.top_p < 1.0f) {
        float max_l = kNegInf;
        for (const auto& c : cand_) max_l = std::max(max_l, c.first);
        double z = 0.0;
        for (const auto& c : cand_) z += std::exp(static_cast<double>(c.first - max_l));
        const double target = static_cast<double>(opts_.top_p) * z;
        size_t m = std::min<size_t>(cand_.size(), 64);
        for (;;) {
            if (n_sorted < m) {
                sort_prefix(cand_, m);
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
            if (m == cand_.size()) break;  // rounding: the whole set is needed
            m = std::min(cand_.size(), m * 4);
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
    // Uniform double in [0, 1) from the top 53 bits: the same on every platform, unlike
    // std::uniform_real_distribution whose algorithm is implementation-defined.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
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
