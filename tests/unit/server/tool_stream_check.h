// Shared by the tool-call stream tests: replies fed in any chunking, accumulated as an OpenAI
// client does, checked against the whole reply (parse_tool_calls) with the stream's invariants
// (every piece whole UTF-8, calls started in order, fragments of the last call only).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "server/tool_call_stream.h"
#include "server/tool_calls.h"

namespace zinc::server::tool_stream_check {

using nlohmann::json;

inline const std::vector<std::string> kNames = {"get_weather", "get_time"};

struct Result {
    std::string content;
    std::vector<ParsedCall> calls;
    bool truncated = false;
    bool operator==(const Result& o) const {
        if (content != o.content || calls.size() != o.calls.size() || truncated != o.truncated)
            return false;
        for (size_t i = 0; i < calls.size(); ++i)
            if (calls[i].name != o.calls[i].name || calls[i].arguments != o.calls[i].arguments)
                return false;
        return true;
    }
};

inline std::ostream& operator<<(std::ostream& os, const Result& r) {
    os << "content=" << json(r.content).dump() << " truncated=" << r.truncated;
    for (const auto& c : r.calls)
        os << " call(" << c.name << ", " << json(c.arguments).dump() << ")";
    return os;
}

inline bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80             ? 1
                         : (c & 0xE0) == 0xC0 ? 2
                         : (c & 0xF0) == 0xE0 ? 3
                         : (c & 0xF8) == 0xF0 ? 4
                                              : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

// Accumulate pieces as an OpenAI client does; check the stream's own invariants on the way.
inline void add(Result& r, const std::vector<ToolStreamPiece>& pieces) {
    for (const auto& p : pieces) {
        EXPECT_TRUE(valid_utf8(p.text))
            << json(p.text).dump(-1, ' ', false, json::error_handler_t::replace);
        if (p.call < 0) {
            EXPECT_FALSE(p.text.empty());
            r.content += p.text;
            continue;
        }
        if (p.starts_call) {
            EXPECT_EQ(p.call, static_cast<int>(r.calls.size())) << "calls start in order";
            EXPECT_FALSE(p.name.empty());
            r.calls.push_back({p.name, ""});
        } else {
            ASSERT_LT(p.call, static_cast<int>(r.calls.size())) << "a fragment before its start";
            EXPECT_EQ(p.call, static_cast<int>(r.calls.size()) - 1) << "fragments of the last call";
        }
        r.calls[static_cast<size_t>(p.call)].arguments += p.text;
    }
}

inline Result run(const std::vector<std::string>& chunks, ToolFormat f = ToolFormat::Hermes,
                  bool parallel = true) {
    ToolCallStream s(f, kNames, parallel);
    Result r;
    for (const auto& c : chunks) add(r, s.feed(c));
    add(r, s.finish());
    r.truncated = s.truncated();
    return r;
}

inline Result whole(const std::string& text, ToolFormat f = ToolFormat::Hermes,
                    bool parallel = true) {
    const ParsedReply p = parse_tool_calls(text, f, kNames, parallel);
    return {p.content, p.calls, p.truncated};
}

// Every chunking of `text` gives the whole reply's result.
inline void expect_split_invariant(const std::string& text, ToolFormat f = ToolFormat::Hermes,
                                   bool parallel = true) {
    const Result want = whole(text, f, parallel);
    EXPECT_EQ(run({text}, f, parallel), want);
    for (size_t i = 0; i <= text.size(); ++i) {
        ASSERT_EQ(run({text.substr(0, i), text.substr(i)}, f, parallel), want) << "split at " << i;
    }
    if (text.size() <= 160) {
        for (size_t i = 0; i <= text.size(); ++i) {
            for (size_t j = i; j <= text.size(); ++j) {
                ASSERT_EQ(
                    run({text.substr(0, i), text.substr(i, j - i), text.substr(j)}, f, parallel),
                    want)
                    << "splits at " << i << ", " << j;
            }
        }
    }
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    EXPECT_EQ(run(bytes, f, parallel), want) << "byte by byte";
}

}  // namespace zinc::server::tool_stream_check
