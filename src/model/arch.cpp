// zinc/model/arch.cpp — the architecture table.
#include "model/arch.h"

#include <array>

#include "models/factories.h"
#include "util/check.h"

namespace zinc::model {
namespace {

// Facts per architecture (llama.cpp: llama-model.cpp hparams loading and llama_model_rope_type):
//   llama  — RoPE NORM (the HF->GGUF converter permutes Q/K rows into adjacent pairs)
//   gemma3 — RoPE NEOX; 5 of every 6 layers use the sliding window with RoPE base 10000, the
//            6th is global with <arch>.rope.freq_base
//   gemma4 — RoPE NEOX; per-layer sliding pattern, head sizes and RoPE from the file's keys
//   qwen2, qwen3, qwen3moe, gpt-oss — RoPE NEOX
//   bert   — no RoPE (absolute position embeddings), bidirectional attention
//   qwen35, qwen35moe — IMROPE, which is NEOX for text with its sections (models/qwen35.cpp checks)
const std::array<ArchInfo, 10> kArchTable = {{
    {Arch::Llama, "llama", RopeMode::Norm, 0, 0.0f, &models::make_llama},
    {Arch::Gemma3, "gemma3", RopeMode::Neox, 6, 10000.0f, &models::make_gemma3},
    // gemma4: the sliding layers come from attention.sliding_window_pattern (an array), their
    // RoPE base from rope.freq_base_swa (models/gemma4.cpp reads both)
    {Arch::Gemma4, "gemma4", RopeMode::Neox, 0, 0.0f, &models::make_gemma4},
    {Arch::Qwen2, "qwen2", RopeMode::Neox, 0, 0.0f, &models::make_qwen2},
    {Arch::Qwen3, "qwen3", RopeMode::Neox, 0, 0.0f, &models::make_qwen3},
    {Arch::Qwen35, "qwen35", RopeMode::Neox, 0, 0.0f, &models::make_qwen35},
    {Arch::Qwen35Moe, "qwen35moe", RopeMode::Neox, 0, 0.0f, &models::make_qwen35moe},
    {Arch::Qwen3Moe, "qwen3moe", RopeMode::Neox, 0, 0.0f, &models::make_qwen3moe},
    // gpt-oss: sliding window on even layers (llama.cpp's swa pattern 2), YaRN from the file
    {Arch::GptOss, "gpt-oss", RopeMode::Neox, 2, 0.0f, &models::make_gpt_oss},
    // bert: an encoder (embeddings only), absolute position embeddings, no RoPE
    {Arch::Bert, "bert", RopeMode::Norm, 0, 0.0f, &models::make_bert},
}};

}  // namespace

const ArchInfo* find_arch(std::string_view name) {
    for (const ArchInfo& a : kArchTable) {
        if (a.name == name) return &a;
    }
    return nullptr;
}

const ArchInfo& arch_info(Arch arch) {
    for (const ArchInfo& a : kArchTable) {
        if (a.arch == arch) return a;
    }
    ZINC_CHECK(false && "arch missing from table");
    std::abort();
}

std::string supported_arch_list() {
    std::string s;
    for (const ArchInfo& a : kArchTable) {
        if (!s.empty()) s += ", ";
        s += a.name;
    }
    return s;
}

}  // namespace zinc::model
