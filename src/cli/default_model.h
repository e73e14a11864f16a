// zinc/cli/default_model.h — what -m means (a path, or a model name from the catalog or the
// models directory), where the default model (SmolLM2-135M-Instruct Q4_1) lives, and how it is
// pulled on first use.
#pragma once

#include <string>
#include <vector>

#include "util/result.h"

namespace zinc::cli {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Folders searched for the default model (and for catalog models by -m NAME) after the models
/// directory: ./models, <source dir>/models (ZINC_SOURCE_DIR, known at build time),
/// $XDG_CACHE_HOME/zinc/models or ~/.cache/zinc/models (where older zinc fetched it).
std::vector<std::string> default_model_dirs();

/// Path of the default model (the catalog entry marked "default", SmolLM2) if it is already
/// present somewhere (the models directory first, then default_model_dirs(), by file name and
/// size); empty otherwise.
std::string find_default_model();

/// Find the default model, or pull it into the models directory (zinc pull's code: progress on
/// stderr, stdout stays clean for generated text). Errors: the pull failed.
Result<std::string> find_or_fetch_default_model();

/// How -m's value was understood.
struct ModelArg {
    std::string path;
    std::string name;        // the model name given (catalog or models directory); "" for a path
    bool bad_input = false;  // on error: the name is unknown or not pulled (exit 2, not 1)
};

/// -m ARG: an existing file is a path; else a catalog name (name, name:tag or alias) already
/// pulled (models directory, then default_model_dirs()); else a .gguf in the models directory by
/// its file name with or without ".gguf"; else a path when it looks like one (has a '/' or ends
/// in .gguf), so the loader's "cannot open" error names it. Errors (bad_input): a catalog name
/// not pulled yet ("run zinc pull NAME"), an unknown name with "did you mean". Without -m: the
/// default model (find_or_fetch_default_model). `fetch`: false never downloads (--check).
Result<std::string> resolve_model_path(const std::string& model_arg, ModelArg* how = nullptr,
                                       bool fetch = true);

}  // namespace zinc::cli
