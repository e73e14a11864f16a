// Tests for engine/sampler: each stage checked against probabilities worked out by hand from
// crafted logits (the oracle is arithmetic, not our own recorded output), plus determinism and
// edge cases (all -inf, NaN, huge logits, top_k > n_vocab, top_p = 0, tiny temperature).
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

using zinc::engine::Sampler;
using zinc::engine::SamplerOptions;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Options with every filter disabled: plain softmax sampling at temperature 1.
SamplerOptions plain(uint64_t seed = 1) {
    SamplerOptions o;
    o.temperature = 1.0f;
    o.top_k = 0;
    o.top_p = 1.0f;
    o.min_p = 0.0f;
    o.seed = seed;
    return o;
}

std::vector<float> logs(std::initializer_list<double> probs) {
    std::vector<float> v;
    for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
    return v;
}

// Empirical frequencies of each id over n draws.
std::vector<double> frequencies(const SamplerOptions& o, const std::vector<float>& logits,
                                const std::vector<int32_t>& history = {}, int n = 200000) {
    Sampler s(o);
    std::vector<double> f(logits.size(), 0.0);
    for (int i = 0; i < n; ++i) {
        int32_t t = s.sample(logits, history);
        EXPECT_GE(t, 0);
        EXPECT_LT(t, static_cast<int32_t>(logits.size()));
        f[static_cast<size_t>(t)] += 1.0;
    }
    for (double& x : f) x /= n;
    return f;
}

// 200k draws: the standard error of a frequency is <= 0.0012, so 0.006 is a 5-sigma bound.
void expect_dist(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 0.006) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "token " << i;
}

}  // namespace

TEST(Sampler, PlainSoftmaxMatchesProbabilities) {
    expect_dist(frequencies(plain(), logs({0.5, 0.3, 0.2})), {0.5, 0.3, 0.2});
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
    // p_i^(1/T) renormalised.
    auto o = plain();
    o.temperature = 2.0f;
    double a = std::sqrt(0.5), b = std::sqrt(0.3), c = std::sqrt(0.2), z = a + b + c;
    expect_dist(frequencies(o, logs({0.5, 0.3, 0.2})), {a / z, b / z, c / z});
    o.temperature = 0.5f;
    a = 0.25, b = 0.09, c = 0.04, z = a + b + c;
    expect_dist(frequencies(o, logs({0.5, 0.3, 0.2})), {a / z, b / z, c / z});
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
    SamplerOptions o = plain();
    o.temperature = 0.0f;
    Sampler s(o);
    EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -2.0f, 2.9f}, {}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}, {}), 1);
    o.temperature = -1.0f;
    Sampler s2(o);
    EXPECT_EQ(s2.sample(std::vector<float>{-3.0f, -1.0f, -2.0f}, {}), 1);
}

TEST(Sampler, TopK) {
    auto o = plain();
    o.top_k = 2;
    expect_dist(frequencies(o, logs({0.2, 0.5, 0.3})), {0.0, 0.625, 0.375});
    o.top_k = 1;
    expect_dist(frequencies(o, logs({0.2, 0.5, 0.3}), {}, 1000), {0.0, 1.0, 0.0}, 0.0);
}

TEST(Sampler, TopKLargerThanVocabIsNoOp) {
    auto o = plain();
    o.top_k = 1000;
    expect_dist(frequencies(o, logs({0.5, 0.3, 0.2})), {0.5, 0.3, 0.2});
}

TEST(Sampler, TopP) {
    auto o = plain();
    o.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8: keeps the two best
    expect_dist(frequencies(o, logs({0.3, 0.2, 0.5})), {0.375, 0.0, 0.625});
    o.top_p = 0.45f;  // the best alone reaches it
    expect_dist(frequencies(o, logs({0.3, 0.2, 0.5}), {}, 1000), {0.0, 0.0, 1.0}, 0.0);
}

TEST(Sampler, TopPZeroIsGreedy) {
    auto o = plain();
    o.top_p = 0.0f;
    expect_dist(frequencies(o, logs({0.3, 0.4, 0.3}), {}, 1000), {0.0, 1.0, 0.0}, 0.0);
}

TEST(Sampler, TopPAppliesAfterTopK) {
    // top-k 2 renormalises {0.5, 0.3} to {0.625, 0.375}; top-p 0.6 then keeps only the best
    // (0.625 >= 0.6), whereas on the raw distribution it would keep two (0.5 < 0.6).
    auto o = plain();
    o.top_k = 2;
    o.top_p = 0.6f;
    expect_dist(frequencies(o, logs({0.5, 0.3, 0.2}), {}, 1000), {1.0, 0.0, 0.0}, 0.0);
}

TEST(Sampler, TopPOnLargeVocabularyNeedsLongPrefix) {
    // 300 "good" tokens at logit 5 scattered among 20000 at logit 0. Each good token has
    // probability e^5 / (300 e^5 + 19700) ~= 0.0023108; top-p 0.4 keeps the first
    // ceil(0.4 / 0.0023108) = 174 of them in (logit desc, id asc) order: a prefix longer than
    // the sampler's first sort window (64).
    const int n = 20000;
    std::vector<float> logits(n, 0.0f);
    std::vector<int32_t> good;
    for (int j = 0; j < 300; ++j) {
        good.push_back(7 + 61 * j);
        logits[static_cast<size_t>(good.back())] = 5.0f;
    }
    const double p_good = std::exp(5.0) / (300 * std::exp(5.0) + 19700);
    const auto n_keep = static_cast<size_t>(std::ceil(0.4 / p_good));
    ASSERT_EQ(n_keep, 174u);
    auto o = plain();
    o.top_p = 0.4f;
    Sampler s(o);
    std::set<int32_t> seen;
    for (int i = 0; i < 5000; ++i) seen.insert(s.sample(logits, {}));
    // Allowed: the 174 lowest good ids. With 5000 draws over 174 equal tokens every one shows
    // (P(some token missing) < 174 * (1 - 1/174)^5000 ~ 1e-10).
    std::set<int32_t> allowed(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n_keep));
    EXPECT_EQ(seen, allowed);
}

TEST(Sampler, MinP) {
    auto o = plain();
    o.min_p = 0.5f;  // threshold 0.25: keeps 0.5 and 0.3
    expect_dist(frequencies(o, logs({0.5, 0.2, 0.3})), {0.625, 0.0, 0.375});
    o.min_p = 0.7f;  // threshold 0.35: keeps 0.5 alone
    expect_dist(frequencies(o, logs({0.5, 0.2, 0.3}), {}, 1000), {1.0, 0.0, 0.0}, 0.0);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveMultipliesNegative) {
    SamplerOptions o = plain();
    o.temperature = 0.0f;
    o.repeat_penalty = 2.0f;
    Sampler s(o);
    // positive: 2.0 / 2 = 1.0 < 1.5
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{0}), 1);
    // negative: -1.0 * 2 = -2.0 < -1.8 (dividing would give -0.5 and keep token 0)
    EXPECT_EQ(s.sample(std::vector<float>{-1.0f, -1.8f}, std::vector<int32_t>{0}), 1);
    // repeated occurrences are penalised once, not per occurrence: 4 / 2 = 2 > 1.9
    EXPECT_EQ(s.sample(std::vector<float>{4.0f, 1.9f}, std::vector<int32_t>{0, 0, 0}), 0);
    // a token not in the history is untouched
    EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{1}), 0);
}

TEST(Sampler, RepetitionPenaltyChangesDistributionExactly) {
    // logits {ln 4, 0}, token 0 seen, penalty 2: ln4 / 2 = ln 2 -> probabilities {2/3, 1/3}.
    auto o = plain();
    o.repeat_penalty = 2.0f;
    expect_dist(frequencies(o, {static_cast<float>(std::log(4.0)), 0.0f}, {0}),
                {2.0 / 3.0, 1.0 / 3.0});
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
    SamplerOptions o = plain();
    o.temperature = 0.0f;
    const std::vector<float> l{2.0f, 1.5f};
    const std::vector<int32_t> h{0, 0, 0};
    o.presence_penalty = 0.4f;  // once: 1.6 > 1.5
    EXPECT_EQ(Sampler(o).sample(l, h), 0);
    o.presence_penalty = 0.6f;  // 1.4 < 1.5
    EXPECT_EQ(Sampler(o).sample(l, h), 1);
    o.presence_penalty = 0.0f;
    o.frequency_penalty = 0.15f;  // per occurrence: 2 - 0.45 = 1.55 > 1.5
    EXPECT_EQ(Sampler(o).sample(l, h), 0);
    o.frequency_penalty = 0.2f;  // 2 - 0.6 = 1.4 < 1.5
    EXPECT_EQ(Sampler(o).sample(l, h), 1);
}

TEST(Sampler, FrequencyPenaltyDistribution) {
    // Equal logits; token 0 seen twice with frequency penalty ln2 / 2: logit -ln2 -> {1/3, 2/3}.
    auto o = plain();
    o.frequency_penalty = static_cast<float>(std::log(2.0) / 2);
    expect_dist(frequencies(o, {0.0f, 0.0f}, {0, 0}), {1.0 / 3.0, 2.0 / 3.0});
}

TEST(Sampler, PenaltyWindowIsLastN) {
    SamplerOptions o = plain();
    o.temperature = 0.0f;
    o.presence_penalty = 1.0f;
    o.penalty_last_n = 2;
    // Token 0 appears only outside the last 2 entries: not penalised, wins 2.0 vs 1.5.
    EXPECT_EQ(Sampler(o).sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{0, 1, 1}), 0);
    // Token 0 inside the last 2 entries: 2 - 1 = 1.0 < 1.5.
    EXPECT_EQ(Sampler(o).sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{1, 0, 0}), 1);
    o.penalty_last_n = 0;  // disabled
    EXPECT_EQ(Sampler(o).sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{0, 0}), 0);
    o.penalty_last_n = -1;  // the whole history
    std::vector<int32_t> h(1000, 1);
    h[0] = 0;
    EXPECT_EQ(Sampler(o).sample(std::vector<float>{2.0f, 1.9f, 1.05f}, h), 2);
}

TEST(Sampler, OutOfRangeHistoryIdsAreIgnored) {
    SamplerOptions o = plain();
    o.temperature = 0.0f;
    o.repeat_penalty = 10.0f;
    EXPECT_EQ(Sampler(o).sample(std::vector<float>{2.0f, 1.5f}, std::vector<int32_t>{-5, 99}), 0);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
    std::mt19937 gen(42);
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::vector<std::vector<float>> steps(200, std::vector<float>(1000));
    for (auto& s : steps)
        for (float& x : s) x = nd(gen);
    SamplerOptions o;  // defaults: top-k 40, top-p 0.95, min-p 0.05, temp 0.8
    o.repeat_penalty = 1.1f;
    o.presence_penalty = 0.1f;
    auto run = [&](uint64_t seed) {
        o.seed = seed;
        Sampler s(o);
        std::vector<int32_t> out;
        for (const auto& l : steps) out.push_back(s.sample(l, out));
        return out;
    };
    auto a = run(1234), b = run(1234), c = run(1235);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
}

TEST(Sampler, AllNegInfButOne) {
    std::vector<float> l(5000, -kInf);
    l[4321] = -7.0f;
    for (float t : {0.0f, 0.3f, 1.0f, 5.0f}) {
        auto o = plain(9);
        o.temperature = t;
        o.top_p = 0.9f;
        o.min_p = 0.1f;
        o.top_k = 3;
        o.repeat_penalty = 1.3f;
        Sampler s(o);
        for (int i = 0; i < 50; ++i)
            EXPECT_EQ(s.sample(l, std::vector<int32_t>{4321, 1}), 4321) << "temp " << t;
    }
}

TEST(Sampler, AllNegInfOrNaNStillReturnsValidId) {
    std::vector<float> l(10, -kInf);
    l[3] = std::numeric_limits<float>::quiet_NaN();
    auto o = plain();
    Sampler s(o);
    int32_t t = s.sample(l, {});
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 10);
}

TEST(Sampler, NaNLogitIsNeverChosen) {
    std::vector<float> l{std::numeric_limits<float>::quiet_NaN(), 0.0f, 0.0f};
    auto o = plain();
    auto f = frequencies(o, l, {}, 20000);
    EXPECT_EQ(f[0], 0.0);
    o.temperature = 0.0f;
    EXPECT_EQ(Sampler(o).sample(l, {}), 1);
}

TEST(Sampler, HugeLogitsStayFinite) {
    // Differences near the float range must not produce inf/inf = NaN weights.
    auto o = plain();
    expect_dist(frequencies(o, {3e38f, -3e38f, 3e38f}, {}, 20000), {0.5, 0.0, 0.5}, 0.03);
}

TEST(Sampler, TinyTemperatureIsArgmax) {
    auto o = plain();
    o.temperature = 1e-30f;
    expect_dist(frequencies(o, {1.0f, 1.0001f, 0.5f}, {}, 1000), {0.0, 1.0, 0.0}, 0.0);
}

TEST(Sampler, SingleTokenVocabulary) {
    SamplerOptions o;
    o.seed = 3;
    Sampler s(o);
    EXPECT_EQ(s.sample(std::vector<float>{0.25f}, std::vector<int32_t>{0, 0}), 0);
}

TEST(Sampler, TopPMatchesBruteForceNucleus) {
    // The nucleus computed by brute force here (full sort by logit desc / id asc, cumulative
    // softmax mass in double) against what the sampler draws from. A near-infinite temperature
    // makes the draw near-uniform over the kept set, so every kept token shows up and any token
    // outside it would too. Vocabularies above 4096 take the sampler's bucketed path.
    std::mt19937 gen(7);
    struct Case {
        int n;
        float p;
        int kind;  // 0: normal sd 1, 1: normal sd 3, 2: four distinct values (many ties)
    };
    for (const Case& cs : {Case{10000, 0.1f, 0}, Case{10000, 0.9f, 1}, Case{6000, 0.1f, 2},
                           Case{3000, 0.2f, 0}, Case{50000, 0.05f, 0}}) {
        std::vector<float> l(static_cast<size_t>(cs.n));
        std::normal_distribution<float> nd(0.0f, cs.kind == 1 ? 3.0f : 1.0f);
        std::uniform_int_distribution<int> ud(0, 3);
        for (float& x : l) x = cs.kind == 2 ? static_cast<float>(ud(gen)) * 2.0f : nd(gen);
        std::vector<int32_t> order(l.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
        std::sort(order.begin(), order.end(),
                  [&](int32_t a, int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; });
        const double mx = l[static_cast<size_t>(order[0])];
        double z = 0.0;
        for (float x : l) z += std::exp(static_cast<double>(x) - mx);
        double cum = 0.0;
        size_t keep = 0;
        while (keep < order.size()) {
            cum += std::exp(static_cast<double>(l[static_cast<size_t>(order[keep])]) - mx);
            ++keep;
            if (cum >= cs.p * z) break;
        }
        // Allow one token of slack at the boundary for summation-order rounding.
        std::set<int32_t> allowed(
            order.begin(),
            order.begin() + static_cast<std::ptrdiff_t>(std::min(keep + 1, order.size())));
        auto o = plain(11);
        o.top_p = cs.p;
        o.temperature = 100.0f;
        Sampler s(o);
        std::set<int32_t> seen;
        // 30 draws a kept token: P(one is never drawn) < keep * e^-20.
        const int draws = static_cast<int>(std::max<size_t>(2000, keep * 30));
        for (int i = 0; i < draws; ++i) {
            int32_t t = s.sample(l, {});
            ASSERT_TRUE(allowed.count(t)) << "n " << cs.n << " p " << cs.p << " token " << t;
            seen.insert(t);
        }
        EXPECT_GE(seen.size() + 1, keep) << "n " << cs.n << " p " << cs.p;
        EXPECT_GT(keep, 64u) << "case too small to exercise the growing sort";
    }
}

// The masked overload is sample() of the logits with the refused tokens at -inf: the same token
// stream for the same seed, greedy and sampled, with and without top-k, top-p, min-p and
// penalties, on a vocabulary that is not a multiple of 64 (a partial last mask word).
TEST(Sampler, MaskedSampleEqualsSampleOfMaskedLogits) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const size_t n = 1000;
    for (int variant = 0; variant < 5; ++variant) {
        SamplerOptions o;  // the defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
        o.seed = 11 + static_cast<uint64_t>(variant);
        if (variant == 0) o.temperature = 0.0f;
        if (variant == 2) o.top_k = 0;
        if (variant == 3) o.repeat_penalty = 1.3f, o.presence_penalty = 0.5f;
        if (variant == 4) o.top_k = 0, o.top_p = 1.0f, o.min_p = 0.0f, o.frequency_penalty = 0.4f;
        Sampler a(o), b(o);
        std::vector<int32_t> hist;
        for (int step = 0; step < 200; ++step) {
            std::vector<float> logits(n);
            for (float& l : logits) l = nd(rng);
            if (step % 5 == 0) logits[static_cast<size_t>(step) % n] = std::nanf("");
            std::vector<uint64_t> bits((n + 63) / 64, 0);
            std::vector<float> masked(n, -kInf);
            const int every = 1 + step % 9;  // from all allowed to one in nine
            for (size_t i = 0; i < n; ++i) {
                if (i % static_cast<size_t>(every) != 0) continue;
                bits[i >> 6] |= uint64_t{1} << (i & 63);
                masked[i] = logits[i];
            }
            const int32_t x = a.sample(logits, hist, bits);
            const int32_t y = b.sample(masked, hist);
            ASSERT_EQ(x, y) << "variant " << variant << " step " << step;
            ASSERT_EQ(x % every, 0);
            hist.push_back(x);
        }
    }
}
