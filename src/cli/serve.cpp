// zinc/cli/serve.cpp — `zinc serve -m FILE` (and `zinc -m FILE` without a prompt): load the
// model, start the engine (continuous batching over a paged KV cache) and the OpenAI-compatible
// HTTP server (src/server), print one "listening on" line, and run until SIGINT/SIGTERM, which
// refuse new requests (503), let in-flight ones finish for --shutdown-timeout seconds, cancel the
// rest and exit 0. Flags and endpoints: docs/server.md.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/chat_prompt.h"
#include "cli/cli.h"
#include "cli/default_model.h"
#include "cli/host_info.h"
#include "cli/llama_compat.h"
#include "cli/model_loader.h"
#include "cli/sampling_flags.h"
#include "cli/server_registry.h"
#include "cli/spec_flags.h"
#include "cli/validators.h"
#include "engine/engine.h"
#include "model/config.h"
#include "model/pooling.h"
#include "runtime/checked_runner.h"
#include "server/http_server.h"
#include "server/tenancy.h"

namespace zinc::cli {

namespace {

struct ServeOptions {
    std::string model_path;  // empty: the default model
    std::string host = "127.0.0.1";
    int port = 8080;
    int n_parallel = 4;
    int n_ctx = 4096;  // per sequence; 0: the model's training context
    int kv_blocks = 0;
    double kv_memory_mib = 0;
    int block_size = 16;
    int max_batch_tokens = 512;
    double tpot_target_ms = 0;
    int min_prefill_chunk = 16;
    int batch_prefill_chunk = 128;
    double interactive_guard = 0.5;
    bool no_class_prefill = false;
    int n_threads = 0;
    int max_queue = 256;
    bool no_prefix_cache = false;
    bool batch_invariant = false;
    std::vector<std::string> api_keys;
    std::string tenants_path;  // --tenants: the tenants config (docs/server.md, "Tenants")
    std::string alias;
    bool strict_model = false;
    double max_body_mib = 8;
    int http_threads = 0;
    engine::SamplerOptions sampling;
    std::string tier;               // --tier; empty: ZINC_TIER, else auto (runtime/tier.h)
    bool exact = false;             // --exact
    int device = -1;                // -d/--device; < 0: ZINC_DEVICE, else 0
    std::string cors_origin = "*";  // Access-Control-Allow-Origin; "": no CORS headers
    std::string gpu_layers;         // -ngl N (llama_compat.h)
    TensorParallelFlags tp_flags;   // --tensor-parallel/-tp, -sm, -ts (llama_compat.h)
    int tensor_parallel = 0;        // apply_tensor_parallel: 0 off, -1 every device
    double shutdown_timeout_s = 0;  // SIGINT/SIGTERM: in-flight requests may finish this long
    SpecFlags spec;                 // --spec, --draft, --spec-max (cli/spec_flags.h)
    std::string pooling;  // --pooling mean|cls|last for /v1/embeddings; "": the file's, else mean
};

std::string format_mib(size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
    return buf;
}

// The served model's name: --alias, else the file name without ".gguf".
std::string model_id_for(const std::string& path, const std::string& alias) {
    if (!alias.empty()) return alias;
    std::string name = std::filesystem::path(path).filename().string();
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0)
        name.resize(name.size() - 5);
    return name;
}

int serve(const ServeOptions& o, const CLI::Option* seed_opt) {
    // A busy port fails before the model is loaded: one line, status 2 (docs/server.md).
    if (o.port != 0)
        if (auto ok = server::check_listen_address(o.host, o.port); !ok)
            return report_error(ok.error().message);
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

    int n_ctx = o.n_ctx > 0 ? o.n_ctx : m.model->n_ctx_train();
    // An encoder (bert) has absolute position embeddings for n_ctx_train positions only.
    if (!m.model->has_lm_head() && n_ctx > m.model->n_ctx_train()) n_ctx = m.model->n_ctx_train();
    model::Pooling pooling =
        model::pooling_from_gguf(m.model->pooling_type()).value_or(model::Pooling::Mean);
    if (!o.pooling.empty()) pooling = *model::parse_pooling(o.pooling);
    const size_t block_bytes = m.model->kv_cache_bytes(o.block_size);
    int kv_blocks = o.kv_blocks;
    if (kv_blocks == 0 && o.kv_memory_mib > 0) {
        kv_blocks =
            static_cast<int>(o.kv_memory_mib * 1024 * 1024 / static_cast<double>(block_bytes));
        if (kv_blocks < 1)
            return report_error("--kv-memory " + fmt_real(o.kv_memory_mib) +
                                " MiB holds no KV block of " + format_mib(block_bytes));
    }
    const int blocks_per_seq = (n_ctx + o.block_size - 1) / o.block_size;
    if (kv_blocks > 0 && kv_blocks < blocks_per_seq)
        return report_error("the KV pool of " + std::to_string(kv_blocks) + " blocks (" +
                            std::to_string(kv_blocks * o.block_size) +
                            " positions) cannot hold one full sequence of --context " +
                            std::to_string(n_ctx) + "; raise --kv-blocks/--kv-memory or lower -c");
    const int planned_blocks = kv_blocks > 0 ? kv_blocks : blocks_per_seq * o.n_parallel;
    if (auto fit = check_memory_fit(*m.model, m.file->file_size(), planned_blocks * o.block_size,
                                    "--kv-blocks/--kv-memory, -c/--context or --parallel");
        !fit)
        return report_error("KV pool of " + std::to_string(planned_blocks) +
                            " blocks: " + fit.error().message);
    warn_if_oversubscribed(o.n_threads);
    if (n_ctx > m.model->n_ctx_train())
        std::fprintf(stderr,
                     "zinc: warning: -c %d exceeds the model's trained context of %d; quality "
                     "will degrade past it\n",
                     n_ctx, m.model->n_ctx_train());

    engine::EngineOptions eo;
    eo.n_parallel = o.n_parallel;
    eo.n_ctx = n_ctx;
    eo.n_kv_blocks = kv_blocks;
    eo.block_size = o.block_size;
    eo.max_batch_tokens = o.max_batch_tokens;
    eo.tpot_target_ms = o.tpot_target_ms;
    eo.min_prefill_chunk = o.min_prefill_chunk;
    eo.batch_prefill_chunk = o.batch_prefill_chunk;
    eo.class_aware_prefill = !o.no_class_prefill;
    eo.interactive_guard = o.interactive_guard;
    eo.max_queue = o.max_queue;
    eo.prefix_cache = !o.no_prefix_cache;
    eo.batch_invariant = o.batch_invariant;
    eo.n_threads = n_threads;
    for (int32_t id = 0; id < m.tok->n_vocab(); ++id)
        if (m.tok->is_eog(id)) eo.eog_tokens.push_back(id);
    // From here on SIGINT/SIGTERM are taken by one waiting thread (sigwait), not by whichever
    // thread they hit: every thread created below inherits the blocked mask (the NextN drafter's
    // thread pool, started by open_spec, included). A write to a client
    // that has gone must fail with EPIPE, not kill the process.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);  // reload the tenants config (ignored without one)
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    signal(SIGPIPE, SIG_IGN);

    // Speculative decoding (--spec, ZINC_SPEC): docs/speculative.md.
    auto spec_r = open_spec(o.spec, std::getenv("ZINC_SPEC"), m, n_ctx, n_threads, o.n_parallel);
    if (!spec_r) return report_error(spec_r.error().message);
    SpecSetup spec = std::move(spec_r.value());
    eo.drafter = spec.drafter;
    eo.spec_max = spec.spec_max;

    // Tenants: the config is read before the engine starts (its policy is the engine's).
    std::shared_ptr<server::Tenancy> tenancy;
    if (!o.tenants_path.empty()) {
        auto t = server::Tenancy::create(o.tenants_path, o.block_size);
        if (!t) return report_error(t.error().message);
        tenancy = std::move(t.value());
        eo.policy = tenancy->policy();
    }

    // The Runner on the chosen tier, with its evidence (/health, /metrics): runtime/.
    auto ropts =
        runtime::runtime_options(o.tier, o.device, [](const char* k) { return std::getenv(k); });
    if (!ropts) return report_error(ropts.error().message);
    if (o.exact) ropts.value().exact = true;
    ropts.value().tensor_parallel = o.tensor_parallel;
    std::shared_ptr<runtime::Evidence> evidence;
    runtime::TierChoice tier_choice;
    runtime::DeviceMemory device_memory;
    eo.make_runner = [&](const model::RunnerOptions& ro) -> Result<std::unique_ptr<model::Runner>> {
        auto tr = runtime::create_tiered_runner(*m.model, ro, ropts.value());
        if (!tr) return tr.error();
        evidence = tr->evidence;
        tier_choice = tr->choice;
        device_memory = tr->device_memory;
        return std::move(tr->runner);
    };
    // Per-request evidence: after each step the engine reads what that step did.
    eo.step_evidence = [&evidence]() {
        return evidence ? evidence->last_step() : runtime::StepRecord{};
    };
    auto eng = engine::Engine::create(*m.model, eo);
    if (!eng) return report_error(eng.error().message);
    engine::Engine& engine = *eng.value();
    note_serving_by_default();  // `zinc -m FILE` without a prompt: say that it serves
    if (log_info())
        std::fprintf(stderr, "zinc: tier %s: %s\n", runtime::to_string(tier_choice.tier),
                     tier_choice.reason.c_str());

    server::ServedModel sm;
    sm.engine = &engine;
    sm.tok = m.tok.get();
    const chat::ChatTemplate chat_tmpl = tmpl.value();
    const LoadedModel* lm = &m;
    sm.render_chat = [lm, chat_tmpl](const std::vector<chat::Message>& msgs,
                                     const server::ChatRenderOptions& ro) {
        return chat_tokens(*lm, chat_tmpl, msgs, ro.enable_thinking);
    };
    sm.render_chat_tools = [lm, chat_tmpl](const std::vector<chat::Message>& msgs,
                                           const chat::Value& tools,
                                           const server::ChatRenderOptions& ro) {
        return chat_tokens(*lm, chat_tmpl, msgs, ro.enable_thinking, &tools);
    };
    sm.chat_template_source = m.chat_template.text;
    sm.chat_stop_strings = template_stop_strings(m);
    sm.kv_block_bytes = block_bytes;
    sm.pooling = pooling;
    sm.embedding_dim = m.model->config().n_embd;
    sm.evidence = evidence;
    sm.device_memory_json = runtime::device_memory_json(device_memory);
    // /v1/models `created`: the model file's modification time (else the start time).
    if (struct stat st{}; stat(path.c_str(), &st) == 0)
        sm.created = static_cast<int64_t>(st.st_mtime);
    server::ServerOptions so;
    so.host = o.host;
    so.port = o.port;
    so.api_keys = o.api_keys;
    so.tenancy = tenancy;
    if (const char* env = std::getenv("ZINC_API_KEY"); env && *env) so.api_keys.push_back(env);
    so.max_body_bytes = static_cast<size_t>(o.max_body_mib * 1024 * 1024);
    so.http_threads = o.http_threads;
    so.cors_origin = o.cors_origin;
    // -m NAME serves under that name (as ollama does), a path under its file name.
    so.model_id = model_id_for(path, o.alias.empty() ? how.name : o.alias);
    so.strict_model = o.strict_model;
    so.sampling = o.sampling;
    if (seed_opt->count() > 0) so.default_seed = o.sampling.seed;
    auto srv = server::HttpServer::create(std::move(sm), so);
    if (!srv) {
        engine.shutdown();
        return report_error(srv.error().message);
    }
    server::HttpServer& http = *srv.value();

    const engine::EngineStats st = engine.stats();
    std::fprintf(stderr,
                 "zinc: listening on http://%s:%d (model '%s', %d slots x %d positions, %d KV "
                 "blocks of %d = %s, prefix cache %s, speculative %s%s)\n",
                 o.host.c_str(), http.port(), so.model_id.c_str(), eo.n_parallel, n_ctx,
                 st.kv_blocks_total, eo.block_size,
                 format_mib(static_cast<size_t>(st.kv_blocks_total) * block_bytes).c_str(),
                 eo.prefix_cache ? "on" : "off", engine::to_string(spec.mode),
                 so.api_keys.empty() && !tenancy ? "" : ", API key required");
    std::fflush(stderr);
    // zinc ps lists this server, and zinc rm refuses its model, until it stops.
    ServerRegistration registration(o.host, http.port(), so.model_id, path);

    std::thread waiter([&] {
        int sig = 0;
        while (sigwait(&sigs, &sig) == 0 && sig == SIGHUP) {
            if (!tenancy) {
                std::fprintf(stderr, "zinc: SIGHUP: no --tenants file to reload\n");
            } else if (auto r = tenancy->reload(); r) {
                std::fprintf(stderr, "zinc: SIGHUP: reloaded %s\n", tenancy->path().c_str());
            } else {
                std::fprintf(stderr, "zinc: SIGHUP: %s (the previous tenants config stays)\n",
                             r.error().message.c_str());
            }
            std::fflush(stderr);
        }
        const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        // Drain: new requests get 503 (a balancer moves on), what is in flight may finish for
        // --shutdown-timeout seconds; a second signal or the timeout cancels the rest, whose
        // streams end with an error event and [DONE] (docs/server.md, docs/deploy.md).
        http.begin_drain();
        const int at_signal = http.in_flight();
        if (o.shutdown_timeout_s > 0 && at_signal > 0) {
            std::fprintf(stderr,
                         "zinc: %s: draining %d request(s) in flight for up to %g s (new requests "
                         "get 503; a second signal cancels them)\n",
                         name, at_signal, o.shutdown_timeout_s);
            std::fflush(stderr);
            const auto end = std::chrono::steady_clock::now() +
                             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(o.shutdown_timeout_s));
            const timespec poll{0, 20 * 1000 * 1000};
            while (http.in_flight() > 0 && std::chrono::steady_clock::now() < end)
                if (sigtimedwait(&sigs, nullptr, &poll) > 0) break;
        }
        const int left = http.in_flight();
        std::fprintf(stderr, "zinc: %s: shutting down (%d in-flight request(s) cancelled)\n", name,
                     left);
        engine.shutdown();  // every pending request ends Cancelled; open streams end
        http.drain(std::chrono::seconds(3));  // ... with an error event and [DONE]
        http.stop();
    });
    const bool ok = http.run();
    if (!ok) {
        // The accept loop failed on its own: wake the waiter so it shuts the engine down.
        pthread_kill(waiter.native_handle(), SIGTERM);
    }
    waiter.join();
    engine.shutdown();
    const engine::EngineStats end = engine.stats();
    std::fprintf(stderr, "zinc: stopped after %llu requests (%llu cancelled)\n",
                 static_cast<unsigned long long>(end.requests_finished + end.requests_cancelled),
                 static_cast<unsigned long long>(end.requests_cancelled));
    return ok ? kExitOk : kExitFailure;
}

}  // namespace

bool serves_by_default(int argc, char** argv) {
    bool model = false;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "-p" || a == "--prompt" || a.starts_with("--prompt=") || a == "--check" ||
            a == "--version" || a == "-h" || a == "--help")
            return false;
        if (a == "-m" || a == "--model" || a.starts_with("--model=")) model = true;
    }
    return model;
}

int serve_main(int argc, char** argv) {
    ServeOptions o;
    CLI::App app{"zinc serve: an OpenAI-compatible HTTP server (continuous batching, paged KV)",
                 "zinc serve"};
    app.footer(
        "Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, "
        "GET /health, GET /metrics, POST /tokenize, POST /detokenize (docs/server.md).");
    app.add_option("-m,--model", o.model_path,
                   "GGUF model file, or a model name (zinc list; default: SmolLM2-135M-Instruct)");
    app.add_option("--host", o.host, "address to listen on")->capture_default_str();
    app.add_option("--port", o.port, "TCP port; 0: any free port")
        ->check(int_in(0, 65535))
        ->capture_default_str();
    app.add_option("--parallel", o.n_parallel, "sequences running at once (slots)")
        ->check(int_in(1, 1024))
        ->capture_default_str();
    app.add_option("-c,--context", o.n_ctx,
                   "positions per sequence (prompt + generated); 0: the model's own")
        ->check(int_in(0, 1 << 24))
        ->capture_default_str();
    auto* kvb = app.add_option("--kv-blocks", o.kv_blocks,
                               "KV cache blocks in the pool; default: --parallel full contexts")
                    ->check(int_in(1, 1 << 24));
    app.add_option("--kv-memory", o.kv_memory_mib,
                   "KV cache budget in MiB (instead of --kv-blocks)")
        ->check(real_in(0.001, 1 << 24))
        ->excludes(kvb);
    app.add_option("--block-size", o.block_size, "positions per KV block")
        ->check(int_in(1, 4096))
        ->capture_default_str();
    app.add_option("--max-batch-tokens", o.max_batch_tokens,
                   "token budget of one engine step (decodes + prefill chunks)")
        ->check(int_in(1, 1 << 20))
        ->capture_default_str();
    app.add_option("--tpot-target", o.tpot_target_ms,
                   "target ms per engine step (= per output token of a running stream): each "
                   "step's row budget comes from a cost model fitted to measured steps, decodes "
                   "first, prefill chunks in the rest; 0: off (every step may take "
                   "--max-batch-tokens)")
        ->check(real_in(0, 60000))
        ->capture_default_str();
    app.add_option("--min-prefill-chunk", o.min_prefill_chunk,
                   "prefill rows a step may always add to its decodes under --tpot-target, "
                   "and batch prefill rows under --interactive-guard")
        ->check(int_in(1, 1 << 20))
        ->capture_default_str();
    app.add_option("--batch-prefill-chunk", o.batch_prefill_chunk,
                   "with --tenants: prefill rows that batch-class requests together may run in "
                   "one step (interactive prefill goes first, then standard, batch takes what "
                   "is left up to this); 0: no cap")
        ->check(int_in(0, 1 << 20))
        ->capture_default_str();
    app.add_option("--interactive-guard", o.interactive_guard,
                   "with --tenants: a step with interactive prefill carries no batch-class rows, "
                   "and while an interactive tenant is active batch prefill keeps each step "
                   "within this fraction of the last interactive step (by the step cost model; "
                   "at least --min-prefill-chunk rows); 0: off")
        ->check(real_in(0, 1))
        ->capture_default_str();
    app.add_flag("--no-class-prefill", o.no_class_prefill,
                 "split prefill chunks alike over all classes (no tiers, no batch cap)");
    app.add_option("-t,--threads", o.n_threads, "threads; 0: all hardware threads")
        ->check(int_in(0, 1024))
        ->capture_default_str();
    app.add_option("--max-queue", o.max_queue,
                   "requests waiting for a slot beyond which new ones get 429")
        ->check(int_in(0, 1 << 20))
        ->capture_default_str();
    app.add_option("--pooling", o.pooling,
                   "pooling of /v1/embeddings: mean, cls or last (default: the model file's "
                   "pooling_type, else mean)")
        ->check(CLI::IsMember({"mean", "cls", "last"}));
    app.add_flag("--no-prefix-cache", o.no_prefix_cache,
                 "do not reuse KV blocks of shared prefixes");
    app.add_flag("--batch-invariant", o.batch_invariant,
                 "results at temperature 0 independent of batching (on the CUDA tier: the exact "
                 "kernels, slower; docs/server.md)");
    app.add_flag("--exact", o.exact,
                 "the CUDA tier computes the CPU tier's exact bits (slower; default: ZINC_EXACT, "
                 "else the fast kernels)");
    app.add_option("--tier", o.tier,
                   "execution tier: auto, cuda or cpu (default: ZINC_TIER, else auto)");
    app.add_option("-d,--device", o.device,
                   "CUDA device index for the cuda tier (default: ZINC_DEVICE, else 0)")
        ->check(int_in(0, 1023));
    app.add_option("--cors-origin", o.cors_origin,
                   "Access-Control-Allow-Origin of every response and preflight; '' turns CORS "
                   "headers off")
        ->capture_default_str();
    app.add_option("--api-key", o.api_keys,
                   "require 'Authorization: Bearer KEY' (repeatable; also $ZINC_API_KEY)");
    app.add_option("--tenants", o.tenants_path,
                   "tenants config (TOML): API keys per tenant, QoS class, weight, quotas, usage "
                   "ledger; reloaded on SIGHUP (docs/server.md, \"Tenants\")");
    app.add_option("--alias", o.alias, "model id clients use (default: the file name)");
    app.add_flag(
        "--strict-model", o.strict_model,
        "refuse requests naming another model (404) instead of serving them with the loaded one");
    app.add_option("--max-body", o.max_body_mib, "largest request body in MiB (larger: 413)")
        ->check(real_in(0.001, 1024))
        ->capture_default_str();
    app.add_option("--http-threads", o.http_threads,
                   "connection threads (each open connection holds one); 0: automatic")
        ->check(int_in(0, 4096))
        ->capture_default_str();
    app.add_option("--shutdown-timeout", o.shutdown_timeout_s,
                   "on SIGINT/SIGTERM, seconds in-flight requests may finish (new ones get 503) "
                   "before the rest are cancelled; 0: cancel at once")
        ->check(real_in(0, 86400))
        ->capture_default_str();
    add_spec_flags(app, o.spec);
    auto* seed_opt = add_sampling_flags(app, o.sampling);
    seed_opt->description("seed for requests that give none (default: a random one each)");
    add_gpu_layers_flag(app, o.gpu_layers);
    add_tensor_parallel_flags(app, o.tp_flags);
    add_verbosity_flags(app);  // -q: no tier line (the listening line stays)
    if (int rc = parse_args(app, argc, argv); rc >= 0) return rc;
    if (auto e = apply_gpu_layers(o.gpu_layers, o.tier); !e.empty()) return report_error(e);
    if (auto e = apply_tensor_parallel(o.tp_flags, o.tensor_parallel); !e.empty())
        return report_error(e);
    return serve(o, seed_opt);
}

}  // namespace zinc::cli
