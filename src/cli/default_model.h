// zinc/cli/default_model.h — where the default model (SmolLM2-135M-Instruct Q4_1) lives and how
// it is fetched on first use.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace zinc::cli {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Directories searched, in order: ./models, <source dir>/models (ZINC_SOURCE_DIR, known at build
/// time), $XDG_CACHE_HOME/zinc/models or ~/.cache/zinc/models (the download target).
std::vector<std::string> default_model_dirs();

/// Path of the default model if it is already present somewhere; empty otherwise.
std::string find_default_model();

/// Find the default model, or fetch it into the cache directory by running the source tree's
/// scripts/fetch-models (its progress bar goes to stderr; stdout stays clean for generated
/// text). Errors: no source tree to fetch with, or the fetch failed.
Result<std::string> find_or_fetch_default_model();

/// `model_path` itself when given (-m); otherwise find_or_fetch_default_model().
Result<std::string> resolve_model_path(const std::string& model_path);

}  // namespace zinc::cli
