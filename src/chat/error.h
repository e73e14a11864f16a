// zinc/chat/error.h — the interpreter's internal error: thrown inside src/chat, caught at the
// public API (chat_template.cpp) and turned into a zinc::Error with "line:column".
//
// Exceptions stay inside this folder: every public entry point catches them, so callers only
// ever see Result<T>. Positions are 1-based; column counts code points from the line start.
#pragma once

#include <string>
#include <utility>

namespace zinc::chat {

struct SourcePos {
    int line = 0;  // 0: not known yet (the evaluator fills in the node being evaluated)
    int col = 0;
};

struct TemplateError {
    std::string message;
    SourcePos pos;
    bool raised = false;  // from raise_exception(): the message is the template's own
};

[[noreturn]] inline void fail(std::string message, SourcePos pos = {}) {
    throw TemplateError{std::move(message), pos, false};
}

}  // namespace zinc::chat
