// zinc/cli/main.cpp — process entry: dispatch to a subcommand (inspect, bench, chat, synth, serve)
// or to the default generation command (run.cpp); `zinc -m FILE` without a prompt serves the
// model. Each subcommand owns its own flags.
#include <cstdio>
#include <cstring>
#include <new>

#include "cli/cli.h"

namespace {

int dispatch(int argc, char** argv) {
    using namespace zinc::cli;
    if (argc >= 2 && std::strcmp(argv[1], "inspect") == 0) return inspect_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "chat") == 0) return chat_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "bench") == 0) return bench_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "synth") == 0) return synth_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "serve") == 0) return serve_main(argc - 1, argv + 1);
    if (serves_by_default(argc, argv)) return serve_main(argc, argv);
    return run_main(argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
    // Allocations that can be large (the KV cache, scratch) are checked up front and caught where
    // they happen; this is the last resort, so an allocation failure anywhere is still one line
    // and status 2 rather than an abort.
    try {
        return dispatch(argc, argv);
    } catch (const std::bad_alloc&) {
        std::fflush(stdout);
        return zinc::cli::report_error(
            "out of memory (an allocation failed); lower -c/--context or free memory");
    }
}
