// zinc/server/generation.cpp — see generation.h.
#include "server/generation.h"

#include <condition_variable>
#include <deque>
#include <mutex>

namespace zinc::server {

struct Generation::Channel {
    struct Item {
        int32_t choice = 0;
        engine::Event event;
        Clock::time_point at;
    };
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> items;
};

struct Generation::Choice {
    Choice(const tokenizer::Tokenizer& tok, const std::vector<std::string>& stops, bool special)
        : stream(tok, stops, special), tail(tok, special) {}
    // The stream's end-of-generation flush without the replacement of a truncated character.
    std::string finish_text() {
        std::string text = stream.finish();
        const std::string cut = tail.finish();  // U+FFFD per cut character, or ""
        if (!cut.empty() && text.size() >= cut.size() &&
            text.compare(text.size() - cut.size(), cut.size(), cut) == 0)
            text.resize(text.size() - cut.size());
        return text;
    }
    engine::RequestId id = 0;
    bool submitted = false;
    bool engine_done = false;  // the engine sent its final event
    int32_t prompt_index = 0;
    bool ignore_eos = false;  // end-of-generation tokens are generated on, with no text
    std::function<bool(std::string_view)> stop_after;  // ChoiceSpec::stop_after
    tokenizer::TextStream stream;
    std::optional<std::string> finish_reason;
    int32_t n_tokens = 0;
    int32_t cached_prompt_tokens = 0;
    engine::Usage final_usage;                         // the engine's final event's usage
    std::optional<runtime::RequestEvidence> evidence;  // from the engine's final event
    // Bytes of a UTF-8 character cut by the end of generation: this second detokenizer sees the
    // same tokens as `stream`, and what its finish() returns is the U+FFFD that the stream's
    // finish() appends for them, which we drop (as llama.cpp's server and OpenAI do).
    tokenizer::IncrementalDetokenizer tail;
    Clock::time_point first_token{}, last_token{};
};

Generation::Generation(engine::Engine& eng, const tokenizer::Tokenizer& tok, Metrics* metrics,
                       Clock::time_point arrival)
    : eng_(eng),
      tok_(tok),
      metrics_(metrics),
      arrival_(arrival),
      channel_(std::make_shared<Channel>()) {}

ApiResult<std::unique_ptr<Generation>> Generation::start(
    engine::Engine& eng, const tokenizer::Tokenizer& tok, std::vector<ChoiceSpec> choices,
    const std::vector<std::string>& stops, Metrics* metrics, Clock::time_point arrival) {
    // A request the engine can never hold at once (n x prompts over --parallel + --max-queue) is
    // a 400 up front: a 429 would invite retries, and submitting part of it would run work that
    // is then cancelled.
    const engine::EngineOptions& eo = eng.options();
    const int64_t admit = static_cast<int64_t>(eo.n_parallel) + eo.max_queue;
    if (static_cast<int64_t>(choices.size()) > admit)
        return bad_request("the request needs " + std::to_string(choices.size()) +
                           " sequences (n x prompts) but the server admits at most " +
                           std::to_string(admit) + " at once (--parallel " +
                           std::to_string(eo.n_parallel) + " + --max-queue " +
                           std::to_string(eo.max_queue) + ")");
    std::unique_ptr<Generation> g(new Generation(eng, tok, metrics, arrival));
    for (auto& spec : choices) {
        auto c = std::make_unique<Choice>(tok, stops, spec.render_special);
        c->prompt_index = spec.prompt_index;
        c->ignore_eos = spec.params.ignore_eos;
        c->stop_after = std::move(spec.stop_after);
        g->choices_.push_back(std::move(c));
    }
    for (size_t i = 0; i < choices.size(); ++i) {
        std::shared_ptr<Channel> ch = g->channel_;
        const auto idx = static_cast<int32_t>(i);
        auto sink = [ch, idx](const engine::Event& ev) {
            {
                std::lock_guard<std::mutex> lk(ch->mu);
                ch->items.push_back({idx, ev, Clock::now()});
            }
            ch->cv.notify_one();
        };
        auto r = eng.submit(std::move(choices[i].params), std::move(sink));
        if (const auto* err = std::get_if<engine::SubmitError>(&r)) {
            g->cancel();  // the ones already submitted
            switch (err->kind) {
                case engine::SubmitErrorKind::ContextLength:
                    return context_length_exceeded(err->message, "messages");
                case engine::SubmitErrorKind::QueueFull:
                    return queue_full(err->message);
                case engine::SubmitErrorKind::ShuttingDown:
                    return shutting_down();
                case engine::SubmitErrorKind::InvalidRequest:
                    return bad_request(err->message);
            }
            return internal_error(err->message);
        }
        g->choices_[i]->id = std::get<engine::RequestId>(r);
        g->choices_[i]->submitted = true;
    }
    return g;
}

Generation::~Generation() {
    cancel();
}

void Generation::cancel() {
    for (auto& c : choices_)
        if (c->submitted && !c->engine_done)
            eng_.cancel(c->id);                      // unknown/finished ids are ignored
    for (auto& c : choices_) c->engine_done = true;  // nothing more is awaited from the engine
}

bool Generation::done() const {
    if (failure_) return true;
    for (const auto& c : choices_)
        if (!c->finish_reason || !c->engine_done) return false;
    return true;
}

bool Generation::settled(int32_t index) const {
    const Choice& c = *choices_[static_cast<size_t>(index)];
    return failure_ || (c.finish_reason && c.engine_done);
}

std::optional<runtime::RequestEvidence> Generation::evidence() const {
    if (failure_) return std::nullopt;
    runtime::RequestEvidence sum;
    for (const auto& c : choices_) {
        if (!c->finish_reason || !c->engine_done || !c->evidence) return std::nullopt;
        sum += *c->evidence;
    }
    return sum;
}

int32_t Generation::completion_tokens() const {
    int32_t n = 0;
    for (const auto& c : choices_) n += c->n_tokens;
    return n;
}

int32_t Generation::cached_prompt_tokens() const {
    int32_t n = 0, last_prompt = -1;
    for (const auto& c : choices_) {
        if (c->prompt_index == last_prompt) continue;
        last_prompt = c->prompt_index;
        n += c->cached_prompt_tokens;
    }
    return n;
}

Generation::Speculation Generation::speculation() const {
    Speculation s;
    for (const auto& c : choices_) {
        s.steps += c->final_usage.spec_steps;
        s.drafted += c->final_usage.spec_drafted;
        s.accepted += c->final_usage.spec_accepted;
    }
    return s;
}

std::vector<ChoiceDelta> Generation::poll(std::chrono::milliseconds timeout) {
    std::deque<Channel::Item> items;
    {
        std::unique_lock<std::mutex> lk(channel_->mu);
        channel_->cv.wait_for(lk, timeout, [&] { return !channel_->items.empty(); });
        items.swap(channel_->items);
    }
    std::vector<ChoiceDelta> out;
    auto delta_for = [&](int32_t idx) -> ChoiceDelta& {
        for (auto& d : out)
            if (d.index == idx) return d;
        out.push_back(ChoiceDelta{idx, {}, {}, std::nullopt});
        return out.back();
    };
    for (auto& item : items) {
        Choice& c = *choices_[static_cast<size_t>(item.choice)];
        const engine::Event& ev = item.event;
        if (ev.finished) {
            c.engine_done = true;
            c.cached_prompt_tokens = ev.usage.cached_prompt_tokens;
            c.final_usage = ev.usage;
            c.evidence = ev.evidence;
        }
        if (c.finish_reason || failure_) continue;  // ended on our side (a stop string)
        ChoiceDelta& d = delta_for(item.choice);
        for (const auto& t : ev.tokens) {
            if (c.n_tokens == 0) c.first_token = item.at;
            if (metrics_) {
                if (!first_token_seen_)
                    metrics_->observe_ttft(
                        std::chrono::duration<double>(item.at - arrival_).count());
                else if (c.n_tokens > 0)
                    metrics_->observe_itl(
                        std::chrono::duration<double>(item.at - c.last_token).count());
            }
            if (!first_token_seen_) first_token_at_ = item.at;
            first_token_seen_ = true;
            c.last_token = item.at;
            last_token_time_ = item.at;
            ++c.n_tokens;
            d.tokens.push_back(t);
            // ignore_eos: an end-of-generation token is a generated token like any other (it
            // counts, and has logprobs) but has no text and must not end the stream.
            if (c.ignore_eos && tok_.is_eog(t.id)) continue;
            tokenizer::StreamStep step = c.stream.push(t.id);
            c.tail.push(t.id);
            d.text += step.text;
            const bool caller_stops = step.status == tokenizer::StreamStatus::Continue &&
                                      c.stop_after && !step.text.empty() && c.stop_after(step.text);
            if (step.status != tokenizer::StreamStatus::Continue || caller_stops) {
                // A stop string completed (or an end-of-turn token the engine did not know, or
                // the caller read all it wants): release the sequence now rather than when
                // max_tokens runs out.
                c.finish_reason = "stop";
                if (!c.engine_done) eng_.cancel(c.id);
                break;
            }
        }
        if (c.finish_reason || !ev.finished) {
            if (c.finish_reason) d.finish_reason = c.finish_reason;
            continue;
        }
        switch (ev.reason) {
            case engine::FinishReason::Length:
            case engine::FinishReason::Context:
                d.text += c.finish_text();  // may still complete a stop string
                c.finish_reason = c.stream.stopped() ? "stop" : "length";
                break;
            case engine::FinishReason::Eog:
                d.text += c.finish_text();
                c.finish_reason = "stop";
                break;
            case engine::FinishReason::Cancelled:
                failure_ = shutting_down();
                break;
            case engine::FinishReason::Error:
                failure_ = internal_error("generation failed: " + ev.error);
                break;
        }
        d.finish_reason = c.finish_reason;
    }
    if (failure_) cancel();
    if (done() && !failure_) finish_metrics();
    return out;
}

void Generation::finish_metrics() {
    if (metrics_done_ || !metrics_) return;
    metrics_done_ = true;
    for (const auto& c : choices_)
        if (c->n_tokens >= 2)
            metrics_->observe_tpot(
                std::chrono::duration<double>(c->last_token - c->first_token).count() /
                (c->n_tokens - 1));
    metrics_->count_tokens(0, static_cast<uint64_t>(completion_tokens()));
    if (first_token_seen_)
        metrics_->observe_e2e(std::chrono::duration<double>(last_token_time_ - arrival_).count());
}

}  // namespace zinc::server
