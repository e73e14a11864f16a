// zinc/cli/check.h — `zinc --check`: can this host run this model? One READY/WARN/FAIL line per
// item (host, CPU features, model file, weights, tokenizer, context, memory fit).
#pragma once

#include <string>

namespace zinc::cli {

struct CheckOptions {
    std::string model_path;  // empty: the default model, if already downloaded
    int n_ctx = 4096;        // 0: the model's training context
    int n_threads = 0;       // 0: all hardware threads
    std::string tier;        // --tier; empty: ZINC_TIER, else auto
    int device = -1;         // -d/--device; < 0: ZINC_DEVICE, else 0
};

/// Prints the report to stdout. Returns 0 when no line is FAIL, 1 otherwise.
int run_check(const CheckOptions& opts);

}  // namespace zinc::cli
