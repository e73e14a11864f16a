// zinc/cli/model_loader.h — open a GGUF, bring its weights into memory with a progress display,
// bind the model and build the tokenizer: the shared first half of run, check and bench.
#pragma once

#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/run_context.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace zinc::cli {

struct LoadedModel {
    // Declaration order is destruction order reversed: the model and tokenizer refer into the
    // file's mapping, so the file is declared first and destroyed last.
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<model::Model> model;
    std::unique_ptr<tokenizer::Tokenizer> tok;  // null when not asked for
    // The chat template source (LoaderOptions::chat_template): copied out before the metadata
    // is released. chat_template_error is set instead when the file's template is unusable.
    chat::TemplateSource chat_template;
    std::string chat_template_error;
};

struct LoaderOptions {
    int n_threads = 0;
    bool tokenizer = true;       // also build the tokenizer
    bool prefault = true;        // read the weights in before binding (see prefault_weights)
    bool progress = true;        // show a progress bar on stderr (only when stderr is a terminal)
    bool chat_template = false;  // copy the chat template source into LoadedModel
    // Free the file's parsed metadata (gguf::File::release_metadata) once the model, tokenizer
    // and chat template are built, before the weights are paged in, so the two never add up in
    // the peak (~55 MiB for Gemma 3's vocabulary). Afterwards only tensors may be read.
    bool release_metadata = false;
};

/// Errors (each one line naming the file): open/parse failure, unsupported architecture, a
/// tensor of the wrong shape or type, a bad tokenizer.
Result<LoadedModel> load_model(const std::string& path, const LoaderOptions& opts);

/// Memory zinc needs beyond the weights and the KV cache: activations, logits, scratch, code.
constexpr uint64_t kWorkspaceBytes = 64ull << 20;

/// Check up front that a context of `n_ctx` positions fits: the model file + its KV cache +
/// kWorkspaceBytes against /proc/meminfo MemAvailable, and the KV cache + workspace against what
/// is left of the address-space limit (RLIMIT_AS, `ulimit -v`) given this process's current
/// size, which already holds the file's mapping. Linux overcommits, so without this an
/// oversized cache would "succeed" and fail mid-run. `flag` names what the user should lower
/// (e.g. "-c/--context"). Error: one line with the sizes.
Result<void> check_memory_fit(const model::Model& model, size_t file_size, int n_ctx,
                              const std::string& flag);

/// The one-sequence Context of `zinc --prompt` and `zinc chat` on the tier chosen from `tier_flag`
/// (then ZINC_TIER, then auto; runtime/run_context.h), with its evidence. Errors (one line): a
/// bad tier request, runner creation, or an allocation failure with the KV cache size.
/// `device_flag`: the -d/--device value, < 0 when not given (then ZINC_DEVICE, else 0);
/// `tensor_parallel`: apply_tensor_parallel's rank count (0: off); `state_checkpoints`:
/// RunContextOptions::n_state_checkpoints (speculative decoding on a hybrid model).
Result<runtime::RunContext> open_run_context(const model::Model& model, int n_ctx, int n_threads,
                                             const std::string& tier_flag, int device_flag = -1,
                                             bool exact = false, int tensor_parallel = 0,
                                             int state_checkpoints = 0);

/// Touch every page of the tensor data (so the first forward pass does not pay for page
/// faults), drawing a progress bar on stderr when it is a terminal.
void prefault_weights(const gguf::File& file, bool progress);

}  // namespace zinc::cli
