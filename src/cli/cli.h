// zinc/cli/cli.h — the zinc command's subcommands (entry points) and the conventions they share.
//
// Exit status: 0 success; 1 a failure that is not the user's input (a failed download, a
// forward pass error, a --check with FAIL lines); 2 bad input (flags, numbers, files, models).
// Bad input is reported as exactly one line on stderr: "zinc: error: <what, where, expected>".
#pragma once

#include <string_view>

namespace CLI {
class App;
}

namespace zinc::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

/// `zinc [-m FILE] --prompt TEXT ...`, `zinc --check`, `zinc --version` (run.cpp).
int run_main(int argc, char** argv);
/// `zinc inspect FILE` (inspect.cpp).
int inspect_main(int argc, char** argv);
/// `zinc chat [-m FILE] [--system TEXT] [-c N] [-n N] ...`: interactive chat (chat_repl.cpp).
int chat_main(int argc, char** argv);
/// `zinc bench [-m FILE] [-p N] [-n N] [-r N] [-t N] [--json]` (bench.cpp).
int bench_main(int argc, char** argv);
/// `zinc synth --preset NAME [--type T] [--seed N] -o FILE`: a GGUF of a real model's shapes
/// with seeded random weights (synth.cpp).
int synth_main(int argc, char** argv);
/// `zinc serve [-m FILE] [--host H] [--port P] [--parallel N] ...`: the OpenAI-compatible HTTP
/// server (serve.cpp, docs/server.md).
int serve_main(int argc, char** argv);
/// `zinc pull NAME...`, `zinc list [--catalog]`, `zinc rm NAME...`, `zinc ps`: model management
/// (models_cmd.cpp, docs/cli.md "Model management").
int pull_main(int argc, char** argv);
int list_main(int argc, char** argv);
int rm_main(int argc, char** argv);
int ps_main(int argc, char** argv);
/// True for `zinc -m FILE ...` without --prompt/--check/--version/--help: as in the seeds, a
/// model with nothing to complete is served (serve_main takes the same argv).
bool serves_by_default(int argc, char** argv);

/// Set by main() before serve_main() runs for `zinc -m FILE` without a prompt: parse_args' errors
/// then name that case, and note_serving_by_default() prints a one-line note (once the model is
/// loaded, so that bad input stays one line).
void set_serving_by_default(bool on);
void note_serving_by_default();

/// Print "zinc: error: <msg>" on one line to stderr and return `code`.
int report_error(std::string_view msg, int code = kExitBadInput);

/// Print a one-line warning on stderr when `n_threads` (from -t) exceeds the hardware threads:
/// allowed (as llama.cpp allows it) but usually slower. 0 (all threads) never warns.
void warn_if_oversubscribed(int n_threads);

/// Parse argv with CLI11. Returns -1 when the caller should continue; otherwise the exit status
/// to return right away (0 after --help, 2 after a parse error, printed as one line).
int parse_args(CLI::App& app, int argc, char** argv);

}  // namespace zinc::cli
