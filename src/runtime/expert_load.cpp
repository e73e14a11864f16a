// zinc/runtime/expert_load.cpp — see expert_load.h.
#include "runtime/expert_load.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace zinc::runtime {

static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

Result<ExpertLoadSummary> summarize_expert_load(std::span<const uint64_t> counts, int n_expert) {
    if (n_expert < 1)
        return make_error("expert load: n_expert is " + std::to_string(n_expert) +
                          "; expected at least 1");
    if (counts.size() % static_cast<size_t>(n_expert) != 0)
        return make_error("expert load: " + std::to_string(counts.size()) +
                          " counts is not a whole number of layers of " + std::to_string(n_expert) +
                          " experts");
    ExpertLoadSummary s;
    s.n_expert = n_expert;
    std::vector<double> mx, mn, cv;
    for (size_t l = 0; l < counts.size() / n_expert; ++l) {
        const auto row = counts.subspan(l * n_expert, n_expert);
        uint64_t sum = 0, hi = 0, lo = row[0];
        for (uint64_t c : row) {
            sum += c;
            hi = std::max(hi, c);
            lo = std::min(lo, c);
            if (c == 0) ++s.unused;
        }
        if (sum == 0) {  // a dense layer: not counted
            s.unused -= n_expert;
            continue;
        }
        ++s.n_layers;
        s.slots += sum;
        const double mean = static_cast<double>(sum) / n_expert;
        double var = 0;
        for (uint64_t c : row) var += (c - mean) * (c - mean);
        mx.push_back(hi / mean);
        mn.push_back(lo / mean);
        cv.push_back(std::sqrt(var / n_expert) / mean);
    }
    s.max_over_mean = median(mx);
    s.min_over_mean = median(mn);
    s.cv = median(cv);
    s.worst_max_over_mean = mx.empty() ? 0 : *std::max_element(mx.begin(), mx.end());
    return s;
}

std::string format_expert_load(const ExpertLoadSummary& s) {
    char b[320];
    std::snprintf(b, sizeof b,
                  "expert load | %d MoE layers x %d experts | %llu slots | max/mean %.2f (worst "
                  "%.2f) | min/mean %.2f | CV %.2f | %lld of %lld (layer, expert) pairs unused",
                  s.n_layers, s.n_expert, static_cast<unsigned long long>(s.slots), s.max_over_mean,
                  s.worst_max_over_mean, s.min_over_mean, s.cv, static_cast<long long>(s.unused),
                  static_cast<long long>(s.n_layers) * s.n_expert);
    return b;
}

}  // namespace zinc::runtime
