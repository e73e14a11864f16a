// zinc/cli/validators.h — CLI11 validators for numeric flags with one-line messages: a value
// must parse completely, be finite, and lie in [lo, hi].
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zinc::cli {

inline std::string fmt_real(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

/// A real number in [lo, hi] ("nan", "inf" and trailing junk are rejected).
inline CLI::Validator real_in(double lo, double hi) {
    return CLI::Validator(
        [lo, hi](std::string& s) -> std::string {
            errno = 0;
            char* end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v))
                return "'" + s + "' is not a number";
            if (v < lo || v > hi)
                return s + " is out of range: expected " + fmt_real(lo) + " to " + fmt_real(hi);
            return "";
        },
        "[" + fmt_real(lo) + ", " + fmt_real(hi) + "]");
}

/// An integer in [lo, hi].
inline CLI::Validator int_in(long long lo, long long hi) {
    return CLI::Validator(
        [lo, hi](std::string& s) -> std::string {
            errno = 0;
            char* end = nullptr;
            const long long v = std::strtoll(s.c_str(), &end, 10);
            if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE)
                return "'" + s + "' is not an integer";
            if (v < lo || v > hi)
                return s + " is out of range: expected " + std::to_string(lo) + " to " +
                       std::to_string(hi);
            return "";
        },
        "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

}  // namespace zinc::cli
