// zinc/engine/drafter.h — speculative decoding's drafters: given a sequence's tokens so far,
// propose up to n tokens that the target model is likely to produce next (docs/speculative.md).
//
// The target model then verifies the draft in one forward (engine/spec_verify.h): each
// sequence contributes 1 + d rows to the step, and only the tokens the target itself would have
// produced are kept, so a drafter can make decoding faster but never changes what is generated
// at temperature 0 (or the distribution above it). Drafters here are deterministic: the same
// tokens give the same draft (a point-mass proposal for the rejection sampler).
//
// Implementations:
//   lookup  prompt lookup decoding (Saxena 2023): the last n tokens (n = 3, 2, 1) matched in the
//           prompt and the text generated so far; the continuation of the most recent match is
//           the draft. No model, no state.
//   draft   a second, smaller GGUF with the same vocabulary (engine/draft_model.h), drafting
//           greedily with its own KV per sequence.
//   nextn   the target's own NextN/MTP block (`<arch>.nextn_predict_layers`, models/qwen35.cpp;
//           engine/nextn_drafter.h): reads the target's hidden states (observe_hidden), CPU tier.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::engine {

/// NextN: the target's own NextN/MTP layers (engine/nextn_drafter.h).
enum class SpecMode { Off, Lookup, Draft, NextN };
const char* to_string(SpecMode m);
/// "off", "lookup", "draft", "nextn" -> the mode; nullopt for anything else.
std::optional<SpecMode> parse_spec_mode(std::string_view s);

/// Most draft tokens per sequence and step (--spec-max); the adaptive length stays in [1, this].
inline constexpr int32_t kSpecMaxDraft = 16;

class Drafter {
  public:
    virtual ~Drafter() = default;
    /// "lookup", "draft" or "nextn" (the metrics label and the evidence's name).
    virtual const char* name() const = 0;
    /// Propose up to max_draft (>= 1) tokens continuing `tokens` (prompt + generated, the last
    /// one not yet run through the target) into `out` (cleared first; empty: no proposal).
    /// `seq` identifies the sequence for drafters that keep state per sequence.
    virtual void propose(uint64_t seq, std::span<const int32_t> tokens, int32_t max_draft,
                         std::vector<int32_t>& out) = 0;
    /// The sequence is gone: drop whatever is kept for it. Unknown ids are ignored.
    virtual void release(uint64_t seq) { (void)seq; }
    /// true for a drafter that reads the target's hidden states (NextN): the caller then asks
    /// the Runner for them (model::Batch::hidden_out) and passes each sequence's kept rows to
    /// observe_hidden() before its next propose().
    virtual bool wants_hidden() const { return false; }
    /// The target's last hidden state before the output norm (Program::hidden, n_embd f32 a
    /// row) at positions [pos0, pos0 + n) of `seq`, rows.size() == n * n_embd: the rows of
    /// tokens the sequence keeps (a prompt's last row, a decode, a verification's pending token
    /// and accepted drafts). Replaces whatever was observed at positions >= pos0.
    virtual void observe_hidden(uint64_t seq, int32_t pos0, std::span<const float> rows) {
        (void)seq, (void)pos0, (void)rows;
    }
};

/// The greedy draft token of a logits row: argmax, lowest id on ties (the model drafters').
int32_t draft_argmax(std::span<const float> logits);

/// Prompt lookup: n-grams of max_ngram down to 1 tokens.
std::unique_ptr<Drafter> make_lookup_drafter(int32_t max_ngram = 3);

/// Draft length per sequence, adapted to its measured acceptance: starts at min(4, max); a draft
/// accepted whole grows it by one, a draft rejected at its first token halves it, a partial
/// accept shrinks it by one; always within [1, max].
struct DraftLength {
    int32_t max = 8;
    int32_t len = 4;
    explicit DraftLength(int32_t max_len = 8) : max(max_len), len(max_len < 4 ? max_len : 4) {}
    void update(int32_t n_drafted, int32_t n_accepted);
};

}  // namespace zinc::engine
