// zinc/model/arch_model.h — internal base of every architecture's Model: the config, the bound
// weights, and the op list (model/ir.h) every tier's Runner executes.
#pragma once

#include <deque>
#include <string>
#include <string_view>

#include "model/config.h"
#include "model/ir.h"
#include "model/model.h"
#include "model/weights.h"

namespace zinc::model {

class ArchModel : public Model {
  public:
    explicit ArchModel(ModelConfig cfg) : cfg_(std::move(cfg)) {}
    const ModelConfig& config() const override { return cfg_; }
    std::string arch_name() const override { return cfg_.arch_name; }
    /// f16 K and V rows of every layer for n_ctx positions.
    size_t kv_cache_bytes(int n_ctx) const override {
        return static_cast<size_t>(n_ctx) * cfg_.kv_bytes_per_position();
    }
    int32_t n_vocab() const override { return cfg_.n_vocab; }
    int32_t n_ctx_train() const override { return cfg_.n_ctx_train; }
    size_t recurrent_state_bytes() const override {
        size_t b = 0;
        for (const auto& l : program_.recurrent)
            b += static_cast<size_t>(l.conv_floats + l.ssm_floats) * sizeof(float);
        return b;
    }

    bool has_lm_head() const override { return program_.logits != kNoTensor; }
    bool bidirectional() const override { return program_.bidirectional; }
    int32_t pooling_type() const override { return cfg_.pooling_type; }

    /// The forward pass of a step batch as an op list, built once at load by the arch file.
    const Program& program() const { return program_; }

    /// The NextN/MTP block's op list (models/qwen35.cpp: embedding + enorm, h + hnorm, eh_proj,
    /// one decoder block with KV layer 0 of its own pool, head), or nullptr when the model has
    /// none. Run by a Runner with RunnerOptions::nextn.
    const Program* nextn_program() const {
        return nextn_program_.ops.empty() ? nullptr : &nextn_program_;
    }

    /// The bound weight whose GGUF tensor name is `gguf_name`, or nullptr.
    const Weight* find_weight(std::string_view gguf_name) const {
        for (const Weight& w : weights_)
            if (w.name == gguf_name) return &w;
        return nullptr;
    }

  protected:
    ModelConfig cfg_;
    std::deque<Weight> weights_;  // bound tensors (pointers into the GGUF mapping)
    Program program_;
    Program nextn_program_;  // empty unless the architecture builds one
};

}  // namespace zinc::model
