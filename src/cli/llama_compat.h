// zinc/cli/llama_compat.h — llama.cpp's spellings on zinc's command line (docs/cli.md, "Coming
// from llama.cpp"): multi-letter single-dash flags (-ngl, -sys, -np, -hf, ...) rewritten to
// zinc's names or refused with a sentence naming what zinc does instead, "did you mean" for
// mistyped flags, the -ngl -> tier mapping, and the -q / --log-verbosity level that every
// subcommand's informational lines obey.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace zinc::cli {

/// Log levels as llama.cpp's --log-verbosity: 1 errors, 2 + warnings, 3 + information (the
/// tier line, the evidence line, timing and stats lines, notes; the default). Errors always
/// print; -q is --log-verbosity 2.
constexpr int kLogWarn = 2;
constexpr int kLogInfo = 3;
int log_verbosity();
void set_log_verbosity(int level);
inline bool log_info() {
    return log_verbosity() >= kLogInfo;
}
inline bool log_warn() {
    return log_verbosity() >= kLogWarn;
}

/// Add -q/--quiet and --log-verbosity N (-lv N) to `app`; they set log_verbosity() when parsed.
void add_verbosity_flags(CLI::App& app);

/// Add --n-gpu-layers/--gpu-layers N (and llama.cpp's -ngl N, rewritten) bound to `value`.
void add_gpu_layers_flag(CLI::App& app, std::string& value);

/// After parsing: -ngl 0 becomes --tier cpu (an error with --tier cuda); N in 1..98 prints a
/// one-line note that zinc offloads all layers or none; -1, "all", "auto" and N >= 99 say
/// "all" and change nothing. Returns an error message, or "" when fine.
std::string apply_gpu_layers(const std::string& value, std::string& tier);

/// --tensor-parallel N (-tp N), and llama.cpp's --split-mode/-sm and --tensor-split/-ts.
struct TensorParallelFlags {
    int tensor_parallel = 0;   // 0: not given
    std::string split_mode;    // none | layer | row; empty: not given
    std::string tensor_split;  // "1,1" or "1/1"; empty: not given
};
void add_tensor_parallel_flags(CLI::App& app, TensorParallelFlags& f);

/// After parsing: the rank count in `n` (0: tensor parallel off; -1: every usable CUDA device,
/// from --split-mode row alone). Equal --tensor-split proportions give their count; unequal
/// ones, --split-mode layer, and contradictions are refused. Returns an error message or "".
std::string apply_tensor_parallel(const TensorParallelFlags& f, int& n);

/// Rewrite llama.cpp spellings in argv[1..] for `app` (names only; option values are left
/// alone). On a llama.cpp flag zinc refuses, returns false with `error` set (one line).
bool rewrite_llama_args(const CLI::App& app, int argc, char** argv, std::vector<std::string>& out,
                        std::string& error);

/// The first argument of `args` that is not a flag of `app`, as "X: unknown flag; did you mean
/// --Y?" (edit distance over the app's flag names), or "" when every flag is known.
std::string unknown_flag_message(const CLI::App& app, const std::vector<std::string>& args);

/// Levenshtein distance (exposed for the suggestion threshold's tests).
int edit_distance(const std::string& a, const std::string& b);

/// The "did you mean" rule, for flags and model names alike: of `candidates` (compared form,
/// shown form), the shown form of the one closest to `word` by edit_distance when it is within
/// max(2, |word| / 3) edits; "" when none is that close.
std::string closest_match(const std::string& word,
                          const std::vector<std::pair<std::string, std::string>>& candidates);

}  // namespace zinc::cli
