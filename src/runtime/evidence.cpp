// zinc/runtime/evidence.cpp — the thread-safe evidence accumulator and its three renderings
// (line, JSON, Prometheus), and the JSON of one request's evidence (request_evidence.h).
#include "runtime/evidence.h"

#include <cinttypes>
#include <cstdio>

namespace zinc::runtime {

void Evidence::set_tier(std::string tier, std::string reason) {
    std::lock_guard<std::mutex> lk(mu_);
    base_tier_ = tier;
    s_.execution_tier = fell_back_ && tier != "cpu" ? tier + "+cpu" : tier;
    s_.tier_reason = std::move(reason);
}

void Evidence::set_validation_mode(std::string mode) {
    std::lock_guard<std::mutex> lk(mu_);
    s_.validation_mode = std::move(mode);
}

void Evidence::set_validate_limit(uint64_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    s_.validate_limit = n;
}

void Evidence::record_step(const OpTally& ops, const std::vector<Shortcut>& shortcuts,
                           const std::vector<Fallback>& fallbacks) {
    std::lock_guard<std::mutex> lk(mu_);
    ++s_.steps;
    s_.ops += ops;
    last_ = StepRecord{};
    last_.index = s_.steps;
    last_.tier = base_tier_;
    last_.ops = ops;
    for (const auto& sc : shortcuts) {
        ++s_.shortcuts[sc.what];
        s_.shortcut_free = false;
        last_.shortcuts.push_back(sc.what);
    }
    for (const auto& f : fallbacks) {
        ++s_.cpu_fallback;
        ++s_.fallback_ops[f.op];
        last_.fallbacks.push_back(f.op);
    }
    if (!fallbacks.empty() && base_tier_ != "cpu") {
        fell_back_ = true;
        s_.execution_tier = base_tier_ + "+cpu";
    }
}

void Evidence::record_oracle_step(const OpTally& ops) {
    std::lock_guard<std::mutex> lk(mu_);
    s_.oracle_ops += ops;
}

void Evidence::record_fallback(const std::string& op) {
    std::lock_guard<std::mutex> lk(mu_);
    ++s_.cpu_fallback;
    ++s_.fallback_ops[op];
    last_.fallbacks.push_back(op);
    if (base_tier_ != "cpu") {
        fell_back_ = true;
        s_.execution_tier = base_tier_ + "+cpu";
    }
}

void Evidence::record_shortcut(const std::string& what) {
    std::lock_guard<std::mutex> lk(mu_);
    ++s_.shortcuts[what];
    s_.shortcut_free = false;
    last_.shortcuts.push_back(what);
}

void Evidence::record_validation(bool ok, const std::string& failure) {
    std::lock_guard<std::mutex> lk(mu_);
    ++s_.validated_steps;
    last_.validated = true;
    last_.validation_failed = last_.validation_failed || !ok;
    if (!ok) {
        ++s_.validation_failures;
        if (s_.first_failure.empty()) s_.first_failure = failure;
    }
}

void Evidence::record_finiteness(bool ok, const std::string& failure) {
    std::lock_guard<std::mutex> lk(mu_);
    ++s_.finiteness_checks;
    last_.finiteness_checked = true;
    last_.finiteness_failed = last_.finiteness_failed || !ok;
    if (!ok) {
        ++s_.validation_failures;
        if (s_.first_failure.empty()) s_.first_failure = failure;
    }
}

void Evidence::set_trust_promoted(bool v) {
    std::lock_guard<std::mutex> lk(mu_);
    s_.trust_promoted = v;
}

EvidenceSnapshot Evidence::snapshot() const {
    std::lock_guard<std::mutex> lk(mu_);
    return s_;
}

StepRecord Evidence::last_step() const {
    std::lock_guard<std::mutex> lk(mu_);
    return last_;
}

namespace {

std::string fmt_bytes(uint64_t b) {
    char buf[32];
    const double v = static_cast<double>(b);
    if (b >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.2fGiB", v / (1ull << 30));
    else if (b >= (1ull << 20))
        std::snprintf(buf, sizeof buf, "%.1fMiB", v / (1ull << 20));
    else if (b >= (1ull << 10))
        std::snprintf(buf, sizeof buf, "%.1fKiB", v / (1ull << 10));
    else
        std::snprintf(buf, sizeof buf, "%" PRIu64 "B", b);
    return buf;
}

std::string json_str(const std::string& s) {
    std::string o = "\"";
    for (const char c : s) {
        switch (c) {
            case '"':
                o += "\\\"";
                break;
            case '\\':
                o += "\\\\";
                break;
            case '\n':
                o += "\\n";
                break;
            case '\r':
                o += "\\r";
                break;
            case '\t':
                o += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", c);
                    o += b;
                } else {
                    o += c;
                }
        }
    }
    return o + "\"";
}

std::string json_counts(const std::map<std::string, uint64_t>& m) {
    std::string o = "{";
    for (const auto& [k, v] : m) {
        if (o.size() > 1) o += ",";
        o += json_str(k) + ":" + std::to_string(v);
    }
    return o + "}";
}

}  // namespace

std::string op_tally_json(const OpTally& t) {
    std::string o = "{";
    for (int d = 0; d < kNumDevices; ++d) {
        const Device dev = static_cast<Device>(d);
        if (d) o += ",";
        o += json_str(device_name(dev)) + ":{\"ops\":" + std::to_string(t.total_ops(dev)) +
             ",\"weight_bytes\":" + std::to_string(t.weight_bytes[d]) +
             ",\"act_bytes\":" + std::to_string(t.act_bytes[d]) + ",\"by_op\":{";
        bool first = true;
        for (int k = 0; k < kNumOps; ++k) {
            if (!t.ops[d][k]) continue;
            if (!first) o += ",";
            first = false;
            o += json_str(op_name(static_cast<Op>(k))) + ":" + std::to_string(t.ops[d][k]);
        }
        o += "}}";
    }
    return o + "}";
}

namespace {

// Label values escaped for the Prometheus text format.
std::string prom_label(const std::string& s) {
    std::string o;
    for (const char c : s) {
        if (c == '\\' || c == '"') o += '\\';
        if (c == '\n') {
            o += "\\n";
            continue;
        }
        o += c;
    }
    return o;
}

}  // namespace

std::string evidence_line(const EvidenceSnapshot& e) {
    std::string o = "evidence: tier=" + e.execution_tier + " steps=" + std::to_string(e.steps);
    const Device devs[] = {Device::Cuda, Device::Cpu};
    o += " ops=";
    for (int i = 0; i < 2; ++i)
        o += std::string(i ? "," : "") + device_name(devs[i]) + ":" +
             std::to_string(e.ops.total_ops(devs[i]));
    o += " bytes=";
    for (int i = 0; i < 2; ++i) {
        const int d = static_cast<int>(devs[i]);
        o += std::string(i ? "," : "") + device_name(devs[i]) + ":" +
             fmt_bytes(e.ops.weight_bytes[d] + e.ops.act_bytes[d]);
    }
    o += " cpu_fallback=" + std::to_string(e.cpu_fallback);
    if (e.validate_limit > 0 || e.validated_steps > 0) {
        o += " validated=" + std::to_string(e.validated_steps) + "/" +
             std::to_string(e.validate_limit) +
             " failures=" + std::to_string(e.validation_failures);
        o += std::string(" trust=") + (e.trust_promoted ? "promoted" : "unpromoted");
        if (!e.validation_mode.empty()) o += " validation=" + e.validation_mode;
    } else {
        o += " validated=off";
        if (e.validation_failures) o += " failures=" + std::to_string(e.validation_failures);
    }
    o += std::string(" shortcut_free=") + (e.shortcut_free ? "true" : "false");
    if (!e.fallback_ops.empty()) {
        o += " fallback_ops=";
        bool first = true;
        for (const auto& [k, v] : e.fallback_ops) {
            o += (first ? "" : ",") + k + ":" + std::to_string(v);
            first = false;
        }
    }
    if (!e.shortcuts.empty()) {
        o += " shortcuts=\"";
        bool first = true;
        for (const auto& [k, v] : e.shortcuts) {
            o += (first ? "" : "; ") + k;
            first = false;
        }
        o += "\"";
    }
    if (!e.first_failure.empty()) o += " first_failure=\"" + e.first_failure + "\"";
    return o;
}

std::string evidence_json(const EvidenceSnapshot& e) {
    std::string o = "{";
    o += "\"execution_tier\":" + json_str(e.execution_tier);
    o += ",\"tier_reason\":" + json_str(e.tier_reason);
    o += ",\"steps\":" + std::to_string(e.steps);
    o += ",\"devices\":" + op_tally_json(e.ops);
    o += ",\"oracle\":" + op_tally_json(e.oracle_ops);
    o += ",\"cpu_fallback\":" + std::to_string(e.cpu_fallback);
    o += ",\"fallback_ops\":" + json_counts(e.fallback_ops);
    o += ",\"validate_limit\":" + std::to_string(e.validate_limit);
    o += ",\"validation\":" + json_str(e.validation_mode);
    o += ",\"validated_steps\":" + std::to_string(e.validated_steps);
    o += ",\"validation_failures\":" + std::to_string(e.validation_failures);
    o += ",\"finiteness_checks\":" + std::to_string(e.finiteness_checks);
    o += std::string(",\"trust_promoted\":") + (e.trust_promoted ? "true" : "false");
    o += ",\"first_failure\":" + json_str(e.first_failure);
    o += std::string(",\"shortcut_free\":") + (e.shortcut_free ? "true" : "false");
    o += ",\"shortcuts\":" + json_counts(e.shortcuts);
    return o + "}";
}

std::string request_evidence_json(const RequestEvidence& e) {
    std::string o = "{";
    o += "\"execution_tier\":" + json_str(e.execution_tier);
    o += ",\"steps\":" + std::to_string(e.steps);
    o += ",\"prompt_rows\":" + std::to_string(e.prompt_rows);
    o += ",\"generated_rows\":" + std::to_string(e.generated_rows);
    o += ",\"attribution\":" +
         json_str(
             "devices: each step's ops and bytes split by rows over its requests; "
             "step_totals: whole steps this request was part of (shared)");
    o += ",\"devices\":" + op_tally_json(e.share);
    o += ",\"step_totals\":" + op_tally_json(e.step_totals);
    o += ",\"cpu_fallback\":" + std::to_string(e.cpu_fallback);
    o += ",\"fallback_ops\":" + json_counts(e.fallback_ops);
    o += ",\"validated_steps\":" + std::to_string(e.validated_steps);
    o += ",\"validation_failures\":" + std::to_string(e.validation_failures);
    o += ",\"finiteness_checks\":" + std::to_string(e.finiteness_checks);
    o += std::string(",\"shortcut_free\":") + (e.shortcut_free ? "true" : "false");
    o += ",\"shortcuts\":" + json_counts(e.shortcuts);
    return o + "}";
}

std::string evidence_prometheus(const EvidenceSnapshot& e) {
    std::string o;
    auto head = [&](const char* name, const char* type, const char* help) {
        o += std::string("# HELP zinc_evidence_") + name + " " + help + "\n# TYPE zinc_evidence_" +
             name + " " + type + "\n";
    };
    auto line = [&](const std::string& name, const std::string& labels, uint64_t v) {
        o += "zinc_evidence_" + name + (labels.empty() ? "" : "{" + labels + "}") + " " +
             std::to_string(v) + "\n";
    };
    head("info", "gauge",
         "execution tier of the runner (value 1), why it was chosen, validation mode");
    line("info",
         "execution_tier=\"" + prom_label(e.execution_tier) + "\",tier_reason=\"" +
             prom_label(e.tier_reason) + "\",validation=\"" + prom_label(e.validation_mode) + "\"",
         1);
    head("steps_total", "counter", "forward steps run");
    line("steps_total", "", e.steps);
    head("ops_total", "counter",
         "ops executed, counted inside the forward pass, per device and op");
    for (int d = 0; d < kNumDevices; ++d)
        for (int k = 0; k < kNumOps; ++k)
            if (e.ops.ops[d][k])
                line("ops_total",
                     std::string("device=\"") + device_name(static_cast<Device>(d)) + "\",op=\"" +
                         op_name(static_cast<Op>(k)) + "\"",
                     e.ops.ops[d][k]);
    head("bytes_total", "counter", "bytes moved by executed ops, per device and kind");
    for (int d = 0; d < kNumDevices; ++d) {
        const std::string dev =
            std::string("device=\"") + device_name(static_cast<Device>(d)) + "\"";
        line("bytes_total", dev + ",kind=\"weights\"", e.ops.weight_bytes[d]);
        line("bytes_total", dev + ",kind=\"activations\"", e.ops.act_bytes[d]);
    }
    head("oracle_ops_total", "counter", "ops run by the CPU oracle for validation only");
    line("oracle_ops_total", "", e.oracle_ops.total_ops(Device::Cpu));
    head("cpu_fallback_total", "counter", "ops or steps meant for the device that ran on the CPU");
    line("cpu_fallback_total", "", e.cpu_fallback);
    for (const auto& [k, v] : e.fallback_ops)
        line("cpu_fallback_total", "op=\"" + prom_label(k) + "\"", v);
    head("validated_steps_total", "counter", "steps compared against the CPU oracle");
    line("validated_steps_total", "", e.validated_steps);
    head("validation_failures_total", "counter",
         "validated or finiteness-checked steps that failed");
    line("validation_failures_total", "", e.validation_failures);
    head("trust_promoted", "gauge", "1 after ZINC_VALIDATE clean steps");
    line("trust_promoted", "", e.trust_promoted ? 1 : 0);
    head("shortcut_free", "gauge",
         "1 unless a layer was skipped, vocab capped, experts clamped or context truncated");
    line("shortcut_free", "", e.shortcut_free ? 1 : 0);
    return o;
}

EvidenceSnapshot evidence_delta(const EvidenceSnapshot& after, const EvidenceSnapshot& before) {
    EvidenceSnapshot d = after;
    d.steps = after.steps - before.steps;
    for (int i = 0; i < kNumDevices; ++i) {
        for (int k = 0; k < kNumOps; ++k) {
            d.ops.ops[i][k] = after.ops.ops[i][k] - before.ops.ops[i][k];
            d.oracle_ops.ops[i][k] = after.oracle_ops.ops[i][k] - before.oracle_ops.ops[i][k];
        }
        d.ops.weight_bytes[i] = after.ops.weight_bytes[i] - before.ops.weight_bytes[i];
        d.ops.act_bytes[i] = after.ops.act_bytes[i] - before.ops.act_bytes[i];
        d.oracle_ops.weight_bytes[i] =
            after.oracle_ops.weight_bytes[i] - before.oracle_ops.weight_bytes[i];
        d.oracle_ops.act_bytes[i] = after.oracle_ops.act_bytes[i] - before.oracle_ops.act_bytes[i];
    }
    d.cpu_fallback = after.cpu_fallback - before.cpu_fallback;
    // Named counts: what happened between the two snapshots only.
    auto diff = [](const std::map<std::string, uint64_t>& a,
                   const std::map<std::string, uint64_t>& b) {
        std::map<std::string, uint64_t> out;
        for (const auto& [k, v] : a) {
            const auto it = b.find(k);
            const uint64_t prev = it == b.end() ? 0 : it->second;
            if (v > prev) out[k] = v - prev;
        }
        return out;
    };
    d.fallback_ops = diff(after.fallback_ops, before.fallback_ops);
    d.shortcuts = diff(after.shortcuts, before.shortcuts);
    d.shortcut_free = d.shortcuts.empty();
    d.validated_steps = after.validated_steps - before.validated_steps;
    d.validation_failures = after.validation_failures - before.validation_failures;
    d.finiteness_checks = after.finiteness_checks - before.finiteness_checks;
    return d;
}

}  // namespace zinc::runtime
