// zinc/cli/errors.cpp — how every subcommand reports bad input: one line on stderr, a status
// (cli.h), and CLI11 parse errors folded into that same one-line form.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/host_info.h"
#include "cli/llama_compat.h"
#include "util/utf8.h"

namespace zinc::cli {

int report_error(std::string_view msg, int code) {
    std::string line(msg);
    // One line, whatever the message carries (a CLI11 message may end with a newline).
    for (char& c : line)
        if (c == '\n' || c == '\r') c = ' ';
    while (!line.empty() && line.back() == ' ') line.pop_back();
    // Messages quote file metadata and user input: never write their control characters or
    // invalid bytes to the terminal raw.
    std::fprintf(stderr, "zinc: error: %s\n", utf8::escape_controls(line).c_str());
    return code;
}

namespace {
bool g_serving_by_default = false;
}  // namespace

void set_serving_by_default(bool on) {
    g_serving_by_default = on;
}

void note_serving_by_default() {
    if (!g_serving_by_default || !log_info()) return;
    g_serving_by_default = false;  // once
    std::fprintf(stderr,
                 "zinc: no --prompt: serving the model over HTTP, as `zinc serve` (give --prompt "
                 "TEXT or -f FILE to generate, or use zinc chat)\n");
}

void warn_if_oversubscribed(int n_threads) {
    const int hw = probe_host().n_threads;
    if (n_threads > hw && log_warn())
        std::fprintf(stderr,
                     "zinc: warning: -t %d exceeds the %d hardware threads; this is usually "
                     "slower than -t %d\n",
                     n_threads, hw, hw);
}

int parse_args(CLI::App& app, int argc, char** argv) {
    // `zinc -m FILE ...` without a prompt runs `zinc serve`: errors say so, and so does a note.
    const std::string why =
        g_serving_by_default
            ? " (zinc -m FILE without --prompt or -f serves the model, as zinc serve; give "
              "--prompt TEXT to generate)"
            : " (see --help)";
    std::vector<std::string> args;
    std::string error;
    if (!rewrite_llama_args(app, argc, argv, args, error)) return report_error(error);
    std::vector<char*> ptrs;
    for (auto& a : args) ptrs.push_back(a.data());
    try {
        app.parse(static_cast<int>(ptrs.size()), ptrs.data());
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return kExitOk;
    } catch (const CLI::CallForAllHelp&) {
        std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
        return kExitOk;
    } catch (const CLI::ExtrasError& e) {
        std::string msg = unknown_flag_message(app, args);
        if (msg.empty()) return report_error(std::string(e.what()) + why);
        if (g_serving_by_default) msg = msg.substr(0, msg.rfind(" (see --help)")) + why;
        return report_error(msg);
    } catch (const CLI::ParseError& e) {
        return report_error(std::string(e.what()) + why, kExitBadInput);
    }
    return -1;
}

}  // namespace zinc::cli
