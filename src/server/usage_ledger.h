// zinc/server/usage_ledger.h — the persistent per-tenant token ledger (SQLite, one file):
// tokens per UTC day and per UTC month, for the tokens_per_day / tokens_per_month quotas.
//
// One row per (tenant, period) where period is "D2026-12-01" or "M2026-12"; add() increments
// both rows of the current day and month in one IMMEDIATE transaction with UPSERTs
// (tokens = tokens + n), so concurrent adds, from threads or from processes sharing the file,
// never lose an update; WAL journal, a 5 s busy timeout. Survives restarts: it is the file.
// Thread-safe (one connection behind a mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "util/result.h"

struct sqlite3;

namespace zinc::server {

class UsageLedger {
  public:
    static Result<std::unique_ptr<UsageLedger>> open(const std::string& path);
    ~UsageLedger();
    UsageLedger(const UsageLedger&) = delete;
    UsageLedger& operator=(const UsageLedger&) = delete;

    /// Add n tokens for tenant at unix time `now` (its UTC day and month).
    Result<void> add(const std::string& tenant, int64_t n, int64_t now);
    /// Tokens of the tenant's UTC day / month containing `now`.
    Result<int64_t> day_tokens(const std::string& tenant, int64_t now);
    Result<int64_t> month_tokens(const std::string& tenant, int64_t now);
    const std::string& path() const { return path_; }

    static std::string day_key(int64_t now);    // "D2026-12-01"
    static std::string month_key(int64_t now);  // "M2026-12"
    /// Seconds from `now` to the next UTC midnight / first of the next month.
    static int64_t seconds_to_next_day(int64_t now);
    static int64_t seconds_to_next_month(int64_t now);

  private:
    UsageLedger(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
    Result<int64_t> get(const std::string& tenant, const std::string& period);
    Result<void> exec(const char* sql);

    std::mutex mu_;
    sqlite3* db_;
    std::string path_;
};

}  // namespace zinc::server
