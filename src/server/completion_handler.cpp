// zinc/server/completion_handler.cpp — POST /v1/chat/completions and POST /v1/completions:
// validate, build the prompt tokens (chat template / tokenizer), check the context, run the
// choices on the engine (generation.h), and answer with one JSON body or an SSE stream.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/evidence.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/peer_watch.h"
#include "server/request_prologue.h"
#include "server/serving_context.h"
#include "server/sse.h"
#include "server/tenancy.h"
#include "server/tool_call_stream.h"
#include "server/tool_calls.h"

namespace zinc::server {

using nlohmann::json;

namespace {

// OpenAI's default max_tokens for /v1/completions.
constexpr int64_t kDefaultCompletionTokens = 16;

// Each prompt's token ids, or the error that stops the request.
ApiResult<std::vector<std::vector<int32_t>>> prompt_tokens(ServingContext& ctx,
                                                           const CompletionRequest& cr) {
    const tokenizer::Tokenizer& tok = *ctx.model.tok;
    std::vector<std::vector<int32_t>> out;
    if (cr.kind == ApiKind::Chat) {
        if (cr.use_tools && !ctx.model.render_chat_tools)
            return invalid_value("tools", "this server's chat renderer does not take tools");
        const ChatRenderOptions ro{cr.enable_thinking};
        // Older Gemma 4 templates take tool results inside the model's turn (tool_format.h).
        const bool fold = template_folds_tool_turns(ctx.model.chat_template_source);
        const std::vector<chat::Message> folded =
            fold ? fold_tool_turns(cr.messages) : std::vector<chat::Message>{};
        const std::vector<chat::Message>& msgs = fold ? folded : cr.messages;
        auto t = cr.use_tools
                     ? ctx.model.render_chat_tools(msgs, json_to_template_value(cr.tools.tools), ro)
                     : ctx.model.render_chat(msgs, ro);
        if (!t.ok())
            return bad_request("the chat template failed on these messages: " + t.error().message,
                               std::string("messages"), std::string("invalid_value"));
        if (t.value().empty())
            return invalid_value("messages", "the rendered conversation has no tokens");
        out.push_back(std::move(t.value()));
        return out;
    }
    for (const auto& p : cr.prompts) {
        std::vector<int32_t> ids;
        if (p.is_tokens) {
            for (size_t k = 0; k < p.tokens.size(); ++k)
                if (p.tokens[k] >= tok.n_vocab())
                    return invalid_value(path_index(p.path, k),
                                         "token id " + std::to_string(p.tokens[k]) +
                                             " is out of range (vocabulary of " +
                                             std::to_string(tok.n_vocab()) + ")");
            ids = p.tokens;
        } else {
            // As `zinc --prompt` and llama.cpp: BOS per the model, special-token text parsed.
            ids = tok.encode(p.text, /*add_special=*/true, /*parse_special=*/true);
        }
        if (ids.empty()) return invalid_value(p.path, "the prompt is empty");
        out.push_back(std::move(ids));
    }
    return out;
}

// The choices to run: prompts x n, with max_tokens resolved against the context.
ApiResult<std::vector<ChoiceSpec>> choice_specs(ServingContext& ctx, const CompletionRequest& cr,
                                                const std::vector<std::vector<int32_t>>& prompts) {
    const int32_t n_ctx = ctx.model.engine->options().n_ctx;
    const std::string prompt_param = cr.kind == ApiKind::Chat ? "messages" : "prompt";
    std::vector<ChoiceSpec> specs;
    for (size_t i = 0; i < prompts.size(); ++i) {
        const auto n_prompt = static_cast<int64_t>(prompts[i].size());
        // One rule (docs/server.md): prompt + max_tokens must fit the context, where max_tokens
        // is the request's or the endpoint's default (OpenAI's: completions 16; chat the rest of
        // the context, which fits by construction when the prompt leaves any room).
        int64_t max_tokens = 0;
        std::string asks;
        if (cr.max_tokens) {
            max_tokens = *cr.max_tokens;
            asks = cr.max_tokens_param + " asks for " + std::to_string(max_tokens) + " more";
        } else if (cr.kind == ApiKind::Completion) {
            max_tokens = kDefaultCompletionTokens;
            asks = "max_tokens (not given) defaults to " + std::to_string(max_tokens) + " more";
        } else {
            max_tokens = std::max<int64_t>(1, n_ctx - n_prompt);
            asks = "at least 1 more must fit";
        }
        if (n_prompt + max_tokens > n_ctx)
            return context_length_exceeded(
                "this model's context is " + std::to_string(n_ctx) +
                    " tokens per sequence; the prompt has " + std::to_string(n_prompt) +
                    " tokens and " + asks,
                // The prompt alone not fitting (or a default) is the prompt's fault.
                n_prompt >= n_ctx || !cr.max_tokens ? prompt_param : cr.max_tokens_param);
        for (int32_t j = 0; j < cr.n; ++j) {
            ChoiceSpec s;
            s.prompt_index = static_cast<int32_t>(i);
            s.params.prompt = prompts[i];
            s.params.max_tokens = static_cast<int32_t>(max_tokens);
            s.params.sampling = cr.sampling;
            // With a seed, choice j draws from seed + j: reproducible, yet the n choices differ.
            const std::optional<uint64_t> seed = cr.seed ? cr.seed : ctx.opts.default_seed;
            s.params.sampling.seed = seed ? *seed + static_cast<uint64_t>(j) : ctx.random_u64();
            s.params.top_logprobs = cr.logprobs ? cr.top_logprobs : -1;
            s.params.tenant = cr.user;
            s.params.ignore_eos = cr.ignore_eos;
            specs.push_back(std::move(s));
        }
    }
    return specs;
}

// A finished reply's tool calls (tool_calls.h) in OpenAI's shape, or null when it made none;
// `r.text` becomes the text outside the calls and, when calls were made and the last one is
// complete, `r.finish_reason` "tool_calls" (a call cut by max_tokens keeps "length", as OpenAI's).
void add_tool_calls(ServingContext& ctx, const CompletionRequest& cr, ChoiceResult& r) {
    const ParsedReply p =
        parse_tool_calls(r.text, tool_format_for_template(ctx.model.chat_template_source),
                         cr.tools.names, cr.tools.parallel);
    r.text = p.content;
    if (p.calls.empty()) return;
    r.tool_calls = json::array();
    for (const auto& c : p.calls)
        r.tool_calls.push_back({{"id", ctx.new_id("call_")},
                                {"type", "function"},
                                {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    if (!p.truncated) r.finish_reason = "tool_calls";
}

json logprobs_for(ServingContext& ctx, const CompletionRequest& cr, CompletionLogprobs* acc,
                  const std::vector<engine::GeneratedToken>& tokens) {
    if (!cr.logprobs || tokens.empty()) return nullptr;
    if (cr.kind == ApiKind::Chat)
        return {{"content", chat_logprob_entries(*ctx.model.tok, tokens, cr.top_logprobs)}};
    return acc->add(*ctx.model.tok, tokens, cr.top_logprobs);
}

// The request's own evidence (runtime/request_evidence.h) as an extension object next to
// `usage`: {"zinc": {"evidence": {...}}}. OpenAI clients keep unknown fields (model_extra).
void add_evidence(json& body, const Generation& gen, const TenantLease* lease = nullptr,
                  const engine::Drafter* drafter = nullptr) {
    if (auto ev = gen.evidence())
        body["zinc"] = {{"evidence", json::parse(runtime::request_evidence_json(*ev))}};
    // With tenants, the evidence names the tenant and class the request ran as.
    if (lease && body.contains("zinc"))
        body["zinc"]["evidence"]["tenant"] = {{"id", lease->tenant().id},
                                              {"class", engine::to_string(lease->tenant().qos)}};
    // Speculative decoding (docs/speculative.md): {"zinc": {"speculation": {...}}}.
    if (drafter) {
        const Generation::Speculation sp = gen.speculation();
        body["zinc"]["speculation"] = {
            {"drafter", drafter->name()},
            {"verifications", sp.steps},
            {"draft_tokens", sp.drafted},
            {"accepted_tokens", sp.accepted},
            {"acceptance_rate", sp.drafted > 0 ? double(sp.accepted) / double(sp.drafted) : 0.0},
            {"mean_accepted_length", sp.steps > 0 ? double(sp.accepted) / double(sp.steps) : 0.0}};
    }
}

// State of one streamed response, shared by httplib's content provider and releaser.
struct StreamState {
    std::unique_ptr<Generation> gen;
    CompletionRequest cr;
    ResponseMeta meta;
    int32_t prompt_tokens = 0;
    std::vector<CompletionLogprobs> lp;  // completions format, per choice
    // With tools: each choice's reply read as it streams (tool_call_stream.h), and the ids
    // given to its calls.
    std::vector<ToolCallStream> tool_streams;
    std::vector<std::vector<std::string>> call_ids;
    // Each choice's finish chunk, held until the engine's final event for it is in (a stop
    // string cancels the engine request; its evidence arrives within a step). The last one
    // written carries the request's evidence unless a usage chunk follows.
    std::vector<std::optional<json>> finish_chunk;
    bool started = false;
    bool ended = false;
    // The connection, watched at every provider call: a client that left is noticed within one
    // poll (<= 250 ms) even while nothing is written (its request still queued), instead of at
    // the heartbeat write that fails.
    std::unique_ptr<PeerWatch> peer;
    Clock::time_point last_write;
    std::shared_ptr<TenantLease> lease;  // with a tenants config
    Clock::time_point arrival;
};

// The request is over: its tenant is charged the prompt and the tokens generated (a request
// that produced nothing, e.g. cancelled in the queue, is charged its prompt only if it ran).
void settle(TenantLease& lease, const Generation& gen, int32_t n_prompt,
            Clock::time_point arrival) {
    const int32_t out = gen.completion_tokens();
    const Clock::time_point first = gen.first_token_at();
    const double queue_s = std::chrono::duration<double>(
                               (first == Clock::time_point{} ? Clock::now() : first) - arrival)
                               .count();
    lease.settle(out > 0 || gen.done() ? n_prompt : 0, out, queue_s);
}

void run_whole(ServingContext& ctx, Generation& gen, const TenantLease* lease,
               const CompletionRequest& cr, const ResponseMeta& meta, int32_t n_prompt_tokens,
               const PeerWatch& peer, httplib::Response& res) {
    std::vector<ChoiceResult> results(static_cast<size_t>(gen.n_choices()));
    std::vector<CompletionLogprobs> lp(results.size());
    std::vector<json> chat_lp(results.size(), json::array());
    // A client that leaves a non-streamed request is noticed here (nothing is written until the
    // end), and its sequences are cancelled so their KV blocks come back within a step, queued
    // or running.
    while (!gen.done()) {
        if (peer.closed()) {
            ctx.metrics.count_disconnect();
            gen.cancel();
            while (!gen.done()) gen.poll(std::chrono::milliseconds(50));
            res.status = 499;  // never read: the client is gone (nginx's "client closed request")
            return;
        }
        for (auto& d : gen.poll(std::chrono::milliseconds(100))) {
            ChoiceResult& r = results[static_cast<size_t>(d.index)];
            r.text += d.text;
            if (cr.logprobs && !d.tokens.empty()) {
                if (cr.kind == ApiKind::Chat)
                    for (auto& e : chat_logprob_entries(*ctx.model.tok, d.tokens, cr.top_logprobs))
                        chat_lp[static_cast<size_t>(d.index)].push_back(std::move(e));
                else
                    lp[static_cast<size_t>(d.index)].add(*ctx.model.tok, d.tokens, cr.top_logprobs);
            }
            if (d.finish_reason) r.finish_reason = *d.finish_reason;
        }
    }
    if (gen.failure()) return send_error(res, *gen.failure());
    if (cr.use_tools)
        for (auto& r : results) add_tool_calls(ctx, cr, r);
    for (size_t i = 0; i < results.size(); ++i) {
        if (!cr.logprobs) {
            results[i].logprobs = nullptr;
        } else if (cr.kind == ApiKind::Chat) {
            results[i].logprobs = {{"content", std::move(chat_lp[i])}};
        } else {
            results[i].logprobs = lp[i].whole();
        }
    }
    UsageCounts u{n_prompt_tokens, gen.completion_tokens(), gen.cached_prompt_tokens()};
    json body = whole_response(meta, results, u);
    add_evidence(body, gen, lease, ctx.model.engine->options().drafter.get());
    res.status = 200;
    res.set_content(dump(body), "application/json");
}

// With tools, one engine delta of a streamed chat choice: its text read by the choice's
// ToolCallStream, each piece written as a content or `delta.tool_calls` chunk, the tokens'
// logprobs on the first chunk written (or one of their own). False when the client is gone.
template <typename Write>
bool stream_tool_delta(ServingContext& ctx, StreamState& st, ChoiceDelta& d, Write& write) {
    const auto ci = static_cast<size_t>(d.index);
    ToolCallStream& ts = st.tool_streams[ci];
    std::vector<ToolStreamPiece> pieces = ts.feed(d.text);
    if (d.finish_reason)
        for (auto& p : ts.finish()) pieces.push_back(std::move(p));
    json lp = logprobs_for(ctx, st.cr, nullptr, d.tokens);
    auto send = [&](const std::string& content, json tool_call) {
        json chunk = stream_chunk(st.meta, d.index, content, false, std::move(lp), std::nullopt,
                                  st.cr.include_usage);
        lp = nullptr;
        if (!tool_call.is_null())
            chunk["choices"][0]["delta"]["tool_calls"] = json::array({std::move(tool_call)});
        return write(sse_event(dump(chunk)));
    };
    for (const auto& p : pieces) {
        if (p.call < 0) {
            if (!send(p.text, nullptr)) return false;
            continue;
        }
        std::vector<std::string>& ids = st.call_ids[ci];
        if (p.starts_call) ids.push_back(ctx.new_id("call_"));
        if (!send("",
                  tool_call_delta(p.call, p.starts_call ? &ids.back() : nullptr, p.name, p.text)))
            return false;
    }
    if (!lp.is_null() && !send("", nullptr)) return false;
    if (d.finish_reason) {
        // As a whole response's (add_tool_calls): "tool_calls" unless the last call was cut.
        if (ts.n_calls() > 0 && !ts.truncated()) d.finish_reason = "tool_calls";
        st.finish_chunk[ci] = stream_chunk(st.meta, d.index, "", false, nullptr, d.finish_reason,
                                           st.cr.include_usage);
    }
    return true;
}

// One call of httplib's content provider: write what is new; false when the client is gone.
bool stream_step(ServingContext& ctx, StreamState& st, httplib::DataSink& sink) {
    const bool chat = st.cr.kind == ApiKind::Chat;
    auto write = [&](const std::string& s) {
        st.last_write = Clock::now();
        return sink.write(s.data(), s.size());
    };
    if (st.peer && st.peer->closed()) return false;  // gone: the releaser cancels
    if (!st.started) {
        st.started = true;
        // Chat streams open each choice with the assistant role, as OpenAI's do.
        if (chat)
            for (int32_t i = 0; i < st.gen->n_choices(); ++i)
                if (!write(sse_event(dump(stream_chunk(st.meta, i, "", true, nullptr, std::nullopt,
                                                       st.cr.include_usage)))))
                    return false;
    }
    const auto wait = std::chrono::milliseconds(std::min(ctx.opts.heartbeat_ms, 250));
    auto deltas = st.gen->poll(wait);
    for (auto& d : deltas) {
        if (d.text.empty() && d.tokens.empty() && !d.finish_reason) continue;
        if (st.cr.use_tools) {
            if (!stream_tool_delta(ctx, st, d, write)) return false;
            continue;
        }
        if (!d.text.empty() || !d.tokens.empty()) {
            json lp = logprobs_for(ctx, st.cr, &st.lp[static_cast<size_t>(d.index)], d.tokens);
            if (!write(sse_event(dump(stream_chunk(st.meta, d.index, d.text, false, std::move(lp),
                                                   std::nullopt, st.cr.include_usage)))))
                return false;
        }
        if (d.finish_reason)
            st.finish_chunk[static_cast<size_t>(d.index)] = stream_chunk(
                st.meta, d.index, "", false, nullptr, d.finish_reason, st.cr.include_usage);
    }
    if (!st.gen->failure()) {
        const bool all_settled = st.gen->done();
        size_t held = 0;
        for (const auto& f : st.finish_chunk) held += f ? 1 : 0;
        for (size_t i = 0; i < st.finish_chunk.size(); ++i) {
            std::optional<json>& f = st.finish_chunk[i];
            if (!f || !st.gen->settled(static_cast<int32_t>(i))) continue;
            if (all_settled && --held == 0 && !st.cr.include_usage)
                add_evidence(*f, *st.gen, st.lease.get(),
                             ctx.model.engine->options().drafter.get());
            if (!write(sse_event(dump(*f)))) return false;
            f.reset();
        }
    }
    if (st.gen->failure()) {
        // The status line is long gone: report in-band, as OpenAI does mid-stream.
        const ApiError& e = *st.gen->failure();
        json err = {{"error",
                     {{"message", e.message},
                      {"type", e.type},
                      {"param", nullptr},
                      {"code", e.code ? json(*e.code) : json(nullptr)}}}};
        st.ended = true;
        if (!write(sse_event(dump(err))) || !write(sse_done())) return false;
        sink.done();
        return true;
    }
    if (st.gen->done()) {
        st.ended = true;
        if (st.cr.include_usage) {
            UsageCounts u{st.prompt_tokens, st.gen->completion_tokens(),
                          st.gen->cached_prompt_tokens()};
            json chunk = usage_chunk(st.meta, u);
            add_evidence(chunk, *st.gen, st.lease.get(), ctx.model.engine->options().drafter.get());
            if (!write(sse_event(dump(chunk)))) return false;
        }
        if (!write(sse_done())) return false;
        sink.done();
        return true;
    }
    if (deltas.empty() &&
        Clock::now() - st.last_write >= std::chrono::milliseconds(ctx.opts.heartbeat_ms)) {
        // A write to a closed connection fails (on the second try at the latest), which is how
        // a client that left while its request waits in the queue is found.
        if (!write(sse_comment("keep-alive"))) return false;
    }
    return true;
}

}  // namespace

void handle_completions(ServingContext& ctx, ApiKind kind, const httplib::Request& req,
                        httplib::Response& res) {
    const Clock::time_point arrival = Clock::now();
    // Whole requests are counted until answered (HttpServer::in_flight); streams until their
    // body ends (open_streams, below).
    const CountedRequest counted(ctx.open_requests);
    const auto body = request_body(ctx, req, res);
    if (!body) return;
    auto parsed = kind == ApiKind::Chat
                      ? parse_chat_request(*body, ctx.opts.sampling, ctx.opts.limits)
                      : parse_completion_request(*body, ctx.opts.sampling, ctx.opts.limits);
    if (!parsed.ok()) return send_error(res, parsed.error());
    CompletionRequest& cr = parsed.value();
    if (auto e = refuse_model(ctx, cr.has_model, cr.model)) return send_error(res, *e);

    auto prompts = prompt_tokens(ctx, cr);
    if (!prompts.ok()) return send_error(res, prompts.error());
    auto specs = choice_specs(ctx, cr, prompts.value());
    if (!specs.ok()) return send_error(res, specs.error());
    if (cr.use_tools &&
        (cr.tools.choice == ToolChoice::Required || cr.tools.choice == ToolChoice::Named)) {
        // The reply must be a call (of the named function): its format's grammar.
        if (!cr.grammar.empty())
            return send_error(res, invalid_value("tool_choice", "cannot be combined with '" +
                                                                    cr.grammar_param + "'"));
        auto g =
            tool_call_grammar(cr.tools, tool_format_for_template(ctx.model.chat_template_source));
        if (!g.ok()) return send_error(res, g.error());
        cr.grammar = std::move(g.value());
        cr.grammar_param = "tool_choice";
    } else if (cr.use_tools && cr.tools.choice == ToolChoice::Auto && cr.grammar.empty()) {
        // auto: the reply is free until it opens a call; from the format's marker on, the call
        // grammar holds (the arguments follow their tool's schema). A response_format given
        // with auto tools constrains the whole reply instead, as before.
        const ToolFormat f = tool_format_for_template(ctx.model.chat_template_source);
        if (auto triggers = tool_call_triggers(cr.tools, f); !triggers.empty()) {
            auto g = tool_call_grammar(cr.tools, f);
            if (!g.ok()) return send_error(res, g.error());
            cr.grammar = std::move(g.value());
            cr.grammar_param = "tools";
            cr.grammar_triggers = std::move(triggers);
        }
    }
    if (cr.use_tools && tool_format_spec(tool_format_for_template(ctx.model.chat_template_source))
                            .renders_control_tokens)
        for (auto& s : specs.value()) s.render_special = true;  // the calls' markers
    if (cr.use_tools && !cr.tools.parallel) {
        // parallel_tool_calls false: each reply is read token by token as the engine delivers
        // it, and generation stops right after the token that completes its one call (what
        // follows would be dropped), so usage is those tokens, streamed or whole.
        const ToolFormat f = tool_format_for_template(ctx.model.chat_template_source);
        for (auto& s : specs.value()) {
            auto ts = std::make_shared<ToolCallStream>(f, cr.tools.names, false);
            s.stop_after = [ts](std::string_view text) {
                ts->feed(text);
                return ts->done();
            };
        }
    }
    if (!cr.grammar.empty()) {
        // Structured output (engine/grammar_matcher.h): one parsed grammar for every choice.
        // Kept per grammar text, so a repeated schema finds its token masks cached.
        auto c = ctx.grammar_constraint(cr.grammar, cr.grammar_triggers);
        if (!c.ok()) return send_error(res, invalid_value(cr.grammar_param, c.error().message));
        for (auto& s : specs.value()) s.params.grammar = c.value();
    }
    int32_t n_prompt_tokens = 0;
    for (const auto& p : prompts.value()) n_prompt_tokens += static_cast<int32_t>(p.size());

    // Tenants (server/tenancy.h): the key names the tenant; quotas decidable now are checked.
    std::shared_ptr<TenantLease> lease;
    if (ctx.opts.tenancy) {
        auto t = ctx.opts.tenancy->authenticate(req.get_header_value("Authorization"),
                                                req.get_header_value("X-Api-Key"));
        if (!t) return send_error(res, unauthorized());
        auto l = ctx.opts.tenancy->admit(std::move(t), specs.value());
        if (!l.ok()) return send_error(res, l.error());
        lease = std::move(l.value());
    }

    // A client that left before its request was submitted (it waited for an HTTP thread, or
    // went while the prompt was rendered) gets nothing queued: no engine request runs for it.
    auto peer = std::make_unique<PeerWatch>(req.remote_addr, req.remote_port, req.local_addr,
                                            req.local_port);
    if (peer->closed()) {
        ctx.metrics.count_disconnect();
        res.status = 499;  // never read (nginx's "client closed request")
        return;            // the lease, unsettled, releases its claim: nothing ran
    }

    std::vector<std::string> stops = cr.stop;
    if (kind == ApiKind::Chat)
        for (const auto& s : ctx.model.chat_stop_strings) stops.push_back(s);
    auto gen = Generation::start(*ctx.model.engine, *ctx.model.tok, std::move(specs.value()), stops,
                                 &ctx.metrics, arrival);
    if (!gen.ok()) return send_error(res, gen.error());
    ctx.metrics.count_tokens(static_cast<uint64_t>(n_prompt_tokens), 0);

    ResponseMeta meta;
    meta.kind = kind;
    meta.id = ctx.new_id(kind == ApiKind::Chat ? "chatcmpl-" : "cmpl-");
    meta.created = static_cast<int64_t>(std::time(nullptr));
    meta.model = ctx.opts.model_id;

    if (!cr.stream) {
        run_whole(ctx, *gen.value(), lease.get(), cr, meta, n_prompt_tokens, *peer, res);
        if (lease) settle(*lease, *gen.value(), n_prompt_tokens, arrival);
        return;
    }

    auto st = std::make_shared<StreamState>();
    st->gen = std::move(gen.value());
    st->cr = std::move(cr);
    st->meta = std::move(meta);
    st->prompt_tokens = n_prompt_tokens;
    st->lp.resize(static_cast<size_t>(st->gen->n_choices()));
    if (st->cr.use_tools) {
        const ToolFormat f = tool_format_for_template(ctx.model.chat_template_source);
        for (int32_t i = 0; i < st->gen->n_choices(); ++i)
            st->tool_streams.emplace_back(f, st->cr.tools.names, st->cr.tools.parallel);
        st->call_ids.resize(static_cast<size_t>(st->gen->n_choices()));
    }
    st->finish_chunk.resize(static_cast<size_t>(st->gen->n_choices()));
    st->last_write = Clock::now();
    st->lease = std::move(lease);
    st->arrival = arrival;
    st->peer = std::move(peer);
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    ServingContext* c = &ctx;
    ++ctx.open_streams;
    res.set_chunked_content_provider(
        "text/event-stream",
        [c, st](size_t /*offset*/, httplib::DataSink& sink) {
            if (st->ended) {
                sink.done();
                return true;
            }
            return stream_step(*c, *st, sink);
        },
        [c, st](bool success) {
            // The response is over: a stream that did not reach its end lost its client (or the
            // server is stopping). Cancel at once so the KV blocks come back within a step.
            if (!success || !st->ended) {
                if (!st->ended) c->metrics.count_disconnect();
                st->gen->cancel();
            }
            if (st->lease) settle(*st->lease, *st->gen, st->prompt_tokens, st->arrival);
            --c->open_streams;
        });
}

}  // namespace zinc::server
