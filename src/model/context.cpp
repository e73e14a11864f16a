// zinc/model/context.cpp — the CPU inference context: KV cache, workspace, thread pool, and the
// chunked eval loop that validates input and calls the architecture's forward pass.
#include <algorithm>
#include <cstdlib>

#include "model/arch_model.h"
#include "model/forward_state.h"
#include "model/model.h"

namespace zinc::model {

Workspace::Workspace(const ModelConfig& c, int nb, int n_ctx, int n_threads) : n_batch(nb) {
    const size_t n = static_cast<size_t>(nb);
    x.resize(n * c.n_embd);
    xn.resize(n * c.n_embd);
    proj.resize(n * c.n_embd);
    q.resize(n * c.q_dim());
    k.resize(n * c.kv_dim_k());
    v.resize(n * c.kv_dim_v());
    attn.resize(n * c.attn_out_dim());
    gate.resize(n * c.n_ff);
    up.resize(n * c.n_ff);
    rope_cs.resize(n * c.n_rot);
    scores.resize(
        static_cast<size_t>(cpu::attention_scratch_floats(c.attention(0), n_threads, n_ctx)));
}

namespace {

class CpuContext : public Context {
  public:
    CpuContext(const ArchModel& model, int n_ctx, int n_batch, int n_threads)
        : model_(model),
          cfg_(model.config()),
          n_ctx_(n_ctx),
          n_batch_(n_batch),
          pool_(n_threads),
          kv_(cfg_, n_ctx),
          ws_(cfg_, n_batch, n_ctx, pool_.n_threads()) {
        if (const char* d = std::getenv("ZINC_DUMP")) dump_.name = d;
        logits_.resize(static_cast<size_t>(cfg_.n_vocab));
    }

    Result<void> eval(std::span<const int32_t> tokens, bool all_logits) override {
        const int64_t n = static_cast<int64_t>(tokens.size());
        if (n == 0) return make_error("eval: no tokens given");
        for (int64_t i = 0; i < n; ++i) {
            if (tokens[i] < 0 || tokens[i] >= cfg_.n_vocab) {
                return make_error("eval: token id " + std::to_string(tokens[i]) + " at index " +
                                  std::to_string(i) + " is out of range [0, " +
                                  std::to_string(cfg_.n_vocab) + ")");
            }
        }
        if (n_past_ + n > n_ctx_) {
            return make_error("eval: context overflow: " + std::to_string(n_past_) +
                              " positions used + " + std::to_string(n) + " new tokens > n_ctx " +
                              std::to_string(n_ctx_));
        }
        const size_t need = (all_logits ? static_cast<size_t>(n) : 1) * cfg_.n_vocab;
        if (logits_.size() < need) logits_.resize(need);
        all_logits_ = all_logits;
        n_last_ = static_cast<int>(n);

        for (int64_t c0 = 0; c0 < n; c0 += n_batch_) {
            const int chunk = static_cast<int>(std::min<int64_t>(n_batch_, n - c0));
            const bool last_chunk = c0 + chunk == n;
            ForwardState st{pool_, mm_, kv_, ws_, dump_};
            st.tokens = tokens.data() + c0;
            st.n_tokens = chunk;
            st.pos0 = n_past_;
            st.all_logits = all_logits;
            if (all_logits) {
                st.logits = logits_.data() + static_cast<size_t>(c0) * cfg_.n_vocab;
            } else {
                st.logits = last_chunk ? logits_.data() : nullptr;
            }
            model_.forward(st);
            n_past_ += chunk;
        }
        return {};
    }

    const float* logits(int i) const override {
        if (i < 0) i = n_last_ - 1;
        if (!all_logits_) {
            ZINC_CHECK(i == n_last_ - 1);
            return logits_.data();
        }
        ZINC_CHECK(i >= 0 && i < n_last_);
        return logits_.data() + static_cast<size_t>(i) * cfg_.n_vocab;
    }
    int n_past() const override { return n_past_; }
    int n_ctx() const override { return n_ctx_; }
    void truncate(int n) override {
        ZINC_CHECK(n >= 0 && n <= n_past_);
        n_past_ = n;
    }

  private:
    const ArchModel& model_;
    const ModelConfig& cfg_;
    int n_ctx_;
    int n_batch_;
    cpu::ThreadPool pool_;
    cpu::MatmulScratch mm_;
    KvCache kv_;
    Workspace ws_;
    DumpFilter dump_;
    std::vector<float> logits_;
    int n_past_ = 0;
    int n_last_ = 0;
    bool all_logits_ = false;
};

}  // namespace

Result<std::unique_ptr<Context>> Context::create(const Model& model, const ContextOptions& opts) {
    if (opts.n_ctx < 1 || opts.n_ctx > (1 << 24)) {
        return make_error("context: n_ctx " + std::to_string(opts.n_ctx) +
                          " out of range [1, 16777216]");
    }
    if (opts.n_batch < 1) {
        return make_error("context: n_batch " + std::to_string(opts.n_batch) + " must be >= 1");
    }
    if (opts.n_threads < 0 || opts.n_threads > 1024) {
        return make_error("context: n_threads " + std::to_string(opts.n_threads) +
                          " out of range [0, 1024]");
    }
    const auto* am = dynamic_cast<const ArchModel*>(&model);
    ZINC_CHECK(am != nullptr);
    const int n_batch = std::min(opts.n_batch, opts.n_ctx);
    return std::unique_ptr<Context>(
        std::make_unique<CpuContext>(*am, opts.n_ctx, n_batch, opts.n_threads));
}

}  // namespace zinc::model
