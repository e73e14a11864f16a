// zinc/model/arch_model.h — internal base of every architecture's Model: the config, the bound
// weights, and the forward pass a Runner calls.
#pragma once

#include <deque>
#include <string>
#include <string_view>

#include "model/config.h"
#include "model/forward_state.h"
#include "model/model.h"
#include "model/weights.h"

namespace zinc::model {

class ArchModel : public Model {
  public:
    explicit ArchModel(ModelConfig cfg) : cfg_(std::move(cfg)) {}
    const ModelConfig& config() const override { return cfg_; }
    std::string arch_name() const override { return cfg_.arch_name; }
    size_t kv_cache_bytes(int n_ctx) const override { return KvPool::bytes(cfg_, n_ctx); }
    int32_t n_vocab() const override { return cfg_.n_vocab; }
    int32_t n_ctx_train() const override { return cfg_.n_ctx_train; }

    /// Run the step batch in st (rows of any number of sequences, each at its own positions),
    /// append every row's K/V to the pool and write the logits of st.out_rows. The caller (the
    /// CPU Runner) has validated ids, positions and block tables.
    virtual void forward(ForwardState& st) const = 0;

    /// The bound weight whose GGUF tensor name is `gguf_name`, or nullptr (for other tiers,
    /// e.g. the CUDA Runner, which uploads weights by name).
    const Weight* find_weight(std::string_view gguf_name) const {
        for (const Weight& w : weights_)
            if (w.name == gguf_name) return &w;
        return nullptr;
    }

  protected:
    ModelConfig cfg_;
    std::deque<Weight> weights_;  // bound tensors (pointers into the GGUF mapping)
};

}  // namespace zinc::model
