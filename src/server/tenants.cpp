// zinc/server/tenants.cpp — see tenants.h.
#include "server/tenants.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <toml++/toml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace zinc::server {

KeyDigest key_hash(std::string_view key) {
    KeyDigest d{};
    unsigned int n = 0;
    EVP_Digest(key.data(), key.size(), d.data(), &n, EVP_sha256(), nullptr);
    return d;
}

bool digest_equal(const KeyDigest& a, const KeyDigest& b) {
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string TenantSpec::cache_namespace() const {
    return cache_group.empty() ? "tenant:" + id : "group:" + cache_group;
}

engine::TenantSchedSpec TenantSpec::sched() const {
    engine::TenantSchedSpec s;
    s.id = id;
    s.qos = qos;
    s.weight = weight;
    s.max_concurrent = quotas.max_concurrent;
    s.max_kv_blocks = quotas.max_kv_blocks;
    s.prefill_tokens_per_s = quotas.prefill_tokens_per_s;
    s.decode_tokens_per_s = quotas.decode_tokens_per_s;
    s.burst_s = quotas.burst_s;
    return s;
}

namespace {

struct Bad {
    std::string message;
};

std::string where(const std::string& source, const toml::source_region& r) {
    return source + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

[[noreturn]] void fail(const std::string& source, const toml::node& n, const std::string& what) {
    throw Bad{where(source, n.source()) + ": " + what};
}

int64_t get_int(const std::string& src, const toml::node& n, const std::string& key, int64_t lo,
                int64_t hi) {
    if (!n.is_integer()) fail(src, n, "'" + key + "' must be an integer");
    const int64_t v = n.as_integer()->get();
    if (v < lo || v > hi)
        fail(src, n,
             "'" + key + "' " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
    return v;
}

double get_real(const std::string& src, const toml::node& n, const std::string& key, double lo,
                double hi) {
    double v = 0;
    if (n.is_integer()) {
        v = static_cast<double>(n.as_integer()->get());
    } else if (n.is_floating_point()) {
        v = n.as_floating_point()->get();
    } else {
        fail(src, n, "'" + key + "' must be a number");
    }
    if (!std::isfinite(v) || v < lo || v > hi) {
        std::ostringstream o;
        o << "'" << key << "' " << v << " out of range [" << lo << ", " << hi << "]";
        fail(src, n, o.str());
    }
    return v;
}

std::string get_str(const std::string& src, const toml::node& n, const std::string& key) {
    if (!n.is_string()) fail(src, n, "'" + key + "' must be a string");
    return n.as_string()->get();
}

KeyDigest parse_digest(const std::string& src, const toml::node& n) {
    const std::string s = get_str(src, n, "api_keys[]");
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    if (s.size() != 7 + 64 || s.compare(0, 7, "sha256:") != 0)
        fail(src, n,
             "an API key must be stored hashed: \"sha256:\" + 64 hex digits (printf %s KEY | "
             "sha256sum), got a string of " +
                 std::to_string(s.size()) + " characters");
    KeyDigest d{};
    for (size_t i = 0; i < 32; ++i) {
        const int hi = hex(s[7 + 2 * i]), lo = hex(s[8 + 2 * i]);
        if (hi < 0 || lo < 0) fail(src, n, "api key digest: not a hex digit");
        d[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    return d;
}

TenantQuotas parse_quotas(const std::string& src, const toml::table& t) {
    TenantQuotas q;
    constexpr int64_t kBig = int64_t{1} << 40;
    for (auto&& [k, v] : t) {
        const std::string key(k.str());
        if (key == "max_concurrent") {
            q.max_concurrent = static_cast<int32_t>(get_int(src, v, key, 0, 1 << 20));
        } else if (key == "max_queued") {
            q.max_queued = static_cast<int32_t>(get_int(src, v, key, 0, 1 << 20));
        } else if (key == "max_kv_blocks") {
            q.max_kv_blocks = static_cast<int32_t>(get_int(src, v, key, 0, 1 << 30));
        } else if (key == "max_context") {
            q.max_context = static_cast<int32_t>(get_int(src, v, key, 0, 1 << 24));
        } else if (key == "prefill_tokens_per_s") {
            q.prefill_tokens_per_s = get_real(src, v, key, 0, 1e9);
        } else if (key == "decode_tokens_per_s") {
            q.decode_tokens_per_s = get_real(src, v, key, 0, 1e9);
        } else if (key == "burst_s") {
            q.burst_s = get_real(src, v, key, 0.001, 3600);
        } else if (key == "tokens_per_day") {
            q.tokens_per_day = get_int(src, v, key, 0, kBig);
        } else if (key == "tokens_per_month") {
            q.tokens_per_month = get_int(src, v, key, 0, kBig);
        } else {
            fail(src, v,
                 "unknown quota '" + key +
                     "' (expected max_concurrent, max_queued, max_kv_blocks, max_context, "
                     "prefill_tokens_per_s, decode_tokens_per_s, burst_s, tokens_per_day, "
                     "tokens_per_month)");
        }
    }
    return q;
}

TenantSpec parse_tenant(const std::string& src, const toml::table& t) {
    TenantSpec s;
    bool have_id = false;
    for (auto&& [k, v] : t) {
        const std::string key(k.str());
        if (key == "id") {
            s.id = get_str(src, v, key);
            if (s.id.empty() || s.id.size() > 64 ||
                s.id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789_.-") != std::string::npos)
                fail(src, v, "tenant id '" + s.id + "': expected 1-64 of [A-Za-z0-9_.-]");
            have_id = true;
        } else if (key == "class") {
            const std::string c = get_str(src, v, key);
            auto q = engine::parse_qos_class(c);
            if (!q) fail(src, v, "class '" + c + "': expected interactive, standard or batch");
            s.qos = *q;
        } else if (key == "weight") {
            s.weight = get_real(src, v, key, 1e-3, 1e6);
        } else if (key == "api_keys") {
            const toml::array* a = v.as_array();
            if (!a) fail(src, v, "'api_keys' must be an array of strings");
            for (const toml::node& e : *a) s.keys.push_back(parse_digest(src, e));
        } else if (key == "admin") {
            if (!v.is_boolean()) fail(src, v, "'admin' must be true or false");
            s.admin = v.as_boolean()->get();
        } else if (key == "cache_group") {
            s.cache_group = get_str(src, v, key);
            if (s.cache_group.empty()) fail(src, v, "'cache_group' must not be empty");
        } else if (key == "quotas") {
            const toml::table* q = v.as_table();
            if (!q) fail(src, v, "'quotas' must be a table");
            s.quotas = parse_quotas(src, *q);
        } else {
            fail(src, v,
                 "unknown tenant field '" + key +
                     "' (expected id, class, weight, api_keys, admin, cache_group, quotas)");
        }
    }
    if (!have_id) fail(src, t, "a [[tenant]] needs an 'id'");
    return s;
}

}  // namespace

Result<TenantsConfig> parse_tenants(std::string_view text, const std::string& source) {
    try {
        toml::table root = toml::parse(text, source);
        TenantsConfig cfg;
        std::set<std::string> ids;
        std::vector<std::pair<KeyDigest, std::string>> keys;
        for (auto&& [k, v] : root) {
            const std::string key(k.str());
            if (key == "tenant") {
                const toml::array* a = v.as_array();
                if (!a) fail(source, v, "'tenant' must be an array of tables ([[tenant]])");
                for (const toml::node& e : *a) {
                    const toml::table* t = e.as_table();
                    if (!t) fail(source, e, "each tenant must be a table ([[tenant]])");
                    TenantSpec s = parse_tenant(source, *t);
                    if (!ids.insert(s.id).second)
                        fail(source, e, "tenant id '" + s.id + "' appears twice");
                    for (const KeyDigest& d : s.keys) {
                        for (const auto& [other, owner] : keys)
                            if (digest_equal(d, other))
                                fail(source, e,
                                     "tenant '" + s.id + "': an API key is also tenant '" + owner +
                                         "''s");
                        keys.emplace_back(d, s.id);
                    }
                    cfg.tenants.push_back(std::move(s));
                }
            } else if (key == "ledger") {
                const toml::table* t = v.as_table();
                if (!t) fail(source, v, "'ledger' must be a table");
                for (auto&& [lk, lv] : *t) {
                    if (lk.str() != "path")
                        fail(
                            source, lv,
                            "unknown ledger field '" + std::string(lk.str()) + "' (expected path)");
                    cfg.ledger_path = get_str(source, lv, "path");
                }
            } else {
                fail(source, v,
                     "unknown top-level key '" + key + "' (expected [[tenant]], [ledger])");
            }
        }
        if (cfg.tenants.empty()) return make_error(source + ": no [[tenant]] defined");
        for (const TenantSpec& s : cfg.tenants)
            if ((s.quotas.tokens_per_day > 0 || s.quotas.tokens_per_month > 0) &&
                cfg.ledger_path.empty())
                return make_error(source + ": tenant '" + s.id +
                                  "' has a tokens_per_day/month quota but no [ledger] path is set");
        return cfg;
    } catch (const toml::parse_error& e) {
        return make_error(where(source, e.source()) + ": " + std::string(e.description()));
    } catch (const Bad& b) {
        return make_error(b.message);
    }
}

Result<TenantsConfig> load_tenants_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(path + ": cannot read the tenants file");
    std::ostringstream ss;
    ss << in.rdbuf();
    auto cfg = parse_tenants(ss.str(), path);
    if (!cfg) return cfg;
    TenantsConfig c = std::move(cfg.value());
    if (!c.ledger_path.empty() && std::filesystem::path(c.ledger_path).is_relative())
        c.ledger_path =
            (std::filesystem::path(path).parent_path() / c.ledger_path).lexically_normal().string();
    return c;
}

}  // namespace zinc::server
