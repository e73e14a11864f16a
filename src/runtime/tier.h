// zinc/runtime/tier.h — tier and device selection (`--tier auto|cuda|cpu`, ZINC_TIER, `-d N`,
// ZINC_DEVICE) and the runtime's
// environment switches (ZINC_VALIDATE, ZINC_VALIDATE_STRICT, ZINC_VALIDATE_TOL,
// ZINC_SKIP_LAYERS, ZINC_CPU_OPS, ZINC_TEST_CORRUPT), parsed once into RuntimeOptions.
//
// choose_tier is a pure function of the request, the device probe (backend/cuda/cuda_tier.h)
// and the bytes the model needs, so its decisions are unit-tested without a GPU.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/cuda_tier.h"
#include "runtime/forward_hooks.h"
#include "util/result.h"

namespace zinc::runtime {

enum class TierRequest { Auto, Cpu, Cuda };
enum class Tier { Cpu, Cuda };
const char* to_string(TierRequest t);
const char* to_string(Tier t);

/// "auto" | "cpu" | "cuda". Error names `what` (e.g. "--tier" or "ZINC_TIER").
Result<TierRequest> parse_tier(std::string_view s, std::string_view what);

struct TierChoice {
    Tier tier = Tier::Cpu;
    int device = 0;      // CUDA device index when tier == Cuda
    std::string reason;  // one line: why this tier
};

/// Auto picks CUDA when the build has it, a usable device `device` exists and its free memory
/// holds `bytes_needed`; otherwise the CPU, saying why. An explicit Cuda request that cannot be
/// met is an error (one line, with the probe's reason); Cpu is always granted.
/// `source` names where the request came from ("--tier", "ZINC_TIER", "default");
/// `device_source` where the device index came from ("-d", "ZINC_DEVICE", "default"). A device
/// asked for explicitly (-d / ZINC_DEVICE) that is not among the usable devices found is an
/// error naming them, under auto too; with the CPU tier asked for, the index is ignored and the
/// reason says so.
Result<TierChoice> choose_tier(TierRequest req, std::string_view source, const cuda::Probe& probe,
                               size_t bytes_needed, int device,
                               std::string_view device_source = "default");

/// Relative-L2 thresholds of validation (|a - b|_2 / |b|_2 per intermediate).
struct Thresholds {
    double residual = 5e-2;  // per-layer residual stream (ffn_inp, l_out) and other intermediates
    double logits = 5e-2;    // final logits
    /// Bitwise validation: every value must have the oracle's exact bits (threshold 0; -0 vs +0
    /// and NaN payloads count as differences). Set when the serving Runner is exact()
    /// (model/batch.h): the CUDA tier in ZINC_EXACT=1 mode, or the CPU tier; the two
    /// thresholds above are then unused.
    bool bitwise = false;
};

struct RuntimeOptions {
    TierRequest tier = TierRequest::Auto;
    std::string tier_source = "default";    // "--tier", "ZINC_TIER" or "default"
    int device = 0;                         // -d N / --device N, else ZINC_DEVICE, else 0
    std::string device_source = "default";  // "-d", "ZINC_DEVICE" or "default"
    int validate_steps = 0;                 // ZINC_VALIDATE=N
    bool validate_strict = false;      // ZINC_VALIDATE_STRICT=1: finish on the CPU after a failure
    Thresholds thresholds;             // ZINC_VALIDATE_TOL=residual[,logits]
    std::vector<int> skip_layers;      // ZINC_SKIP_LAYERS=3,5 (debug shortcut)
    std::vector<std::string> cpu_ops;  // ZINC_CPU_OPS=glu (force ops of a device tier to the CPU)
    CorruptSpec corrupt;               // ZINC_TEST_CORRUPT=name:layer (test-only fault injection)
    /// --exact or ZINC_EXACT=1: the CUDA tier computes the CPU tier's bits (docs/exactness.md);
    /// default (ZINC_EXACT unset or 0): its fast kernels. The CPU tier is exact either way.
    bool exact = false;
    /// --tensor-parallel N (model/shard.h): 0 off; N >= 1 ranks; -1 every usable CUDA device
    /// (--split-mode row alone). CPU tier: N shards in lockstep (backend/cpu/tp_runner.h); CUDA
    /// tier: N must not exceed the usable devices, and only N = 1 runs today.
    int tensor_parallel = 0;
};

/// Read the switches from `env` (std::getenv in production). `tier_flag` is the --tier value,
/// empty when the flag was not given (then ZINC_TIER, then auto). Errors name the variable.
Result<RuntimeOptions> runtime_options(const std::string& tier_flag,
                                       const std::function<const char*(const char*)>& env);
/// The same with the -d/--device value (`device_flag` < 0: not given; then ZINC_DEVICE, an
/// integer in [0, 1023], else device 0).
Result<RuntimeOptions> runtime_options(const std::string& tier_flag, int device_flag,
                                       const std::function<const char*(const char*)>& env);

/// The CUDA tier's rank count for --tensor-parallel `requested` (RuntimeOptions::
/// tensor_parallel): -1 becomes the number of usable devices; more ranks than usable devices is
/// an error naming them. 0 (off) stays 0.
Result<int> cuda_tensor_parallel(int requested, const cuda::Probe& probe);

/// The usable CUDA devices of a probe as one phrase, e.g. "0 (NVIDIA H200, compute 9.0), 1
/// (NVIDIA H200, compute 9.0)", or "none" with the probe's reason.
std::string describe_devices(const cuda::Probe& probe);

}  // namespace zinc::runtime
