// zinc/chat/taint.h — the trust boundary of chat rendering: which bytes of a string came from
// the render's input values (data: message content, roles, tools, documents) and which from the
// template's own text (control). The tokenizer may turn control text into special tokens; data
// text is always tokenized as plain text (docs/chat-templates.md, "Data and control").
//
// A string's taint is a list of data byte ranges. Operations that move bytes (concatenation,
// slicing, strip, split, replace, join, formatting) carry the ranges with the bytes; operations
// that compute new text from a value (case mapping, tojson, repr, centre/indent, ...) make the
// whole result data when any input was data. Numbers, booleans and None carry no taint: their
// text (digits, True, None) is the same whatever the input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::chat {

/// Bytes [begin, end) of a string.
struct Span {
    size_t begin = 0, end = 0;
    bool operator==(const Span&) const = default;
};

/// Data ranges of one string: sorted, disjoint, non-empty and non-adjacent (adjacent ranges are
/// merged), all within the string. Empty: the string is entirely template text.
using DataSpans = std::vector<Span>;

/// Append [b, e) to `spans` (which ends at or before b), merging with the last range.
void spans_add(DataSpans& spans, size_t b, size_t e);
/// Append `more` (ranges of a string placed at byte `shift`) to `spans`.
void spans_append(DataSpans& spans, const DataSpans& more, size_t shift);
/// The part of `spans` inside [b, e), shifted to start at 0.
DataSpans spans_slice(const DataSpans& spans, size_t b, size_t e);
/// Whether any byte of [b, e) is data.
bool spans_overlap(const DataSpans& spans, size_t b, size_t e);

/// A string being built with its data ranges (the interpreter's output buffer).
class TaintedText {
  public:
    void append_literal(std::string_view s) { text_ += s; }
    void append_data(std::string_view s) {
        spans_add(spans_, text_.size(), text_.size() + s.size());
        text_ += s;
    }
    /// Append `s` whose own data ranges are `spans` (nullptr: none).
    void append(std::string_view s, const DataSpans* spans) {
        if (spans) spans_append(spans_, *spans, text_.size());
        text_ += s;
    }
    /// Append `s` as data when `data`, else as template text.
    void append_as(std::string_view s, bool data) {
        if (data)
            append_data(s);
        else
            append_literal(s);
    }
    size_t size() const { return text_.size(); }
    const std::string& text() const { return text_; }
    const DataSpans& spans() const { return spans_; }
    std::string& text_mut() { return text_; }
    DataSpans& spans_mut() { return spans_; }

  private:
    std::string text_;
    DataSpans spans_;
};

}  // namespace zinc::chat
