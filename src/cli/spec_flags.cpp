// zinc/cli/spec_flags.cpp — see spec_flags.h.
#include "cli/spec_flags.h"

#include <CLI/CLI.hpp>
#include <set>

#include "cli/validators.h"
#include "engine/draft_model.h"
#include "engine/nextn_drafter.h"

namespace zinc::cli {

void add_spec_flags(CLI::App& app, SpecFlags& f) {
    app.add_option("--spec", f.mode,
                   "speculative decoding: lookup (n-grams of the prompt and the text so far), "
                   "draft (a smaller model, --draft FILE), nextn (the model's own NextN/MTP "
                   "layers; CPU tier) or off; output is unchanged at "
                   "temperature 0 (default: off; ZINC_SPEC=0 forces off)");
    app.add_option("--draft", f.draft_path,
                   "draft model GGUF for --spec draft (same vocabulary as the model)");
    app.add_option("--spec-max", f.spec_max,
                   "most draft tokens per sequence and step (the length adapts in 1..N)")
        ->check(int_in(1, engine::kSpecMaxDraft))
        ->capture_default_str();
}

Result<void> check_draft_vocab(const LoadedModel& target, const LoadedModel& draft,
                               const std::string& draft_path) {
    const std::string what = "--draft " + draft_path + ": ";
    const int32_t nt = target.tok->n_vocab(), nd = draft.tok->n_vocab();
    if (nt != nd || target.model->n_vocab() != draft.model->n_vocab())
        return make_error(what + "vocabulary of " + std::to_string(nd) + " tokens (" +
                          std::to_string(draft.model->n_vocab()) +
                          " embedding rows), the model's has " + std::to_string(nt) + " (" +
                          std::to_string(target.model->n_vocab()) +
                          "); a draft model must share the model's tokenizer");
    std::set<int32_t> ids;
    for (int32_t i = 0; i < 32 && i < nt; ++i) {
        ids.insert(i);
        ids.insert(nt - 1 - i);
    }
    for (int32_t k = 0; k < 256; ++k)
        ids.insert(static_cast<int32_t>(static_cast<int64_t>(nt - 1) * k / 255));
    for (int32_t id : ids) {
        const std::string_view a = target.tok->token_text(id), b = draft.tok->token_text(id);
        if (a != b)
            return make_error(what + "token " + std::to_string(id) + " is '" + std::string(b) +
                              "' in the draft but '" + std::string(a) +
                              "' in the model; a draft model must share the model's tokenizer");
    }
    return {};
}

Result<SpecSetup> open_spec(const SpecFlags& f, const char* env, const LoadedModel& target,
                            int n_ctx, int n_threads, int n_seqs) {
    SpecSetup s;
    s.spec_max = f.spec_max;
    engine::SpecMode mode = engine::SpecMode::Off;
    if (!f.mode.empty()) {
        auto m = engine::parse_spec_mode(f.mode);
        if (!m)
            return make_error("--spec " + f.mode +
                              ": unknown mode (expected lookup, draft, nextn or off)");
        mode = *m;
    } else if (!f.draft_path.empty()) {
        mode = engine::SpecMode::Draft;  // --draft alone implies --spec draft
    }
    if (mode == engine::SpecMode::Draft && f.draft_path.empty())
        return make_error(
            "--spec draft needs --draft FILE (a smaller model with the same "
            "vocabulary)");
    if (mode != engine::SpecMode::Draft && !f.draft_path.empty())
        return make_error("--draft is only used with --spec draft (got --spec " +
                          std::string(engine::to_string(mode)) + ")");
    if (env != nullptr && *env != '\0') {
        const std::string e = env;
        if (e == "0") return s;  // off for A/B, whatever the flags say
        if (e != "1") return make_error("ZINC_SPEC=" + e + ": expected 0 or 1");
        if (f.mode.empty() && f.draft_path.empty()) mode = engine::SpecMode::Lookup;
    }
    if (mode == engine::SpecMode::NextN) {
        const std::string arch = target.model->arch_name();
        if (target.model->n_nextn_layers() == 0)
            return make_error("--spec nextn: " + target.file->path() + ": this " + arch +
                              " model has no NextN/MTP layers (" + arch +
                              ".nextn_predict_layers is 0 or absent); use --spec lookup or "
                              "--spec draft --draft FILE");
        engine::NextnDrafterOptions no;
        no.n_ctx = n_ctx;
        no.n_seqs = n_seqs;
        no.n_threads = n_threads;
        auto d = engine::make_nextn_drafter(*target.model, no);
        if (!d)
            return make_error("--spec nextn: " + target.file->path() + ": " + d.error().message);
        s.drafter = std::move(d.value());
    }
    s.mode = mode;
    if (mode == engine::SpecMode::Lookup) s.drafter = engine::make_lookup_drafter();
    if (mode == engine::SpecMode::Draft) {
        LoaderOptions lo;
        lo.n_threads = n_threads;
        lo.release_metadata = true;
        auto d = load_model(f.draft_path, lo);
        if (!d) return make_error("--draft " + f.draft_path + ": " + d.error().message);
        s.draft = std::make_unique<LoadedModel>(std::move(d.value()));
        if (auto ok = check_draft_vocab(target, *s.draft, f.draft_path); !ok) return ok.error();
        engine::DraftModelOptions dmo;
        dmo.n_ctx = n_ctx;
        dmo.n_threads = n_threads;
        s.drafter = engine::make_draft_model_drafter(*s.draft->model, dmo);
    }
    return s;
}

}  // namespace zinc::cli
