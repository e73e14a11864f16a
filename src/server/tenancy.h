// zinc/server/tenancy.h — tenants at run time: who a request is (its API key), whether it is
// within its tenant's quotas, what it used, and the config reload (SIGHUP).
//
// The tenant comes from the key only (Authorization: Bearer KEY or X-Api-Key), never from a
// request field. admit() checks, in order, the quotas that can be decided when a request arrives
// and answers 429 with Retry-After and the quota's name (ApiError::param, and in the message):
//   max_context     a sequence's prompt + max_tokens is over the tenant's longest context;
//   max_kv_blocks   a sequence's worst case ceil((prompt + max_tokens) / block) blocks is over
//                   the tenant's KV quota (it could never be admitted);
//   max_queued      the tenant's sequences in flight beyond its running ones would pass it
//                   (with max_concurrent set and max_queued 0: "max_concurrent");
//   tokens_per_day / tokens_per_month: ledger + tokens reserved by requests in flight + this
//                   request's prompt + max_tokens would pass the quota (reserved, so a burst of
//                   concurrent requests cannot overshoot; settled to what was used at the end).
// Embeddings (admit_embeddings): their input tokens are prompt tokens: max_context per input,
// tokens_per_day / tokens_per_month (reserving the inputs' tokens), then the usage counters and
// the ledger when settled; the engine charges their rows to the prefill bucket
// (EmbeddingParams::tenant). They are not scheduler sequences: max_concurrent, max_queued and
// max_kv_blocks do not count them.
// The rest are the engine's (engine/tenant_policy.h): max_concurrent (excess waits), KV blocks
// held, prefill / decode token buckets (shaping), class and weight.
// reload() parses the file whole and swaps it in only when valid: requests in flight keep the
// spec they were admitted with, the policy gets the new limits from its next step.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/tenant_policy.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/tenants.h"
#include "server/usage_ledger.h"

namespace zinc::server {

class Tenancy;

/// One admitted request's claim on its tenant (in-flight sequences, reserved tokens); settle()
/// records what it used. Destroyed unsettled: nothing used (the request did not run).
class TenantLease {
  public:
    ~TenantLease();
    TenantLease(const TenantLease&) = delete;
    TenantLease& operator=(const TenantLease&) = delete;
    /// The request ended: prompt + completion tokens go to the ledger and the usage counters.
    void settle(int64_t prompt_tokens, int64_t completion_tokens, double queue_s);
    const TenantSpec& tenant() const { return *spec_; }

  private:
    friend class Tenancy;
    TenantLease(Tenancy& t, std::shared_ptr<const TenantSpec> spec, int32_t n_seqs,
                int64_t reserved)
        : t_(t), spec_(std::move(spec)), n_seqs_(n_seqs), reserved_(reserved) {}
    Tenancy& t_;
    std::shared_ptr<const TenantSpec> spec_;
    int32_t n_seqs_;
    int64_t reserved_;
    bool settled_ = false;
};

class Tenancy {
  public:
    /// Load the config file and open its ledger; block_size: the engine's (KV quota).
    static Result<std::unique_ptr<Tenancy>> create(const std::string& path, int32_t block_size);

    /// The engine's policy (EngineOptions::policy), kept in step with reloads.
    std::shared_ptr<engine::TenantPolicy> policy() const { return policy_; }
    /// Re-read the file; on error the old config stays and the error says file:line: why.
    Result<void> reload();
    /// The tenant whose key the headers carry, or null.
    std::shared_ptr<const TenantSpec> authenticate(std::string_view authorization,
                                                   std::string_view x_api_key) const;
    /// Quotas decidable now (above); fills each choice's tenant and cache namespace.
    ApiResult<std::unique_ptr<TenantLease>> admit(std::shared_ptr<const TenantSpec> t,
                                                  std::vector<ChoiceSpec>& choices);
    /// An embedding request's inputs (token counts), as prompt tokens (above); settle the lease
    /// with their sum and no completion tokens.
    ApiResult<std::unique_ptr<TenantLease>> admit_embeddings(std::shared_ptr<const TenantSpec> t,
                                                             const std::vector<int64_t>& n_tokens);
    /// GET /v1/usage for one tenant.
    nlohmann::json usage(const std::string& tenant_id);
    bool known(const std::string& tenant_id) const;
    /// Per-tenant Prometheus families (tenant as a label: the configured tenants only).
    std::string metrics() const;
    const std::string& path() const { return path_; }

  private:
    friend class TenantLease;
    struct Counters {
        int32_t in_flight = 0;  // sequences admitted and not settled
        int64_t reserved = 0;   // tokens reserved by requests in flight
        uint64_t requests = 0, prompt_tokens = 0, completion_tokens = 0;
        double queue_s = 0;
        std::map<std::string, uint64_t> rejections;  // by quota
    };
    Tenancy(std::string path, int32_t block_size) : path_(std::move(path)), bs_(block_size) {}
    void apply(TenantsConfig cfg);  // mu_ held
    ApiError reject(const TenantSpec& t, const std::string& quota, std::string why,
                    int64_t retry_after_s);
    /// tokens_per_day / tokens_per_month for `reserve` more tokens (mu_ held).
    std::optional<ApiError> check_token_quotas(const TenantSpec& t, int64_t reserve,
                                               const std::string& what);
    void release(const TenantSpec& t, int32_t n_seqs, int64_t reserved, bool ran, int64_t prompt,
                 int64_t completion, double queue_s);

    const std::string path_;
    const int32_t bs_;
    mutable std::mutex mu_;
    std::vector<std::shared_ptr<const TenantSpec>> tenants_;
    std::map<std::string, Counters> counters_;
    std::unique_ptr<UsageLedger> ledger_;
    std::shared_ptr<engine::TenantPolicy> policy_;
};

}  // namespace zinc::server
