// zinc/server/usage_ledger.cpp — see usage_ledger.h.
#include "server/usage_ledger.h"

#include <sqlite3.h>

#include <ctime>

namespace zinc::server {

namespace {

std::tm utc(int64_t now) {
    std::tm t{};
    const std::time_t tt = static_cast<std::time_t>(now);
    gmtime_r(&tt, &t);
    return t;
}

// A statement prepared for one use, finalized on scope exit.
struct Stmt {
    sqlite3_stmt* s = nullptr;
    ~Stmt() { sqlite3_finalize(s); }
};

}  // namespace

std::string UsageLedger::day_key(int64_t now) {
    const std::tm t = utc(now);
    char buf[32];
    std::strftime(buf, sizeof buf, "D%Y-%m-%d", &t);
    return buf;
}

std::string UsageLedger::month_key(int64_t now) {
    const std::tm t = utc(now);
    char buf[32];
    std::strftime(buf, sizeof buf, "M%Y-%m", &t);
    return buf;
}

int64_t UsageLedger::seconds_to_next_day(int64_t now) {
    return 86400 - (now % 86400 + 86400) % 86400;
}

int64_t UsageLedger::seconds_to_next_month(int64_t now) {
    std::tm t = utc(now);
    t.tm_mday = 1;
    t.tm_hour = t.tm_min = t.tm_sec = 0;
    t.tm_mon += 1;
    return static_cast<int64_t>(timegm(&t)) - now;
}

Result<std::unique_ptr<UsageLedger>> UsageLedger::open(const std::string& path) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
        const std::string m = db ? sqlite3_errmsg(db) : "out of memory";
        sqlite3_close(db);
        return make_error("usage ledger " + path + ": " + m);
    }
    std::unique_ptr<UsageLedger> l(new UsageLedger(db, path));
    sqlite3_busy_timeout(db, 5000);
    if (auto r = l->exec("PRAGMA journal_mode=WAL"); !r) return r.error();
    if (auto r = l->exec("CREATE TABLE IF NOT EXISTS usage (tenant TEXT NOT NULL, period TEXT "
                         "NOT NULL, tokens INTEGER NOT NULL, PRIMARY KEY (tenant, period))");
        !r)
        return r.error();
    return l;
}

UsageLedger::~UsageLedger() {
    sqlite3_close(db_);
}

Result<void> UsageLedger::exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        const std::string m = err ? err : sqlite3_errmsg(db_);
        sqlite3_free(err);
        return make_error("usage ledger " + path_ + ": " + m);
    }
    return {};
}

Result<void> UsageLedger::add(const std::string& tenant, int64_t n, int64_t now) {
    if (n <= 0) return {};
    std::lock_guard<std::mutex> lk(mu_);
    if (auto r = exec("BEGIN IMMEDIATE"); !r) return r;
    for (const std::string& period : {day_key(now), month_key(now)}) {
        Stmt st;
        const char* sql =
            "INSERT INTO usage (tenant, period, tokens) VALUES (?1, ?2, ?3) "
            "ON CONFLICT (tenant, period) DO UPDATE SET tokens = tokens + excluded.tokens";
        if (sqlite3_prepare_v2(db_, sql, -1, &st.s, nullptr) != SQLITE_OK ||
            sqlite3_bind_text(st.s, 1, tenant.data(), static_cast<int>(tenant.size()),
                              SQLITE_TRANSIENT) != SQLITE_OK ||
            sqlite3_bind_text(st.s, 2, period.data(), static_cast<int>(period.size()),
                              SQLITE_TRANSIENT) != SQLITE_OK ||
            sqlite3_bind_int64(st.s, 3, n) != SQLITE_OK || sqlite3_step(st.s) != SQLITE_DONE) {
            const std::string m = sqlite3_errmsg(db_);
            (void)exec("ROLLBACK");
            return make_error("usage ledger " + path_ + ": " + m);
        }
    }
    return exec("COMMIT");
}

Result<int64_t> UsageLedger::get(const std::string& tenant, const std::string& period) {
    std::lock_guard<std::mutex> lk(mu_);
    Stmt st;
    if (sqlite3_prepare_v2(db_, "SELECT tokens FROM usage WHERE tenant = ?1 AND period = ?2", -1,
                           &st.s, nullptr) != SQLITE_OK ||
        sqlite3_bind_text(st.s, 1, tenant.data(), static_cast<int>(tenant.size()),
                          SQLITE_TRANSIENT) != SQLITE_OK ||
        sqlite3_bind_text(st.s, 2, period.data(), static_cast<int>(period.size()),
                          SQLITE_TRANSIENT) != SQLITE_OK)
        return make_error("usage ledger " + path_ + ": " + sqlite3_errmsg(db_));
    const int rc = sqlite3_step(st.s);
    if (rc == SQLITE_ROW) return static_cast<int64_t>(sqlite3_column_int64(st.s, 0));
    if (rc == SQLITE_DONE) return int64_t{0};
    return make_error("usage ledger " + path_ + ": " + sqlite3_errmsg(db_));
}

Result<int64_t> UsageLedger::day_tokens(const std::string& tenant, int64_t now) {
    return get(tenant, day_key(now));
}

Result<int64_t> UsageLedger::month_tokens(const std::string& tenant, int64_t now) {
    return get(tenant, month_key(now));
}

}  // namespace zinc::server
