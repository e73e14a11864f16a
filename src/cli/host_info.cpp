// zinc/cli/host_info.cpp — probing the host (cpuid via the compiler's builtins, /proc) and
// describing the build (predefined macros, version and commit from CMake).
#include "cli/host_info.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#if __has_include("zinc_git_commit.h")
#include "zinc_git_commit.h"  // ZINC_GIT_COMMIT, generated at build time (git_commit.cmake)
#endif

namespace zinc::cli {

namespace {

struct Feature {
    const char* name;
    bool cpu;
    bool build;
};

// What the compiler was told it may use (-march): the predefined feature macros.
#ifdef __SSE4_2__
constexpr bool kBuildSse42 = true;
#else
constexpr bool kBuildSse42 = false;
#endif
#ifdef __AVX__
constexpr bool kBuildAvx = true;
#else
constexpr bool kBuildAvx = false;
#endif
#ifdef __AVX2__
constexpr bool kBuildAvx2 = true;
#else
constexpr bool kBuildAvx2 = false;
#endif
#ifdef __FMA__
constexpr bool kBuildFma = true;
#else
constexpr bool kBuildFma = false;
#endif
#ifdef __F16C__
constexpr bool kBuildF16c = true;
#else
constexpr bool kBuildF16c = false;
#endif
#ifdef __BMI2__
constexpr bool kBuildBmi2 = true;
#else
constexpr bool kBuildBmi2 = false;
#endif
#ifdef __AVX512F__
constexpr bool kBuildAvx512f = true;
#else
constexpr bool kBuildAvx512f = false;
#endif
#ifdef __AVX512BW__
constexpr bool kBuildAvx512bw = true;
#else
constexpr bool kBuildAvx512bw = false;
#endif
#ifdef __AVX512VNNI__
constexpr bool kBuildAvx512vnni = true;
#else
constexpr bool kBuildAvx512vnni = false;
#endif

std::vector<Feature> features() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // __builtin_cpu_supports needs a string literal, so the table is spelled out.
    return {
        {"sse4.2", __builtin_cpu_supports("sse4.2") != 0, kBuildSse42},
        {"avx", __builtin_cpu_supports("avx") != 0, kBuildAvx},
        {"avx2", __builtin_cpu_supports("avx2") != 0, kBuildAvx2},
        {"fma", __builtin_cpu_supports("fma") != 0, kBuildFma},
        {"f16c", __builtin_cpu_supports("f16c") != 0, kBuildF16c},
        {"bmi2", __builtin_cpu_supports("bmi2") != 0, kBuildBmi2},
        {"avx512f", __builtin_cpu_supports("avx512f") != 0, kBuildAvx512f},
        {"avx512bw", __builtin_cpu_supports("avx512bw") != 0, kBuildAvx512bw},
        {"avx512vnni", __builtin_cpu_supports("avx512vnni") != 0, kBuildAvx512vnni},
    };
#else
    return {};
#endif
}

uint64_t meminfo_kib(const std::string& text, const std::string& key) {
    auto p = text.find(key + ":");
    if (p == std::string::npos) return 0;
    return std::strtoull(text.c_str() + p + key.size() + 1, nullptr, 10);
}

}  // namespace

HostInfo probe_host() {
    HostInfo h;
    h.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    h.cpu_model = "unknown";
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
        if (line.rfind("model name", 0) == 0) {
            auto c = line.find(':');
            const auto v = c == std::string::npos ? c : line.find_first_not_of(" \t", c + 1);
            if (v != std::string::npos) h.cpu_model = line.substr(v);
            break;
        }
    }
    for (const auto& f : features()) {
        if (f.cpu) h.cpu_features.emplace_back(f.name);
        if (f.build) h.build_features.emplace_back(f.name);
        if (f.build && !f.cpu) h.missing.emplace_back(f.name);
    }
    std::ifstream mi("/proc/meminfo");
    std::string text((std::istreambuf_iterator<char>(mi)), std::istreambuf_iterator<char>());
    h.mem_total = meminfo_kib(text, "MemTotal") * 1024;
    h.mem_available = meminfo_kib(text, "MemAvailable") * 1024;
    return h;
}

std::string build_description() {
    std::string s = "g++ " __VERSION__;
#ifdef __clang__
    s = "clang " __clang_version__;
#endif
#ifdef __OPTIMIZE__
    s += ", optimised";
#else
    s += ", not optimised";
#endif
#ifdef NDEBUG
    s += ", NDEBUG";
#endif
#ifdef ZINC_BUILD_TYPE
    s += ", " ZINC_BUILD_TYPE;
#endif
    s += ", simd:";
    auto f = features();
    bool any = false;
    for (const auto& x : f)
        if (x.build) {
            s += std::string(" ") + x.name;
            any = true;
        }
    if (!any) s += " baseline only";
    return s;
}

std::string version_line() {
#ifdef ZINC_VERSION
    std::string s = "zinc " ZINC_VERSION;
#else
    std::string s = "zinc (unknown version)";
#endif
#ifdef ZINC_GIT_COMMIT
    if (std::string(ZINC_GIT_COMMIT).size() > 0) s += " (commit " ZINC_GIT_COMMIT ")";
#endif
    return s;
}

uint64_t peak_rss_bytes() {
    // VmHWM is this address space's high-water mark, reset by exec. getrusage's ru_maxrss is
    // not: Linux carries the parent's RSS at fork across exec, so a zinc started by a large
    // process (a test runner) would report the parent's size. getrusage is the fallback.
    {
        std::ifstream f("/proc/self/status");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind("VmHWM:", 0) == 0) {
                const unsigned long long kib = std::strtoull(line.c_str() + 6, nullptr, 10);
                if (kib > 0) return kib * 1024;
            }
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string format_bytes(uint64_t n) {
    char buf[64];
    const double d = static_cast<double>(n);
    if (n >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.2f GiB", d / (1ull << 30));
    else if (n >= (1ull << 20))
        std::snprintf(buf, sizeof buf, "%.1f MiB", d / (1ull << 20));
    else if (n >= 1024)
        std::snprintf(buf, sizeof buf, "%.1f KiB", d / 1024);
    else
        std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
    return buf;
}

}  // namespace zinc::cli
