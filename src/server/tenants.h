// zinc/server/tenants.h — the tenants config file (TOML, docs/server.md "Tenants"): tenant ids,
// hashed API keys, QoS class, fair-share weight, quotas, prefix-cache sharing group, and the
// usage ledger's path. Parsing only; src/server/tenancy.h applies it.
//
// A malformed file is refused whole with "FILE:LINE:COLUMN: reason" (toml++ gives every node's
// source position), so a reload never half-applies. Keys are stored as "sha256:" + 64 hex
// digits of the key (`printf %s KEY | sha256sum`); key_hash() hashes a presented key (OpenSSL)
// and matches() compares digests in constant time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tenant_policy.h"
#include "util/result.h"

namespace zinc::server {

using KeyDigest = std::array<unsigned char, 32>;

/// SHA-256 of the key's bytes.
KeyDigest key_hash(std::string_view key);
/// Constant-time equality of two digests.
bool digest_equal(const KeyDigest& a, const KeyDigest& b);

struct TenantQuotas {
    int32_t max_concurrent = 0;       // running sequences (engine); 0: no limit
    int32_t max_queued = -1;          // sequences waiting beyond the running ones; -1: no limit
    int32_t max_kv_blocks = 0;        // KV blocks held, worst case (engine); 0: no limit
    int32_t max_context = 0;          // prompt + max_tokens of one sequence; 0: no limit
    double prefill_tokens_per_s = 0;  // token bucket (engine); 0: no limit
    double decode_tokens_per_s = 0;   // token bucket (engine); 0: no limit
    double burst_s = 1.0;             // bucket capacity, seconds of its rate
    int64_t tokens_per_day = 0;       // prompt + completion tokens per UTC day (ledger); 0: none
    int64_t tokens_per_month = 0;     // per UTC calendar month (ledger); 0: none
};

struct TenantSpec {
    std::string id;
    engine::QosClass qos = engine::QosClass::Standard;
    double weight = 1.0;
    std::vector<KeyDigest> keys;
    bool admin = false;       // may read any tenant's usage (GET /v1/usage/{tenant})
    std::string cache_group;  // tenants with the same group share cached prefixes
    TenantQuotas quotas;
    /// The prefix-cache namespace of its requests: "group:" + cache_group, else "tenant:" + id.
    std::string cache_namespace() const;
    engine::TenantSchedSpec sched() const;
};

struct TenantsConfig {
    std::vector<TenantSpec> tenants;
    std::string ledger_path;  // absolute, or relative to the config file's folder; "" : none
};

/// Parse TOML text; `source` names it in errors ("FILE:LINE:COL: reason").
Result<TenantsConfig> parse_tenants(std::string_view text, const std::string& source);
/// Read and parse a file; a relative ledger path is resolved against the file's folder.
Result<TenantsConfig> load_tenants_file(const std::string& path);

}  // namespace zinc::server
