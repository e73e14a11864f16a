// zinc/runtime/validator.cpp — per-step comparison of intermediates against the CPU oracle.
#include "runtime/validator.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace zinc::runtime {

bool all_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return false;
    return true;
}

std::string producing_op(std::string_view name) {
    // Strip "blk.<il>."
    std::string_view base = name;
    if (base.substr(0, 4) == "blk.") {
        const size_t dot = base.find('.', 4);
        if (dot != std::string_view::npos) base = base.substr(dot + 1);
    }
    static const std::map<std::string_view, const char*> kOps = {
        {"inp_embd", "embed"},
        {"Qcur", "q/k/v matmul"},
        {"Kcur", "q/k/v matmul"},
        {"Vcur", "q/k/v matmul"},
        {"kqv_out", "rope_kv+attention"},
        {"attn_out", "attn_output matmul"},
        {"ffn_inp", "attention block (norm, q/k/v, rope, attention, output, residual add)"},
        {"ffn_out", "ffn (gate/up matmul, glu, down matmul)"},
        {"l_out", "ffn block (norm, gate/up, glu, down, residual add)"},
        {"result_output", "output head (norm, lm_head matmul)"},
    };
    const auto it = kOps.find(base);
    return it == kOps.end() ? std::string(base) : std::string(it->second);
}

namespace {

std::string fmt(const char* f, double a, double b) {
    char buf[96];
    std::snprintf(buf, sizeof buf, f, a, b);
    return buf;
}

}  // namespace

StepComparison compare_step(uint64_t step, const std::vector<Captured>& serving,
                            const std::vector<Captured>& oracle, const Thresholds& tol,
                            int n_layer) {
    StepComparison r;
    std::map<std::string_view, const Captured*> by_name;
    for (const Captured& c : serving) by_name[c.name] = &c;
    std::vector<bool> l_out_seen(static_cast<size_t>(std::max(n_layer, 0)), false);
    const std::string where = "step " + std::to_string(step);
    for (const Captured& o : oracle) {
        const auto it = by_name.find(o.name);
        const bool layer_out =
            o.il >= 0 && o.il + 1 < n_layer && o.name == "blk." + std::to_string(o.il) + ".l_out";
        if (it == by_name.end()) {
            if (layer_out && r.ok) {
                r.ok = false;
                r.failure = where + " layer " + std::to_string(o.il) + " op l_out: " + o.name +
                            " missing on the serving tier (not produced or not captured)";
            }
            continue;
        }
        const Captured& s = *it->second;
        if (s.n_rows != o.n_rows || s.dim != o.dim) continue;
        ++r.n_compared;
        const bool is_logits = o.name == "result_output";
        const double t = is_logits ? tol.logits : tol.residual;
        double num = 0, den = 0;
        bool finite = true;
        for (size_t i = 0; i < o.data.size(); ++i) {
            const double a = s.data[i], b = o.data[i];
            if (!std::isfinite(a)) finite = false;
            num += (a - b) * (a - b);
            den += b * b;
        }
        const double rel = finite ? std::sqrt(num) / std::max(std::sqrt(den), 1e-6) : INFINITY;
        if (rel > r.worst_rel || r.worst_name.empty()) {
            r.worst_rel = rel;
            r.worst_name = o.name;
        }
        if (layer_out) l_out_seen[o.il] = true;
        if (r.ok && !(rel <= t)) {
            r.ok = false;
            r.failure = where + " layer " + (o.il >= 0 ? std::to_string(o.il) : std::string("-")) +
                        " op " + producing_op(o.name) + ": " + o.name +
                        (finite ? fmt(" rel err %.3g > tol %.3g", rel, t)
                                : std::string(" has non-finite values"));
        }
    }
    if (r.ok) {
        for (int il = 0; il + 1 < n_layer; ++il) {
            if (!l_out_seen[il]) {
                r.ok = false;
                r.failure = where + " layer " + std::to_string(il) + " op l_out: blk." +
                            std::to_string(il) +
                            ".l_out missing on the serving tier (not produced or not captured)";
                break;
            }
        }
    }
    return r;
}

}  // namespace zinc::runtime
