// zinc/engine/engine.cpp — the Engine: submission and cancellation from any thread, and the step
// thread that owns the Runner, the block manager and the scheduler.
//
// Each iteration of the step thread: take the requests and cancellations that arrived (under the
// one mutex), finish cancelled sequences (releasing their blocks before the next batch is
// built: "within one step"), plan a step (engine/scheduler.h), run it as one Batch, commit it,
// and sample one token for every sequence whose logits came back. Sinks are called on this
// thread without the mutex held, so a sink may call cancel().
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/block_manager.h"
#include "engine/embedding_step.h"
#include "engine/logprobs.h"
#include "engine/policy.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/config.h"
#include "model/model.h"

namespace zinc::engine {

const char* to_string(FinishReason r) {
    switch (r) {
        case FinishReason::Length:
            return "length";
        case FinishReason::Eog:
            return "eog";
        case FinishReason::Cancelled:
            return "cancelled";
        case FinishReason::Context:
            return "context";
        case FinishReason::Error:
            return "error";
    }
    return "?";
}

namespace {

class EngineImpl : public Engine {
  public:
    EngineImpl(const model::Model& model, const EngineOptions& opts,
               std::unique_ptr<model::Runner> runner)
        : opts_(opts),
          n_vocab_(model.n_vocab()),
          has_lm_head_(model.has_lm_head()),
          recurrent_(model.recurrent_state_bytes() > 0),
          embed_opts_{opts.max_batch_tokens, 0, model.config().n_embd, model.bidirectional()},
          runner_(std::move(runner)),
          drafter_(opts.drafter),
          want_hidden_(opts.drafter && opts.drafter->wants_hidden()),
          n_embd_(model.config().n_embd),
          // Hybrid (recurrent) models: no prefix reuse. A cached block holds K/V, not the
          // recurrent state after it, so a prefix hit could not resume the state; every prompt
          // block then counts as prefix_miss_disabled (docs/engine.md).
          bm_(runner_->options().n_blocks, opts.block_size,
              opts.prefix_cache && model.recurrent_state_bytes() == 0),
          policy_(opts.policy ? opts.policy
                              : std::shared_ptr<SchedulingPolicy>(make_fcfs_policy())),
          sched_(SchedulerOptions{opts.n_parallel, opts.max_batch_tokens, opts.tpot_target_ms,
                                  opts.min_prefill_chunk, opts.class_aware_prefill,
                                  opts.batch_prefill_chunk, opts.interactive_guard},
                 bm_, *policy_,
                 [this](int32_t src, int32_t dst) { runner_->copy_block(src, dst); }),
          eog_(opts.eog_tokens) {
        counters_.spec_drafter = drafter_ ? drafter_->name() : "";
        std::sort(eog_.begin(), eog_.end());
        logits_.resize(static_cast<size_t>(runner_->options().max_seqs) * n_vocab_);
        device_sampling_ = runner_->samples_on_device();
        embed_opts_.max_seqs = runner_->options().max_seqs;
        batch_tokens_.reserve(static_cast<size_t>(opts.max_batch_tokens));
        publish();
        thread_ = std::thread([this] { loop(); });
    }
    ~EngineImpl() override { shutdown(); }

    std::variant<RequestId, SubmitError> submit(RequestParams params, EventSink sink) override {
        auto invalid = [](std::string m) {
            return SubmitError{SubmitErrorKind::InvalidRequest, std::move(m)};
        };
        if (!has_lm_head_)
            return invalid(
                "this model is an embedding model (no LM head): it computes "
                "embeddings only (POST /v1/embeddings), not completions");
        if (params.prompt.empty()) return invalid("prompt: empty (expected at least one token)");
        for (size_t i = 0; i < params.prompt.size(); ++i) {
            if (params.prompt[i] < 0 || params.prompt[i] >= n_vocab_) {
                return invalid("prompt[" + std::to_string(i) + "]: token id " +
                               std::to_string(params.prompt[i]) + " out of range [0, " +
                               std::to_string(n_vocab_) + ")");
            }
        }
        if (params.max_tokens < 1) {
            return invalid("max_tokens: " + std::to_string(params.max_tokens) + " (expected >= 1)");
        }
        if (params.top_logprobs < -1 || params.top_logprobs > 20) {
            return invalid("top_logprobs: " + std::to_string(params.top_logprobs) +
                           " (expected -1 or 0..20)");
        }
        if (static_cast<int64_t>(params.prompt.size()) + params.max_tokens > opts_.n_ctx) {
            return SubmitError{SubmitErrorKind::ContextLength,
                               "prompt of " + std::to_string(params.prompt.size()) +
                                   " tokens + max_tokens " + std::to_string(params.max_tokens) +
                                   " > context " + std::to_string(opts_.n_ctx)};
        }
        std::lock_guard<std::mutex> lk(mu_);
        if (!accepting_)
            return SubmitError{SubmitErrorKind::ShuttingDown, "engine is shutting down"};
        // Admitted while fewer than n_parallel + max_queue requests are running or waiting.
        // Requests still in the inbox count too: one that will take a free slot is not waiting.
        const int64_t in_flight = static_cast<int64_t>(inbox_.size()) + n_waiting_ + n_running_;
        if (in_flight >= static_cast<int64_t>(opts_.n_parallel) + opts_.max_queue) {
            const int64_t waiting = std::max<int64_t>(0, in_flight - opts_.n_parallel);
            return SubmitError{SubmitErrorKind::QueueFull,
                               "queue full: " + std::to_string(waiting) +
                                   " requests waiting (--max-queue " +
                                   std::to_string(opts_.max_queue) + ") and " +
                                   std::to_string(opts_.n_parallel) + " running"};
        }
        const RequestId id = next_id_++;
        inbox_.push_back(std::make_unique<Sequence>(id, id, std::move(params), std::move(sink)));
        cv_.notify_one();
        return id;
    }

    std::variant<RequestId, SubmitError> submit_embedding(EmbeddingParams params,
                                                          EmbeddingSink sink) override {
        auto invalid = [](std::string m) {
            return SubmitError{SubmitErrorKind::InvalidRequest, std::move(m)};
        };
        // A hybrid model's recurrent layers need a state slot per sequence, which the embedding
        // step does not take (not implemented): refused, not run wrong.
        if (recurrent_)
            return invalid(
                "embeddings are not supported for hybrid models with recurrent state "
                "(this model's DeltaNet layers)");
        if (params.tokens.empty()) return invalid("input: empty (expected at least one token)");
        for (size_t i = 0; i < params.tokens.size(); ++i) {
            if (params.tokens[i] < 0 || params.tokens[i] >= n_vocab_) {
                return invalid("input token " + std::to_string(i) + ": id " +
                               std::to_string(params.tokens[i]) + " out of range [0, " +
                               std::to_string(n_vocab_) + ")");
            }
        }
        const int64_t n = static_cast<int64_t>(params.tokens.size());
        if (n > opts_.n_ctx) {
            return SubmitError{SubmitErrorKind::ContextLength, "input of " + std::to_string(n) +
                                                                   " tokens > context " +
                                                                   std::to_string(opts_.n_ctx)};
        }
        if (embed_opts_.bidirectional && n > embed_opts_.max_rows) {
            return SubmitError{
                SubmitErrorKind::ContextLength,
                "input of " + std::to_string(n) + " tokens > " +
                    std::to_string(embed_opts_.max_rows) +
                    " (--max-batch-tokens: a bidirectional model's input must fit one step)"};
        }
        std::lock_guard<std::mutex> lk(mu_);
        if (!accepting_)
            return SubmitError{SubmitErrorKind::ShuttingDown, "engine is shutting down"};
        const int64_t queued = static_cast<int64_t>(embed_inbox_.size()) + n_embed_jobs_;
        if (queued >= static_cast<int64_t>(opts_.n_parallel) + opts_.max_queue) {
            return SubmitError{SubmitErrorKind::QueueFull,
                               "queue full: " + std::to_string(queued) +
                                   " embedding requests waiting (--max-queue " +
                                   std::to_string(opts_.max_queue) + ")"};
        }
        const RequestId id = next_id_++;
        EmbeddingJob job;
        job.id = id;
        job.params = std::move(params);
        job.sink = std::move(sink);
        embed_inbox_.push_back(std::move(job));
        cv_.notify_one();
        return id;
    }

    void cancel(RequestId id) override {
        std::lock_guard<std::mutex> lk(mu_);
        cancels_.push_back(id);
        cv_.notify_one();
    }

    EngineStats stats() const override {
        std::lock_guard<std::mutex> lk(mu_);
        EngineStats s = snapshot_;
        s.queue_depth += static_cast<int32_t>(inbox_.size());
        return s;
    }

    const EngineOptions& options() const override { return opts_; }

    void shutdown() override {
        {
            std::lock_guard<std::mutex> lk(mu_);
            accepting_ = false;
            stop_ = true;
            cv_.notify_one();
        }
        std::lock_guard<std::mutex> jl(join_mu_);
        if (thread_.joinable()) thread_.join();
    }

  private:
    void loop() {
        while (true) {
            std::vector<std::unique_ptr<Sequence>> incoming;
            std::vector<RequestId> cancels;
            bool stopping = false;
            {
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait(lk, [&] {
                    return stop_ || !inbox_.empty() || !cancels_.empty() || !sched_.idle() ||
                           !embed_inbox_.empty() || !embed_jobs_.empty();
                });
                incoming.swap(inbox_);
                for (EmbeddingJob& j : embed_inbox_) embed_jobs_.push_back(std::move(j));
                embed_inbox_.clear();
                n_embed_jobs_ = static_cast<int32_t>(embed_jobs_.size());
                cancels.swap(cancels_);
                stopping = stop_;
                n_waiting_ += static_cast<int32_t>(incoming.size());
                // They wait now (stats() no longer sees them in the inbox): counted until the
                // next publish() counts the scheduler's queue, so queue_depth never dips.
                snapshot_.queue_depth += static_cast<int32_t>(incoming.size());
            }
            for (auto& s : incoming) {
                counters_.prompt_tokens += static_cast<uint64_t>(s->n_prompt);
                s->usage.prompt_tokens = s->n_prompt;
                s->draft_len = DraftLength(opts_.spec_max);
                Sequence* p = s.get();
                live_.emplace(p->id, std::move(s));
                sched_.add(p);
            }
            for (RequestId id : cancels) {
                auto it = live_.find(id);
                if (it != live_.end()) finish(*it->second, FinishReason::Cancelled);
                for (EmbeddingJob& j : embed_jobs_) {
                    if (j.id != id) continue;
                    fail_embedding(j, bm_, "cancelled");
                    j.n_done = -1;
                }
                std::erase_if(embed_jobs_, [](const EmbeddingJob& j) { return j.n_done < 0; });
            }
            if (stopping) {
                for (EmbeddingJob& j : embed_jobs_) fail_embedding(j, bm_, "engine shut down");
                embed_jobs_.clear();
                while (!live_.empty()) finish(*live_.begin()->second, FinishReason::Cancelled);
                publish();
                return;
            }
            // One bounded embedding step between generation steps (engine/embedding_step.h),
            // its rows charged to their tenants' prefill buckets (refilled here too, so that
            // embeddings alone are not held back forever).
            EmbeddingStepResult es;
            if (!embed_jobs_.empty()) {
                policy_->on_step_begin();
                es = run_embedding_step(embed_jobs_, *runner_, bm_, *policy_, embed_opts_);
            }
            const bool embedded = es.rows > 0;
            {
                std::lock_guard<std::mutex> lk(mu_);
                n_embed_jobs_ = static_cast<int32_t>(embed_jobs_.size());
            }
            if (!embedded && es.held_back && sched_.idle()) {
                // Every waiting input's tenant is over its prefill rate: wait for the bucket.
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait_for(lk, std::chrono::milliseconds(2),
                             [&] { return stop_ || !cancels_.empty() || !inbox_.empty(); });
            } else if (!embedded && !embed_jobs_.empty() && sched_.idle()) {
                // No blocks for the first job and no generation to free any: a bug, or a KV pool
                // smaller than one input (submit_embedding bounds inputs by n_ctx).
                fail_embedding(embed_jobs_.front(), bm_, "KV cache too small for this input");
                embed_jobs_.pop_front();
            }
            if (!sched_.idle() && !run_step()) {
                // The policy held every sequence back (rate limits): wait a little for tokens
                // to refill, or for an arrival or a cancellation.
                std::unique_lock<std::mutex> lk(mu_);
                cv_.wait_for(lk, std::chrono::milliseconds(2),
                             [&] { return stop_ || !inbox_.empty() || !cancels_.empty(); });
            }
            publish();
        }
    }

    // One step; false when the policy held everything back (nothing ran, nothing is wrong).
    bool run_step() {
        if (drafter_) propose_drafts();
        StepPlan plan = sched_.schedule();
        if (plan.empty()) {
            if (plan.held_back) return false;
            // Nothing fits although nothing runs: the first waiting sequence can never start.
            if (sched_.running().empty() && !sched_.waiting().empty()) {
                finish(*sched_.waiting().front(), FinishReason::Error,
                       "KV cache too small for this request's first chunk");
            }
            return true;
        }
        batch_tokens_.clear();
        batch_seqs_.clear();
        size_t n_logit_rows = 0;
        for (const ScheduledSeq& ss : plan.seqs) {
            const Sequence& s = *ss.seq;
            model::BatchSeq bs;
            bs.row0 = static_cast<int32_t>(batch_tokens_.size());
            bs.n_tokens = ss.n_tokens;
            bs.pos0 = s.n_computed;
            bs.block_table = s.blocks;
            bs.want_logits = ss.want_logits;
            bs.state_slot = s.state_slot;
            bs.all_logits = ss.n_draft > 0;  // a draft: every row's logits are verified
            // A draft on a recurrent model: keep the state after every row, so on_verified can
            // put it back at the accepted boundary (Runner::rewind_state).
            bs.keep_states = recurrent_ && ss.n_draft > 0;
            const int32_t n_real = ss.n_tokens - ss.n_draft;
            batch_tokens_.insert(batch_tokens_.end(), s.tokens.begin() + s.n_computed,
                                 s.tokens.begin() + s.n_computed + n_real);
            batch_tokens_.insert(batch_tokens_.end(), s.draft.begin(),
                                 s.draft.begin() + ss.n_draft);
            batch_seqs_.push_back(bs);
            n_logit_rows += ss.n_draft > 0 ? ss.n_tokens : ss.want_logits ? 1 : 0;
        }
        if (logits_.size() < n_logit_rows * static_cast<size_t>(n_vocab_))
            logits_.resize(n_logit_rows * static_cast<size_t>(n_vocab_));
        model::Batch batch{batch_tokens_, batch_seqs_};
        if (want_hidden_) {  // the NextN drafter reads the trunk's hidden state of these rows
            if (hidden_.size() < n_logit_rows * static_cast<size_t>(n_embd_))
                hidden_.resize(n_logit_rows * static_cast<size_t>(n_embd_));
            batch.hidden_out = hidden_.data();
        }
        // Sampling on the Runner's device when it can and no request of the step needs its
        // logits on the host (logprobs): only token ids come back (model/batch.h).
        const bool on_device =
            device_sampling_ && plan.n_draft_rows == 0 && !want_hidden_ &&
            std::none_of(plan.seqs.begin(), plan.seqs.end(), [](const ScheduledSeq& ss) {
                return ss.want_logits && (ss.seq->params.top_logprobs >= 0 || ss.seq->grammar);
            });
        if (on_device) {
            sample_rows_.clear();
            for (const ScheduledSeq& ss : plan.seqs)
                if (ss.want_logits)
                    sample_rows_.push_back(ss.seq->sampler.device_row(ss.seq->tokens, n_vocab_));
            sampled_.assign(sample_rows_.size(), model::SampledToken{});
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (auto r = on_device
                         ? runner_->forward_sample(batch, sample_rows_, sampled_.data(), false)
                         : runner_->forward(batch, logits_.data());
            !r) {
            for (const ScheduledSeq& ss : plan.seqs) {
                finish(*ss.seq, FinishReason::Error, r.error().message);
            }
            return true;
        }
        const double step_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        sched_.budgeter().observe(step_s * 1e3, plan.n_decode_rows, plan.n_prefill_rows);
        count_step(plan, step_s);
        if (opts_.step_evidence) attribute_step(plan);  // before commit: n_computed is the start
        sched_.commit(plan);
        ++counters_.steps;
        size_t row = 0;
        for (const ScheduledSeq& ss : plan.seqs) {
            if (!ss.want_logits) continue;
            if (on_device) {
                ss.seq->sampler.device_done(sampled_[row]);
                on_token(*ss.seq, sampled_[row++].id, {});
                continue;
            }
            const float* l = logits_.data() + row * static_cast<size_t>(n_vocab_);
            const float* h =
                want_hidden_ ? hidden_.data() + row * static_cast<size_t>(n_embd_) : nullptr;
            if (ss.n_draft > 0) {
                row += static_cast<size_t>(ss.n_tokens);
                on_verified(*ss.seq, ss.n_draft,
                            std::span<const float>(l, static_cast<size_t>(ss.n_tokens) *
                                                          static_cast<size_t>(n_vocab_)),
                            h);
                continue;
            }
            ++row;
            // (the row's position: commit() has made it computed)
            if (h) observe_hidden(*ss.seq, ss.seq->n_computed - 1, h, 1);
            on_logits(*ss.seq, std::span<const float>(l, static_cast<size_t>(n_vocab_)));
        }
        return true;
    }

    void count_step(const StepPlan& plan, double step_s) {
        counters_.step_decode_rows += static_cast<uint64_t>(plan.n_decode_rows);
        counters_.step_prefill_rows += static_cast<uint64_t>(plan.n_prefill_rows);
        counters_.step_budget_rows += static_cast<uint64_t>(plan.budget);
        counters_.spec_rows_cut += static_cast<uint64_t>(plan.n_draft_cut);
        if (plan.n_prefill_rows == 0) {
            ++counters_.steps_decode_only;
        } else if (plan.n_decode_rows == 0) {
            ++counters_.steps_prefill_only;
        } else {
            ++counters_.steps_mixed;
        }
        size_t b = 0;
        while (b < kStepSecondsBounds.size() && step_s > kStepSecondsBounds[b]) ++b;
        ++counters_.step_seconds_buckets[b];
        counters_.step_seconds_sum += step_s;
        counters_.step_budget_last = plan.budget;
    }

    // The step that just ran, attributed to its sequences (runtime/request_evidence.h): each
    // its row share of the step's counts, the step's totals, and the step's events.
    void attribute_step(const StepPlan& plan) {
        const runtime::StepRecord rec = opts_.step_evidence();
        if (rec.index == 0 || rec.index == last_step_index_) return;  // the Runner recorded none
        last_step_index_ = rec.index;
        step_rows_.clear();
        for (const ScheduledSeq& ss : plan.seqs)
            step_rows_.push_back(static_cast<uint64_t>(ss.n_tokens));
        const std::vector<runtime::OpTally> shares = runtime::split_by_rows(rec.ops, step_rows_);
        for (size_t i = 0; i < plan.seqs.size(); ++i) {
            Sequence& s = *plan.seqs[i].seq;
            const int32_t start = s.n_computed, end = start + plan.seqs[i].n_tokens;
            const int32_t prompt_end = std::min(end, s.n_prompt);
            const auto n_prompt_rows = static_cast<uint64_t>(std::max(0, prompt_end - start));
            s.evidence.add_step(rec, shares[i], n_prompt_rows, step_rows_[i] - n_prompt_rows);
        }
    }

    bool is_eog(int32_t t) const { return std::binary_search(eog_.begin(), eog_.end(), t); }

    void on_logits(Sequence& s, std::span<const float> logits) {
        if (s.grammar) return on_grammar_logits(s, logits);
        on_token(s, s.sampler.sample(logits, s.tokens), logits);
    }

    // A grammar-constrained sample: the logits of tokens the grammar does not allow next are
    // -inf. Greedy requests first try the unmasked argmax (the same token when it is allowed,
    // which it usually is); otherwise the sampler applies the matcher's mask (cached per state,
    // grammar_matcher.h) as it copies the logits.
    void on_grammar_logits(Sequence& s, std::span<const float> logits) {
        GrammarMatcher& g = *s.grammar;
        int32_t tok = -1;
        if (s.sampler.options().temperature <= 0.0f) {
            const int32_t t = s.sampler.sample(logits, s.tokens);
            if (g.allows(t)) tok = t;
        }
        if (tok < 0) {
            const std::vector<uint64_t>& ok = g.allowed_bits();
            if (std::all_of(ok.begin(), ok.end(), [](uint64_t w) { return w == 0; })) {
                // Complete, and the vocabulary has no end-of-generation token to say so.
                if (g.complete()) return finish(s, FinishReason::Eog);
                return finish(s, FinishReason::Error,
                              "the grammar allows no token of the vocabulary at this point");
            }
            tok = s.sampler.sample(logits, s.tokens, ok);
        }
        if (!is_eog(tok) && !g.accept(tok))
            return finish(s, FinishReason::Error, "internal: a sampled token broke the grammar");
        on_token(s, tok, logits);
    }

    // The sequence's next token; `logits` (its row, for logprobs) is empty when the token was
    // sampled on the device (only for requests without logprobs).
    void on_token(Sequence& s, int32_t tok, std::span<const float> logits) {
        on_tokens(s, std::span<const int32_t>(&tok, 1), logits);
    }

    // The sequence's next tokens (one, or a verified draft's kept tokens and the one after
    // them) as one event; `logits` holds one n_vocab row per token when logprobs are wanted.
    // Returns whether the sequence is still running (false: it finished, and is gone).
    bool on_tokens(Sequence& s, std::span<const int32_t> toks, std::span<const float> logits) {
        Event ev;
        const auto nv = static_cast<size_t>(n_vocab_);
        for (size_t i = 0; i < toks.size(); ++i) {
            const int32_t tok = toks[i];
            if (!s.params.ignore_eos && is_eog(tok)) {
                finish(s, FinishReason::Eog, {}, &ev);
                return false;
            }
            GeneratedToken g;
            g.id = tok;
            if (s.params.top_logprobs >= 0)
                token_logprobs(logits.subspan(i * nv, nv), tok, s.params.top_logprobs, g);
            ev.tokens.push_back(std::move(g));
            s.tokens.push_back(tok);
            ++s.usage.completion_tokens;
            ++counters_.generated_tokens;
            if (s.n_generated() >= s.params.max_tokens) {
                finish(s, FinishReason::Length, {}, &ev);
                return false;
            }
            if (static_cast<int32_t>(s.tokens.size()) >= opts_.n_ctx) {
                finish(s, FinishReason::Context, {}, &ev);
                return false;
            }
        }
        ev.usage = s.usage;
        if (!deliver(s.sink, ev)) {
            finish(s, FinishReason::Error, "the event sink threw");
            return false;
        }
        return true;
    }

    // Speculative decoding: s ran its pending token and ss.n_draft draft tokens; `rows` holds
    // their 1 + n_draft logits rows. Keep what the target agrees with (engine/spec_verify.h),
    // report the tokens, and let the scheduler make the kept drafts computed.
    // `hidden`: the rows' hidden states (a drafter that reads them), or null.
    void on_verified(Sequence& s, int32_t n_draft, std::span<const float> rows,
                     const float* hidden) {
        const std::span<const int32_t> draft(s.draft.data(), static_cast<size_t>(n_draft));
        VerifyResult v =
            verify_draft(s.sampler, rows, n_vocab_, s.tokens, draft, {}, opts_.spec_fault);
        // The pending token (commit() made it computed) and the kept drafts: the rows it keeps.
        if (hidden) observe_hidden(s, s.n_computed - 1, hidden, 1 + v.n_accepted);
        ++s.usage.spec_steps;
        s.usage.spec_drafted += n_draft;
        s.usage.spec_accepted += v.n_accepted;
        ++counters_.spec_steps;
        counters_.spec_drafted += static_cast<uint64_t>(n_draft);
        counters_.spec_accepted += static_cast<uint64_t>(v.n_accepted);
        s.draft_len.update(n_draft, v.n_accepted);
        // Accepted drafts count once they are reported (the usage in the event includes them).
        if (!on_tokens(s, v.tokens, rows.first(v.tokens.size() * static_cast<size_t>(n_vocab_))))
            return;
        sched_.accept_drafts(s, v.n_accepted);
        // The recurrent state consumed every draft row: back to the accepted boundary (the
        // pending token and the kept drafts), where the next step starts.
        if (recurrent_ && opts_.spec_fault != SpecFault::NoStateRollback)
            if (auto r = runner_->rewind_state(s.state_slot, s.n_computed); !r)
                finish(s, FinishReason::Error, r.error().message);
    }

    // The drafter's view of the target's hidden states: n rows of s from position pos0.
    void observe_hidden(const Sequence& s, int32_t pos0, const float* h, int32_t n) {
        drafter_->observe_hidden(s.id, pos0,
                                 std::span<const float>(h, static_cast<size_t>(n) * n_embd_));
    }

    // Before planning: each running decode's draft for this step (engine/drafter.h), at most its
    // adaptive length and never past max_tokens (drafts are generated tokens; the bonus token
    // of a draft accepted up to max_tokens is dropped).
    void propose_drafts() {
        for (Sequence* s : sched_.running()) {
            s->draft.clear();
            // (a grammar-constrained sequence is not drafted: verification does not run its
            // matcher over the drafted tokens)
            if (!drafter_ || !s->is_decode() || s->grammar) continue;
            const int32_t left = s->params.max_tokens - s->n_generated();
            const int32_t n = std::min(s->draft_len.len, left);
            if (n <= 0) continue;
            drafter_->propose(s->id, s->tokens, n, s->draft);
            if (static_cast<int32_t>(s->draft.size()) > n) s->draft.resize(static_cast<size_t>(n));
        }
    }

    // Call a sink; an exception from it must not take the step thread (and every other
    // request) down: it is caught and reported as false.
    static bool deliver(const EventSink& sink, const Event& ev) {
        try {
            sink(ev);
            return true;
        } catch (...) {
            return false;
        }
    }

    // The sequence's last event; releases its blocks and forgets it.
    void finish(Sequence& s, FinishReason reason, std::string error = {}, Event* with = nullptr) {
        Event local;
        Event& ev = with ? *with : local;
        ev.finished = true;
        ev.reason = reason;
        ev.error = std::move(error);
        ev.usage = s.usage;
        if (opts_.step_evidence) ev.evidence = std::move(s.evidence);
        if (reason == FinishReason::Cancelled) {
            ++counters_.requests_cancelled;
        } else {
            ++counters_.requests_finished;
        }
        sched_.remove(&s);
        if (drafter_) drafter_->release(s.id);
        const RequestId id = s.id;
        EventSink sink = std::move(s.sink);
        live_.erase(id);  // s is gone from here on
        publish();        // stats() reflects the release before the caller hears of it
        if (sink) deliver(sink, ev);
    }

    void publish() {
        const PrefixCounters& pc = sched_.counters();
        EngineStats s = counters_;
        s.slots_busy = static_cast<int32_t>(sched_.running().size());
        s.slots_idle = opts_.n_parallel - s.slots_busy;
        s.queue_depth = static_cast<int32_t>(sched_.waiting().size());
        s.kv_blocks_total = bm_.n_blocks();
        s.kv_blocks_used = bm_.n_used();
        s.kv_blocks_free = bm_.n_free();
        s.kv_blocks_cached = bm_.n_cached();
        s.prefix_hits_blocks = pc.hits;
        s.prefix_miss_cold = pc.miss_cold;
        s.prefix_miss_evicted = pc.miss_evicted;
        s.prefix_miss_partial = pc.miss_partial;
        s.prefix_miss_disabled = pc.miss_disabled;
        s.preemptions = pc.preemptions;
        s.preemptions_qos = pc.preemptions_qos;
        s.step_model_a_ms = sched_.budgeter().intercept_ms();
        s.step_model_b_ms = sched_.budgeter().ms_per_row();
        std::lock_guard<std::mutex> lk(mu_);
        snapshot_ = s;
        n_waiting_ = s.queue_depth;
        n_running_ = s.slots_busy;
    }

    const EngineOptions opts_;
    const int32_t n_vocab_;
    const bool has_lm_head_;
    const bool recurrent_;  // a hybrid model (recurrent state): no embeddings
    EmbeddingStepOptions embed_opts_;
    std::unique_ptr<model::Runner> runner_;
    std::shared_ptr<Drafter> drafter_;  // speculative decoding; null: off
    const bool want_hidden_;            // the drafter reads the trunk's hidden states (NextN)
    const int32_t n_embd_;

    // Step thread only.
    BlockManager bm_;
    std::shared_ptr<SchedulingPolicy> policy_;
    Scheduler sched_;
    std::vector<int32_t> eog_;  // sorted
    std::unordered_map<RequestId, std::unique_ptr<Sequence>> live_;
    std::vector<int32_t> batch_tokens_;
    std::vector<model::BatchSeq> batch_seqs_;
    std::vector<float> logits_;                    // (max_seqs, n_vocab)
    std::vector<float> hidden_;                    // (logits rows, n_embd) when want_hidden_
    bool device_sampling_ = false;                 // runner_->samples_on_device()
    std::vector<model::RowSampling> sample_rows_;  // the step's rows, forward_sample
    std::vector<model::SampledToken> sampled_;     // its results
    std::vector<uint64_t> step_rows_;              // rows per sequence of the step being attributed
    uint64_t last_step_index_ = 0;                 // StepRecord::index last attributed
    std::deque<EmbeddingJob> embed_jobs_;          // embedding requests being computed, in order
    EngineStats counters_;  // cumulative counters (the gauges are filled by publish)

    // Shared, under mu_.
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::unique_ptr<Sequence>> inbox_;
    std::vector<RequestId> cancels_;
    std::vector<EmbeddingJob> embed_inbox_;  // submitted, not yet taken by the step thread
    int32_t n_embed_jobs_ = 0;               // the step thread's embed_jobs_.size()
    bool stop_ = false;
    bool accepting_ = true;
    RequestId next_id_ = 1;
    int32_t n_waiting_ = 0;
    int32_t n_running_ = 0;
    EngineStats snapshot_;

    std::mutex join_mu_;
    std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const model::Model& model,
                                               const EngineOptions& opts) {
    auto bad = [](const char* what, int64_t v, const char* range) {
        return make_error(std::string("engine: ") + what + " " + std::to_string(v) +
                          " out of range " + range);
    };
    if (opts.n_parallel < 1 || opts.n_parallel > 4096)
        return bad("n_parallel", opts.n_parallel, "[1, 4096]");
    if (opts.n_ctx < 2 || opts.n_ctx > (1 << 24)) return bad("n_ctx", opts.n_ctx, "[2, 16777216]");
    if (opts.block_size < 1 || opts.block_size > 4096)
        return bad("block_size", opts.block_size, "[1, 4096]");
    if (opts.max_batch_tokens < 1 || opts.max_batch_tokens > (1 << 20))
        return bad("max_batch_tokens", opts.max_batch_tokens, "[1, 1048576]");
    if (opts.max_queue < 0) return bad("max_queue", opts.max_queue, "[0, ...)");
    if (!(opts.tpot_target_ms >= 0 && opts.tpot_target_ms <= 60000))
        return bad("tpot_target_ms", static_cast<int64_t>(opts.tpot_target_ms), "[0, 60000]");
    if (opts.min_prefill_chunk < 1 || opts.min_prefill_chunk > (1 << 20))
        return bad("min_prefill_chunk", opts.min_prefill_chunk, "[1, 1048576]");
    if (opts.batch_prefill_chunk < 0 || opts.batch_prefill_chunk > (1 << 20))
        return bad("batch_prefill_chunk", opts.batch_prefill_chunk, "[0, 1048576]");
    if (!(opts.interactive_guard >= 0 && opts.interactive_guard <= 1))
        return make_error("engine: interactive_guard " + std::to_string(opts.interactive_guard) +
                          " out of range [0, 1]");
    if (opts.n_kv_blocks < 0) return bad("n_kv_blocks", opts.n_kv_blocks, "[0, ...)");
    if (opts.spec_max < 1 || opts.spec_max > kSpecMaxDraft)
        return bad("spec_max", opts.spec_max, "[1, 16]");
    // Speculation on a recurrent model: the state after each of a draft's 1 + spec_max rows.
    const bool spec_state = opts.drafter && model.recurrent_state_bytes() > 0;
    if (opts.n_threads < 0 || opts.n_threads > 1024)
        return bad("n_threads", opts.n_threads, "[0, 1024]");
    const int64_t per_seq =
        (static_cast<int64_t>(opts.n_ctx) + opts.block_size - 1) / opts.block_size;
    const int64_t n_blocks =
        opts.n_kv_blocks > 0 ? opts.n_kv_blocks : per_seq * static_cast<int64_t>(opts.n_parallel);
    if (n_blocks < per_seq) {
        return make_error(
            "engine: " + std::to_string(n_blocks) + " KV blocks of " +
            std::to_string(opts.block_size) + " positions cannot hold one full sequence of n_ctx " +
            std::to_string(opts.n_ctx) + " (expected >= " + std::to_string(per_seq) + " blocks)");
    }
    if (n_blocks > (int64_t{1} << 30)) return bad("n_kv_blocks", n_blocks, "[1, 2^30]");
    model::RunnerOptions ro;
    ro.n_blocks = static_cast<int32_t>(n_blocks);
    ro.block_size = opts.block_size;
    ro.max_batch_tokens = opts.max_batch_tokens;
    ro.max_seqs = std::min(opts.n_parallel, opts.max_batch_tokens);
    ro.max_seq_len = opts.n_ctx;
    ro.n_threads = opts.n_threads;
    ro.batch_invariant = opts.batch_invariant;
    ro.n_state_slots = opts.n_parallel;  // one recurrent state per running sequence
    ro.n_state_checkpoints = spec_state ? opts.spec_max + 1 : 0;
    Result<std::unique_ptr<model::Runner>> runner =
        opts.make_runner ? opts.make_runner(ro) : model::Runner::create_cpu(model, ro);
    if (!runner) return runner.error();
    if (spec_state && runner.value()->state_checkpoints() < ro.n_state_checkpoints)
        return make_error("engine: speculative decoding on " + model.arch_name() +
                          " (recurrent state) needs the state kept at each of a draft's " +
                          std::to_string(ro.n_state_checkpoints) + " rows (1 + spec_max); this " +
                          runner.value()->tier() + " tier Runner keeps " +
                          std::to_string(runner.value()->state_checkpoints()) +
                          " (the CPU and CUDA tiers' Runners keep "
                          "RunnerOptions::n_state_checkpoints)");
    if (opts.drafter && opts.drafter->wants_hidden() &&
        runner.value()->hidden_width() != model.config().n_embd)
        return make_error(std::string("engine: the ") + opts.drafter->name() +
                          " drafter reads the model's hidden states, which this " +
                          runner.value()->tier() +
                          " tier Runner does not return (the CPU and CUDA tiers return them, "
                          "not with --tensor-parallel)");
    const model::RunnerOptions& got = runner.value()->options();
    if (got.n_blocks != ro.n_blocks || got.block_size != ro.block_size ||
        got.max_batch_tokens < ro.max_batch_tokens || got.max_seqs < ro.max_seqs ||
        got.max_seq_len < ro.max_seq_len) {
        return make_error("engine: the Runner's options do not match what the engine asked for");
    }
    return std::unique_ptr<Engine>(
        std::make_unique<EngineImpl>(model, opts, std::move(runner.value())));
}

}  // namespace zinc::engine
