// zinc/engine/spec_verify.cpp — see spec_verify.h.
#include "engine/spec_verify.h"

#include <algorithm>

#include "util/check.h"

namespace zinc::engine {

namespace {

using Cand = std::pair<float, int32_t>;

// Probability of `id` under the drafter's row (point mass when q is empty).
double q_of(std::span<const float> q, size_t i, int32_t n_vocab, int32_t draft_id, int32_t id) {
    if (q.empty()) return id == draft_id ? 1.0 : 0.0;
    return q[i * static_cast<size_t>(n_vocab) + static_cast<size_t>(id)];
}

// Draw from norm(max(p - q, 0)); p given as (unnormalised mass, id) with sum z. Candidates in
// ascending id, as the sampler's own draw walks them. Falls back to p's last candidate with
// mass when rounding leaves the target at the end, and to p itself when the residual is empty.
int32_t draw_residual(const std::vector<Cand>& p, double z, std::span<const float> q, size_t i,
                      int32_t n_vocab, int32_t draft_id, double u, bool from_p) {
    std::vector<double> r(p.size());
    double zr = 0.0;
    for (size_t c = 0; c < p.size(); ++c) {
        const double pc = static_cast<double>(p[c].first) / z;
        r[c] = from_p ? pc : std::max(0.0, pc - q_of(q, i, n_vocab, draft_id, p[c].second));
        zr += r[c];
    }
    if (zr <= 0.0) {  // p <= q everywhere: p == q, the draft could not have been rejected
        for (size_t c = 0; c < p.size(); ++c) r[c] = static_cast<double>(p[c].first) / z;
        zr = 1.0;
    }
    const double target = u * zr;
    double cum = 0.0;
    for (size_t c = 0; c < p.size(); ++c) {
        cum += r[c];
        if (target < cum) return p[c].second;
    }
    for (size_t c = p.size(); c-- > 0;)
        if (r[c] > 0.0) return p[c].second;
    return p.front().second;
}

}  // namespace

VerifyResult verify_draft(Sampler& sampler, std::span<const float> rows, int32_t n_vocab,
                          std::span<const int32_t> history, std::span<const int32_t> draft,
                          std::span<const float> q, SpecFault fault) {
    const size_t k = draft.size();
    const auto nv = static_cast<size_t>(n_vocab);
    ZINC_CHECK(rows.size() == (k + 1) * nv);
    ZINC_CHECK(q.empty() || q.size() == k * nv);
    VerifyResult out;
    std::vector<int32_t> hist(history.begin(), history.end());
    auto row = [&](size_t i) { return rows.subspan(i * nv, nv); };
    const bool greedy = sampler.options().temperature <= 0.0f;
    std::vector<Cand> p;
    for (size_t i = 0; i < k; ++i) {
        const int32_t d = draft[i];
        bool keep = false;
        int32_t replacement = -1;
        if (fault == SpecFault::AcceptAll) {
            keep = true;
        } else if (greedy) {
            const int32_t g = sampler.sample(row(i), hist);
            keep = g == d;
            replacement = g;
        } else {
            const double z = sampler.distribution(row(i), hist, p);
            if (z <= 0.0) {  // no possible token: the sampler's answer is id 0
                out.tokens.push_back(0);
                return out;
            }
            double pd = 0.0;
            for (const Cand& c : p)
                if (c.second == d) pd = static_cast<double>(c.first) / z;
            const double qd = q_of(q, i, n_vocab, d, d);
            const double u = sampler.uniform();
            keep = qd > 0.0 && u * qd < pd;  // u < min(1, p/q)
            if (!keep)
                replacement = draw_residual(p, z, q, i, n_vocab, d, sampler.uniform(),
                                            fault == SpecFault::ResampleFromP);
        }
        if (!keep) {
            out.tokens.push_back(replacement);
            return out;
        }
        out.tokens.push_back(d);
        hist.push_back(d);
        ++out.n_accepted;
    }
    out.tokens.push_back(sampler.sample(row(k), hist));
    return out;
}

}  // namespace zinc::engine
