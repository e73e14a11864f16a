// zinc/runtime/evidence.h — the run's evidence: which tier executed, what each device really
// did (ops and bytes counted inside the Runners' forward passes, runtime/forward_hooks.h), CPU
// fallbacks with the op names, validation against the CPU oracle, and whether the run was
// shortcut-free. One Evidence per Runner (per run); readers take a Snapshot. Rendered as one
// compact line (CLI, bench), a JSON object (/health, bench --json) and Prometheus series
// (/metrics). Field meanings: docs/runtime.md.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/forward_hooks.h"
#include "runtime/request_evidence.h"

namespace zinc::runtime {

struct EvidenceSnapshot {
    std::string execution_tier = "cpu";  // "cpu", "cuda", or "cuda+cpu" after a CPU fallback
    std::string tier_reason;             // one line: why this tier
    uint64_t steps = 0;                  // forward calls (step batches) run
    OpTally ops;                         // executed by the serving tier (and fallbacks)
    OpTally oracle_ops;                  // executed by the CPU oracle for validation only
    uint64_t cpu_fallback = 0;           // ops (or whole steps) meant for the device, run on CPU
    std::map<std::string, uint64_t> fallback_ops;  // op name -> count
    uint64_t validate_limit = 0;                   // ZINC_VALIDATE=N (0: validation off)
    /// How validated steps are compared: "bitwise" (an exact serving tier: any differing bit
    /// fails), "tolerance" (relative L2 error against ZINC_VALIDATE_TOL), "" when off.
    std::string validation_mode;
    uint64_t validated_steps = 0;                  // steps compared against the CPU oracle
    uint64_t validation_failures = 0;  // steps whose comparison failed (or non-finite logits)
    uint64_t finiteness_checks = 0;    // steps after trust promotion checked for finite logits
    bool trust_promoted = false;       // validate_limit clean validated steps done
    std::string first_failure;         // "step S layer L op O: ..." of the first failure
    bool shortcut_free = true;
    std::map<std::string, uint64_t> shortcuts;  // what -> count
};

class Evidence {
  public:
    void set_tier(std::string tier, std::string reason);
    void set_validate_limit(uint64_t n);
    /// "bitwise" or "tolerance" (EvidenceSnapshot::validation_mode).
    void set_validation_mode(std::string mode);
    /// Merge one finished step of the serving tier: its op tally, shortcuts and fallbacks.
    void record_step(const OpTally& ops, const std::vector<Shortcut>& shortcuts,
                     const std::vector<Fallback>& fallbacks);
    void record_oracle_step(const OpTally& ops);
    void record_fallback(const std::string& op);
    void record_shortcut(const std::string& what);
    /// One validated step: ok, or the failure line ("step S layer L op O: detail").
    void record_validation(bool ok, const std::string& failure);
    void record_finiteness(bool ok, const std::string& failure);
    void set_trust_promoted(bool v);
    EvidenceSnapshot snapshot() const;
    /// What the most recent step did: everything recorded from its record_step up to now (its
    /// validation, a strict fallback). The engine reads it right after each forward and
    /// attributes it to the step's requests (runtime/request_evidence.h).
    StepRecord last_step() const;

  private:
    mutable std::mutex mu_;
    EvidenceSnapshot s_;
    StepRecord last_;
    bool fell_back_ = false;
    std::string base_tier_ = "cpu";
};

/// The compact line, e.g.
/// "evidence: tier=cuda steps=40 ops=cuda:5240,cpu:0 bytes=cuda:5.1GB,cpu:0B cpu_fallback=0
///  validated=4/4 failures=0 trust=promoted validation=bitwise shortcut_free=true"
/// with " fallback_ops=glu:30" / " shortcuts=..." / " first_failure=..." appended when present.
std::string evidence_line(const EvidenceSnapshot& e);
/// A JSON object (one line) with every field; op counts per device and op name.
std::string evidence_json(const EvidenceSnapshot& e);
/// The JSON object of one tally: {"cpu":{"ops","weight_bytes","act_bytes","by_op":{...}},
/// "cuda":{...}} (used by evidence_json and request_evidence_json).
std::string op_tally_json(const OpTally& t);
/// Prometheus text-format series prefixed zinc_evidence_ (with # HELP / # TYPE lines).
std::string evidence_prometheus(const EvidenceSnapshot& e);
/// `after` minus `before` for the counters and the named counts (fallback ops, shortcuts):
/// the evidence of what ran between two snapshots (a bench test, a request); shortcut_free is
/// then about that interval; tier, reason, first_failure and trust come from `after`.
EvidenceSnapshot evidence_delta(const EvidenceSnapshot& after, const EvidenceSnapshot& before);

}  // namespace zinc::runtime
