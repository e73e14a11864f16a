// zinc/model/arch.h — the table of supported architectures (general.architecture values).
//
// One row per architecture: its GGUF name, RoPE pairing, and the per-arch facts that are not in
// the file's metadata (llama.cpp hard-codes the same facts in llama-model.cpp's hparams loading):
// gemma3's local/global layer pattern and local RoPE base.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "model/rope.h"
#include "util/result.h"

namespace zinc::gguf {
class File;
}

namespace zinc::model {

enum class Arch {
    Llama, Gemma3, Gemma4, Qwen2, Qwen3, Qwen35, Qwen3Moe, GptOss, Qwen35Moe, Bert
};

class Model;
struct ModelConfig;

/// Builds the model object for one architecture (models/<arch>.cpp): binds its weights.
using ModelFactory = Result<std::unique_ptr<Model>> (*)(const gguf::File& file, ModelConfig cfg);

struct ArchInfo {
    Arch arch;
    std::string_view name;  // general.architecture
    RopeMode rope_mode;
    int swa_pattern;           // 0: no sliding window; n: layer il is global iff (il+1) % n == 0
    float rope_freq_base_swa;  // RoPE base of sliding-window layers (0: same as global)
    ModelFactory factory;
};

/// Row for `name`, or nullptr when the architecture is not supported.
const ArchInfo* find_arch(std::string_view name);
const ArchInfo& arch_info(Arch arch);
/// "llama, gemma3, qwen2, qwen3, qwen35" (for error messages).
std::string supported_arch_list();

}  // namespace zinc::model
