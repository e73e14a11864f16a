// tests/unit/server/test_tenants.cpp — the tenants config parser (every refusal names
// FILE:LINE:COLUMN and why), key digests, and the SQLite usage ledger (exact under concurrent
// adds, persistent across reopen, UTC day/month periods).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "server/tenants.h"
#include "server/usage_ledger.h"

namespace zs = zinc::server;

namespace {

const std::string kAbc =
    "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";  // "abc"

std::string err_of(const std::string& text) {
    auto r = zs::parse_tenants(text, "t.toml");
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? "" : r.error().message;
}

}  // namespace

TEST(Tenants, ParsesAFullConfig) {
    const std::string text =
        "[ledger]\npath = \"u.sqlite\"\n\n[[tenant]]\nid = \"editor\"\n"
        "class = \"interactive\"\nweight = 2\napi_keys = [\"" +
        kAbc +
        "\"]\nadmin = true\ncache_group = \"team\"\n[tenant.quotas]\n"
        "max_concurrent = 2\nmax_queued = 3\nmax_kv_blocks = 100\n"
        "max_context = 2048\nprefill_tokens_per_s = 500.5\n"
        "decode_tokens_per_s = 50\nburst_s = 2\ntokens_per_day = 1000\n"
        "tokens_per_month = 9000\n\n[[tenant]]\nid = \"batch-1\"\n"
        "class = \"batch\"\n";
    auto r = zs::parse_tenants(text, "t.toml");
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto& c = r.value();
    EXPECT_EQ(c.ledger_path, "u.sqlite");
    ASSERT_EQ(c.tenants.size(), 2u);
    const zs::TenantSpec& t = c.tenants[0];
    EXPECT_EQ(t.id, "editor");
    EXPECT_EQ(t.qos, zinc::engine::QosClass::Interactive);
    EXPECT_DOUBLE_EQ(t.weight, 2);
    ASSERT_EQ(t.keys.size(), 1u);
    EXPECT_TRUE(zs::digest_equal(t.keys[0], zs::key_hash("abc")));
    EXPECT_FALSE(zs::digest_equal(t.keys[0], zs::key_hash("abd")));
    EXPECT_TRUE(t.admin);
    EXPECT_EQ(t.cache_namespace(), "group:team");
    EXPECT_EQ(t.quotas.max_concurrent, 2);
    EXPECT_EQ(t.quotas.max_queued, 3);
    EXPECT_EQ(t.quotas.max_kv_blocks, 100);
    EXPECT_EQ(t.quotas.max_context, 2048);
    EXPECT_DOUBLE_EQ(t.quotas.prefill_tokens_per_s, 500.5);
    EXPECT_DOUBLE_EQ(t.quotas.decode_tokens_per_s, 50);
    EXPECT_DOUBLE_EQ(t.quotas.burst_s, 2);
    EXPECT_EQ(t.quotas.tokens_per_day, 1000);
    EXPECT_EQ(t.quotas.tokens_per_month, 9000);
    EXPECT_EQ(c.tenants[1].qos, zinc::engine::QosClass::Batch);
    EXPECT_EQ(c.tenants[1].cache_namespace(), "tenant:batch-1");
    EXPECT_EQ(c.tenants[1].quotas.max_queued, -1);
    const auto s = t.sched();
    EXPECT_EQ(s.max_concurrent, 2);
    EXPECT_EQ(s.max_kv_blocks, 100);
}

TEST(Tenants, EveryRefusalNamesTheLineAndWhy) {
    EXPECT_NE(err_of("[[tenant]]\nid = \"a\"\napi_keys = [\"plain\"]\n").find("t.toml:3:"),
              std::string::npos);
    EXPECT_NE(err_of("[[tenant]]\nid = \"a\"\napi_keys = [\"plain\"]\n").find("stored hashed"),
              std::string::npos);
    const std::string e1 = err_of("[[tenant]]\nid = \"a\"\nclas = \"batch\"\n");
    EXPECT_NE(e1.find("t.toml:3:"), std::string::npos) << e1;
    EXPECT_NE(e1.find("unknown tenant field 'clas'"), std::string::npos) << e1;
    const std::string e2 = err_of("[[tenant]]\nid = \"a\"\n\nclass = \"urgent\"\n");
    EXPECT_NE(e2.find("t.toml:4:"), std::string::npos) << e2;
    EXPECT_NE(e2.find("interactive, standard or batch"), std::string::npos) << e2;
    const std::string e3 = err_of("[[tenant]]\nid = \"a\"\n[[tenant]]\nid = \"a\"\n");
    EXPECT_NE(e3.find("appears twice"), std::string::npos) << e3;
    const std::string e4 = err_of("[[tenant]]\nid = \"a\"\napi_keys = [\"" + kAbc +
                                  "\"]\n[[tenant]]\nid = \"b\"\napi_keys = [\"" + kAbc + "\"]\n");
    EXPECT_NE(e4.find("also tenant 'a'"), std::string::npos) << e4;
    const std::string e5 = err_of("[[tenant]]\nid = \"a\"\nweight = = 2\n");
    EXPECT_NE(e5.find("t.toml:3:"), std::string::npos) << e5;
    const std::string e6 = err_of("[[tenant]]\nid = \"a\"\n[tenant.quotas]\nmax_concurrent = -1\n");
    EXPECT_NE(e6.find("t.toml:4:"), std::string::npos) << e6;
    EXPECT_NE(e6.find("out of range"), std::string::npos) << e6;
    const std::string e7 = err_of("[[tenant]]\nid = \"a\"\n[tenant.quotas]\ntokens_per_day = 5\n");
    EXPECT_NE(e7.find("no [ledger] path"), std::string::npos) << e7;
    EXPECT_NE(err_of("[[tenant]]\nclass = \"batch\"\n").find("needs an 'id'"), std::string::npos);
    EXPECT_NE(err_of("[[tenant]]\nid = \"a b\"\n").find("tenant id 'a b'"), std::string::npos);
    EXPECT_NE(err_of("").find("no [[tenant]]"), std::string::npos);
    EXPECT_NE(err_of("tenants = 3\n").find("unknown top-level key 'tenants'"), std::string::npos);
    EXPECT_NE(err_of("[[tenant]]\nid = \"a\"\n[tenant.quotas]\nmax_qeued = 1\n")
                  .find("unknown quota 'max_qeued'"),
              std::string::npos);
}

TEST(Tenants, MissingFileIsAnError) {
    auto r = zs::load_tenants_file("/nonexistent/tenants.toml");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("cannot read"), std::string::npos);
}

TEST(UsageLedger, PeriodsAndRetryTimes) {
    const int64_t t = 1764633600 + 3600;  // 2025-12-02 01:00:00 UTC
    EXPECT_EQ(zs::UsageLedger::day_key(t), "D2025-12-02");
    EXPECT_EQ(zs::UsageLedger::month_key(t), "M2025-12");
    EXPECT_EQ(zs::UsageLedger::seconds_to_next_day(t), 23 * 3600);
    EXPECT_EQ(zs::UsageLedger::seconds_to_next_month(t), 30 * 86400 - 3600);
}

TEST(UsageLedger, ConcurrentAddsAreExactAndPersist) {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("zinc-ledger-" + std::to_string(getpid())))
            .string();
    std::filesystem::remove(path);
    const int64_t now = 1764633600;
    {
        auto l = zs::UsageLedger::open(path);
        ASSERT_TRUE(l.ok()) << l.error().message;
        std::vector<std::thread> ths;
        for (int i = 0; i < 8; ++i)
            ths.emplace_back([&, i] {
                for (int k = 0; k < 50; ++k) ASSERT_TRUE(l.value()->add(i % 2 ? "a" : "b", 3, now));
            });
        for (auto& t : ths) t.join();
        EXPECT_EQ(l.value()->day_tokens("a", now).value(), 4 * 50 * 3);
        EXPECT_EQ(l.value()->month_tokens("b", now).value(), 4 * 50 * 3);
        EXPECT_EQ(l.value()->day_tokens("a", now + 86400).value(), 0);      // the next day
        EXPECT_EQ(l.value()->month_tokens("a", now + 86400).value(), 600);  // same month
    }
    // A second connection (another process would be the same) and a reopen see every add.
    auto l2 = zs::UsageLedger::open(path);
    ASSERT_TRUE(l2.ok());
    ASSERT_TRUE(l2.value()->add("a", 10, now));
    EXPECT_EQ(l2.value()->day_tokens("a", now).value(), 610);
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
}

TEST(UsageLedger, UnopenableIsAnError) {
    auto l = zs::UsageLedger::open("/nonexistent/dir/usage.sqlite");
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().message.find("usage ledger /nonexistent/dir/usage.sqlite"),
              std::string::npos);
}
