// zinc/engine/sampler.h — turn logits into the next token.
//
// Order follows llama.cpp's default sampler chain: penalties (repetition over the last
// `penalty_last_n` tokens, presence, frequency; as in llama-sampling / OpenAI's definitions) ->
// top-k -> top-p -> min-p -> temperature -> draw with a seeded RNG (std::mt19937_64). temp <= 0
// means greedy (argmax, lowest id on ties). Same seed + settings + logits => same tokens.
// The draw walks the kept candidates in ascending token id, so a device sampler can reproduce
// it without sorting (Runner::forward_sample: device_row() hands it this sampler's settings and
// next uniform, device_done() consumes the uniform when the device used it).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "model/batch.h"

namespace zinc::engine {

struct SamplerOptions {
    float temperature = 0.8f;     // <= 0: greedy
    int top_k = 40;               // <= 0: disabled
    float top_p = 0.95f;          // >= 1: disabled
    float min_p = 0.05f;          // <= 0: disabled
    float repeat_penalty = 1.0f;  // 1: disabled
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    int penalty_last_n = 64;
    uint64_t seed = 0xFFFFFFFFu;  // the CLI replaces the default with a random seed
};

class Sampler {
  public:
    explicit Sampler(const SamplerOptions& opts);
    /// Pick a token from (n_vocab) logits given the tokens generated/seen so far (for penalties).
    int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
    /// sample() over the tokens whose bit is set in `allowed` ((n_vocab + 63) / 64 words, bit
    /// id % 64 of word id / 64; grammar_matcher.h's allowed_bits()): the others count as -inf
    /// logits from the start, before penalties, top-k and the rest, so the result is sample() of
    /// the masked logits, in the same pass that copies them. At least one bit must be set.
    int32_t sample(std::span<const float> logits, std::span<const int32_t> history,
                   std::span<const uint64_t> allowed);
    const SamplerOptions& options() const { return opts_; }

    /// The distribution sample() draws from at temperature > 0, without drawing: the kept
    /// candidates as (unnormalised probability, id) in ascending id, into `out`, and their sum
    /// (0 when no token is possible). Speculative verification (engine/spec_verify.h) uses it.
    double distribution(std::span<const float> logits, std::span<const int32_t> history,
                        std::vector<std::pair<float, int32_t>>& out);
    /// The next uniform draw in [0, 1) of this sampler's seeded stream (the one sample() uses).
    double uniform() { return next_uniform(); }

    /// This sampler's settings as a device row for Runner::forward_sample (n_vocab logits per
    /// row): the penalty window of `history` as distinct ids in [0, n_vocab) with counts (held
    /// by this Sampler, valid until its next call) and the next uniform draw, peeked: it stays
    /// pending until device_done() or sample() consumes it, so the draws are sample()'s.
    model::RowSampling device_row(std::span<const int32_t> history, int32_t n_vocab);
    /// The device sampled the row device_row() described: consume the uniform if it was used.
    void device_done(const model::SampledToken& t);

  private:
    double next_uniform();
    // sample() with draw false: stop once cand_ holds the distribution; returns -1 then.
    // `allowed`: empty, or the mask of sample()'s masked overload.
    int32_t sample_impl(std::span<const float> logits, std::span<const int32_t> history,
                        std::span<const uint64_t> allowed, bool draw,
                        double* z_out);  // the pending draw if any, else a fresh one

    SamplerOptions opts_;
    std::mt19937_64 rng_;
    std::optional<double> pending_;                // peeked by device_row, not yet consumed
    std::vector<int32_t> pen_ids_, pen_counts_;    // device_row's penalty window
    std::vector<float> work_;                      // scratch: (n_vocab) penalised logits
    std::vector<std::pair<float, int32_t>> cand_;  // scratch: (logit, id) candidates
};

}  // namespace zinc::engine
