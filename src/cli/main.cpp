// zinc/cli/main.cpp — process entry: dispatch to a subcommand (inspect, bench, chat, synth, serve,
// and the model management commands pull, list/ls, rm, ps)
// or to the default generation command (run.cpp); `zinc -m FILE` without a prompt serves the
// model (and says so in one line) unless a flag only generation has (-f, -n, --chat, ...) is
// there. Each subcommand owns its own flags.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

#include "cli/cli.h"

namespace {

// Flags only the generation command has: with one of them, `zinc -m FILE` generates (the prompt
// from -f, or from a piped stdin) rather than serving.
bool has_generation_flag(int argc, char** argv) {
    static constexpr std::string_view kFlags[] = {"-f",
                                                  "--file",
                                                  "-n",
                                                  "--n-predict",
                                                  "--chat",
                                                  "--raw",
                                                  "--no-echo",
                                                  "--stop",
                                                  "--no-display-prompt",
                                                  "--system",
                                                  "-sys",
                                                  "--no-think",
                                                  "--system-prompt"};
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        a = a.substr(0, a.find('='));
        for (auto f : kFlags)
            if (a == f) return true;
        if (a.size() > 2 && a[0] == '-' && a[1] != '-' && (a[1] == 'n' || a[1] == 'f') &&
            a != "-ngl" && a != "-np" && a != "-no-cnv")
            return true;  // -n5, -fprompt.txt
    }
    return false;
}

int dispatch(int argc, char** argv) {
    using namespace zinc::cli;
    if (argc >= 2 && std::strcmp(argv[1], "inspect") == 0) return inspect_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "chat") == 0) return chat_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "bench") == 0) return bench_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "synth") == 0) return synth_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) return serve_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "pull") == 0) return pull_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "list") == 0) return list_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "ls") == 0) return list_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "rm") == 0) return rm_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "ps") == 0) return ps_main(argc - 1, argv + 1);
    if (serves_by_default(argc, argv) && !has_generation_flag(argc, argv)) {
        set_serving_by_default(true);
        return serve_main(argc, argv);
    }
    return run_main(argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
    // Allocations that can be large (the KV cache, scratch) are checked up front and caught where
    // they happen; this is the last resort, so an allocation failure anywhere is still one line
    // and status 2 rather than an abort.
    // NVLink multicast (NVLS) stays off in every process zinc starts, as the device machines'
    // docs require; the multi-GPU tensor-parallel path (docs/cuda.md) would use NCCL.
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    try {
        return dispatch(argc, argv);
    } catch (const std::bad_alloc&) {
        std::fflush(stdout);
        return zinc::cli::report_error(
            "out of memory (an allocation failed); lower -c/--context or free memory");
    }
}
