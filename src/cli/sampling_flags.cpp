// zinc/cli/sampling_flags.cpp — see sampling_flags.h.
#include "cli/sampling_flags.h"

#include <CLI/CLI.hpp>
#include <random>

#include "cli/validators.h"

namespace zinc::cli {

CLI::Option* add_sampling_flags(CLI::App& app, engine::SamplerOptions& opts) {
    app.add_option("--temp", opts.temperature, "temperature; 0: greedy")
        ->check(real_in(0, 100))
        ->capture_default_str();
    app.add_option("--top-k", opts.top_k, "top-k; 0: off")
        ->check(int_in(0, 1000000000))
        ->capture_default_str();
    app.add_option("--top-p", opts.top_p, "top-p (nucleus); 1: off, 0: only the most likely token")
        ->check(real_in(0, 1))
        ->capture_default_str();
    app.add_option("--min-p", opts.min_p, "min-p; 0: off")
        ->check(real_in(0, 1))
        ->capture_default_str();
    app.add_option("--repeat-penalty", opts.repeat_penalty,
                   "repetition penalty over the last --repeat-last-n tokens; 1: off")
        ->check(real_in(0.01, 100))
        ->capture_default_str();
    app.add_option("--repeat-last-n", opts.penalty_last_n,
                   "tokens the penalties look back over; -1: all, 0: off")
        ->check(int_in(-1, 1000000000))
        ->capture_default_str();
    app.add_option("--presence-penalty", opts.presence_penalty, "presence penalty; 0: off")
        ->check(real_in(-2, 2))
        ->capture_default_str();
    app.add_option("--frequency-penalty", opts.frequency_penalty, "frequency penalty; 0: off")
        ->check(real_in(-2, 2))
        ->capture_default_str();
    return app.add_option("-s,--seed", opts.seed, "RNG seed (default: random)")
        ->check(int_in(0, (1ll << 62) - 1));
}

void finish_sampling_flags(const CLI::Option* seed_opt, engine::SamplerOptions& opts) {
    if (seed_opt->count() == 0) opts.seed = std::random_device{}();
}

}  // namespace zinc::cli
