// zinc/server/tool_call_stream.h — the model's tool calls read from its text as it is generated,
// chunk by chunk: the parser behind both streamed `delta.tool_calls` and a whole reply's
// `message.tool_calls` (parse_tool_calls in tool_calls.h feeds the whole text in one chunk), so
// the concatenated stream is the whole response by construction, for any chunking.
//
// The formats are the descriptors of tool_format.h. What a reply becomes (docs/server.md):
//   - A call starts at the format's open marker (Hermes `<tool_call>`), or at a `{` that starts
//     the reply or follows a bare call (formats with bare calls). It is committed (sent as the
//     call's first piece, with its name) once `{"name": "<one of the request's tools>",
//     "arguments":` ("parameters" too, any whitespace) is read, or `}` right after the name.
//     A start that leaves that shape first (another key, an unknown name, not JSON, the end of
//     the generation) is content: for a marker, the whole block through its close marker; for
//     a bare `{`, the rest of the reply.
//   - Then the "arguments" value is sent as it is generated: an object or array verbatim, a
//     string as its decoded text (some models write the arguments as JSON text in a string),
//     null (or no arguments key) as "{}". Keys after it are skipped. The value is not
//     validated (as OpenAI's own are not: a client validates the arguments). Text that does
//     not continue the call object ends the call there and is read as what follows it.
//   - After a call: whitespace, the close marker (if the format has one; optional) and, after a
//     bare call, ';' separators are dropped.
//   - Whitespace directly before or after a call is dropped, and trailing whitespace too when
//     the reply made calls; a reply without calls is its text exactly.
//   - Generation that ends inside a call's arguments leaves that call with the arguments as far
//     as they were generated (`truncated()`), as OpenAI's with finish_reason "length".
//   - Not parallel (`parallel_tool_calls: false`): the reply ends with its first call's object;
//     everything after it (a close marker, a second call, text) is dropped, and done() tells
//     the caller that nothing more will be read (so generation can stop).
// Held back (sent with the next chunk or at finish): a possible prefix of the open marker, a run
// of whitespace, an incomplete UTF-8 sequence at a chunk's end, a call's start until it is
// committed or refused, an escape in string-valued arguments, a bare literal.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/gemma4_args.h"
#include "server/tool_format.h"

namespace zinc::server {

/// One piece of a reply in the order generated: content text (call < 0), or a part of call
/// `call` (0, 1, ... in order): its first piece has `starts_call` and the name, and every
/// piece's `text` is the next fragment of the call's arguments (possibly empty on the first).
struct ToolStreamPiece {
    int call = -1;
    bool starts_call = false;
    std::string name;
    std::string text;
};

class ToolCallStream {
  public:
    /// `names`: the request's tool names; a call of another name is content. `parallel` false:
    /// at most one call (above).
    ToolCallStream(ToolFormat format, std::vector<std::string> names, bool parallel = true);

    /// Read the next chunk of generated text (any byte split); returns what can be sent now.
    std::vector<ToolStreamPiece> feed(std::string_view chunk);
    /// Generation ended: everything still held, resolved (see the header comment).
    std::vector<ToolStreamPiece> finish();

    /// Calls committed so far.
    int n_calls() const { return n_calls_; }
    /// After finish(): generation ended inside the last call's arguments.
    bool truncated() const { return truncated_; }
    /// Not parallel, and the one call is complete: the rest of the reply is dropped unread.
    bool done() const { return state_ == State::Done; }

  private:
    enum class State {
        Text,         // content; watching for a call's start
        Header,       // a possible call's start in hdr_ (not committed)
        FailedBlock,  // a marker's block that is not a call: content through the close marker
        Object,       // a committed call's object after the name: the next key or the end
        Key,          // reading a key (its text in lit_)
        Colon,        // after a key
        Value,        // a value's first byte (arguments or a skipped one)
        Raw,          // an object/array value: depth_, in_str_, esc_
        String,       // a string-valued arguments, decoded (escape bytes in lit_)
        Literal,      // a bare literal (its text in lit_)
        Gemma4Args,   // Gemma 4's arguments, read by g4_ and sent as JSON
        AfterCall,    // the call object closed: separators and the close marker
        Done,         // not parallel: the one call is complete; the rest is dropped
    };

    // Each consumes from buf_ and returns false when it needs more input.
    bool step();
    bool text_state();
    bool header_state(bool at_end);
    struct HeadCursor;  // reads a call's head (tool_call_stream.cpp)
    bool json_head(HeadCursor& h, std::string& name, bool& no_arguments) const;
    bool harmony_head(HeadCursor& h, std::string& name) const;
    bool gemma4_head(HeadCursor& h, std::string& name) const;
    bool gemma4_state();
    bool failed_block_state();
    bool object_state();
    bool after_call_state();
    bool value_bytes();
    void end_call_value(bool was_arguments);
    void close_call();

    void put_content(std::string_view s);
    void put_args(std::string_view s);
    void put(ToolStreamPiece p);
    std::vector<ToolStreamPiece> take(bool at_end);

    const ToolFormatSpec& spec_;
    std::vector<std::string> names_;
    bool parallel_ = true;
    State state_ = State::Text;
    std::string buf_;          // input not yet consumed
    std::string ws_;           // held whitespace (content unless a call follows)
    std::string hdr_;          // Header: the bytes since the call's start
    size_t marker_len_ = 0;    // of hdr_, the marker it starts with (0: a bare '{')
    bool in_block_ = false;    // the current call opened with the format's marker
    bool bare_ok_ = true;      // a '{' here may start a bare call
    bool after_call_ = false;  // whitespace here follows a call (dropped)
    bool value_is_args_ = false;
    bool args_seen_ = false;
    bool args_done_ = false;
    int depth_ = 0;
    bool in_str_ = false, esc_ = false;
    std::string lit_;  // Key / Literal / String escape bytes
    Gemma4ArgsReader g4_;
    int n_calls_ = 0;
    bool truncated_ = false;
    std::vector<ToolStreamPiece> out_;
    ToolStreamPiece carry_;  // an incomplete UTF-8 tail of the last piece (text may be empty)
    bool has_carry_ = false;
};

}  // namespace zinc::server
