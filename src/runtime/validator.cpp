// zinc/runtime/validator.cpp — per-step comparison of intermediates against the CPU oracle.
#include "runtime/validator.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>

namespace zinc::runtime {

bool all_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i])) return false;
    return true;
}

namespace {

struct OpName {
    const char* single;  // the op, when its input intermediate was compared
    const char* input;   // that input ("" when it is not a named intermediate)
    const char* span;    // the ops since the previous compared intermediate, otherwise
};

const OpName* op_entry(std::string_view base) {
    static const std::map<std::string_view, OpName> kOps = {
        {"inp_embd", {"embed", "", "embed"}},
        {"Qcur", {"attn_q matmul", "", "attn_q matmul"}},
        {"Kcur", {"attn_k matmul", "", "attn_k matmul"}},
        {"Vcur", {"attn_v matmul", "", "attn_v matmul"}},
        {"kqv_out",
         {"attention (rope_kv, attention)", "Vcur",
          "attention (norm, q/k/v matmul, rope_kv, attention)"}},
        {"attn_out",
         {"attn_output matmul", "kqv_out",
          "attention (norm, q/k/v matmul, rope_kv, attention, attn_output matmul)"}},
        {"ffn_inp",
         {"attention residual add", "attn_out",
          "attention block (norm, q/k/v, rope, attention, output, residual add)"}},
        {"ffn_gate", {"ffn_gate matmul", "", "ffn_gate matmul"}},
        {"ffn_up", {"ffn_up matmul", "", "ffn_up matmul"}},
        {"ffn_glu", {"glu", "ffn_up", "ffn gate/up matmul, glu"}},
        {"ffn_out", {"ffn_down matmul", "ffn_glu", "ffn (gate/up matmul, glu, down matmul)"}},
        {"l_out",
         {"ffn residual add", "ffn_out", "ffn block (norm, gate/up, glu, down, residual add)"}},
        {"result_output",
         {"output head (norm, lm_head matmul)", "", "output head (norm, lm_head matmul)"}},
    };
    const auto it = kOps.find(base);
    return it == kOps.end() ? nullptr : &it->second;
}

// "blk.<il>.NAME" -> NAME
std::string_view base_name(std::string_view name) {
    if (name.substr(0, 4) == "blk.") {
        const size_t dot = name.find('.', 4);
        if (dot != std::string_view::npos) return name.substr(dot + 1);
    }
    return name;
}

}  // namespace

std::string producing_op(std::string_view name, bool input_compared) {
    const std::string_view base = base_name(name);
    const OpName* e = op_entry(base);
    if (!e) return std::string(base);
    return input_compared ? e->single : e->span;
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
    std::set<std::string> compared;  // names compared so far (the oracle's execution order)
    std::set<std::string> failed;    // names compared and failed
    std::string first_failed;
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
        if (s.n_rows != o.n_rows || s.dim != o.dim || s.data.size() != o.data.size()) continue;
        ++r.n_compared;
        compared.insert(o.name);
        const bool is_logits = o.name == "result_output";
        const double t = is_logits ? tol.logits : tol.residual;
        double num = 0, den = 0;
        bool finite = true;
        size_t n_diff_bits = 0;
        for (size_t i = 0; i < o.data.size(); ++i) {
            const double a = s.data[i], b = o.data[i];
            if (!std::isfinite(a)) finite = false;
            if (std::bit_cast<uint32_t>(s.data[i]) != std::bit_cast<uint32_t>(o.data[i]))
                ++n_diff_bits;
            num += (a - b) * (a - b);
            den += b * b;
        }
        const double rel = finite ? std::sqrt(num) / std::max(std::sqrt(den), 1e-6) : INFINITY;
        if (rel > r.worst_rel || r.worst_name.empty()) {
            r.worst_rel = rel;
            r.worst_name = o.name;
        }
        if (layer_out) l_out_seen[o.il] = true;
        const bool pass = finite && (tol.bitwise ? n_diff_bits == 0 : rel <= t);
        if (!pass) failed.insert(o.name);
        if (r.ok && !pass) {
            r.ok = false;
            first_failed = o.name;
            // The op: the single one when its input intermediate was compared (and so passed).
            bool input_compared = true;
            const std::string_view base = base_name(o.name);
            if (const OpName* e = op_entry(base); e && *e->input) {
                const std::string prefix =
                    o.il >= 0 ? "blk." + std::to_string(o.il) + "." : std::string();
                input_compared = compared.count(prefix + e->input) > 0;
            }
            std::string detail;
            if (!finite)
                detail = " has non-finite values";
            else if (tol.bitwise)
                detail = ": " + std::to_string(n_diff_bits) + " of " +
                         std::to_string(o.data.size()) + " values differ in bits" +
                         fmt(" (rel err %.3g; bitwise, tol %g)", rel, 0.0);
            else
                detail = fmt(" rel err %.3g > tol %.3g", rel, t);
            r.failure = where + " layer " + (o.il >= 0 ? std::to_string(o.il) : std::string("-")) +
                        " op " + producing_op(o.name, input_compared) + ": " + o.name + detail;
        }
    }
    // Sibling projections that all fail share their input: the norm before them is as likely.
    if (!r.ok && !first_failed.empty()) {
        const std::string_view base = base_name(first_failed);
        const std::string prefix = first_failed.substr(0, first_failed.size() - base.size());
        auto all_failed = [&](std::initializer_list<const char*> names) {
            for (const char* n : names)
                if (!failed.count(prefix + n)) return false;
            return true;
        };
        if (base == "Qcur" && all_failed({"Kcur", "Vcur"}))
            r.failure +=
                "; Kcur and Vcur differ too: their common input, the attention norm, "
                "is as likely";
        else if (base == "ffn_gate" && all_failed({"ffn_up"}))
            r.failure += "; ffn_up differs too: their common input, the ffn norm, is as likely";
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
