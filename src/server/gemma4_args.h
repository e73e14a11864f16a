// zinc/server/gemma4_args.h — Gemma 4's tool-call arguments read as they are generated and
// written as JSON: the reader behind the Gemma 4 format of tool_call_stream.h.
//
// Gemma 4 writes a call as `<|tool_call>call:NAME{key:VALUE,...}<tool_call|>`, its arguments
// not JSON but the dictionary syntax of its chat template's `format_argument` macro (the fact
// source is llama.cpp's peg-gemma4 grammar, common/parsers/gemma4.cpp, and its gemma4_to_json
// mapper, common/chat-peg-parser.cpp, as llama-cpp-python 0.3.36 vendors them):
//   value  := string | dict | array | literal
//   string := `<|"|>` any text without `<|"|>` `<|"|>`   (no escapes: the text is verbatim)
//   dict   := `{` ws (`}` | key `:` ws value (`,` ws key `:` ws value)* ws `}`)
//   key    := a character other than `:`, `}`, `<` and whitespace, then any other than `:`, `}`
//             (llama.cpp's also may start with `<`; here markup where a key starts ends the call)
//   array  := `[` ws (`]` | value (`,` ws value)* ws `]`)
//   literal:= a number, `true`, `false` or `null` (a run of bytes up to `,` `}` `]` `<` or ws)
// The JSON is compact, as llama.cpp's mapper writes it: `{"key":VALUE,...}`, strings escaped
// (RFC 8259: `"` `\` and control bytes; other bytes, UTF-8 included, as they are), literals as
// written (not validated, as the JSON formats' arguments are not).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zinc::server {

class Gemma4ArgsReader {
  public:
    enum class Status {
        More,    // every byte before `used` was read; the rest (a possible `<|"|>`) needs more
        Done,    // the outermost value ended at in[used - 1]
        Failed,  // in[used] does not continue the syntax (nothing of it was read)
    };

    /// Read `in` from its start, appending the JSON for what was read to `out`; `used` is the
    /// number of bytes read. Call again with the unread rest plus new input after More.
    Status read(std::string_view in, size_t& used, std::string& out);

    /// The input ended: the JSON for `rest` (what the last read left unread), which is text of
    /// a string when the input ended inside one, and nothing otherwise.
    std::string at_end(std::string_view rest) const;

  private:
    enum class State { Value, FirstKey, KeyStart, Key, String, Literal, AfterValue, Done };
    State state_ = State::Value;
    std::vector<char> open_;  // the containers open: '{' or '['
    bool empty_ok_ = false;   // Value right after `[`: `]` closes an empty array
};

/// `s` as the inside of a JSON string (RFC 8259 escapes for `"`, `\` and control bytes).
std::string json_escape_inner(std::string_view s);

}  // namespace zinc::server
