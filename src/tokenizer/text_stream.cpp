// zinc/tokenizer/text_stream.cpp — TextStream: IncrementalDetokenizer output run through a
// stop-string matcher that holds back possible stop-string prefixes (see text_stream.h).
#include "tokenizer/text_stream.h"

#include <algorithm>

namespace zinc::tokenizer {

namespace {

bool is_continuation(char c) {
    return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// Does `text` end with the first k bytes of `s`?
bool ends_with_prefix(std::string_view text, std::string_view s, size_t k) {
    return k <= text.size() && text.compare(text.size() - k, k, s.substr(0, k)) == 0;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings, bool special)
    : tok_(tok), detok_(tok, special), stops_(std::move(stop_strings)) {
    for (size_t i = 0; i < stops_.size(); ++i)
        if (!stops_[i].empty()) by_length_.push_back(i);
    std::stable_sort(by_length_.begin(), by_length_.end(),
                     [&](size_t a, size_t b) { return stops_[a].size() > stops_[b].size(); });
}

std::string_view TextStream::stop_string() const {
    return stop_index_ < 0 ? std::string_view() : std::string_view(stops_[stop_index_]);
}

StreamStep TextStream::push(TokenId id) {
    if (stopped() || finished_) return {std::string(), status_};
    if (tok_.is_eog(id)) {
        eog_token_ = id;
        finished_ = true;
        std::string out = absorb(detok_.finish(), true);
        if (status_ == StreamStatus::Continue) status_ = StreamStatus::Eog;
        return {std::move(out), status_};
    }
    std::string out = absorb(detok_.push(id), false);
    return {std::move(out), status_};
}

std::string TextStream::finish() {
    if (stopped() || finished_) return {};
    finished_ = true;
    return absorb(detok_.finish(), true);
}

std::string TextStream::absorb(std::string text, bool at_end) {
    // Every match ends in the new text: earlier calls already ruled out matches ending before it,
    // and text that was emitted can never be the start of a match (it was not a stop prefix).
    const size_t old_size = held_.size();
    held_ += text;
    const std::string_view h(held_);
    for (size_t end = old_size + 1; end <= h.size(); ++end) {
        for (size_t idx : by_length_) {  // longest first: same end, earlier start wins
            const std::string_view s(stops_[idx]);
            if (s.size() <= end && h.compare(end - s.size(), s.size(), s) == 0) {
                size_t cut = end - s.size();
                while (cut > 0 && is_continuation(held_[cut])) --cut;  // invalid stop strings
                std::string out = held_.substr(0, cut);
                emitted_ += out;
                held_.clear();
                status_ = StreamStatus::StopString;
                stop_index_ = static_cast<int>(idx);
                return out;
            }
        }
    }
    size_t keep = 0;
    if (!at_end) {
        for (size_t idx : by_length_) {
            const std::string_view s(stops_[idx]);
            for (size_t k = std::min(s.size() - 1, h.size()); k > keep; --k) {
                if (ends_with_prefix(h, s, k)) {
                    keep = k;
                    break;
                }
            }
        }
    }
    size_t split = held_.size() - keep;
    // A stop string that is not valid UTF-8 could match from inside a character; never split one.
    while (split > 0 && split < held_.size() && is_continuation(held_[split])) --split;
    std::string out = held_.substr(0, split);
    held_.erase(0, split);
    emitted_ += out;
    return out;
}

}  // namespace zinc::tokenizer
