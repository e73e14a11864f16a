// zinc/engine/logprobs.cpp — log-softmax and top-n of one row of logits.
#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zinc::engine {

void token_logprobs(std::span<const float> logits, int32_t id, int n, GeneratedToken& out) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    auto val = [&](size_t i) { return std::isnan(logits[i]) ? kNegInf : logits[i]; };
    float mx = kNegInf;
    for (size_t i = 0; i < logits.size(); ++i) mx = std::max(mx, val(i));
    double sum = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) sum += std::exp(static_cast<double>(val(i) - mx));
    const double lse = static_cast<double>(mx) + std::log(sum);
    auto lp = [&](size_t i) { return static_cast<float>(static_cast<double>(val(i)) - lse); };
    out.id = id;
    out.logprob = lp(static_cast<size_t>(id));
    out.top.clear();
    if (n <= 0) return;
    // Top n by a bounded min-heap-free scan: n <= 20, so keep a small sorted list.
    std::vector<std::pair<float, int32_t>> best;  // (logit, id), best first
    best.reserve(static_cast<size_t>(n) + 1);
    auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    };
    for (size_t i = 0; i < logits.size(); ++i) {
        const std::pair<float, int32_t> c{val(i), static_cast<int32_t>(i)};
        if (static_cast<int>(best.size()) == n && !better(c, best.back())) continue;
        best.insert(std::upper_bound(best.begin(), best.end(), c, better), c);
        if (static_cast<int>(best.size()) > n) best.pop_back();
    }
    for (const auto& [l, i] : best) out.top.push_back({i, lp(static_cast<size_t>(i))});
}

}  // namespace zinc::engine
