// zinc/cli/line_editor.h — what `zinc chat` reads a user turn with. On a terminal: libedit
// (BSD-licensed editline) with emacs key bindings, arrow keys, history persisted in
// $XDG_STATE_HOME/zinc/history (else ~/.local/state/zinc/history), and bracketed paste (a pasted
// block of several lines is one turn). Otherwise (piped stdin): plain line reads. In both, a line
// ending in a backslash continues on the next line (llama.cpp), and """ opens a block closed by
// a line ending in """ (Ollama). Ctrl-C while waiting drops what was typed.
#pragma once

#include <memory>
#include <string>

#include "cli/sigint.h"

namespace zinc::cli {

enum class ReadStatus { Line, Eof, Interrupted };

class LineEditor {
  public:
    /// `terminal`: use libedit (stdin and stdout are terminals). `history_path` "" keeps no
    /// history file.
    LineEditor(bool terminal, std::string history_path);
    ~LineEditor();
    LineEditor(const LineEditor&) = delete;
    LineEditor& operator=(const LineEditor&) = delete;

    /// One user turn (continuation lines and pasted blocks joined with '\n'), without the final
    /// newline. Interrupted: Ctrl-C while waiting (what was typed is dropped).
    ReadStatus read_turn(std::string& turn, const SigintGuard& sigint);

    /// Remember a turn in the history (and the history file), terminal mode only.
    void remember(const std::string& turn);

    bool terminal() const;

    struct Impl;

  private:
    std::unique_ptr<Impl> impl_;
};

/// $XDG_STATE_HOME/zinc/history, else $HOME/.local/state/zinc/history; "" without either.
std::string default_history_path();

}  // namespace zinc::cli
