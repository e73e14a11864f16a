// zinc/backend/cuda/runner_context.cpp — a model::Context over any model::Runner (one sequence,
// blocks 0..n-1 in order), so the CLI's generate loop runs unchanged on the CUDA tier.
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "util/check.h"

namespace zinc::cuda {
namespace {

class RunnerContext final : public model::Context {
  public:
    RunnerContext(std::unique_ptr<model::Runner> r, int n_ctx, int32_t n_vocab)
        : runner_(std::move(r)), n_ctx_(n_ctx), n_vocab_(n_vocab) {
        const int bs = runner_->options().block_size;
        table_.resize((n_ctx + bs - 1) / bs);
        for (size_t i = 0; i < table_.size(); ++i) table_[i] = static_cast<int32_t>(i);
    }

    Result<void> eval(std::span<const int32_t> tokens, bool all_logits) override {
        const int n = static_cast<int>(tokens.size());
        if (n == 0) return make_error("eval: no tokens given");
        if (n_past_ + n > n_ctx_)
            return make_error("eval: context overflow: " + std::to_string(n_past_) +
                              " positions used + " + std::to_string(n) + " new tokens > n_ctx " +
                              std::to_string(n_ctx_));
        const size_t need = static_cast<size_t>(all_logits ? n : 1) * n_vocab_;
        if (logits_.size() < need) logits_.resize(need);
        const int chunk_max = runner_->options().max_batch_tokens;
        for (int c0 = 0; c0 < n; c0 += chunk_max) {
            const int m = std::min(chunk_max, n - c0);
            const bool last = c0 + m == n;
            model::BatchSeq s;
            s.row0 = 0;
            s.n_tokens = m;
            s.pos0 = n_past_;
            s.block_table = std::span<const int32_t>(table_);
            s.all_logits = all_logits;
            s.want_logits = all_logits || last;
            model::Batch b;
            b.tokens = tokens.subspan(c0, m);
            b.seqs = std::span<const model::BatchSeq>(&s, 1);
            float* out = all_logits ? logits_.data() + static_cast<size_t>(c0) * n_vocab_
                                    : logits_.data();
            if (auto r = runner_->forward(b, out); !r) return r;
            n_past_ += m;
        }
        all_logits_ = all_logits;
        n_last_ = n;
        return {};
    }
    const float* logits(int i) const override {
        if (i < 0) i = n_last_ - 1;
        if (!all_logits_) {
            ZINC_CHECK(i == n_last_ - 1);
            return logits_.data();
        }
        ZINC_CHECK(i >= 0 && i < n_last_);
        return logits_.data() + static_cast<size_t>(i) * n_vocab_;
    }
    int n_past() const override { return n_past_; }
    int n_ctx() const override { return n_ctx_; }
    void truncate(int n) override {
        ZINC_CHECK(n >= 0 && n <= n_past_);
        n_past_ = n;
    }

  private:
    std::unique_ptr<model::Runner> runner_;
    int n_ctx_;
    int32_t n_vocab_;
    std::vector<int32_t> table_;
    std::vector<float> logits_;
    int n_past_ = 0, n_last_ = 0;
    bool all_logits_ = false;
};

}  // namespace

Result<std::unique_ptr<model::Context>> make_runner_context(std::unique_ptr<model::Runner> runner,
                                                            int n_ctx, int32_t n_vocab) {
    if (!runner) return make_error("make_runner_context: no runner");
    const auto& o = runner->options();
    if (static_cast<int64_t>(o.n_blocks) * o.block_size < n_ctx)
        return make_error("make_runner_context: the runner's KV blocks hold fewer than n_ctx = " +
                          std::to_string(n_ctx) + " positions");
    return std::unique_ptr<model::Context>(
        std::make_unique<RunnerContext>(std::move(runner), n_ctx, n_vocab));
}

}  // namespace zinc::cuda
