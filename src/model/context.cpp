// zinc/model/context.cpp — the single-sequence inference context over a Runner: one sequence
// owning a fixed, contiguous block table of the Runner's whole KV pool, and the chunked eval
// loop that validates input and runs each chunk as a one-sequence step batch.
#include <algorithm>
#include <numeric>
#include <string>

#include "model/batch.h"
#include "model/model.h"
#include "util/check.h"

namespace zinc::model {
namespace {

// Positions per KV block of a Context. The Context's table is contiguous, so the block size
// only sets how often attention steps to the next block (a longer run per block is a little
// cheaper); results do not depend on it.
constexpr int kContextBlockSize = 256;

class RunnerContext : public Context {
  public:
    RunnerContext(std::unique_ptr<Runner> runner, int n_ctx, int n_batch, int32_t n_vocab)
        : runner_(std::move(runner)), n_ctx_(n_ctx), n_batch_(n_batch), n_vocab_(n_vocab) {
        block_table_.resize(static_cast<size_t>(runner_->options().n_blocks));
        std::iota(block_table_.begin(), block_table_.end(), 0);
        logits_.resize(static_cast<size_t>(n_vocab_));
    }

    Result<void> eval(std::span<const int32_t> tokens, bool all_logits) override {
        const int64_t n = static_cast<int64_t>(tokens.size());
        if (n == 0) return make_error("eval: no tokens given");
        for (int64_t i = 0; i < n; ++i) {
            if (tokens[i] < 0 || tokens[i] >= n_vocab_) {
                return make_error("eval: token id " + std::to_string(tokens[i]) + " at index " +
                                  std::to_string(i) + " is out of range [0, " +
                                  std::to_string(n_vocab_) + ")");
            }
        }
        if (n_past_ + n > n_ctx_) {
            return make_error("eval: context overflow: " + std::to_string(n_past_) +
                              " positions used + " + std::to_string(n) + " new tokens > n_ctx " +
                              std::to_string(n_ctx_));
        }
        if (!rewind_error_.empty()) {
            std::string e = std::move(rewind_error_);
            rewind_error_.clear();
            return make_error("eval: " + e);
        }
        const size_t need = (all_logits ? static_cast<size_t>(n) : 1) * n_vocab_;
        if (logits_.size() < need) logits_.resize(need);
        if (n_hidden_ > 0) hidden_.resize((all_logits ? static_cast<size_t>(n) : 1) * n_hidden_);
        all_logits_ = all_logits;
        n_last_ = static_cast<int>(n);

        for (int64_t c0 = 0; c0 < n; c0 += n_batch_) {
            const int chunk = static_cast<int>(std::min<int64_t>(n_batch_, n - c0));
            const bool last_chunk = c0 + chunk == n;
            BatchSeq seq;
            seq.row0 = 0;
            seq.n_tokens = chunk;
            seq.pos0 = n_past_;
            seq.block_table = block_table_;
            seq.want_logits = last_chunk || all_logits;
            seq.all_logits = all_logits;
            seq.state_slot = 0;  // recurrent models: the one sequence's state
            // Recurrent models: an all-logits eval (a speculative draft) keeps the state of
            // every row when it fits, so truncate() can go back to any of them.
            seq.keep_states = all_logits && chunk <= runner_->state_checkpoints();
            Batch batch{tokens.subspan(static_cast<size_t>(c0), static_cast<size_t>(chunk)),
                        std::span<const BatchSeq>(&seq, 1)};
            const size_t row = all_logits ? static_cast<size_t>(c0) : 0;
            float* out = logits_.data() + row * n_vocab_;
            if (n_hidden_ > 0 && seq.want_logits)
                batch.hidden_out = hidden_.data() + row * n_hidden_;
            ZINC_TRY(runner_->forward(batch, out));
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
        return logits_.data() + static_cast<size_t>(i) * n_vocab_;
    }
    Result<void> keep_hidden() override {
        if (runner_->hidden_width() == 0)
            return make_error("context: the " + runner_->tier() +
                              " tier Runner does not return the trunk's hidden states (the CPU and "
                              "CUDA tiers return them, not with --tensor-parallel)");
        n_hidden_ = static_cast<size_t>(runner_->hidden_width());
        return {};
    }
    const float* hidden(int i) const override {
        ZINC_CHECK(n_hidden_ > 0);
        if (i < 0) i = n_last_ - 1;
        if (!all_logits_) {
            ZINC_CHECK(i == n_last_ - 1);
            return hidden_.data();
        }
        ZINC_CHECK(i >= 0 && i < n_last_);
        return hidden_.data() + static_cast<size_t>(i) * n_hidden_;
    }
    int n_past() const override { return n_past_; }
    int n_ctx() const override { return n_ctx_; }
    void truncate(int n) override {
        ZINC_CHECK(n >= 0 && n <= n_past_);
        // Recurrent models: the state goes back with the positions (Runner::rewind_state, the
        // one rule: only to a position the last eval kept). truncate(0) restarts it instead.
        // A position it cannot go back to fails the next eval, with the reason.
        rewind_error_.clear();
        if (n > 0 && n < n_past_ && runner_->state_checkpoints() > 0)
            if (auto r = runner_->rewind_state(0, n); !r) rewind_error_ = r.error().message;
        n_past_ = n;
    }

  private:
    std::unique_ptr<Runner> runner_;
    int n_ctx_;
    int n_batch_;
    int32_t n_vocab_;
    std::vector<int32_t> block_table_;  // 0, 1, 2, ...: the whole pool, in order
    std::vector<float> logits_;
    std::vector<float> hidden_;  // keep_hidden(): as logits_, n_hidden_ floats a row
    size_t n_hidden_ = 0;
    int n_past_ = 0;
    int n_last_ = 0;
    bool all_logits_ = false;
    std::string rewind_error_;  // why the last truncate() could not move the recurrent state
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
    RunnerOptions ro;
    ro.block_size = std::min(kContextBlockSize, opts.n_ctx);
    ro.n_blocks = (opts.n_ctx + ro.block_size - 1) / ro.block_size;
    ro.max_batch_tokens = std::min(opts.n_batch, opts.n_ctx);
    ro.max_seqs = 1;
    ro.max_seq_len = opts.n_ctx;
    ro.n_threads = opts.n_threads;
    ro.n_state_checkpoints = opts.n_state_checkpoints;
    auto runner = Runner::create_cpu(model, ro);
    if (!runner) return runner.error();
    return over_runner(std::move(runner.value()), opts.n_ctx, model.n_vocab());
}

Result<std::unique_ptr<Context>> Context::over_runner(std::unique_ptr<Runner> runner, int n_ctx,
                                                      int32_t n_vocab) {
    if (!runner) return make_error("context: no runner");
    const RunnerOptions& o = runner->options();
    if (static_cast<int64_t>(o.n_blocks) * o.block_size < n_ctx)
        return make_error("context: the runner's KV blocks hold fewer than n_ctx = " +
                          std::to_string(n_ctx) + " positions");
    const int n_batch = std::min(o.max_batch_tokens, n_ctx);
    return std::unique_ptr<Context>(
        std::make_unique<RunnerContext>(std::move(runner), n_ctx, n_batch, n_vocab));
}

}  // namespace zinc::model
