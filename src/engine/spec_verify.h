// zinc/engine/spec_verify.h — verifying a draft against the target model's logits: which draft
// tokens are kept and which token follows them (speculative decoding, Leviathan et al. 2023,
// "Fast Inference from Transformers via Speculative Decoding", and Chen et al. 2023, algorithm 2).
//
// The target ran the sequence's pending token and its draft d_1..d_k as k + 1 rows; row i holds
// the logits of the token after tokens + d_1..d_i. Walking i = 0, 1, ...:
//   temperature <= 0: d_{i+1} is kept while it equals the sampler's greedy choice on row i (the
//     penalties see the kept drafts, as without speculation); the first mismatch is replaced by
//     that choice. The output is token for token what decoding without speculation gives.
//   temperature > 0: with p the sampler's distribution on row i (penalties, top-k, top-p, min-p,
//     temperature: Sampler::distribution) and q the drafter's, d_{i+1} is kept with probability
//     min(1, p(d)/q(d)) (one uniform of the sequence's seeded stream); on rejection the token is
//     drawn from norm(max(p - q, 0)) and the walk ends. Every kept token and the replacement are
//     then distributed exactly as sampling from p would be. zinc's drafters are deterministic,
//     so q is a point mass at d: keep with probability p(d), else draw from p without d.
//   All k kept: one more token is sampled from row k as usual (the "bonus" token).
// So a verification yields n_accepted drafts plus one token, 1..k+1 new tokens per forward.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampler.h"

namespace zinc::engine {

/// Test-only faults that break the acceptance rule (the statistical test shows they are caught).
enum class SpecFault {
    None,
    AcceptAll,      // keep every draft token whatever the target says
    ResampleFromP,  // on rejection draw from p (not from the residual max(p - q, 0))
    /// (engine) a hybrid model's recurrent state is not rewound to the accepted boundary after
    /// a verification (Runner::rewind_state skipped): the next step is refused
    NoStateRollback,
};

struct VerifyResult {
    int32_t n_accepted = 0;       // draft tokens kept
    std::vector<int32_t> tokens;  // the kept drafts, then the replacement or bonus token
};

/// Verify `draft` (k tokens) against `rows`: (k + 1) * n_vocab f32 logits, row-major. `history`
/// is the sequence's tokens so far including the pending one (for penalties). `q`: the drafter's
/// probabilities, (k) rows of n_vocab, or empty for a point mass at each draft token.
VerifyResult verify_draft(Sampler& sampler, std::span<const float> rows, int32_t n_vocab,
                          std::span<const int32_t> history, std::span<const int32_t> draft,
                          std::span<const float> q = {}, SpecFault fault = SpecFault::None);

}  // namespace zinc::engine
