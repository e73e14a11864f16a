// zinc/server/tenancy.cpp — see tenancy.h.
#include "server/tenancy.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace zinc::server {

namespace {

bool iequals_prefix(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != prefix[i]) return false;
    }
    return true;
}

std::string_view presented_key(std::string_view authorization, std::string_view x_api_key) {
    std::string_view k;
    if (iequals_prefix(authorization, "bearer ")) {
        k = authorization.substr(7);
        while (!k.empty() && k.front() == ' ') k.remove_prefix(1);
        while (!k.empty() && k.back() == ' ') k.remove_suffix(1);
    } else {
        k = x_api_key;
    }
    return k;
}

int64_t unix_now() {
    return static_cast<int64_t>(std::time(nullptr));
}

std::vector<engine::TenantSchedSpec> sched_specs(
    const std::vector<std::shared_ptr<const TenantSpec>>& ts) {
    std::vector<engine::TenantSchedSpec> out;
    for (const auto& t : ts) out.push_back(t->sched());
    return out;
}

}  // namespace

TenantLease::~TenantLease() {
    if (!settled_) t_.release(*spec_, n_seqs_, reserved_, false, 0, 0, 0);
}

void TenantLease::settle(int64_t prompt_tokens, int64_t completion_tokens, double queue_s) {
    if (settled_) return;
    settled_ = true;
    t_.release(*spec_, n_seqs_, reserved_, true, prompt_tokens, completion_tokens, queue_s);
}

Result<std::unique_ptr<Tenancy>> Tenancy::create(const std::string& path, int32_t block_size) {
    auto cfg = load_tenants_file(path);
    if (!cfg) return cfg.error();
    std::unique_ptr<Tenancy> t(new Tenancy(path, block_size));
    if (!cfg->ledger_path.empty()) {
        auto l = UsageLedger::open(cfg->ledger_path);
        if (!l) return l.error();
        t->ledger_ = std::move(l.value());
    }
    std::lock_guard<std::mutex> lk(t->mu_);
    t->apply(std::move(cfg.value()));
    t->policy_ = std::make_shared<engine::TenantPolicy>(sched_specs(t->tenants_), block_size);
    return t;
}

void Tenancy::apply(TenantsConfig cfg) {
    tenants_.clear();
    for (auto& s : cfg.tenants) {
        counters_[s.id];  // every configured tenant has its series from the start
        tenants_.push_back(std::make_shared<const TenantSpec>(std::move(s)));
    }
}

Result<void> Tenancy::reload() {
    auto cfg = load_tenants_file(path_);
    if (!cfg) return cfg.error();
    std::unique_ptr<UsageLedger> ledger;
    {
        std::lock_guard<std::mutex> lk(mu_);
        const std::string old = ledger_ ? ledger_->path() : "";
        if (cfg->ledger_path != old && !cfg->ledger_path.empty()) {
            auto l = UsageLedger::open(cfg->ledger_path);
            if (!l) return l.error();
            ledger = std::move(l.value());
        }
    }
    std::lock_guard<std::mutex> lk(mu_);
    if (ledger) ledger_ = std::move(ledger);
    if (cfg->ledger_path.empty()) ledger_.reset();
    apply(std::move(cfg.value()));
    policy_->configure(sched_specs(tenants_));
    return {};
}

std::shared_ptr<const TenantSpec> Tenancy::authenticate(std::string_view authorization,
                                                        std::string_view x_api_key) const {
    const std::string_view key = presented_key(authorization, x_api_key);
    if (key.empty()) return nullptr;
    const KeyDigest d = key_hash(key);
    std::lock_guard<std::mutex> lk(mu_);
    std::shared_ptr<const TenantSpec> found;
    for (const auto& t : tenants_)  // every digest is compared: no early exit
        for (const KeyDigest& k : t->keys)
            if (digest_equal(d, k) && !found) found = t;
    return found;
}

bool Tenancy::known(const std::string& id) const {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& t : tenants_)
        if (t->id == id) return true;
    return false;
}

ApiError Tenancy::reject(const TenantSpec& t, const std::string& quota, std::string why,
                         int64_t retry_after_s) {
    ++counters_[t.id].rejections[quota];  // mu_ held by the caller
    ApiError e;
    e.status = 429;
    e.type = "rate_limit_error";
    e.code = "quota_exceeded";
    e.param = quota;
    e.message = "tenant '" + t.id + "': quota " + quota + " exceeded: " + why;
    e.retry_after_s = static_cast<int>(std::clamp<int64_t>(retry_after_s, 1, 31 * 86400));
    return e;
}

ApiResult<std::unique_ptr<TenantLease>> Tenancy::admit(std::shared_ptr<const TenantSpec> t,
                                                       std::vector<ChoiceSpec>& choices) {
    const TenantQuotas& q = t->quotas;
    int64_t reserve = 0;
    for (ChoiceSpec& c : choices) {
        c.params.tenant = t->id;
        c.params.cache_namespace = t->cache_namespace();
        const int64_t n = static_cast<int64_t>(c.params.prompt.size()) + c.params.max_tokens;
        reserve += n;
    }
    const auto n_seqs = static_cast<int32_t>(choices.size());
    std::lock_guard<std::mutex> lk(mu_);
    for (const ChoiceSpec& c : choices) {
        const int64_t n = static_cast<int64_t>(c.params.prompt.size()) + c.params.max_tokens;
        if (q.max_context > 0 && n > q.max_context)
            return reject(*t, "max_context",
                          "prompt " + std::to_string(c.params.prompt.size()) + " + max_tokens " +
                              std::to_string(c.params.max_tokens) + " > " +
                              std::to_string(q.max_context),
                          1);
        const int64_t blocks = (n + bs_ - 1) / bs_;
        if (q.max_kv_blocks > 0 && blocks > q.max_kv_blocks)
            return reject(*t, "max_kv_blocks",
                          "one sequence needs up to " + std::to_string(blocks) +
                              " KV blocks > the tenant's " + std::to_string(q.max_kv_blocks),
                          1);
    }
    Counters& cn = counters_[t->id];
    if (q.max_queued >= 0 || q.max_concurrent > 0) {
        int32_t running = 0;
        for (const auto& st : policy_->snapshot())
            if (st.id == t->id) running = st.running;
        const int64_t queued = std::max<int64_t>(0, cn.in_flight - running);
        const int64_t may_queue = std::max(0, q.max_queued);
        const int64_t may_start =
            q.max_concurrent > 0 ? std::max<int64_t>(0, q.max_concurrent - running) : 1 << 30;
        const int64_t room = may_start + may_queue;
        if (q.max_queued >= 0 && queued + n_seqs > room) {
            const std::string name = q.max_queued == 0 ? "max_concurrent" : "max_queued";
            return reject(*t, name,
                          std::to_string(cn.in_flight) + " sequences in flight (" +
                              std::to_string(running) + " running, max_concurrent " +
                              std::to_string(q.max_concurrent) + ", max_queued " +
                              std::to_string(q.max_queued) + ") + " + std::to_string(n_seqs) +
                              " new",
                          1);
        }
    }
    if (auto e = check_token_quotas(*t, reserve, "(prompt + max_tokens)")) return *e;
    cn.in_flight += n_seqs;
    cn.reserved += reserve;
    return std::unique_ptr<TenantLease>(new TenantLease(*this, std::move(t), n_seqs, reserve));
}

std::optional<ApiError> Tenancy::check_token_quotas(const TenantSpec& t, int64_t reserve,
                                                    const std::string& what) {
    const TenantQuotas& q = t.quotas;
    if (q.tokens_per_day <= 0 && q.tokens_per_month <= 0) return std::nullopt;
    const Counters& cn = counters_[t.id];
    const int64_t now = unix_now();
    auto check = [&](int64_t limit, Result<int64_t> used, const char* name,
                     int64_t retry) -> std::optional<ApiError> {
        if (limit <= 0) return std::nullopt;
        if (!used) return internal_error(used.error().message);
        if (used.value() + cn.reserved + reserve > limit)
            return reject(t, name,
                          std::to_string(used.value()) + " used + " + std::to_string(cn.reserved) +
                              " reserved in flight + " + std::to_string(reserve) + " " + what +
                              " > " + std::to_string(limit),
                          retry);
        return std::nullopt;
    };
    if (auto e = check(q.tokens_per_day, ledger_->day_tokens(t.id, now), "tokens_per_day",
                       UsageLedger::seconds_to_next_day(now)))
        return e;
    return check(q.tokens_per_month, ledger_->month_tokens(t.id, now), "tokens_per_month",
                 UsageLedger::seconds_to_next_month(now));
}

ApiResult<std::unique_ptr<TenantLease>> Tenancy::admit_embeddings(
    std::shared_ptr<const TenantSpec> t, const std::vector<int64_t>& n_tokens) {
    const TenantQuotas& q = t->quotas;
    int64_t reserve = 0;
    for (int64_t n : n_tokens) reserve += n;
    std::lock_guard<std::mutex> lk(mu_);
    for (int64_t n : n_tokens)
        if (q.max_context > 0 && n > q.max_context)
            return reject(*t, "max_context",
                          "an embedding input of " + std::to_string(n) + " tokens > " +
                              std::to_string(q.max_context),
                          1);
    if (auto e = check_token_quotas(*t, reserve, "(embedding input tokens)")) return *e;
    counters_[t->id].reserved += reserve;
    return std::unique_ptr<TenantLease>(new TenantLease(*this, std::move(t), 0, reserve));
}

void Tenancy::release(const TenantSpec& t, int32_t n_seqs, int64_t reserved, bool ran,
                      int64_t prompt, int64_t completion, double queue_s) {
    std::lock_guard<std::mutex> lk(mu_);
    Counters& cn = counters_[t.id];
    cn.in_flight = std::max(0, cn.in_flight - n_seqs);
    cn.reserved = std::max<int64_t>(0, cn.reserved - reserved);
    if (!ran) return;
    ++cn.requests;
    cn.prompt_tokens += static_cast<uint64_t>(prompt);
    cn.completion_tokens += static_cast<uint64_t>(completion);
    cn.queue_s += queue_s;
    if (ledger_) {
        if (auto r = ledger_->add(t.id, prompt + completion, unix_now()); !r)
            std::fprintf(stderr, "zinc: %s\n", r.error().message.c_str());
    }
}

nlohmann::json Tenancy::usage(const std::string& id) {
    using nlohmann::json;
    std::shared_ptr<const TenantSpec> spec;
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& t : tenants_)
        if (t->id == id) spec = t;
    const Counters& cn = counters_[id];
    json rej = json::object();
    for (const auto& [k, v] : cn.rejections) rej[k] = v;
    json j = {{"object", "usage"},
              {"tenant", id},
              {"class", spec ? engine::to_string(spec->qos) : "standard"},
              {"requests", cn.requests},
              {"prompt_tokens", cn.prompt_tokens},
              {"completion_tokens", cn.completion_tokens},
              {"queue_time_seconds", cn.queue_s},
              {"in_flight_sequences", cn.in_flight},
              {"rejections", rej}};
    if (ledger_) {
        const int64_t now = unix_now();
        auto d = ledger_->day_tokens(id, now);
        auto m = ledger_->month_tokens(id, now);
        j["ledger"] = {{"day", UsageLedger::day_key(now).substr(1)},
                       {"day_tokens", d ? d.value() : -1},
                       {"month", UsageLedger::month_key(now).substr(1)},
                       {"month_tokens", m ? m.value() : -1}};
        if (spec) {
            j["ledger"]["tokens_per_day"] = spec->quotas.tokens_per_day;
            j["ledger"]["tokens_per_month"] = spec->quotas.tokens_per_month;
        }
    }
    for (const auto& st : policy_->snapshot())
        if (st.id == id) {
            j["scheduler"] = {{"running", st.running},
                              {"virtual_counter", st.vtc},
                              {"prefill_rows", st.prefill_rows},
                              {"decode_rows", st.decode_rows}};
        }
    return j;
}

std::string Tenancy::metrics() const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string out;
    auto num = [](double v) {
        char b[64];
        std::snprintf(b, sizeof b, "%.9g", v);
        return std::string(b);
    };
    auto family = [&](const char* n, const char* type, const char* help) {
        out += std::string("# HELP ") + n + " " + help + "\n# TYPE " + n + " " + type + "\n";
    };
    // Only configured tenants are labels (bounded cardinality).
    std::vector<std::string> ids;
    for (const auto& t : tenants_) ids.push_back(t->id);
    family("zinc_tenant_requests_total", "counter", "Requests served, by tenant.");
    for (const auto& id : ids)
        out += "zinc_tenant_requests_total{tenant=\"" + id + "\"} " +
               num(double(counters_.at(id).requests)) + "\n";
    family("zinc_tenant_tokens_total", "counter", "Tokens served, by tenant and kind.");
    for (const auto& id : ids) {
        const Counters& c = counters_.at(id);
        out += "zinc_tenant_tokens_total{tenant=\"" + id + "\",kind=\"prompt\"} " +
               num(double(c.prompt_tokens)) + "\n";
        out += "zinc_tenant_tokens_total{tenant=\"" + id + "\",kind=\"completion\"} " +
               num(double(c.completion_tokens)) + "\n";
    }
    family("zinc_tenant_rejections_total", "counter",
           "Requests refused (429), by tenant and quota.");
    for (const auto& id : ids)
        for (const auto& [q, n] : counters_.at(id).rejections)
            out += "zinc_tenant_rejections_total{tenant=\"" + id + "\",quota=\"" + q + "\"} " +
                   num(double(n)) + "\n";
    family("zinc_tenant_in_flight_sequences", "gauge", "Sequences admitted and not ended.");
    for (const auto& id : ids)
        out += "zinc_tenant_in_flight_sequences{tenant=\"" + id + "\"} " +
               num(counters_.at(id).in_flight) + "\n";
    std::string rows, vtc;
    std::map<std::string, engine::TenantSchedState> seen;
    for (auto& st : policy_->snapshot()) seen[st.id] = st;
    for (const auto& id : ids) {
        engine::TenantSchedState st = seen.count(id) ? seen[id] : engine::TenantSchedState{};
        st.id = id;
        rows += "zinc_tenant_served_rows_total{tenant=\"" + st.id + "\",kind=\"prefill\"} " +
                num(double(st.prefill_rows)) + "\n";
        rows += "zinc_tenant_served_rows_total{tenant=\"" + st.id + "\",kind=\"decode\"} " +
                num(double(st.decode_rows)) + "\n";
        vtc += "zinc_tenant_virtual_counter{tenant=\"" + st.id + "\"} " + num(st.vtc) + "\n";
    }
    family("zinc_tenant_served_rows_total", "counter",
           "Batch rows the engine ran for the tenant, by kind (the fair-share basis).");
    out += rows;
    family("zinc_tenant_virtual_counter", "gauge", "The tenant's VTC counter (rows / weight).");
    out += vtc;
    return out;
}

}  // namespace zinc::server
