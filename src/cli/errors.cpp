// zinc/cli/errors.cpp — how every subcommand reports bad input: one line on stderr, a status
// (cli.h), and CLI11 parse errors folded into that same one-line form.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/cli.h"
#include "cli/host_info.h"
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

void warn_if_oversubscribed(int n_threads) {
    const int hw = probe_host().n_threads;
    if (n_threads > hw)
        std::fprintf(stderr,
                     "zinc: warning: -t %d exceeds the %d hardware threads; this is usually "
                     "slower than -t %d\n",
                     n_threads, hw, hw);
}

int parse_args(CLI::App& app, int argc, char** argv) {
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::fputs(app.help().c_str(), stdout);
        return kExitOk;
    } catch (const CLI::CallForAllHelp&) {
        std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
        return kExitOk;
    } catch (const CLI::ParseError& e) {
        return report_error(std::string(e.what()) + " (see --help)", kExitBadInput);
    }
    return -1;
}

}  // namespace zinc::cli
