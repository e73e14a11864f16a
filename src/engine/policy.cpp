// zinc/engine/policy.cpp — the default first-come-first-served policy.
#include "engine/policy.h"

#include "engine/sequence.h"

namespace zinc::engine {
namespace {

class FcfsPolicy : public SchedulingPolicy {
  public:
    bool before(const Sequence& a, const Sequence& b) const override {
        return a.arrival < b.arrival;
    }
    bool may_admit(const Sequence&, const SchedulerLoad&) const override { return true; }
    size_t pick_victim(std::span<const Sequence* const> candidates) const override {
        return candidates.size() - 1;
    }
    const char* name() const override { return "fcfs"; }
};

}  // namespace

std::unique_ptr<SchedulingPolicy> make_fcfs_policy() {
    return std::make_unique<FcfsPolicy>();
}

}  // namespace zinc::engine
