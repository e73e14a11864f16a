// zinc/cli/host_info.h — what the machine and this binary are: CPU model, hardware threads, SIMD
// features (the CPU's, and those the binary was compiled to require), memory, and build flags.
// Used by --version, --check and bench.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zinc::cli {

struct HostInfo {
    std::string cpu_model;                    // /proc/cpuinfo "model name" ("unknown" if absent)
    int n_threads = 1;                        // hardware threads
    std::vector<std::string> cpu_features;    // SIMD features this CPU has (cpuid)
    std::vector<std::string> build_features;  // SIMD features the binary was compiled to use
    std::vector<std::string> missing;         // build_features the CPU lacks (must be empty)
    uint64_t mem_total = 0;                   // bytes, /proc/meminfo MemTotal (0: unknown)
    uint64_t mem_available = 0;               // bytes, /proc/meminfo MemAvailable (0: unknown)
};

HostInfo probe_host();

/// One line: compiler, optimisation, -march features, build type.
std::string build_description();

/// Version line: "zinc 0.1.0 (commit abc1234)" (commit omitted when unknown).
std::string version_line();

/// Peak resident set size of this process so far, bytes (/proc/self/status VmHWM, else
/// getrusage ru_maxrss).
uint64_t peak_rss_bytes();

/// "93.8 MiB" style.
std::string format_bytes(uint64_t n);

}  // namespace zinc::cli
