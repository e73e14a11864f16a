// zinc/tokenizer/text_stream.h — the streaming detokenizer shared by the CLI and the server:
// token ids in, text that is safe to show out, with stop strings and end-of-generation tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace zinc::tokenizer {

/// Why a TextStream is (or is not yet) done.
enum class StreamStatus {
    Continue,    // keep generating
    StopString,  // a stop string completed; it and everything after it were dropped
    Eog,         // an end-of-generation token (Tokenizer::is_eog) arrived; its text was dropped
};

/// What one push() gives the caller: text to show now (valid UTF-8, possibly empty) and status.
struct StreamStep {
    std::string text;
    StreamStatus status = StreamStatus::Continue;
};

/// Turns generated token ids into displayable text with the semantics OpenAI-style clients and
/// llama.cpp's server expect:
///
/// * Never emits part of a UTF-8 character: bytes of a character split across tokens are held
///   until it is complete. Ill-formed bytes become U+FFFD (one per maximal ill-formed subpart,
///   like Python's errors="replace") as soon as they are proven ill-formed, or at the end of the
///   stream for a truncated character (composes IncrementalDetokenizer).
/// * Holds back the longest tail of the text that is a proper prefix of some stop string, and
///   releases it as soon as the following text rules the match out (or at the end of stream).
/// * Stops as soon as any stop string is complete, even if it spans many tokens. The stop string
///   and anything after it are not emitted; text before it (also from the same token) is. When
///   several stop strings could match, the one that completes first in the text wins (ties: the
///   longer one, i.e. the one starting earlier). This rule makes the output independent of how
///   the text is split into tokens: streaming byte by byte gives the same result as one token.
/// * An EOG token stops the stream without emitting its own text; text still held back (a
///   partial stop string, a truncated character -> U+FFFD) is released with it.
///
/// Stop strings are byte strings compared against the emitted UTF-8 text; empty ones are ignored.
/// Matching happens after U+FFFD substitution, so a stop string never matches half a character.
/// The Tokenizer must outlive the stream. Not thread-safe (one stream per sequence).
class TextStream {
  public:
    /// `special`: render control tokens that are not EOG (e.g. "<|im_start|>") as their text.
    TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings, bool special = false);

    /// Feed one generated token. After the stream has stopped, returns {"", status()}.
    StreamStep push(TokenId id);

    /// End of stream without a stop (e.g. max tokens reached): flush held-back text, including a
    /// truncated trailing character as U+FFFD. A stop string completed by the flushed text still
    /// stops (status() becomes StopString). Returns "" once the stream has stopped or finished.
    std::string finish();

    StreamStatus status() const { return status_; }
    bool stopped() const { return status_ != StreamStatus::Continue; }
    /// Everything emitted so far (the concatenation of all returned text).
    const std::string& text() const { return emitted_; }
    /// Index into the constructor's stop_strings of the one that matched, or -1.
    int stop_index() const { return stop_index_; }
    /// The stop string that matched ("" if none).
    std::string_view stop_string() const;
    /// The EOG token that stopped the stream, or -1.
    TokenId eog_token() const { return eog_token_; }
    /// Bytes of decoded, valid text currently held back as a possible stop-string prefix.
    size_t held_bytes() const { return held_.size(); }

  private:
    // Append decoded text, look for a completed stop string, and return what became safe.
    std::string absorb(std::string text, bool at_end);

    const Tokenizer& tok_;
    IncrementalDetokenizer detok_;
    std::vector<std::string> stops_;
    std::vector<size_t> by_length_;  // indices into stops_, longest first
    std::string held_;               // decoded but not yet emitted
    std::string emitted_;
    StreamStatus status_ = StreamStatus::Continue;
    bool finished_ = false;
    int stop_index_ = -1;
    TokenId eog_token_ = -1;
};

}  // namespace zinc::tokenizer
