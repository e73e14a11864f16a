// zinc/cli/model_loader.h — open a GGUF, bring its weights into memory with a progress display,
// bind the model and build the tokenizer: the shared first half of run, check and bench.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace zinc::cli {

struct LoadedModel {
    // Declaration order is destruction order reversed: the model and tokenizer refer into the
    // file's mapping, so the file is declared first and destroyed last.
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<model::Model> model;
    std::unique_ptr<tokenizer::Tokenizer> tok;  // null when not asked for
};

struct LoaderOptions {
    int n_threads = 0;
    bool tokenizer = true;  // also build the tokenizer
    bool prefault = true;   // read the weights in before binding (see prefault_weights)
    bool progress = true;   // show a progress bar on stderr (only when stderr is a terminal)
};

/// Errors (each one line naming the file): open/parse failure, unsupported architecture, a
/// tensor of the wrong shape or type, a bad tokenizer.
Result<LoadedModel> load_model(const std::string& path, const LoaderOptions& opts);

/// Touch every page of the tensor data (so the first forward pass does not pay for page
/// faults), drawing a progress bar on stderr when it is a terminal.
void prefault_weights(const gguf::File& file, bool progress);

}  // namespace zinc::cli
