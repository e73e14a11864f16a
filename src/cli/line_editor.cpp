// zinc/cli/line_editor.cpp — see line_editor.h. The terminal side is libedit's native API
// (histedit.h): el_gets with our own read function (poll(2) + read(2), so a Ctrl-C while waiting
// is seen at once: the SIGINT handler only raises a flag, and poll returns EINTR), a key binding
// for bracketed paste (ESC[200~ ... ESC[201~ inserted as text, newlines included), and libedit's
// history saved after each turn.
#include "cli/line_editor.h"

#include <histedit.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <filesystem>
#include <string_view>
#include <vector>

namespace zinc::cli {

namespace {

constexpr int kHistorySize = 1000;
constexpr const char* kPrompt = "> ";
constexpr const char* kMorePrompt = "... ";

enum class ByteStatus { Byte, Eof, Interrupted };

// One byte from stdin; bytes read ahead are kept in `buf`.
ByteStatus read_byte(std::string& buf, bool& eof, const SigintGuard* sigint, char& out) {
    for (;;) {
        if (!buf.empty()) {
            out = buf.front();
            buf.erase(0, 1);
            return ByteStatus::Byte;
        }
        if (eof) return ByteStatus::Eof;
        struct pollfd pfd {
            STDIN_FILENO, POLLIN, 0
        };
        if (::poll(&pfd, 1, -1) < 0) {
            if (errno == EINTR && sigint && sigint->fired()) return ByteStatus::Interrupted;
            if (errno == EINTR) continue;
            eof = true;
            continue;
        }
        char chunk[4096];
        const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
        if (n > 0) {
            buf.append(chunk, static_cast<size_t>(n));
        } else if (n == 0) {
            eof = true;
        } else if (errno == EINTR) {
            if (sigint && sigint->fired()) return ByteStatus::Interrupted;
        } else {
            eof = true;  // an unreadable stdin ends the chat like EOF
        }
    }
}

bool ends_with(std::string_view s, std::string_view t) {
    return s.size() >= t.size() && s.substr(s.size() - t.size()) == t;
}

std::string rtrim(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
    return s;
}

}  // namespace

struct LineEditor::Impl {
    bool terminal = false;
    std::string history_path;
    std::string buf;  // bytes read ahead of the line in use
    bool eof = false;
    const SigintGuard* sigint = nullptr;
    bool interrupted = false;
    const char* prompt = kPrompt;
    EditLine* el = nullptr;
    History* hist = nullptr;
    bool save_warned = false;

    // libedit's read function: one wide character, 1; EOF, 0; Ctrl-C (or an error), -1.
    static int getc_fn(EditLine* el, wchar_t* wc) {
        Impl* self = nullptr;
        el_get(el, EL_CLIENTDATA, &self);
        std::mbstate_t st{};
        for (;;) {
            char c = 0;
            const ByteStatus bs = read_byte(self->buf, self->eof, self->sigint, c);
            if (bs == ByteStatus::Eof) return 0;
            if (bs == ByteStatus::Interrupted) {
                self->interrupted = true;
                return -1;
            }
            const size_t r = std::mbrtowc(wc, &c, 1, &st);
            if (r == static_cast<size_t>(-2)) continue;  // within a multibyte character
            if (r == static_cast<size_t>(-1)) {          // not valid here: the byte as Latin-1
                *wc = static_cast<unsigned char>(c);
                return 1;
            }
            return 1;
        }
    }

    // Bound to ESC[200~: everything up to ESC[201~ is inserted as text (CR -> LF, as terminals
    // send the lines of a paste with CR), so that a pasted block is one turn.
    static unsigned char paste_fn(EditLine* el, int) {
        Impl* self = nullptr;
        el_get(el, EL_CLIENTDATA, &self);
        std::string text;
        static constexpr std::string_view kEnd = "\033[201~";
        for (;;) {
            char c = 0;
            const ByteStatus bs = read_byte(self->buf, self->eof, self->sigint, c);
            if (bs == ByteStatus::Interrupted) {
                self->interrupted = true;
                return CC_ERROR;
            }
            if (bs == ByteStatus::Eof) break;
            text.push_back(c == '\r' ? '\n' : c);
            if (ends_with(text, kEnd)) {
                text.resize(text.size() - kEnd.size());
                break;
            }
        }
        while (!text.empty() && text.back() == '\n') text.pop_back();  // Enter sends it
        if (!text.empty()) el_insertstr(el, text.c_str());
        return CC_REFRESH;
    }

    static char* prompt_fn(EditLine* el) {
        Impl* self = nullptr;
        el_get(el, EL_CLIENTDATA, &self);
        return const_cast<char*>(self->prompt);
    }

    void open_terminal() {
        // libedit decodes and prints multibyte text per LC_CTYPE: use the user's locale, and
        // UTF-8 when that is plain "C" (model text is UTF-8).
        const char* loc = std::setlocale(LC_CTYPE, "");
        if (loc == nullptr || std::strstr(loc, "UTF-8") == nullptr)
            std::setlocale(LC_CTYPE, "C.UTF-8");
        el = el_init("zinc", stdin, stdout, stderr);
        if (el == nullptr) {
            terminal = false;
            return;
        }
        el_set(el, EL_CLIENTDATA, this);
        el_set(el, EL_EDITOR, "emacs");
        el_set(el, EL_SIGNAL, 0);  // SIGINT is ours (SigintGuard); getc_fn sees it
        el_set(el, EL_GETCFN, &Impl::getc_fn);
        el_set(el, EL_PROMPT, &Impl::prompt_fn);
        el_set(el, EL_ADDFN, "zinc-paste", "insert a bracketed paste", &Impl::paste_fn);
        el_set(el, EL_BIND, "\033[200~", "zinc-paste", nullptr);
        el_source(el, nullptr);  // ~/.editrc, as other libedit programs read it
        hist = history_init();
        HistEvent ev;
        history(hist, &ev, H_SETSIZE, kHistorySize);
        history(hist, &ev, H_SETUNIQUE, 1);
        if (!history_path.empty()) history(hist, &ev, H_LOAD, history_path.c_str());
        el_set(el, EL_HIST, history, hist);
    }

    // One physical line (a paste may hold several), without its newline.
    ReadStatus read_line(std::string& line) {
        if (!terminal) {
            std::fputs(prompt, stdout);
            std::fflush(stdout);
            line.clear();
            for (;;) {
                char c = 0;
                const ByteStatus bs = read_byte(buf, eof, sigint, c);
                if (bs == ByteStatus::Interrupted) {
                    buf.clear();  // the terminal dropped the typed line too
                    return ReadStatus::Interrupted;
                }
                if (bs == ByteStatus::Eof) return line.empty() ? ReadStatus::Eof : ReadStatus::Line;
                if (c == '\n') return ReadStatus::Line;
                line.push_back(c);
            }
        }
        interrupted = false;
        std::fputs("\033[?2004h", stdout);  // bracketed paste on while editing
        std::fflush(stdout);
        int count = 0;
        const char* got = el_gets(el, &count);
        std::fputs("\033[?2004l", stdout);
        std::fflush(stdout);
        if (interrupted) {
            buf.clear();
            return ReadStatus::Interrupted;
        }
        if (got == nullptr || count <= 0) return ReadStatus::Eof;
        line.assign(got, static_cast<size_t>(count));
        if (!line.empty() && line.back() == '\n') line.pop_back();
        return ReadStatus::Line;
    }
};

LineEditor::LineEditor(bool terminal, std::string history_path) : impl_(std::make_unique<Impl>()) {
    impl_->terminal = terminal;
    impl_->history_path = std::move(history_path);
    if (terminal) impl_->open_terminal();
}

LineEditor::~LineEditor() {
    if (impl_->hist) history_end(impl_->hist);
    if (impl_->el) el_end(impl_->el);
}

bool LineEditor::terminal() const {
    return impl_->terminal;
}

ReadStatus LineEditor::read_turn(std::string& turn, const SigintGuard& sigint) {
    impl_->sigint = &sigint;
    std::vector<std::string> parts;
    bool block = false;  // inside """ ... """
    for (;;) {
        impl_->prompt = parts.empty() && !block ? kPrompt : kMorePrompt;
        std::string line;
        const ReadStatus st = impl_->read_line(line);
        if (st == ReadStatus::Interrupted) return st;
        if (st == ReadStatus::Eof) {
            if (parts.empty()) return st;
            break;  // an unfinished continuation at EOF is sent as it stands
        }
        if (!block) {
            const size_t lead = line.find_first_not_of(" \t");
            if (parts.empty() && lead != std::string::npos &&
                line.compare(lead, 3, "\"\"\"") == 0) {
                std::string rest = rtrim(line.substr(lead + 3));
                if (ends_with(rest, "\"\"\"")) {  // """one line"""
                    parts.push_back(rest.substr(0, rest.size() - 3));
                    break;
                }
                block = true;
                if (!rest.empty()) parts.push_back(rest);
                continue;
            }
            const std::string r = rtrim(line);
            if (ends_with(r, "\\")) {
                parts.push_back(r.substr(0, r.size() - 1));
                continue;
            }
            parts.push_back(line);
            break;
        }
        const std::string r = rtrim(line);
        if (ends_with(r, "\"\"\"")) {
            const std::string last = r.substr(0, r.size() - 3);
            if (!last.empty()) parts.push_back(last);
            break;
        }
        parts.push_back(line);
    }
    turn.clear();
    for (size_t i = 0; i < parts.size(); ++i) turn += (i ? "\n" : "") + parts[i];
    return ReadStatus::Line;
}

void LineEditor::remember(const std::string& turn) {
    if (!impl_->terminal || impl_->hist == nullptr || turn.empty()) return;
    HistEvent ev;
    history(impl_->hist, &ev, H_ENTER, turn.c_str());
    if (impl_->history_path.empty()) return;
    std::error_code ec;
    const std::filesystem::path p(impl_->history_path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    errno = 0;
    if (!ec && history(impl_->hist, &ev, H_SAVE, impl_->history_path.c_str()) >= 0) {
        ::chmod(impl_->history_path.c_str(), 0600);  // what was typed is private
        return;
    }
    if (impl_->save_warned) return;
    impl_->save_warned = true;  // once a session; the chat goes on
    const std::string why = ec ? ec.message() : errno ? std::strerror(errno) : "not writable";
    std::fprintf(stderr,
                 "zinc: warning: cannot save the input history to %s: %s (--history-file '' keeps "
                 "none)\n",
                 impl_->history_path.c_str(), why.c_str());
}

std::string default_history_path() {
    if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x)
        return std::string(x) + "/zinc/history";
    if (const char* h = std::getenv("HOME"); h && *h)
        return std::string(h) + "/.local/state/zinc/history";
    return "";
}

}  // namespace zinc::cli
