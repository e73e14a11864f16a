// zinc/server/metrics.h — the server's Prometheus metrics: request counters by endpoint and
// status, token counters, latency histograms (TTFT, TPOT, ITL, end-to-end), and the engine's
// gauges and prefix-cache counters read from EngineStats at scrape time.
//
// Text exposition format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats): one
// "# HELP" and "# TYPE" line per family; histograms as cumulative _bucket{le=...}, _sum, _count.
// Names are listed in docs/server.md ("Metrics"). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace zinc::server {

/// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
  public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double v);
    /// Lines of the family `name` (without HELP/TYPE).
    void render(const std::string& name, std::string& out) const;
    uint64_t count() const { return count_; }
    double sum() const { return sum_; }

  private:
    std::vector<double> bounds_;    // ascending upper bounds; +Inf is implicit
    std::vector<uint64_t> counts_;  // (bounds + 1) per-bucket (not cumulative) counts
    uint64_t count_ = 0;
    double sum_ = 0;
};

class Metrics {
  public:
    Metrics();

    /// One finished HTTP request. `endpoint` is a known route or "other".
    void count_request(const std::string& endpoint, int status);
    /// Tokens of one finished generation request (all its choices).
    void count_tokens(uint64_t prompt, uint64_t generated);
    void observe_ttft(double s);
    void observe_itl(double s);
    void observe_tpot(double s);
    void observe_e2e(double s);
    void count_disconnect();

    /// The whole exposition text, with the engine's gauges and counters from `st`.
    std::string render(const engine::EngineStats& st) const;

  private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, disconnects_ = 0;
    Histogram ttft_, itl_, tpot_, e2e_;
};

}  // namespace zinc::server
