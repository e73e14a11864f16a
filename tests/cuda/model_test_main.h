// zinc/tests/cuda/model_test_main.h — the main() of the end-to-end GPU test programs that run
// their cases per model file and per kernel mode (test_embed, test_state_ckpt): the device probe
// and the model arguments (exit 77 without either), loading each file, one runner probe per mode
// (fast; exact, reported as SKIP where the runner refuses it), PASS / FAIL lines and the summary.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "gpu_model.h"
#include "model/batch.h"
#include "util/result.h"

namespace zinc::gpu_test {

/// A kernel mode of the CUDA runner: "fast" (ZINC_EXACT=0) or "exact" (ZINC_EXACT=1).
struct Mode {
    const char* name;
    bool exact;
};

/// Pass / fail counts of the program (one per process, as its output is).
struct Tally {
    int pass = 0, fail = 0;
};
inline Tally& tally() {
    static Tally t;
    return t;
}
/// One result line: "PASS what" or "FAIL what", counted.
inline void report(bool ok, const std::string& what) {
    std::printf("%-4s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    std::fflush(stdout);
    (ok ? tally().pass : tally().fail)++;
}

struct ModelTestMain {
    const char* program;     // "cuda_test_embed"
    const char* model_hint;  // what to pass, for the SKIP line without a model
    /// "" when the model suits the program, else the FAIL line's text (optional).
    std::function<std::string(const LoadedModel&, const std::string& file)> suits;
    /// A runner for the mode (creation errors become FAIL lines; exact refusals SKIP lines).
    std::function<Result<std::unique_ptr<model::Runner>>(const model::Model&, const Mode&)> probe;
    /// The cases, per model and accepted mode; tag = "FILE MODE:".
    std::function<void(const LoadedModel&, const Mode&, const std::string& tag)> cases;
};

/// Runs `t` over the model paths in argv (--ctest ignored). Exit code: 0 all passed, 1 a failure,
/// 77 no usable device or no model.
inline int model_test_main(int argc, char** argv, const ModelTestMain& t) {
    const cuda::Probe p = cuda::probe();
    if (p.devices.empty()) {
        std::printf("SKIP %s: %s\n", t.program, p.reason.c_str());
        return 77;
    }
    std::vector<std::string> models;
    for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) != "--ctest") models.push_back(argv[i]);
    if (models.empty()) {
        std::printf("SKIP %s: no model given (%s)\n", t.program, t.model_hint);
        return 77;
    }
    for (const std::string& path : models) {
        LoadedModel L;
        if (const std::string err = load_model(path, L); !err.empty()) {
            report(false, err);
            continue;
        }
        if (t.suits) {
            if (const std::string why = t.suits(L, base_name(path)); !why.empty()) {
                report(false, why);
                continue;
            }
        }
        for (const Mode mode : {Mode{"fast", false}, Mode{"exact", true}}) {
            const std::string tag = base_name(path) + " " + mode.name + ":";
            if (auto r = t.probe(*L.model, mode); !r) {
                if (mode.exact) {
                    std::printf("SKIP %s the runner refuses exact mode: %s\n", tag.c_str(),
                                r.error().message.c_str());
                    continue;
                }
                report(false, tag + " create: " + r.error().message);
                continue;
            }
            t.cases(L, mode, tag);
        }
    }
    const Tally& n = tally();
    std::printf("%s: %d passed, %d failed\n", n.fail ? "FAIL" : "PASS", n.pass, n.fail);
    return n.fail ? 1 : 0;
}

}  // namespace zinc::gpu_test
