// zinc/cli/run.cpp — the default command: load a model, prefill the prompt, sample and stream
// text to stdout until an end-of-generation token or -n tokens, then print one timing line to
// stderr. Also routes --version and --check (check.cpp).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "chat/chat_template.h"
#include "cli/chat_prompt.h"
#include "cli/check.h"
#include "cli/cli.h"
#include "cli/default_model.h"
#include "cli/host_info.h"
#include "cli/llama_compat.h"
#include "cli/model_loader.h"
#include "cli/sampling_flags.h"
#include "cli/sigint.h"
#include "cli/spec_flags.h"
#include "cli/validators.h"
#include "engine/sampler.h"
#include "engine/spec_verify.h"
#include "quant/quant.h"
#include "runtime/evidence.h"
#include "runtime/run_context.h"
#include "tokenizer/text_stream.h"

namespace zinc::cli {

namespace {

struct RunOptions {
    std::string model_path;  // empty: the default model
    std::string prompt;
    std::string prompt_file;  // -f FILE; "-": stdin
    std::string gpu_layers;   // -ngl N: llama_compat.h
    int n_predict = 128;      // -1: until an end-of-generation token or the context is full
    int n_ctx = 4096;         // 0: the model's training context
    int n_threads = 0;        // 0: all hardware threads
    bool echo = true;         // print the prompt before the continuation (as llama.cpp does)
    bool chat = false;        // wrap the prompt as one user turn with the model's chat template
    std::string system;       // optional system turn (with --chat)
    bool raw = false;         // prompt verbatim: special-token text is plain text
    bool no_think = false;    // enable_thinking=false for the template (with --chat)
    std::vector<std::string> stops;  // stop strings (not printed)
    bool check = false;
    bool version = false;
    std::string tier;              // --tier; empty: ZINC_TIER, else auto (runtime/tier.h)
    bool exact = false;            // --exact (docs/exactness.md)
    int device = -1;               // -d/--device; < 0: ZINC_DEVICE, else 0
    TensorParallelFlags tp_flags;  // --tensor-parallel/-tp, -sm, -ts (llama_compat.h)
    int tensor_parallel = 0;       // apply_tensor_parallel: 0 off, -1 every device
    engine::SamplerOptions sampling;
    SpecFlags spec;  // --spec, --draft, --spec-max (cli/spec_flags.h)
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double rate(int n, double s) {
    return s > 0 ? n / s : 0.0;
}

void write_out(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
}

// Exit status after an interrupt, as a shell reports a process killed by SIGINT (128 + 2).
constexpr int kExitInterrupted = 130;

int generate(const RunOptions& o) {
    ModelArg how;
    auto resolved = resolve_model_path(o.model_path, &how);
    if (!resolved)
        return report_error(resolved.error().message, how.bad_input ? kExitBadInput : kExitFailure);
    const std::string path = resolved.value();
    const int n_threads = o.n_threads > 0 ? o.n_threads : probe_host().n_threads;
    LoaderOptions lo;
    lo.n_threads = n_threads;
    lo.chat_template = o.chat;
    lo.release_metadata = true;  // nothing below reads the metadata
    auto loaded = load_model(path, lo);
    if (!loaded) return report_error(loaded.error().message);
    LoadedModel& m = loaded.value();

    const int n_ctx = o.n_ctx > 0 ? o.n_ctx : m.model->n_ctx_train();
    // Special-token text in the prompt (e.g. "<|im_start|>") is parsed as the special token, as
    // llama.cpp's completion tool does, so a chat turn can be written by hand.
    std::vector<int32_t> tokens;
    if (o.chat) {
        auto tmpl = parse_model_template(m);
        if (!tmpl) return report_error(tmpl.error().message);
        std::vector<chat::Message> msgs;
        if (!o.system.empty()) msgs.push_back({"system", o.system});
        msgs.push_back({"user", o.prompt});
        auto t = chat_tokens(m, tmpl.value(), msgs,
                             o.no_think ? std::optional<bool>(false) : std::nullopt);
        if (!t) return report_error(t.error().message);
        tokens = std::move(t.value());
    } else {
        // --raw: the prompt is plain text, special-token text included (BOS still follows the
        // model's rule, as it is not part of the text).
        tokens = m.tok->encode(o.prompt, /*add_special=*/true, /*parse_special=*/!o.raw);
    }
    if (tokens.empty())
        return report_error("the prompt is empty (and the model adds no BOS token)");
    const int n_prompt = static_cast<int>(tokens.size());
    if (n_prompt >= n_ctx)
        return report_error("the prompt is " + std::to_string(n_prompt) + " token" +
                            (n_prompt == 1 ? "" : "s") + ", which does not fit the context of " +
                            std::to_string(n_ctx) + " position" + (n_ctx == 1 ? "" : "s") +
                            " with room to generate; raise -c/--context or shorten it");

    if (auto fit = check_memory_fit(*m.model, m.file->file_size(), n_ctx, "-c/--context"); !fit)
        return report_error("-c " + std::to_string(n_ctx) + ": " + fit.error().message);
    // Warnings, printed only once the run is known to go ahead (bad input is one line).
    warn_if_oversubscribed(o.n_threads);
    if (n_ctx > m.model->n_ctx_train() && log_warn())
        std::fprintf(stderr,
                     "zinc: warning: -c %d exceeds the model's trained context of %d; quality "
                     "will degrade past it\n",
                     n_ctx, m.model->n_ctx_train());

    // Speculative decoding (--spec, ZINC_SPEC): the drafter, and the draft model if any.
    auto spec_r = open_spec(o.spec, std::getenv("ZINC_SPEC"), m, n_ctx, n_threads);
    if (!spec_r) return report_error(spec_r.error().message);
    SpecSetup spec = std::move(spec_r.value());
    engine::DraftLength draft_len(spec.spec_max);
    std::vector<int32_t> draft, feed;
    int n_spec_steps = 0, n_drafted = 0, n_accepted = 0;

    // The tier (--tier, ZINC_TIER, auto) and the run's evidence: runtime/run_context.h.
    // (a hybrid model keeps its recurrent state after each row of a draft: Context::truncate)
    const int state_ckpt = spec.drafter ? spec.spec_max + 1 : 0;
    auto rc_r = open_run_context(*m.model, n_ctx, n_threads, o.tier, o.device, o.exact,
                                 o.tensor_parallel, state_ckpt);
    if (!rc_r) return report_error(rc_r.error().message);
    runtime::RunContext rc = std::move(rc_r.value());
    std::unique_ptr<model::Context> ctx_owner = std::move(rc.ctx);
    model::Context& ctx = *ctx_owner;
    if (log_info())
        std::fprintf(stderr, "zinc: tier %s: %s\n", runtime::to_string(rc.choice.tier),
                     rc.choice.reason.c_str());

    // The NextN drafter reads the trunk's hidden state of each kept row (CPU tier).
    const bool spec_hidden = spec.drafter && spec.drafter->wants_hidden();
    if (spec_hidden)
        if (auto r = ctx.keep_hidden(); !r)
            return report_error("--spec nextn: " + r.error().message);
    const auto n_embd = static_cast<size_t>(m.model->config().n_embd);
    auto observe = [&](int pos0, int n_rows, int first_row) {
        if (spec_hidden)
            spec.drafter->observe_hidden(0, pos0, {ctx.hidden(first_row), n_rows * n_embd});
    };

    if (o.echo && !o.chat) write_out(o.prompt);

    SigintGuard sigint;  // Ctrl-C from here on: finish the token, flush, report, exit 130
    const auto t_prefill = Clock::now();
    if (auto r = ctx.eval(tokens); !r) return report_error(r.error().message, kExitFailure);
    observe(ctx.n_past() - 1, 1, -1);
    const double s_prefill = seconds_since(t_prefill);

    engine::Sampler sampler(o.sampling);
    // Stops at the stop strings (never printed) and at end-of-generation tokens (EOS, the
    // template's end-of-turn token, ...: Tokenizer::is_eog).
    std::vector<std::string> stops = o.stops;
    if (o.chat)
        for (auto& s : template_stop_strings(m)) stops.push_back(std::move(s));
    tokenizer::TextStream stream(*m.tok, stops);
    const auto n_vocab = static_cast<size_t>(m.model->n_vocab());
    std::vector<int32_t> history = tokens;  // penalties see the prompt too, as in llama.cpp
    int n_gen = 0, n_decode = 0, n_forward = 0;
    bool context_full = false;
    Clock::time_point t_decode{};
    // Tokens to print next: one sampled token, or a verified draft's kept tokens and the one
    // after them (speculative decoding: engine/spec_verify.h keeps the output what plain
    // sampling would give).
    std::vector<int32_t> next = {sampler.sample({ctx.logits(-1), n_vocab}, history)};
    bool done = false;
    while (!done && !sigint.fired()) {
        for (const int32_t tok : next) {
            if (o.n_predict >= 0 && n_gen >= o.n_predict) {
                done = true;
                break;
            }
            if (n_forward > 0) ++n_decode;  // a token a decode forward produced (EOG included)
            if (m.tok->is_eog(tok)) {
                done = true;
                break;
            }
            history.push_back(tok);
            ++n_gen;
            const tokenizer::StreamStep step = stream.push(tok);
            write_out(step.text);
            if (step.status != tokenizer::StreamStatus::Continue) {
                done = true;
                break;
            }
        }
        if (done || (o.n_predict >= 0 && n_gen >= o.n_predict)) break;
        if (ctx.n_past() >= ctx.n_ctx()) {
            context_full = true;
            break;
        }
        if (sigint.fired()) break;
        if (n_forward == 0) t_decode = Clock::now();
        // The draft: never past -n or the context (the draft's rows need positions).
        draft.clear();
        if (spec.drafter) {
            int64_t cap = std::min<int64_t>(draft_len.len, ctx.n_ctx() - ctx.n_past() - 1);
            if (o.n_predict >= 0) cap = std::min<int64_t>(cap, o.n_predict - n_gen);
            if (cap > 0) spec.drafter->propose(0, history, static_cast<int32_t>(cap), draft);
        }
        feed.assign(1, history.back());
        feed.insert(feed.end(), draft.begin(), draft.end());
        const int base = ctx.n_past();
        if (auto r = ctx.eval(feed, !draft.empty()); !r) {
            write_out(stream.finish());
            std::fputc('\n', stdout);
            return report_error(r.error().message, kExitFailure);
        }
        ++n_forward;
        if (draft.empty()) {
            observe(base, 1, -1);
            next.assign(1, sampler.sample({ctx.logits(-1), n_vocab}, history));
            continue;
        }
        const std::span<const float> rows(ctx.logits(0), feed.size() * n_vocab);
        engine::VerifyResult v =
            engine::verify_draft(sampler, rows, static_cast<int32_t>(n_vocab), history, draft);
        ++n_spec_steps;
        n_drafted += static_cast<int>(draft.size());
        n_accepted += v.n_accepted;
        draft_len.update(static_cast<int32_t>(draft.size()), v.n_accepted);
        ctx.truncate(base + 1 + v.n_accepted);  // rejected drafts' K/V are dropped
        observe(base, 1 + v.n_accepted, 0);     // the rows kept: pending token, accepted drafts
        next = std::move(v.tokens);
    }
    const bool interrupted = sigint.fired();
    write_out(stream.finish());
    std::fputc('\n', stdout);
    std::fflush(stdout);
    const double s_decode = n_decode > 0 ? seconds_since(t_decode) : 0.0;
    if (interrupted)
        std::fprintf(stderr, "zinc: interrupted after %d generated token%s\n", n_gen,
                     n_gen == 1 ? "" : "s");
    if (context_full)
        std::fprintf(stderr, "zinc: stopped: the context (%d positions) is full\n", ctx.n_ctx());
    if (!log_info()) return interrupted ? kExitInterrupted : kExitOk;
    // What ran where (docs/runtime.md); the timing line stays the last line.
    std::fprintf(stderr, "%s\n", runtime::evidence_line(rc.evidence->snapshot()).c_str());
    if (spec.drafter)
        std::fprintf(
            stderr,
            "speculative: %s, %d drafted, %d accepted (%.1f%%), %.2f tokens per "
            "verification, %d forwards for %d tokens\n",
            spec.drafter->name(), n_drafted, n_accepted,
            n_drafted > 0 ? 100.0 * n_accepted / n_drafted : 0.0,
            n_spec_steps > 0 ? static_cast<double>(n_accepted + n_spec_steps) / n_spec_steps : 0.0,
            n_forward, n_decode);
    // Decode counts the tokens decode forwards produced (without speculation one per forward,
    // an end-of-generation token included, as before; with it, kept drafts too); its time
    // includes sampling and streaming, as a user experiences it.
    std::fprintf(stderr,
                 "prefill: %d tok in %.2f s (%.1f tok/s) | decode: %d tok in %.2f s (%.1f tok/s)\n",
                 n_prompt, s_prefill, rate(n_prompt, s_prefill), n_decode, s_decode,
                 rate(n_decode, s_decode));
    return interrupted ? kExitInterrupted : kExitOk;
}

// A prompt file (or stdin) as llama.cpp's -f reads it: the bytes as they are, one trailing
// newline dropped. Larger than this is refused before it is read (no context holds it).
constexpr size_t kMaxPromptBytes = size_t{256} << 20;

bool read_all(std::FILE* f, std::string& out) {
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) {
        out.append(buf, n);
        if (out.size() > kMaxPromptBytes) return false;
    }
    return true;
}

// "" when read; else the error line.
std::string read_prompt(const std::string& path, std::string& out) {
    const bool from_stdin = path == "-";
    const std::string what = from_stdin ? "-f - (stdin)" : "-f " + path;
    std::FILE* f = stdin;
    if (!from_stdin) {
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) return what + ": cannot open: " + std::strerror(errno);
        if (S_ISDIR(st.st_mode)) return what + ": is a directory, expected a text file";
        if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > kMaxPromptBytes)
            return what + ": " + std::to_string(st.st_size) +
                   " bytes; prompts over 256 MiB are refused";
        f = std::fopen(path.c_str(), "rb");
        if (f == nullptr) return what + ": cannot open: " + std::strerror(errno);
    }
    const bool ok = read_all(f, out);
    const bool err = std::ferror(f) != 0;
    if (!from_stdin) std::fclose(f);
    if (!ok) return what + ": over 256 MiB; prompts that large are refused";
    if (err) return what + ": read error";
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return "";
}

// Piped or redirected stdin (a pipe or a regular file; not a terminal, not /dev/null) is the
// prompt when none is given.
bool stdin_has_data() {
    struct stat st {};
    if (::fstat(STDIN_FILENO, &st) != 0) return false;
    return S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode);
}

}  // namespace

int run_main(int argc, char** argv) {
    RunOptions o;
    CLI::App app{"zinc: run a GGUF language model on the CPU or an NVIDIA GPU (--tier)", "zinc"};
    app.footer(
        "Subcommands: zinc chat [-m FILE] | zinc serve [-m FILE] | zinc inspect FILE | zinc bench "
        "[-m FILE] | zinc synth --preset P -o FILE (each has --help).\n"
        "zinc -m FILE without --prompt or -f serves the model over HTTP, like zinc serve -m "
        "FILE (and says so); with -n, --chat etc. a piped stdin is the prompt.\n"
        "llama.cpp spellings (-ngl, --ctx-size, -f, -sys, ...) work; docs/cli.md has the table.\n"
        "With no -m, the default model (SmolLM2-135M-Instruct Q4_1) is used, pulled on "
        "first use. Models: zinc pull NAME | zinc list [--catalog] | zinc rm NAME | zinc ps; "
        "-m takes a path or a model name.");
    app.add_option("-m,--model", o.model_path,
                   "GGUF model file, or a model name (zinc list; default: SmolLM2-135M-Instruct)");
    auto* prompt_opt = app.add_option("-p,--prompt", o.prompt,
                                      "prompt text (special-token text is recognised; with --chat "
                                      "it is message text, never control tokens)");
    app.add_option("-f,--file", o.prompt_file,
                   "read the prompt from FILE ('-': stdin; one trailing newline is dropped). "
                   "Without --prompt or -f, a piped stdin is the prompt")
        ->excludes(prompt_opt);
    app.add_option("-n,--n-predict", o.n_predict,
                   "tokens to generate; -1: until end of generation or a full context")
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
    add_spec_flags(app, o.spec);
    app.add_flag("--chat", o.chat,
                 "send the prompt as a user turn through the model's chat template (the "
                 "reply alone is printed); the prompt and --system are data: special-token text "
                 "in them stays text");
    app.add_option("--system,--system-prompt", o.system, "system message for --chat");
    app.add_option("--stop", o.stops,
                   "stop string (repeatable): generation stops when the text contains it; it is "
                   "not printed");
    app.add_flag("--raw", o.raw,
                 "use the prompt verbatim: special-token text (e.g. <|im_start|>) is plain text");
    app.add_flag("--no-think", o.no_think,
                 "with --chat: pass enable_thinking=false to the template (Qwen3-style)");
    app.add_flag(
        "--no-echo,--no-display-prompt", [&](int64_t) { o.echo = false; },
        "do not print the prompt");
    app.add_flag("--exact", o.exact,
                 "the CUDA tier computes the CPU tier's exact bits (slower; default: ZINC_EXACT, "
                 "else the fast kernels)");
    app.add_option("--tier", o.tier,
                   "execution tier: auto, cuda or cpu (default: ZINC_TIER, else auto)");
    app.add_option("-d,--device", o.device,
                   "CUDA device index for the cuda tier (default: ZINC_DEVICE, else 0)")
        ->check(int_in(0, 1023));
    add_gpu_layers_flag(app, o.gpu_layers);
    add_tensor_parallel_flags(app, o.tp_flags);
    add_verbosity_flags(app);
    app.add_flag("--check", o.check, "check host, model and memory fit; print READY/WARN/FAIL");
    app.add_flag("--version", o.version, "print version, build flags and CPU features");
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;

    if (o.version) {
        std::printf("%s\n", version_line().c_str());
        std::printf("build: %s\n", build_description().c_str());
        std::printf("kernels: %s (chosen at run time; ZINC_SIMD=0 forces the scalar ones)\n",
                    quant::simd_level());
        std::printf("cuda: %s\n", cuda::build_info().c_str());
        HostInfo h = probe_host();
        std::string feats;
        for (const auto& f : h.cpu_features) feats += " " + f;
        std::printf("cpu: %s, %d threads, features:%s\n", h.cpu_model.c_str(), h.n_threads,
                    feats.c_str());
        return kExitOk;
    }
    if (auto e = apply_gpu_layers(o.gpu_layers, o.tier); !e.empty()) return report_error(e);
    if (auto e = apply_tensor_parallel(o.tp_flags, o.tensor_parallel); !e.empty())
        return report_error(e);
    if (o.check) {
        // --check loads the model but never generates; a prompt or -n would be silently dropped.
        if (app.count("--prompt") || app.count("--file") || app.count("--n-predict") || o.chat)
            return report_error("--check does not generate; drop --prompt/-f/-n/--chat");
        CheckOptions c;
        c.model_path = o.model_path;
        c.n_ctx = o.n_ctx;
        c.n_threads = o.n_threads;
        c.tier = o.tier;
        c.device = o.device;
        return run_check(c);
    }
    if (app.count("--file")) {
        if (auto e = read_prompt(o.prompt_file, o.prompt); !e.empty()) return report_error(e);
    } else if (!app.count("--prompt")) {
        if (!stdin_has_data())
            return report_error(
                "no prompt: give --prompt TEXT, -f FILE or a piped stdin (-f - reads stdin); "
                "zinc chat for a conversation; zinc -m FILE alone serves the model over HTTP");
        if (auto e = read_prompt("-", o.prompt); !e.empty()) return report_error(e);
    }
    if (app.count("--system") && !o.chat)
        return report_error("--system is only used with --chat (the chat template's system turn)");
    if (o.raw && o.chat)
        return report_error("--raw and --chat exclude each other (--raw skips the chat template)");
    if (o.no_think && !o.chat)
        return report_error("--no-think is only used with --chat (a chat template variable)");
    finish_sampling_flags(seed_opt, o.sampling);
    return generate(o);
}

}  // namespace zinc::cli
