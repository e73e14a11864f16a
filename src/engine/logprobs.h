// zinc/engine/logprobs.h — log-probabilities of tokens under the model's raw logits
// (log-softmax), for the OpenAI `logprobs` / `top_logprobs` fields. Sampling settings
// (temperature, penalties, truncation) do not change them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace zinc::engine {

/// logprob(id) = logit[id] - log(sum_j exp(logit[j])), computed with the max subtracted and the
/// sum in double. Fills `chosen` (for token `id`) and `top` (the n most likely tokens, most
/// likely first; ties by lower id). NaN logits count as -inf.
void token_logprobs(std::span<const float> logits, int32_t id, int n, GeneratedToken& out);

}  // namespace zinc::engine
