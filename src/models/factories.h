// zinc/models/factories.h — one constructor per architecture file (referenced by the arch table).
#pragma once

#include <memory>

#include "model/config.h"
#include "model/model.h"
#include "util/result.h"

namespace zinc::models {

using model::Model;
using model::ModelConfig;

Result<std::unique_ptr<Model>> make_llama(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_gemma3(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_gemma4(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_qwen2(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_qwen3(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_qwen35(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_qwen35moe(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_qwen3moe(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_gpt_oss(const gguf::File& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> make_bert(const gguf::File& file, ModelConfig cfg);

}  // namespace zinc::models
