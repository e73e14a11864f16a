// zinc/engine/tenant_policy.cpp — see tenant_policy.h.
#include "engine/tenant_policy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "engine/sequence.h"
#include "util/check.h"

namespace zinc::engine {

const char* to_string(QosClass c) {
    switch (c) {
        case QosClass::Interactive:
            return "interactive";
        case QosClass::Standard:
            return "standard";
        case QosClass::Batch:
            return "batch";
    }
    return "?";
}

std::optional<QosClass> parse_qos_class(std::string_view s) {
    if (s == "interactive") return QosClass::Interactive;
    if (s == "standard") return QosClass::Standard;
    if (s == "batch") return QosClass::Batch;
    return std::nullopt;
}

TenantPolicy::TenantPolicy(std::vector<TenantSchedSpec> tenants, int32_t block_size,
                           std::function<double()> clock)
    : block_size_(block_size), clock_(std::move(clock)) {
    ZINC_CHECK(block_size > 0);
    if (!clock_) {
        clock_ = [] {
            return std::chrono::duration<double>(
                       std::chrono::steady_clock::now().time_since_epoch())
                .count();
        };
    }
    last_refill_ = clock_();
    configure(std::move(tenants));
}

double TenantPolicy::capacity(double rate, double burst_s) {
    return std::max(1.0, rate * burst_s);
}

void TenantPolicy::configure(std::vector<TenantSchedSpec> tenants) {
    std::lock_guard<std::mutex> lk(mu_);
    specs_.clear();
    for (auto& t : tenants) {
        ZINC_CHECK(t.weight > 0 && t.burst_s > 0);
        specs_[t.id] = t;
    }
    for (auto& [id, t] : tenants_) {
        const TenantSchedSpec old = t.spec;
        t.spec = spec_for(id);
        // A newly limited bucket starts full; a changed one keeps its level within capacity.
        if (old.prefill_tokens_per_s <= 0)
            t.bucket_prefill = capacity(t.spec.prefill_tokens_per_s, t.spec.burst_s);
        if (old.decode_tokens_per_s <= 0)
            t.bucket_decode = capacity(t.spec.decode_tokens_per_s, t.spec.burst_s);
        t.bucket_prefill =
            std::min(t.bucket_prefill, capacity(t.spec.prefill_tokens_per_s, t.spec.burst_s));
        t.bucket_decode =
            std::min(t.bucket_decode, capacity(t.spec.decode_tokens_per_s, t.spec.burst_s));
    }
}

TenantSchedSpec TenantPolicy::spec_for(const std::string& id) const {
    if (auto it = specs_.find(id); it != specs_.end()) return it->second;
    TenantSchedSpec s;
    if (auto it = specs_.find("default"); it != specs_.end()) s = it->second;
    s.id = id;
    return s;
}

TenantPolicy::Tenant& TenantPolicy::of(const Sequence& s) const {
    return of_id(s.params.tenant);
}

TenantPolicy::Tenant& TenantPolicy::of_id(const std::string& id) const {
    auto it = tenants_.find(id);
    if (it != tenants_.end()) return it->second;
    Tenant t;
    t.spec = spec_for(id);
    t.bucket_prefill = capacity(t.spec.prefill_tokens_per_s, t.spec.burst_s);
    t.bucket_decode = capacity(t.spec.decode_tokens_per_s, t.spec.burst_s);
    return tenants_.emplace(id, std::move(t)).first->second;
}

void TenantPolicy::fill(Tenant& t, double dt) {
    const TenantSchedSpec& sp = t.spec;
    if (sp.prefill_tokens_per_s > 0)
        t.bucket_prefill = std::min(capacity(sp.prefill_tokens_per_s, sp.burst_s),
                                    t.bucket_prefill + sp.prefill_tokens_per_s * dt);
    if (sp.decode_tokens_per_s > 0)
        t.bucket_decode = std::min(capacity(sp.decode_tokens_per_s, sp.burst_s),
                                   t.bucket_decode + sp.decode_tokens_per_s * dt);
    t.decode_reserved = 0;
}

std::vector<TenantSchedState> TenantPolicy::snapshot() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<TenantSchedState> out;
    for (const auto& [id, t] : tenants_) {
        TenantSchedState s;
        s.id = id;
        s.qos = t.spec.qos;
        s.weight = t.spec.weight;
        s.vtc = t.vtc;
        s.prefill_rows = t.prefill_rows;
        s.decode_rows = t.decode_rows;
        s.running = t.running;
        s.backlog = t.backlog;
        s.kv_blocks_reserved = t.blocks;
        out.push_back(std::move(s));
    }
    return out;
}

int32_t TenantPolicy::worst_case_blocks(const Sequence& s, int32_t block_size) {
    const int64_t n = static_cast<int64_t>(s.n_prompt) + s.params.max_tokens;
    return static_cast<int32_t>((n + block_size - 1) / block_size);
}

void TenantPolicy::on_step_begin() {
    std::lock_guard<std::mutex> lk(mu_);
    const double now = clock_();
    const double dt = std::max(0.0, now - last_refill_);
    last_refill_ = now;
    for (auto& [id, t] : tenants_) fill(t, dt);
}

bool TenantPolicy::before(const Sequence& a, const Sequence& b) const {
    std::lock_guard<std::mutex> lk(mu_);
    const Tenant& ta = of(a);
    const Tenant& tb = of(b);
    if (ta.spec.qos != tb.spec.qos) return ta.spec.qos < tb.spec.qos;
    if (&ta != &tb && ta.vtc != tb.vtc) return ta.vtc < tb.vtc;
    return a.arrival < b.arrival;
}

bool TenantPolicy::may_admit(const Sequence& s, const SchedulerLoad&) const {
    std::lock_guard<std::mutex> lk(mu_);
    const Tenant& t = of(s);
    if (t.spec.max_concurrent > 0 && t.running >= t.spec.max_concurrent) return false;
    if (t.spec.max_kv_blocks > 0 &&
        t.blocks + worst_case_blocks(s, block_size_) > t.spec.max_kv_blocks)
        return false;
    return true;
}

bool TenantPolicy::may_decode(const Sequence& s) const {
    std::lock_guard<std::mutex> lk(mu_);
    Tenant& t = of(s);
    if (t.spec.decode_tokens_per_s <= 0) return true;
    if (t.bucket_decode - t.decode_reserved < 1) return false;
    t.decode_reserved += 1;
    return true;
}

int32_t TenantPolicy::prefill_allowance(const Sequence& s) const {
    return embedding_allowance(s.params.tenant);
}

int32_t TenantPolicy::embedding_allowance(const std::string& tenant) const {
    std::lock_guard<std::mutex> lk(mu_);
    const Tenant& t = of_id(tenant);
    if (t.spec.prefill_tokens_per_s <= 0) return std::numeric_limits<int32_t>::max();
    if (t.bucket_prefill < 1) return 0;
    return static_cast<int32_t>(std::min<double>(std::floor(t.bucket_prefill), 1 << 30));
}

int32_t TenantPolicy::prefill_tier(const Sequence& s) const {
    std::lock_guard<std::mutex> lk(mu_);
    switch (of(s).spec.qos) {
        case QosClass::Interactive:
            return kPrefillTierFirst;
        case QosClass::Batch:
            return kPrefillTierBackground;
        case QosClass::Standard:
            break;
    }
    return kPrefillTierNormal;
}

bool TenantPolicy::first_tier_active() const {
    std::lock_guard<std::mutex> lk(mu_);
    const double now = clock_();
    for (const auto& [id, t] : tenants_)
        if (t.spec.qos == QosClass::Interactive &&
            (t.backlog > 0 || now - t.idle_since < kInteractiveWindow))
            return true;
    return false;
}

size_t TenantPolicy::pick_victim(std::span<const Sequence* const> candidates) const {
    // Sorted by before(): the last is of the lowest class and the largest counter.
    return candidates.size() - 1;
}

std::optional<size_t> TenantPolicy::preempt_for(const Sequence& w,
                                                std::span<const Sequence* const> running) const {
    std::lock_guard<std::mutex> lk(mu_);
    if (of(w).spec.qos != QosClass::Interactive || running.empty()) return std::nullopt;
    // running is sorted by before(): the last one is batch if any is, else standard.
    const size_t last = running.size() - 1;
    if (of(*running[last]).spec.qos == QosClass::Interactive) return std::nullopt;
    return last;
}

void TenantPolicy::on_enqueue(const Sequence& s) {
    std::lock_guard<std::mutex> lk(mu_);
    Tenant& t = of(s);
    if (t.backlog == 0 && clock_() - t.idle_since > kLiftGrace) {
        // VTC's lift: a tenant returning from idle starts at the smallest counter of the
        // backlogged ones, so idle time is not banked.
        double lo = std::numeric_limits<double>::infinity();
        for (const auto& [id, o] : tenants_)
            if (&o != &t && o.backlog > 0) lo = std::min(lo, o.vtc);
        if (std::isfinite(lo)) t.vtc = std::max(t.vtc, lo);
    }
    ++t.backlog;
}

void TenantPolicy::on_finish(const Sequence& s) {
    std::lock_guard<std::mutex> lk(mu_);
    Tenant& t = of(s);
    t.backlog = std::max(0, t.backlog - 1);
    if (t.backlog == 0) t.idle_since = clock_();
}

void TenantPolicy::on_admit(const Sequence& s) {
    std::lock_guard<std::mutex> lk(mu_);
    Tenant& t = of(s);
    ++t.running;
    t.blocks += worst_case_blocks(s, block_size_);
}

void TenantPolicy::on_release(const Sequence& s) {
    std::lock_guard<std::mutex> lk(mu_);
    Tenant& t = of(s);
    t.running = std::max(0, t.running - 1);
    t.blocks = std::max(0, t.blocks - worst_case_blocks(s, block_size_));
}

void TenantPolicy::on_embedding_served(const std::string& tenant, int32_t rows) {
    std::lock_guard<std::mutex> lk(mu_);
    Tenant& t = of_id(tenant);
    t.vtc += static_cast<double>(rows) / t.spec.weight;
    t.prefill_rows += static_cast<uint64_t>(rows);
    if (t.spec.prefill_tokens_per_s > 0) t.bucket_prefill -= rows;
}

void TenantPolicy::on_served(const Sequence& s, int32_t n_prefill, int32_t n_decode) {
    std::lock_guard<std::mutex> lk(mu_);
    Tenant& t = of(s);
    t.vtc += static_cast<double>(n_prefill + n_decode) / t.spec.weight;
    t.prefill_rows += static_cast<uint64_t>(n_prefill);
    t.decode_rows += static_cast<uint64_t>(n_decode);
    if (t.spec.prefill_tokens_per_s > 0) t.bucket_prefill -= n_prefill;
    if (t.spec.decode_tokens_per_s > 0) {
        t.bucket_decode -= n_decode;
        t.decode_reserved = std::max(0.0, t.decode_reserved - n_decode);
    }
}

}  // namespace zinc::engine
