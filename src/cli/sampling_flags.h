// zinc/cli/sampling_flags.h — the sampling flags shared by `zinc` and `zinc chat`, declared once
// so both commands accept the same names, ranges and defaults (docs/cli.md, "Sampling flags").
#pragma once

#include "engine/sampler.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace zinc::cli {

/// Add --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --presence-penalty
/// --frequency-penalty and -s/--seed to `app`, bound to `opts`. Returns the seed option, for
/// finish_sampling_flags().
CLI::Option* add_sampling_flags(CLI::App& app, engine::SamplerOptions& opts);

/// After parsing: a seed that was not given becomes a random one.
void finish_sampling_flags(const CLI::Option* seed_opt, engine::SamplerOptions& opts);

}  // namespace zinc::cli
