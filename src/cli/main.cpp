// zinc/cli/main.cpp — process entry: dispatch to a subcommand (inspect, bench) or to the default
// generation command (run.cpp). Each subcommand owns its own flags.
#include <cstring>

#include "cli/cli.h"

int main(int argc, char** argv) {
    using namespace zinc::cli;
    if (argc >= 2 && std::strcmp(argv[1], "inspect") == 0) return inspect_main(argc - 1, argv + 1);
    if (argc >= 2 && std::strcmp(argv[1], "bench") == 0) return bench_main(argc - 1, argv + 1);
    return run_main(argc, argv);
}
