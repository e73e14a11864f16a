// zinc/engine/engine.h — the generation engine: continuous batching over a paged KV cache.
//
// Requests (token ids + sampling settings) are submitted from any thread. One step-loop thread
// owns the model Runner: each step it asks the scheduling policy (engine/policy.h) what to run,
// builds one Batch from all running decodes plus prefill chunks under a token budget (chunked
// prefill), runs it, samples, and reports tokens to each request's sink. KV memory is paged
// (engine/block_manager.h) with a prefix cache of full blocks keyed by a chained hash
// (engine/prefix_cache.h); when blocks run out a running sequence is preempted and later
// recomputed. Text (detokenizing, stop strings, chat templates) is the caller's business: the
// engine sees only token ids, and stops on end-of-generation ids it was given.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/drafter.h"
#include "engine/sampler.h"
#include "engine/spec_verify.h"
#include "model/batch.h"
#include "model/pooling.h"
#include "runtime/request_evidence.h"
#include "util/result.h"

namespace zinc::engine {

using RequestId = uint64_t;
class SchedulingPolicy;
struct GrammarConstraint;

struct EngineOptions {
    int32_t n_parallel = 4;          // most sequences running at once (slots)
    int32_t n_ctx = 4096;            // most positions per sequence (prompt + generated)
    int32_t n_kv_blocks = 0;         // 0: enough for n_parallel full contexts
    int32_t block_size = 16;         // positions per KV block
    int32_t max_batch_tokens = 512;  // hard cap on the rows of one step (decodes + prefill chunks)
    /// Target step duration in ms (a running stream's time per output token): each step's row
    /// budget comes from a cost model fitted to the steps that ran (engine/step_budget.h),
    /// decodes first, prefill chunks in the rest. 0: off, every step may take max_batch_tokens.
    double tpot_target_ms = 0;
    int32_t min_prefill_chunk = 16;  // prefill rows a step may always add to its decodes
    /// Class-aware prefill chunks (engine/scheduler.h): the policy's tiers take the prefill
    /// budget in order (interactive first) and batch-class chunks together take at most
    /// batch_prefill_chunk rows a step (0: no cap). false: every prefill alike.
    bool class_aware_prefill = true;
    int32_t batch_prefill_chunk = 128;
    /// Interactive guard (SchedulerOptions::interactive_guard; with class_aware_prefill): a
    /// step with interactive prefill carries no batch rows, and while an interactive tenant is
    /// active batch prefill keeps a step within this fraction of the last interactive step's
    /// modelled duration (at least min_prefill_chunk rows). 0: off; in [0, 1].
    double interactive_guard = 0.5;
    /// The scheduling policy (engine/policy.h); empty: first come, first served. Used on the
    /// step thread only (a policy that is reconfigured from elsewhere locks inside).
    std::shared_ptr<SchedulingPolicy> policy;
    /// Requests that may wait for a slot: submit() fails (QueueFull) once n_parallel + max_queue
    /// requests are running or waiting (so max_queue 0 admits only what can run at once).
    int32_t max_queue = 256;
    bool prefix_cache = true;  // reuse cached full blocks of identical prefixes
    /// Batch-invariant mode: results at temperature 0 do not depend on what else is batched
    /// (see docs/engine.md: exact on the CPU tier; passed to the Runner for CUDA).
    bool batch_invariant = false;
    int n_threads = 0;                // CPU tier threads, 0 = all
    std::vector<int32_t> eog_tokens;  // ids that end generation (Tokenizer EOG set)
    /// Builds the Runner once the engine has sized the KV pool; empty: the CPU tier
    /// (model::Runner::create_cpu). The CUDA tier plugs in here.
    std::function<Result<std::unique_ptr<model::Runner>>(const model::RunnerOptions&)> make_runner;
    /// Optional: what the step that just ran did (runtime::Evidence::last_step of the Runner
    /// make_runner built), called on the step thread after every successful forward. The engine
    /// attributes it to the step's requests (runtime/request_evidence.h) and hands each request
    /// its evidence in its final Event. Empty: no per-request evidence.
    std::function<runtime::StepRecord()> step_evidence;
    /// Speculative decoding (docs/speculative.md): each step, every running decode asks the
    /// drafter for up to its adaptive draft length (1..spec_max) tokens, verified with its pending
    /// token in the same batched forward (1 + d rows, logits for each). Null: off.
    std::shared_ptr<Drafter> drafter;
    int32_t spec_max = 8;  // most draft tokens per sequence and step, in [1, kSpecMaxDraft]
    SpecFault spec_fault = SpecFault::None;  // tests only: a broken acceptance rule
};

/// What a request wants. Tenant and priority are carried for the scheduling policy.
struct RequestParams {
    std::vector<int32_t> prompt;  // non-empty
    int32_t max_tokens = 16;      // generated tokens at most (>= 1)
    SamplerOptions sampling;
    bool ignore_eos = false;    // do not stop on eog_tokens
    int32_t top_logprobs = -1;  // -1: no logprobs; 0..20: logprob of the chosen token + top N
    std::string tenant;         // for policies (unused by the default FCFS policy)
    int32_t priority = 0;       // higher runs first in policies that read it
    /// Prefix-cache namespace: cached blocks are shared only between requests with the same
    /// value ("" is the default namespace). Tenancy sets one per tenant or sharing group.
    std::string cache_namespace;
    /// Grammar-constrained sampling (engine/grammar_matcher.h): each token is sampled from the
    /// tokens the grammar allows next, end of generation only once the text is complete. Such
    /// requests sample on the host. Null: unconstrained.
    std::shared_ptr<const GrammarConstraint> grammar;
};

enum class FinishReason {
    Length,     // max_tokens reached
    Eog,        // an end-of-generation token was sampled (not reported as a token)
    Cancelled,  // cancel() was called (a disconnect, or the caller's stop string matched)
    Context,    // the sequence reached n_ctx
    Error,      // an internal failure; Event::error says what
};
const char* to_string(FinishReason r);

struct TokenLogprob {
    int32_t id = 0;
    float logprob = 0.0f;  // natural log of the probability under the unmodified logits
};

struct GeneratedToken {
    int32_t id = 0;
    float logprob = 0.0f;           // set when top_logprobs >= 0
    std::vector<TokenLogprob> top;  // top_logprobs alternatives, most likely first
};

struct Usage {
    int32_t prompt_tokens = 0;
    int32_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
    int32_t completion_tokens = 0;
    int32_t preemptions = 0;
    // Speculative decoding (zero when off): verifications (steps in which this request had a
    // draft), draft tokens proposed and of those accepted.
    int32_t spec_steps = 0;
    int32_t spec_drafted = 0;
    int32_t spec_accepted = 0;
};

/// Delivered to the request's sink on the step thread. The sink must be quick and must not call
/// back into the Engine except cancel(). After an event with finished = true, none follow.
struct Event {
    std::vector<GeneratedToken> tokens;  // new tokens this step (usually one)
    bool finished = false;
    FinishReason reason = FinishReason::Length;
    std::string error;  // when reason == Error
    Usage usage;        // cumulative
    /// On the final event when EngineOptions::step_evidence is set: what the steps this request
    /// took part in did (its row share, the steps' totals, fallbacks, validation, shortcuts).
    std::optional<runtime::RequestEvidence> evidence;
};
using EventSink = std::function<void(const Event&)>;

/// An embedding request (/v1/embeddings; engine/embedding_step.h): the tokens' hidden states
/// (model::Runner::forward_embed) pooled and L2-normalised (model/pooling.h).
struct EmbeddingParams {
    std::vector<int32_t> tokens;  // non-empty
    model::Pooling pooling = model::Pooling::Mean;
    /// Whose rows these are (as RequestParams::tenant): the policy's prefill bucket and served
    /// rows count them (SchedulingPolicy::embedding_allowance).
    std::string tenant;
};
struct EmbeddingResult {
    std::vector<float> embedding;  // (n_embd), unit L2 norm; empty on error
    int32_t n_tokens = 0;
    std::string error;  // non-empty: the forward failed, or the request was cancelled
};
/// Called once, on the step thread; must be quick and must not call back into the Engine.
using EmbeddingSink = std::function<void(EmbeddingResult)>;

/// Why submit() refused a request.
enum class SubmitErrorKind { InvalidRequest, ContextLength, QueueFull, ShuttingDown };
struct SubmitError {
    SubmitErrorKind kind;
    std::string message;  // one line
};

/// Upper bounds (seconds) of the step-duration histogram in EngineStats (+Inf implicit).
inline constexpr std::array<double, 12> kStepSecondsBounds = {
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0};

/// A point-in-time view for /health and /metrics. Counters are cumulative since start.
struct EngineStats {
    int32_t slots_busy = 0, slots_idle = 0, queue_depth = 0;
    int32_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_free = 0, kv_blocks_cached = 0;
    uint64_t prefix_hits_blocks = 0;    // prompt blocks served from the cache
    uint64_t prefix_miss_cold = 0;      // blocks never cached
    uint64_t prefix_miss_evicted = 0;   // blocks cached once but evicted since
    uint64_t prefix_miss_partial = 0;   // trailing partial blocks (never cacheable)
    uint64_t prefix_miss_disabled = 0;  // prefix cache off
    uint64_t steps = 0, preemptions = 0;
    uint64_t preemptions_qos = 0;  // of which to admit a higher QoS class
    // How the steps were split (engine/scheduler.h): rows, and steps by kind.
    uint64_t step_decode_rows = 0, step_prefill_rows = 0, step_budget_rows = 0;
    uint64_t steps_decode_only = 0, steps_prefill_only = 0, steps_mixed = 0;
    // Step (forward) durations: per-bucket counts (kStepSecondsBounds, then +Inf), sum.
    std::array<uint64_t, kStepSecondsBounds.size() + 1> step_seconds_buckets{};
    double step_seconds_sum = 0;
    // The step budget: last budget, and the fitted cost model step_ms = a + b * rows.
    int32_t step_budget_last = 0;
    double step_model_a_ms = 0, step_model_b_ms = 0;
    uint64_t prompt_tokens = 0, generated_tokens = 0;
    uint64_t requests_finished = 0, requests_cancelled = 0;
    // Speculative decoding: the drafter's name ("" when off), verifications, draft tokens
    // proposed, accepted, and draft rows the step budget cut (engine/drafter.h).
    std::string spec_drafter;
    uint64_t spec_steps = 0, spec_drafted = 0, spec_accepted = 0, spec_rows_cut = 0;
};

class Engine {
  public:
    /// Starts the step thread. Errors: invalid options, or KV memory that cannot hold one full
    /// sequence.
    static Result<std::unique_ptr<Engine>> create(const model::Model& model,
                                                  const EngineOptions& opts);
    virtual ~Engine() = default;  // stops the step thread; pending requests finish Cancelled

    /// Queue a request. Returns its id, or why it was refused (prompt + max_tokens > n_ctx is
    /// ContextLength; a full queue is QueueFull). The sink is called from the step thread.
    virtual std::variant<RequestId, SubmitError> submit(RequestParams params, EventSink sink) = 0;
    /// Queue an embedding request; it runs between generation steps on the step thread
    /// (engine/embedding_step.h). Refused: empty tokens or ids out of range (InvalidRequest), more
    /// tokens than n_ctx, or than one step's max_batch_tokens for a bidirectional model
    /// (ContextLength), a full queue, shutdown. The default (an Engine that does not compute
    /// embeddings) refuses every request.
    virtual std::variant<RequestId, SubmitError> submit_embedding(EmbeddingParams params,
                                                                  EmbeddingSink sink) {
        (void)params, (void)sink;
        return SubmitError{SubmitErrorKind::InvalidRequest, "this engine computes no embeddings"};
    }
    /// Stop a request: its sequence and KV blocks are released within one step and its sink gets
    /// a final Cancelled event. Unknown or finished ids are ignored. Thread-safe.
    virtual void cancel(RequestId id) = 0;
    virtual EngineStats stats() const = 0;
    virtual const EngineOptions& options() const = 0;
    /// Stop accepting, cancel everything, join the step thread. Idempotent.
    virtual void shutdown() = 0;
};

}  // namespace zinc::engine
