// zinc/cli/spec_flags.h — the speculative decoding flags of `zinc` (run) and `zinc serve`:
// --spec lookup|draft|nextn|off, --draft FILE, --spec-max N, and ZINC_SPEC (0: off whatever the
// flags say, for A/B runs; 1: lookup when --spec is not given). Parsed once here, at the edge; the
// engine and the run loop get a Drafter or nothing (docs/speculative.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/model_loader.h"
#include "engine/drafter.h"
#include "util/result.h"

namespace CLI {
class App;
}

namespace zinc::cli {

struct SpecFlags {
    std::string mode;        // --spec; "": not given
    std::string draft_path;  // --draft FILE
    int spec_max = 8;        // --spec-max
};

void add_spec_flags(CLI::App& app, SpecFlags& flags);

/// What the flags ask for. The draft model (with its tokenizer) is owned here and must outlive
/// the drafter.
struct SpecSetup {
    engine::SpecMode mode = engine::SpecMode::Off;
    int32_t spec_max = 8;
    std::shared_ptr<engine::Drafter> drafter;  // null when off
    std::unique_ptr<LoadedModel> draft;        // --spec draft only
};

/// Errors (one line): an unknown --spec, --spec draft without --draft, --draft with another
/// mode, a bad ZINC_SPEC, a draft file that does not load, a draft vocabulary that is not the
/// target's (size, or the text of a sampled token). `env` is ZINC_SPEC's value or null.
/// --spec nextn: a model without NextN layers is an error naming the file and
/// `<arch>.nextn_predict_layers`. `n_seqs`: sequences drafted for at once (n_parallel; 1 for run).
Result<SpecSetup> open_spec(const SpecFlags& flags, const char* env, const LoadedModel& target,
                            int n_ctx, int n_threads, int n_seqs = 1);

/// Ok when `draft` can draft for `target`: same vocabulary size (tokenizer and model) and the
/// same text for a sample of ids (the first and last 32 and 256 spread evenly). The error
/// names `draft_path`, the id and both texts.
Result<void> check_draft_vocab(const LoadedModel& target, const LoadedModel& draft,
                               const std::string& draft_path);

}  // namespace zinc::cli
