// zinc/cli/chat_repl.cpp — `zinc chat`: an interactive multi-turn chat in the terminal. Each turn
// renders the whole conversation with the model's chat template, keeps the KV cache of the
// longest common token prefix with what the context already holds, prefills only the rest, and
// streams the reply through TextStream. Ctrl-C stops a reply (the partial reply is kept);
// Ctrl-D leaves. Input: line_editor.h (libedit on a terminal: editing, history, multi-line).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "cli/chat_prompt.h"
#include "cli/cli.h"
#include "cli/default_model.h"
#include "cli/host_info.h"
#include "cli/line_editor.h"
#include "cli/llama_compat.h"
#include "cli/model_loader.h"
#include "cli/sampling_flags.h"
#include "cli/sigint.h"
#include "cli/validators.h"
#include "engine/sampler.h"
#include "runtime/evidence.h"
#include "runtime/run_context.h"
#include "tokenizer/text_stream.h"

namespace zinc::cli {

namespace {

struct ChatOptions {
    std::string model_path;
    std::string system;
    std::string first_turn;  // -p: sent before any input is read
    int n_predict = -1;      // per reply; -1: until end of turn or a full context
    int n_ctx = 4096;
    int n_threads = 0;
    bool no_think = false;
    std::vector<std::string> stops;
    engine::SamplerOptions sampling;
    std::string tier;        // --tier; empty: ZINC_TIER, else auto (runtime/tier.h)
    bool exact = false;      // --exact (docs/exactness.md)
    int device = -1;         // -d/--device; < 0: ZINC_DEVICE, else 0
    std::string gpu_layers;  // -ngl N: llama_compat.h
    std::string history_file = default_history_path();  // "": none
};

using Clock = std::chrono::steady_clock;

void write_out(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r");
    return s.substr(a, b - a + 1);
}

constexpr const char* kHelp =
    "commands: /reset (clear the conversation and the KV cache), /system TEXT (set the system "
    "message and reset), /help, /quit (or Ctrl-D). Ctrl-C stops a reply. Several lines: end a "
    "line with \\ to continue it, or open and close a block with \"\"\"; a paste is one turn.\n";

class ChatSession {
  public:
    ChatSession(const ChatOptions& o, LoadedModel& m, chat::ChatTemplate tmpl, model::Context& ctx)
        : o_(o), m_(m), tmpl_(std::move(tmpl)), ctx_(ctx), sampler_(o.sampling) {
        system_ = o.system;
        stops_ = o.stops;
        for (auto& s : template_stop_strings(m)) stops_.push_back(std::move(s));
    }

    void reset() {
        messages_.clear();
        ctx_.reset();
        in_ctx_.clear();
    }
    void set_system(std::string s) {
        system_ = std::move(s);
        reset();
    }

    // One user turn: render, reuse the common prefix, prefill the rest, stream the reply.
    void turn(const std::string& user, SigintGuard& sigint) {
        std::vector<chat::Message> msgs;
        if (!system_.empty()) msgs.push_back({"system", system_});
        msgs.insert(msgs.end(), messages_.begin(), messages_.end());
        msgs.push_back({"user", user});
        auto t =
            chat_tokens(m_, tmpl_, msgs, o_.no_think ? std::optional<bool>(false) : std::nullopt);
        if (!t) {
            std::fprintf(stderr, "zinc: error: %s\n", t.error().message.c_str());
            return;
        }
        const std::vector<int32_t>& tokens = t.value();
        const int n_ctx = ctx_.n_ctx();
        if (static_cast<int>(tokens.size()) >= n_ctx) {
            std::fprintf(stderr,
                         "zinc: context full (%d positions; this turn needs %zu): /reset or "
                         "start with a larger -c\n",
                         n_ctx, tokens.size());
            return;
        }
        // Longest common prefix with what the KV cache holds; at least one token is evaluated
        // so that there are logits to sample from.
        size_t keep = 0;
        while (keep < in_ctx_.size() && keep < tokens.size() && in_ctx_[keep] == tokens[keep])
            ++keep;
        if (keep == tokens.size()) --keep;
        // A recurrent (hybrid) model's state cannot be rewound (docs/engine.md): keep all of
        // the context or none of it.
        if (m_.model->recurrent_state_bytes() > 0 && static_cast<int>(keep) != ctx_.n_past())
            keep = 0;
        ctx_.truncate(static_cast<int>(keep));
        in_ctx_.resize(keep);
        messages_.push_back({"user", user});

        const auto t0 = Clock::now();
        const std::span<const int32_t> fresh(tokens.data() + keep, tokens.size() - keep);
        if (auto r = ctx_.eval(fresh); !r) {
            std::fprintf(stderr, "zinc: error: %s\n", r.error().message.c_str());
            ctx_.reset();
            in_ctx_.clear();
            return;
        }
        in_ctx_.assign(tokens.begin(), tokens.end());
        const double s_prefill = std::chrono::duration<double>(Clock::now() - t0).count();

        tokenizer::TextStream stream(*m_.tok, stops_);
        const auto n_vocab = static_cast<size_t>(m_.model->n_vocab());
        std::vector<int32_t> history = tokens;
        int n_gen = 0;
        bool full = false;
        const auto t1 = Clock::now();
        while ((o_.n_predict < 0 || n_gen < o_.n_predict) && !sigint.fired()) {
            const int32_t tok = sampler_.sample({ctx_.logits(-1), n_vocab}, history);
            const tokenizer::StreamStep step = stream.push(tok);
            write_out(step.text);
            if (step.status != tokenizer::StreamStatus::Continue) break;
            history.push_back(tok);
            ++n_gen;
            if (o_.n_predict >= 0 && n_gen >= o_.n_predict) break;
            if (ctx_.n_past() >= n_ctx) {
                full = true;
                break;
            }
            if (sigint.fired()) break;
            const int32_t one[1] = {tok};
            if (auto r = ctx_.eval(one); !r) {
                std::fprintf(stderr, "\nzinc: error: %s\n", r.error().message.c_str());
                break;
            }
            in_ctx_.push_back(tok);
        }
        const bool interrupted = sigint.fired();
        write_out(stream.finish());
        std::fputc('\n', stdout);
        std::fflush(stdout);
        const double s_gen = std::chrono::duration<double>(Clock::now() - t1).count();
        messages_.push_back({"assistant", stream.text()});
        if (interrupted) std::fprintf(stderr, "zinc: reply stopped (Ctrl-C)\n");
        if (full)
            std::fprintf(stderr,
                         "zinc: context full (%d positions): /reset or start with a larger -c\n",
                         n_ctx);
        if (!log_info()) return;
        std::fprintf(stderr,
                     "[prefilled %zu tok, reused %zu tok, %.2f s | generated %d tok, %.1f tok/s "
                     "| context %d/%d]\n",
                     fresh.size(), keep, s_prefill, n_gen, s_gen > 0 ? n_gen / s_gen : 0.0,
                     ctx_.n_past(), n_ctx);
    }

  private:
    const ChatOptions& o_;
    LoadedModel& m_;
    chat::ChatTemplate tmpl_;
    model::Context& ctx_;
    engine::Sampler sampler_;
    std::string system_;
    std::vector<std::string> stops_;       // --stop plus the template's (template_stop_strings)
    std::vector<chat::Message> messages_;  // user and assistant turns (the system one apart)
    std::vector<int32_t> in_ctx_;          // the tokens whose K/V the context holds
};

int chat_loop(const ChatOptions& o) {
    ModelArg how;
    auto resolved = resolve_model_path(o.model_path, &how);
    if (!resolved)
        return report_error(resolved.error().message, how.bad_input ? kExitBadInput : kExitFailure);
    const std::string path = resolved.value();
    const int n_threads = o.n_threads > 0 ? o.n_threads : probe_host().n_threads;
    LoaderOptions lo;
    lo.n_threads = n_threads;
    lo.chat_template = true;
    lo.release_metadata = true;
    auto loaded = load_model(path, lo);
    if (!loaded) return report_error(loaded.error().message);
    LoadedModel& m = loaded.value();
    auto tmpl = parse_model_template(m);
    if (!tmpl) return report_error(tmpl.error().message);
    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : m.model->n_ctx_train();
    if (auto fit = check_memory_fit(*m.model, m.file->file_size(), n_ctx, "-c/--context"); !fit)
        return report_error("-c " + std::to_string(n_ctx) + ": " + fit.error().message);
    warn_if_oversubscribed(o.n_threads);
    // The tier (--tier, ZINC_TIER, auto) and the session's evidence: runtime/run_context.h.
    auto rc_r = open_run_context(*m.model, n_ctx, n_threads, o.tier, o.device, o.exact);
    if (!rc_r) return report_error(rc_r.error().message);
    runtime::RunContext rc = std::move(rc_r.value());
    std::unique_ptr<model::Context> ctx = std::move(rc.ctx);

    ChatSession session(o, m, std::move(tmpl.value()), *ctx);
    // Every Ctrl-C only raises the flag (no SA_RESETHAND); SA_RESTART keeps writes whole, and
    // the prompt's poll() still returns EINTR.
    SigintGuard sigint(/*once=*/false, /*restart=*/true);
    const bool tty = ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
    LineEditor reader(tty, tty ? o.history_file : std::string());
    if (log_info()) {
        std::fprintf(stderr, "zinc: tier %s: %s\n", runtime::to_string(rc.choice.tier),
                     rc.choice.reason.c_str());
        std::fprintf(stderr, "zinc chat: %s, context %d. /help for commands, Ctrl-D to leave.\n",
                     path.c_str(), n_ctx);
    }
    // On leaving: what ran where over the whole session (docs/runtime.md).
    auto leave = [&rc]() {
        if (log_info())
            std::fprintf(stderr, "%s\n", runtime::evidence_line(rc.evidence->snapshot()).c_str());
        return kExitOk;
    };
    if (!o.first_turn.empty()) {
        if (tty) write_out("> " + o.first_turn + "\n");
        reader.remember(o.first_turn);
        session.turn(o.first_turn, sigint);
        sigint.clear();
    }
    for (;;) {
        std::string line;
        const ReadStatus st = reader.read_turn(line, sigint);
        if (st == ReadStatus::Eof) {
            write_out("\n");
            return leave();
        }
        if (st == ReadStatus::Interrupted) {
            sigint.clear();
            write_out("\n");
            std::fprintf(stderr, "(Ctrl-C: line cleared; /quit or Ctrl-D to leave)\n");
            continue;
        }
        const std::string text = trim(line);
        if (text.empty()) continue;
        reader.remember(text);
        if (text == "/quit" || text == "/exit") return leave();
        if (text == "/help") {
            std::fputs(kHelp, stderr);
            continue;
        }
        if (text == "/reset") {
            session.reset();
            std::fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (text == "/system" || text.rfind("/system ", 0) == 0) {
            session.set_system(trim(text.substr(7)));
            std::fprintf(stderr, "(system message set; conversation cleared)\n");
            continue;
        }
        if (text[0] == '/' && text.find(' ') == std::string::npos) {
            std::fprintf(stderr, "unknown command %s; /help lists them\n", text.c_str());
            continue;
        }
        sigint.clear();
        session.turn(text, sigint);
        sigint.clear();
    }
}

}  // namespace

int chat_main(int argc, char** argv) {
    ChatOptions o;
    CLI::App app{"zinc chat: interactive chat with a model's own chat template", "zinc chat"};
    app.add_option("-m,--model", o.model_path,
                   "GGUF model file, or a model name (zinc list; default: SmolLM2-135M-Instruct)");
    app.add_option("--system,--system-prompt", o.system, "system message");
    app.add_option("-p,--prompt", o.first_turn,
                   "first user turn, answered before input is read (llama-cli's -p in "
                   "conversation mode)");
    app.add_option("-n,--n-predict", o.n_predict,
                   "tokens per reply at most; -1: until end of turn or a full context")
        ->check(int_in(-1, 1000000000))
        ->capture_default_str();
    app.add_option("-c,--context,--ctx-size", o.n_ctx,
                   "context size in positions; 0: the model's own")
        ->check(int_in(0, 1 << 24))
        ->capture_default_str();
    app.add_option("-t,--threads", o.n_threads, "threads; 0: all hardware threads")
        ->check(int_in(0, 1024))
        ->capture_default_str();
    auto* seed_opt = add_sampling_flags(app, o.sampling);
    app.add_option("--stop", o.stops, "stop string (repeatable); not printed");
    app.add_flag("--no-think", o.no_think, "pass enable_thinking=false to the template");
    app.add_flag("--exact", o.exact,
                 "the CUDA tier computes the CPU tier's exact bits (slower; default: ZINC_EXACT, "
                 "else the fast kernels)");
    app.add_option("--tier", o.tier,
                   "execution tier: auto, cuda or cpu (default: ZINC_TIER, else auto)");
    app.add_option("-d,--device", o.device,
                   "CUDA device index for the cuda tier (default: ZINC_DEVICE, else 0)")
        ->check(int_in(0, 1023));
    app.add_option("--history-file", o.history_file,
                   "where a terminal session keeps its input history; '' keeps none (default: "
                   "$XDG_STATE_HOME/zinc/history, else ~/.local/state/zinc/history)");
    add_gpu_layers_flag(app, o.gpu_layers);
    add_verbosity_flags(app);
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    if (auto e = apply_gpu_layers(o.gpu_layers, o.tier); !e.empty()) return report_error(e);
    finish_sampling_flags(seed_opt, o.sampling);
    return chat_loop(o);
}

}  // namespace zinc::cli
