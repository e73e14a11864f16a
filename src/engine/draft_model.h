// zinc/engine/draft_model.h — the draft-model drafter: a second, smaller model with the target's
// vocabulary proposes the next tokens greedily (speculative decoding's classic form).
//
// Each sequence gets its own model::Context (its own KV) on the CPU tier, created on its first
// proposal and dropped by release(). The Context remembers which tokens its KV holds; a new
// proposal keeps the longest prefix that still agrees with the sequence (accepted drafts stay,
// rejected ones are truncated away), runs the tokens after it, then one token per drafted
// position (argmax, lowest id on ties). Vocabulary compatibility is checked by the caller when
// the draft is loaded (cli/spec_flags.h: size and the texts of sampled tokens).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/drafter.h"

namespace zinc::model {
class Model;
}

namespace zinc::engine {

struct DraftModelOptions {
    int32_t n_ctx = 4096;  // positions per sequence's draft KV (the target's context)
    int n_threads = 0;     // CPU threads of the draft's forward; 0: all
};

/// `model` must outlive the drafter. Its vocabulary must be the target's.
std::unique_ptr<Drafter> make_draft_model_drafter(const model::Model& model,
                                                  const DraftModelOptions& opts);

}  // namespace zinc::engine
