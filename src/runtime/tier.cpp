// zinc/runtime/tier.cpp — tier choice and the parsing of the runtime's environment switches.
#include "runtime/tier.h"

#include <cctype>
#include <cstdlib>

namespace zinc::runtime {

const char* to_string(TierRequest t) {
    switch (t) {
        case TierRequest::Auto:
            return "auto";
        case TierRequest::Cpu:
            return "cpu";
        case TierRequest::Cuda:
            return "cuda";
    }
    return "?";
}
const char* to_string(Tier t) {
    return t == Tier::Cuda ? "cuda" : "cpu";
}

Result<TierRequest> parse_tier(std::string_view s, std::string_view what) {
    if (s == "auto") return TierRequest::Auto;
    if (s == "cpu") return TierRequest::Cpu;
    if (s == "cuda") return TierRequest::Cuda;
    return make_error(std::string(what) + ": unknown tier '" + std::string(s) +
                      "', expected auto, cuda or cpu");
}

namespace {

std::string mib(size_t b) {
    return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB";
}

}  // namespace

std::string describe_devices(const cuda::Probe& probe) {
    if (probe.devices.empty())
        return "none (" +
               (probe.reason.empty() ? std::string("no usable CUDA device") : probe.reason) + ")";
    std::string o;
    for (const auto& d : probe.devices) {
        if (!o.empty()) o += ", ";
        o += std::to_string(d.index) + " (" + d.name + ", compute " + std::to_string(d.cc_major) +
             "." + std::to_string(d.cc_minor) + ")";
    }
    return o;
}

Result<TierChoice> choose_tier(TierRequest req, std::string_view source, const cuda::Probe& probe,
                               size_t bytes_needed, int device, std::string_view device_source) {
    const std::string src = std::string(source) == "default"
                                ? std::string("auto")
                                : std::string(source) + "=" + to_string(req);
    const bool device_asked = device_source != "default";
    const std::string dev_src = std::string(device_source) + " " + std::to_string(device);
    TierChoice c;
    c.device = device;
    if (req == TierRequest::Cpu) {
        c.reason = src + ": the CPU tier was asked for";
        if (device_asked) c.reason += " (" + dev_src + " ignored: it selects a CUDA device)";
        return c;
    }
    if (device_asked && !probe.devices.empty()) {
        bool found = false;
        for (const auto& d : probe.devices) found = found || d.index == device;
        if (!found)
            return make_error(dev_src + ": no usable CUDA device " + std::to_string(device) +
                              "; usable devices found: " + describe_devices(probe));
    }
    // Why CUDA cannot be used, or "" when it can.
    std::string why_not;
    const cuda::DeviceInfo* dev = nullptr;
    if (!probe.built) {
        why_not = "zinc was built without the CUDA tier";
    } else if (probe.devices.empty()) {
        why_not = probe.reason.empty() ? "no usable CUDA device" : probe.reason;
    } else {
        for (const auto& d : probe.devices)
            if (d.index == device) dev = &d;
        if (!dev) {
            why_not = "CUDA device " + std::to_string(device) + " is not usable (" +
                      std::to_string(probe.devices.size()) + " usable, first is " +
                      std::to_string(probe.devices.front().index) + ")";
        } else if (dev->mem_free > 0 && bytes_needed > dev->mem_free) {
            why_not = "CUDA device " + std::to_string(dev->index) + " (" + dev->name + ") has " +
                      mib(dev->mem_free) + " free, the model and KV cache need about " +
                      mib(bytes_needed);
        }
    }
    if (why_not.empty()) {
        c.tier = Tier::Cuda;
        c.reason = src + ": CUDA device " + std::to_string(dev->index) + " (" + dev->name +
                   ", compute " + std::to_string(dev->cc_major) + "." +
                   std::to_string(dev->cc_minor) + ", " + mib(dev->mem_free) +
                   " free) holds the model and KV cache (about " + mib(bytes_needed) + ")";
        return c;
    }
    if (device_asked) why_not += " (" + dev_src + " asked for)";
    if (req == TierRequest::Cuda) return make_error(src + ": cannot use the CUDA tier: " + why_not);
    c.tier = Tier::Cpu;
    c.reason = src + ": using the CPU tier because " + why_not;
    return c;
}

namespace {

Result<int> parse_int(const std::string& s, const char* var, int lo, int hi) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    const bool starts_ok =
        !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-');
    if (!starts_ok || *end != '\0' || v < lo || v > hi)
        return make_error(std::string(var) + "=" + s + ": expected an integer in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int>(v);
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t a = 0;
    while (a <= s.size()) {
        const size_t b = s.find(sep, a);
        const std::string part = s.substr(a, b == std::string::npos ? std::string::npos : b - a);
        if (!part.empty()) out.push_back(part);
        if (b == std::string::npos) break;
        a = b + 1;
    }
    return out;
}

Result<double> parse_tol(const std::string& s, const char* var) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v > 0.0) || v > 1e6)
        return make_error(std::string(var) + "=" + s + ": expected a positive number");
    return v;
}

}  // namespace

Result<RuntimeOptions> runtime_options(const std::string& tier_flag,
                                       const std::function<const char*(const char*)>& env) {
    return runtime_options(tier_flag, -1, env);
}

Result<RuntimeOptions> runtime_options(const std::string& tier_flag, int device_flag,
                                       const std::function<const char*(const char*)>& env) {
    RuntimeOptions o;
    auto get = [&](const char* k) -> std::string {
        const char* v = env(k);
        return v ? std::string(v) : std::string();
    };
    if (device_flag >= 0) {
        if (device_flag > 1023)
            return make_error("-d " + std::to_string(device_flag) +
                              ": expected a CUDA device index in [0, 1023]");
        o.device = device_flag;
        o.device_source = "-d";
    } else if (const std::string v = get("ZINC_DEVICE"); !v.empty()) {
        auto n = parse_int(v, "ZINC_DEVICE", 0, 1023);
        if (!n) return n.error();
        o.device = n.value();
        o.device_source = "ZINC_DEVICE";
    }
    if (!tier_flag.empty()) {
        auto t = parse_tier(tier_flag, "--tier");
        if (!t) return t.error();
        o.tier = t.value();
        o.tier_source = "--tier";
    } else if (const std::string t = get("ZINC_TIER"); !t.empty()) {
        auto r = parse_tier(t, "ZINC_TIER");
        if (!r) return r.error();
        o.tier = r.value();
        o.tier_source = "ZINC_TIER";
    }
    if (const std::string v = get("ZINC_VALIDATE"); !v.empty()) {
        auto n = parse_int(v, "ZINC_VALIDATE", 0, 1 << 30);
        if (!n) return n.error();
        o.validate_steps = n.value();
    }
    if (const std::string v = get("ZINC_EXACT"); !v.empty()) {
        if (v != "0" && v != "1") return make_error("ZINC_EXACT=" + v + ": expected 0 or 1");
        o.exact = v == "1";
    }
    if (const std::string v = get("ZINC_VALIDATE_STRICT"); !v.empty()) {
        if (v != "0" && v != "1")
            return make_error("ZINC_VALIDATE_STRICT=" + v + ": expected 0 or 1");
        o.validate_strict = v == "1";
    }
    if (const std::string v = get("ZINC_VALIDATE_TOL"); !v.empty()) {
        const auto parts = split(v, ',');
        if (parts.empty() || parts.size() > 2)
            return make_error("ZINC_VALIDATE_TOL=" + v + ": expected RESIDUAL[,LOGITS]");
        auto r = parse_tol(parts[0], "ZINC_VALIDATE_TOL");
        if (!r) return r.error();
        o.thresholds.residual = r.value();
        o.thresholds.logits = r.value();
        if (parts.size() == 2) {
            auto l = parse_tol(parts[1], "ZINC_VALIDATE_TOL");
            if (!l) return l.error();
            o.thresholds.logits = l.value();
        }
    }
    if (const std::string v = get("ZINC_SKIP_LAYERS"); !v.empty()) {
        for (const auto& p : split(v, ',')) {
            auto n = parse_int(p, "ZINC_SKIP_LAYERS", 0, 1 << 20);
            if (!n) return n.error();
            o.skip_layers.push_back(n.value());
        }
    }
    if (const std::string v = get("ZINC_CPU_OPS"); !v.empty()) {
        for (const auto& p : split(v, ',')) {
            if (p != "glu")
                return make_error("ZINC_CPU_OPS=" + v + ": unknown op '" + p +
                                  "' (ops that can be forced onto the CPU: glu)");
            o.cpu_ops.push_back(p);
        }
    }
    if (const std::string v = get("ZINC_TEST_CORRUPT"); !v.empty()) {
        const size_t colon = v.rfind(':');
        if (colon == std::string::npos || colon == 0)
            return make_error("ZINC_TEST_CORRUPT=" + v + ": expected NAME:LAYER (e.g. l_out:3)");
        auto il = parse_int(v.substr(colon + 1), "ZINC_TEST_CORRUPT", -1, 1 << 20);
        if (!il) return il.error();
        o.corrupt.name = v.substr(0, colon);
        o.corrupt.il = il.value();
    }
    return o;
}

Result<int> cuda_tensor_parallel(int requested, const cuda::Probe& probe) {
    if (requested == 0) return 0;
    const int n_dev = static_cast<int>(probe.devices.size());
    const int n = requested < 0 ? n_dev : requested;  // --split-mode row: every usable device
    if (n < 1 || n > n_dev)
        return make_error("--tensor-parallel " + std::to_string(n) + ": the CUDA tier has " +
                          std::to_string(n_dev) + " usable device" + (n_dev == 1 ? "" : "s") +
                          " (" + describe_devices(probe) + "); N must be at most " +
                          std::to_string(n_dev));
    return n;
}

}  // namespace zinc::runtime
