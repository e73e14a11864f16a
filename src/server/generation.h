// zinc/server/generation.h — one API request's run on the engine: its choices (prompts x n) as
// engine requests, their token events turned into text deltas through TextStream (UTF-8 safe,
// stop strings held back), finish reasons, usage, latency metrics, and cancellation.
//
// Threads: the engine calls the sinks on its step thread; they only queue the event (the engine
// asks sinks to be quick). The HTTP thread that owns the Generation calls poll(), which
// detokenizes and matches stop strings. When a stop string completes, that choice's engine
// request is cancelled so its KV blocks are released within a step. Destroying a Generation
// cancels whatever is still running (a handler that returns early leaks nothing).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "runtime/request_evidence.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "tokenizer/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace zinc::server {

using Clock = std::chrono::steady_clock;

/// One choice to generate: which prompt it continues and the engine parameters.
struct ChoiceSpec {
    int32_t prompt_index = 0;
    engine::RequestParams params;
    /// Reads the choice's text as it is released, token by token (the pieces in order); true
    /// ends the choice right after that token, as a stop string does: finish reason "stop", the
    /// token counted and delivered, later ones neither, the engine request cancelled. So what a
    /// caller stops on is decided per token, whatever the polling, and usage counts the tokens
    /// up to it in a stream and a whole response alike (parallel_tool_calls false: the reply's
    /// first complete call). Empty: none.
    std::function<bool(std::string_view)> stop_after;
    /// Render control tokens that do not end the generation as their text (TextStream's
    /// `special`): tool formats whose markers are control tokens (tool_format.h).
    bool render_special = false;
};

/// What one poll() has for one choice.
struct ChoiceDelta {
    int32_t index = 0;
    std::string text;                            // new text (valid UTF-8; may be empty)
    std::vector<engine::GeneratedToken> tokens;  // the tokens consumed, with logprobs if asked
    std::optional<std::string> finish_reason;    // "stop" or "length" on the choice's last delta
};

class Generation {
  public:
    /// Submit every choice. A refusal cancels those already submitted and maps to an ApiError:
    /// ContextLength -> 400 context_length_exceeded, QueueFull -> 429, ShuttingDown -> 503,
    /// InvalidRequest -> 400. `metrics` may be null.
    static ApiResult<std::unique_ptr<Generation>> start(
        engine::Engine& eng, const tokenizer::Tokenizer& tok, std::vector<ChoiceSpec> choices,
        const std::vector<std::string>& stops, Metrics* metrics, Clock::time_point arrival);
    ~Generation();
    Generation(const Generation&) = delete;
    Generation& operator=(const Generation&) = delete;

    /// Wait up to `timeout` for engine events and turn them into deltas (one per choice that
    /// has news; empty on timeout).
    std::vector<ChoiceDelta> poll(std::chrono::milliseconds timeout);
    /// Every choice has its finish reason and the engine's final event (so its evidence is in),
    /// or the generation failed. A choice ended by a stop string waits for the cancel to land
    /// (within one engine step).
    bool done() const;
    /// Choice `index` has its finish reason and the engine's final event.
    bool settled(int32_t index) const;
    /// The choices' per-request evidence summed (runtime/request_evidence.h), once every choice
    /// is settled and the engine keeps step evidence; nullopt otherwise.
    std::optional<runtime::RequestEvidence> evidence() const;
    /// Set when the engine ended a choice abnormally (an internal error, or shutdown).
    const std::optional<ApiError>& failure() const { return failure_; }
    /// Cancel every choice still running (the client went away). Idempotent.
    void cancel();

    /// When the first token of any choice arrived (epoch when none has).
    Clock::time_point first_token_at() const { return first_token_at_; }
    int32_t n_choices() const { return static_cast<int32_t>(choices_.size()); }
    /// Tokens delivered to the client, all choices (stop-string and EOG tokens excluded).
    int32_t completion_tokens() const;
    /// Prompt tokens served from the prefix cache, summed over the first choice of each prompt.
    int32_t cached_prompt_tokens() const;
    /// Speculative decoding over all choices (engine::Usage's spec_* counts of their final
    /// events): verifications, draft tokens proposed, accepted.
    struct Speculation {
        int64_t steps = 0, drafted = 0, accepted = 0;
    };
    Speculation speculation() const;

  private:
    struct Channel;
    struct Choice;
    Generation(engine::Engine& eng, const tokenizer::Tokenizer& tok, Metrics* metrics,
               Clock::time_point arrival);
    void finish_metrics();

    engine::Engine& eng_;
    const tokenizer::Tokenizer& tok_;
    Metrics* metrics_;
    Clock::time_point arrival_;
    std::shared_ptr<Channel> channel_;  // shared with the sinks, which may outlive us
    std::vector<std::unique_ptr<Choice>> choices_;
    std::optional<ApiError> failure_;
    bool first_token_seen_ = false;
    bool metrics_done_ = false;
    Clock::time_point last_token_time_{};
    Clock::time_point first_token_at_{};
};

}  // namespace zinc::server
