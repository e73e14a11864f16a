// zinc/server/metrics.cpp — see metrics.h.
#include "server/metrics.h"

#include <cstdio>

namespace zinc::server {

namespace {

std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
    out += name;
    if (!labels.empty()) out += "{" + labels + "}";
    out += ' ';
    out += num(v);
    out += '\n';
}

// Latency buckets (seconds): first tokens wait for prefill and queueing, so they reach further.
const std::vector<double> kTtftBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1,     2.5,  5,     10,   30,  60,   120};
const std::vector<double> kTokenBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,   0.25,   0.5,   1,    2.5,   5};
const std::vector<double> kE2eBounds = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

// How the steps were composed (engine/scheduler.h: decodes first, prefill chunks in the rest of
// the step's row budget) and how long they took.
void render_steps(std::string& out, const engine::EngineStats& st) {
    family(out, "zinc_step_rows_total", "counter",
           "Batch rows of all engine steps, by kind (decode: one per running stream; prefill: "
           "prompt chunks and recomputation).");
    sample(out, "zinc_step_rows_total", "kind=\"decode\"", double(st.step_decode_rows));
    sample(out, "zinc_step_rows_total", "kind=\"prefill\"", double(st.step_prefill_rows));
    family(out, "zinc_step_budget_rows_total", "counter",
           "Sum of the row budgets the steps were planned under (--tpot-target, else "
           "--max-batch-tokens).");
    sample(out, "zinc_step_budget_rows_total", "", double(st.step_budget_rows));
    family(out, "zinc_steps_by_composition_total", "counter",
           "Engine steps by what they carried: decode rows only, prefill rows only, or both.");
    sample(out, "zinc_steps_by_composition_total", "kind=\"decode_only\"",
           double(st.steps_decode_only));
    sample(out, "zinc_steps_by_composition_total", "kind=\"prefill_only\"",
           double(st.steps_prefill_only));
    sample(out, "zinc_steps_by_composition_total", "kind=\"mixed\"", double(st.steps_mixed));
    family(out, "zinc_step_budget_rows", "gauge", "Row budget of the last step.");
    sample(out, "zinc_step_budget_rows", "", st.step_budget_last);
    family(out, "zinc_step_cost_model_ms", "gauge",
           "The step cost model fitted online, step_ms = intercept + per_row * rows.");
    sample(out, "zinc_step_cost_model_ms", "term=\"intercept\"", st.step_model_a_ms);
    sample(out, "zinc_step_cost_model_ms", "term=\"per_row\"", st.step_model_b_ms);
    family(out, "zinc_step_duration_seconds", "histogram",
           "Duration of each engine step's forward pass.");
    uint64_t cum = 0;
    for (size_t i = 0; i < engine::kStepSecondsBounds.size(); ++i) {
        cum += st.step_seconds_buckets[i];
        sample(out, "zinc_step_duration_seconds_bucket",
               "le=\"" + num(engine::kStepSecondsBounds[i]) + "\"", double(cum));
    }
    cum += st.step_seconds_buckets.back();
    sample(out, "zinc_step_duration_seconds_bucket", "le=\"+Inf\"", double(cum));
    sample(out, "zinc_step_duration_seconds_sum", "", st.step_seconds_sum);
    sample(out, "zinc_step_duration_seconds_count", "", double(cum));
}

// Speculative decoding (docs/speculative.md), labelled by drafter ("off" when none).
void render_spec(std::string& out, const engine::EngineStats& st) {
    const std::string l =
        "drafter=\"" + (st.spec_drafter.empty() ? std::string("off") : st.spec_drafter) + "\"";
    family(out, "zinc_spec_verifications_total", "counter",
           "Sequence-steps that verified a draft (speculative decoding).");
    sample(out, "zinc_spec_verifications_total", l, double(st.spec_steps));
    family(out, "zinc_spec_draft_tokens_total", "counter", "Draft tokens proposed and verified.");
    sample(out, "zinc_spec_draft_tokens_total", l, double(st.spec_drafted));
    family(out, "zinc_spec_accepted_tokens_total", "counter",
           "Draft tokens the target model accepted.");
    sample(out, "zinc_spec_accepted_tokens_total", l, double(st.spec_accepted));
    family(out, "zinc_spec_draft_tokens_cut_total", "counter",
           "Draft tokens left out because the step's row budget or the KV pool had no room.");
    sample(out, "zinc_spec_draft_tokens_cut_total", l, double(st.spec_rows_cut));
    family(out, "zinc_spec_acceptance_ratio", "gauge",
           "Accepted / proposed draft tokens since start (0 before any draft).");
    sample(out, "zinc_spec_acceptance_ratio", l,
           st.spec_drafted > 0 ? double(st.spec_accepted) / double(st.spec_drafted) : 0.0);
    family(out, "zinc_spec_mean_accepted_length", "gauge",
           "Accepted draft tokens per verification since start.");
    sample(out, "zinc_spec_mean_accepted_length", l,
           st.spec_steps > 0 ? double(st.spec_accepted) / double(st.spec_steps) : 0.0);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    ++counts_[i];
    ++count_;
    sum_ += v;
}

void Histogram::render(const std::string& name, std::string& out) const {
    uint64_t cum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        sample(out, name + "_bucket", "le=\"" + num(bounds_[i]) + "\"", double(cum));
    }
    sample(out, name + "_bucket", "le=\"+Inf\"", double(count_));
    sample(out, name + "_sum", "", sum_);
    sample(out, name + "_count", "", double(count_));
}

Metrics::Metrics()
    : ttft_(kTtftBounds), itl_(kTokenBounds), tpot_(kTokenBounds), e2e_(kE2eBounds) {}

void Metrics::count_request(const std::string& endpoint, int status) {
    std::lock_guard<std::mutex> lk(mu_);
    ++requests_[{endpoint, status}];
}

void Metrics::count_tokens(uint64_t prompt, uint64_t generated) {
    std::lock_guard<std::mutex> lk(mu_);
    prompt_tokens_ += prompt;
    generated_tokens_ += generated;
}

void Metrics::observe_ttft(double s) {
    std::lock_guard<std::mutex> lk(mu_);
    ttft_.observe(s);
}
void Metrics::observe_itl(double s) {
    std::lock_guard<std::mutex> lk(mu_);
    itl_.observe(s);
}
void Metrics::observe_tpot(double s) {
    std::lock_guard<std::mutex> lk(mu_);
    tpot_.observe(s);
}
void Metrics::observe_e2e(double s) {
    std::lock_guard<std::mutex> lk(mu_);
    e2e_.observe(s);
}
void Metrics::count_disconnect() {
    std::lock_guard<std::mutex> lk(mu_);
    ++disconnects_;
}

std::string Metrics::render(const engine::EngineStats& st) const {
    std::string out;
    std::lock_guard<std::mutex> lk(mu_);
    family(out, "zinc_requests_total", "counter",
           "HTTP requests answered, by endpoint and status.");
    for (const auto& [key, n] : requests_)
        sample(out, "zinc_requests_total",
               "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"",
               double(n));
    family(out, "zinc_client_disconnects_total", "counter",
           "Streams whose client went away before the end (their requests were cancelled).");
    sample(out, "zinc_client_disconnects_total", "", double(disconnects_));
    family(out, "zinc_prompt_tokens_total", "counter", "Prompt tokens of generation requests.");
    sample(out, "zinc_prompt_tokens_total", "", double(prompt_tokens_));
    family(out, "zinc_generation_tokens_total", "counter",
           "Tokens generated for clients (after stop strings).");
    sample(out, "zinc_generation_tokens_total", "", double(generated_tokens_));
    family(out, "zinc_time_to_first_token_seconds", "histogram",
           "From request arrival to its first generated token.");
    ttft_.render("zinc_time_to_first_token_seconds", out);
    family(out, "zinc_time_per_output_token_seconds", "histogram",
           "Per request: (last token time - first token time) / (tokens - 1).");
    tpot_.render("zinc_time_per_output_token_seconds", out);
    family(out, "zinc_inter_token_latency_seconds", "histogram",
           "Gap between consecutive tokens of one sequence.");
    itl_.render("zinc_inter_token_latency_seconds", out);
    family(out, "zinc_e2e_request_latency_seconds", "histogram",
           "From request arrival to its last token.");
    e2e_.render("zinc_e2e_request_latency_seconds", out);

    family(out, "zinc_slots_busy", "gauge", "Sequences running now.");
    sample(out, "zinc_slots_busy", "", st.slots_busy);
    family(out, "zinc_slots_idle", "gauge", "Free sequence slots.");
    sample(out, "zinc_slots_idle", "", st.slots_idle);
    family(out, "zinc_queue_depth", "gauge", "Requests waiting for a slot.");
    sample(out, "zinc_queue_depth", "", st.queue_depth);
    family(out, "zinc_kv_blocks", "gauge",
           "KV cache blocks by state (used: held by sequences; cached: free but holding a "
           "reusable prefix; free: empty).");
    sample(out, "zinc_kv_blocks", "state=\"used\"", st.kv_blocks_used);
    sample(out, "zinc_kv_blocks", "state=\"cached\"", st.kv_blocks_cached);
    sample(out, "zinc_kv_blocks", "state=\"free\"", st.kv_blocks_free);
    family(out, "zinc_kv_blocks_total", "gauge", "KV cache blocks in the pool.");
    sample(out, "zinc_kv_blocks_total", "", st.kv_blocks_total);
    family(out, "zinc_kv_usage_ratio", "gauge", "Used KV blocks / all KV blocks.");
    sample(out, "zinc_kv_usage_ratio", "",
           st.kv_blocks_total > 0 ? double(st.kv_blocks_used) / st.kv_blocks_total : 0.0);
    family(out, "zinc_prefix_cache_hits_total", "counter",
           "Prompt KV blocks served from the prefix cache.");
    sample(out, "zinc_prefix_cache_hits_total", "", double(st.prefix_hits_blocks));
    family(out, "zinc_prefix_cache_misses_total", "counter",
           "Prompt KV blocks computed afresh, by reason (cold: never cached; evicted: cached "
           "once, evicted since; partial: a trailing partial block; disabled: cache off).");
    sample(out, "zinc_prefix_cache_misses_total", "reason=\"cold\"", double(st.prefix_miss_cold));
    sample(out, "zinc_prefix_cache_misses_total", "reason=\"evicted\"",
           double(st.prefix_miss_evicted));
    sample(out, "zinc_prefix_cache_misses_total", "reason=\"partial\"",
           double(st.prefix_miss_partial));
    sample(out, "zinc_prefix_cache_misses_total", "reason=\"disabled\"",
           double(st.prefix_miss_disabled));
    family(out, "zinc_engine_steps_total", "counter", "Engine steps (batched forward passes).");
    sample(out, "zinc_engine_steps_total", "", double(st.steps));
    family(out, "zinc_preemptions_total", "counter",
           "Sequences preempted (recomputed later) when KV blocks ran out.");
    sample(out, "zinc_preemptions_total", "", double(st.preemptions));
    family(out, "zinc_preemptions_qos_total", "counter",
           "Of the preemptions: running sequences of a lower QoS class preempted to admit a "
           "higher one.");
    sample(out, "zinc_preemptions_qos_total", "", double(st.preemptions_qos));
    render_steps(out, st);
    render_spec(out, st);
    family(out, "zinc_engine_prompt_tokens_total", "counter",
           "Prompt tokens the engine admitted (including recomputation after preemption).");
    sample(out, "zinc_engine_prompt_tokens_total", "", double(st.prompt_tokens));
    family(out, "zinc_engine_generated_tokens_total", "counter",
           "Tokens the engine sampled (including ones dropped after a stop string).");
    sample(out, "zinc_engine_generated_tokens_total", "", double(st.generated_tokens));
    family(out, "zinc_engine_requests_total", "counter", "Engine requests ended, by outcome.");
    sample(out, "zinc_engine_requests_total", "outcome=\"finished\"", double(st.requests_finished));
    sample(out, "zinc_engine_requests_total", "outcome=\"cancelled\"",
           double(st.requests_cancelled));
    return out;
}

}  // namespace zinc::server
