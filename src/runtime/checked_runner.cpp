// zinc/runtime/checked_runner.cpp — the evidence-keeping, optionally validating Runner wrapper
// and the factory that picks the tier.
#include "runtime/checked_runner.h"

#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/tp_runner.h"
#include "model/arch_model.h"
#include "model/config.h"
#include "model/shard.h"
#include "runtime/validator.h"
#include "util/check.h"

namespace zinc::runtime {
namespace {

// Validation is bitwise when the serving Runner computes the CPU tier's bits: the CUDA tier in
// ZINC_EXACT=1 mode (Runner::exact), or the CPU tier itself (the oracle is the same code with
// the same options).
bool bitwise_validation(const model::Runner& r) {
    // The CPU tier is the oracle's own arithmetic, unless split over ranks (other sum order).
    return r.exact() || (r.tier() == "cpu" && r.tensor_parallel() == 1);
}

class CheckedRunner final : public model::Runner {
  public:
    CheckedRunner(std::unique_ptr<ForwardHooks> hooks, std::unique_ptr<model::Runner> primary,
                  std::unique_ptr<ForwardHooks> oracle_hooks, std::unique_ptr<model::Runner> oracle,
                  std::shared_ptr<Evidence> ev, const RuntimeOptions& ro, int n_layer,
                  int32_t n_vocab)
        : hooks_(std::move(hooks)),
          primary_(std::move(primary)),
          oracle_hooks_(std::move(oracle_hooks)),
          oracle_(std::move(oracle)),
          ev_(std::move(ev)),
          ro_(ro),
          n_layer_(n_layer),
          n_vocab_(n_vocab) {
        // An exact serving tier must reproduce the oracle's bits: validation thresholds are 0.
        ro_.thresholds.bitwise = bitwise_validation(*primary_);
    }

    Result<void> forward(const model::Batch& batch, float* logits) override {
        const uint64_t step = step_++;
        int n_out = 0;
        for (const model::BatchSeq& s : batch.seqs)
            n_out += s.all_logits ? s.n_tokens : (s.want_logits ? 1 : 0);
        const size_t n_logits = static_cast<size_t>(n_out) * static_cast<size_t>(n_vocab_);

        if (fell_back_) return forward_on_oracle(batch, logits);

        const bool validate = oracle_ && validated_ < static_cast<uint64_t>(ro_.validate_steps);
        hooks_->begin_step(validate);
        ZINC_TRY(primary_->forward(batch, logits));
        if (validate && logits && n_out > 0)
            hooks_->capture_host("result_output", -1, logits, n_out, n_vocab_);
        ev_->record_step(hooks_->step, hooks_->shortcuts, hooks_->fallbacks);
        hooks_->shortcuts.clear();
        hooks_->fallbacks.clear();

        if (validate) {
            oracle_logits_.resize(n_logits);
            oracle_hooks_->begin_step(true);
            // The hidden rows (NextN drafting) are the serving tier's; only drafts depend on them.
            model::Batch ob = batch;
            ob.hidden_out = nullptr;
            ZINC_TRY(oracle_->forward(ob, n_out > 0 ? oracle_logits_.data() : nullptr));
            if (n_out > 0)
                oracle_hooks_->capture_host("result_output", -1, oracle_logits_.data(), n_out,
                                            n_vocab_);
            ev_->record_oracle_step(oracle_hooks_->step);
            const StepComparison c = compare_step(step, hooks_->captured, oracle_hooks_->captured,
                                                  ro_.thresholds, n_layer_);
            ev_->record_validation(c.ok, c.failure);
            ++validated_;
            if (!c.ok) {
                ++failures_;
                std::fprintf(
                    stderr, "zinc: validation failed: %s%s\n", c.failure.c_str(),
                    ro_.validate_strict ? "; finishing on the CPU (ZINC_VALIDATE_STRICT)" : "");
                if (ro_.validate_strict) {
                    // The oracle computed this very step: its logits replace the serving tier's.
                    if (n_out > 0 && logits)
                        std::copy(oracle_logits_.begin(), oracle_logits_.end(), logits);
                    fell_back_ = true;
                    ev_->record_fallback("forward");
                    return {};
                }
            }
            if (validated_ == static_cast<uint64_t>(ro_.validate_steps)) {
                ev_->set_trust_promoted(failures_ == 0);
                oracle_.reset();  // promotion (or the validation budget is spent): free the oracle
                oracle_hooks_.reset();
            }
            return {};
        }
        // After the validated steps (trust promotion): only the finiteness of what the model
        // consumes. Not without ZINC_VALIDATE: the scan of every logit is not free on a fast tier.
        if (ro_.validate_steps > 0 && logits && n_out > 0) {
            const bool ok = all_finite(logits, n_logits);
            const std::string failure =
                ok ? std::string()
                   : "step " + std::to_string(step) + " layer - op output head: non-finite logits";
            ev_->record_finiteness(ok, failure);
            if (!ok && ro_.validate_strict)
                return make_error("validation: " + failure +
                                  " after trust promotion; the CPU oracle is released, so strict "
                                  "mode cannot fall back");
        }
        return {};
    }

    // Embedding forwards (engine/embedding_step.h) run on the serving tier (or on the oracle
    // after a strict-validation fallback) and are recorded as steps; they are not validated
    // (validation compares logits and the named intermediates of generation steps).
    Result<void> forward_embed(const model::Batch& batch, float* hidden) override {
        ++step_;
        if (fell_back_) return oracle_->forward_embed(batch, hidden);
        hooks_->begin_step(false);
        ZINC_TRY(primary_->forward_embed(batch, hidden));
        ev_->record_step(hooks_->step, hooks_->shortcuts, hooks_->fallbacks);
        hooks_->shortcuts.clear();
        hooks_->fallbacks.clear();
        return {};
    }

    // Sampling on the serving tier's device (engine: forward_sample) passes through when there
    // is no validation: validated steps and the later finiteness checks need the logits on the
    // host. The step is recorded like forward()'s, so per-request evidence sees every step.
    bool samples_on_device() const override {
        return ro_.validate_steps == 0 && primary_->samples_on_device();
    }
    Result<void> forward_sample(const model::Batch& batch, std::span<const model::RowSampling> rows,
                                model::SampledToken* out, bool want_logprob) override {
        ZINC_CHECK(ro_.validate_steps == 0);
        ++step_;
        hooks_->begin_step(false);
        ZINC_TRY(primary_->forward_sample(batch, rows, out, want_logprob));
        ev_->record_step(hooks_->step, hooks_->shortcuts, hooks_->fallbacks);
        hooks_->shortcuts.clear();
        hooks_->fallbacks.clear();
        return {};
    }

    void copy_block(int32_t src, int32_t dst) override {
        primary_->copy_block(src, dst);
        if (oracle_) oracle_->copy_block(src, dst);
    }
    // Recurrent state rollback (speculative decoding) on every Runner that holds the state: the
    // serving tier and, while it runs beside it, the oracle (it has run every step so far).
    int32_t state_checkpoints() const override {
        if (fell_back_) return oracle_->state_checkpoints();
        return oracle_ ? std::min(primary_->state_checkpoints(), oracle_->state_checkpoints())
                       : primary_->state_checkpoints();
    }
    Result<void> rewind_state(int32_t slot, int64_t pos) override {
        if (!fell_back_) ZINC_TRY(primary_->rewind_state(slot, pos));
        if (oracle_) ZINC_TRY(oracle_->rewind_state(slot, pos));
        return {};
    }
    int64_t hidden_width() const override {
        if (fell_back_) return oracle_->hidden_width();
        return oracle_ && oracle_->hidden_width() != primary_->hidden_width()
                   ? 0
                   : primary_->hidden_width();
    }
    const model::RunnerOptions& options() const override { return primary_->options(); }
    std::string tier() const override { return fell_back_ ? "cpu" : primary_->tier(); }
    int tensor_parallel() const override { return fell_back_ ? 1 : primary_->tensor_parallel(); }
    bool exact() const override { return fell_back_ || bitwise_validation(*primary_); }
    size_t kv_bytes() const override {
        return primary_->kv_bytes() + (oracle_ ? oracle_->kv_bytes() : 0);
    }

  private:
    Result<void> forward_on_oracle(const model::Batch& batch, float* logits) {
        oracle_hooks_->begin_step(false);
        ZINC_TRY(oracle_->forward(batch, logits));
        ev_->record_step(oracle_hooks_->step, oracle_hooks_->shortcuts, oracle_hooks_->fallbacks);
        oracle_hooks_->shortcuts.clear();
        oracle_hooks_->fallbacks.clear();
        ev_->record_fallback("forward");
        return {};
    }

    std::unique_ptr<ForwardHooks> hooks_;
    std::unique_ptr<model::Runner> primary_;
    std::unique_ptr<ForwardHooks> oracle_hooks_;
    std::unique_ptr<model::Runner> oracle_;
    std::shared_ptr<Evidence> ev_;
    RuntimeOptions ro_;
    int n_layer_;
    int32_t n_vocab_;
    uint64_t step_ = 0, validated_ = 0, failures_ = 0;
    bool fell_back_ = false;
    std::vector<float> oracle_logits_;
};

}  // namespace

std::string device_memory_json(const DeviceMemory& m) {
    if (!m.on_device) return "null";
    const size_t total = m.weight_bytes + m.kv_bytes + m.scratch_bytes;
    return "{\"weight_bytes\": " + std::to_string(m.weight_bytes) +
           ", \"kv_bytes\": " + std::to_string(m.kv_bytes) +
           ", \"scratch_bytes\": " + std::to_string(m.scratch_bytes) +
           ", \"total_bytes\": " + std::to_string(total) + "}";
}

Result<TieredRunner> create_tiered_runner(const model::Model& model, const model::RunnerOptions& ro,
                                          const RuntimeOptions& ropts, const TierChoice& choice) {
    TieredRunner out;
    out.choice = choice;
    out.evidence = std::make_shared<Evidence>();

    auto hooks = std::make_unique<ForwardHooks>();
    hooks->skip_layers = ropts.skip_layers;
    hooks->cpu_ops = ropts.cpu_ops;
    hooks->corrupt = ropts.corrupt;
    model::RunnerOptions pro = ro;
    pro.hooks = hooks.get();

    std::unique_ptr<model::Runner> primary;
    if (choice.tier == Tier::Cuda && !ropts.skip_layers.empty())
        return make_error("ZINC_SKIP_LAYERS is honoured by the CPU tier only (use --tier cpu)");
    if (choice.tier == Tier::Cpu && !ropts.cpu_ops.empty())
        return make_error(
            "ZINC_CPU_OPS forces ops of a device tier onto the CPU; the CPU tier "
            "has nothing to force (use --tier cuda)");
    const int tp = ropts.tensor_parallel;
    if (tp < 0 && choice.tier == Tier::Cpu)
        return make_error(
            "--split-mode row without --tensor-parallel N: the CPU tier has no devices to count "
            "ranks by; give --tensor-parallel N");
    if (choice.tier == Tier::Cuda && tp != 0 && tp != 1) {
        return make_error("--tensor-parallel " + std::to_string(tp) +
                          " on the CUDA tier: multi-GPU execution (one runner per device, NCCL "
                          "all-reduce) is not implemented yet; N = 1 runs, and --tier cpu runs "
                          "N ranks as a correctness mode (docs/cuda.md, \"Tensor parallel\")");
    }
    if (choice.tier == Tier::Cuda) {
        cuda::CudaOptions co;
        co.device = choice.device;
        co.exact = ropts.exact || ro.batch_invariant ? 1 : 0;
        if (tp == 1) {  // the sharded op list at N = 1: one-rank AllReduce ops, same weights
            auto set = model::shard_program(dynamic_cast<const model::ArchModel&>(model).program(),
                                            model.config(), 1);
            if (!set) return set.error();
            co.shards = std::shared_ptr<const model::ShardSet>(std::move(set.value()));
        }
        auto r = cuda::create_runner(model, pro, co);
        if (r) {
            primary = std::move(r.value());
            const cuda::RunnerStats st = cuda::runner_stats(*primary);
            out.device_memory = {true, st.weight_bytes, st.kv_bytes, st.scratch_bytes};
        } else if (ropts.tier == TierRequest::Cuda) {
            return make_error(r.error().message);
        } else {
            out.choice.tier = Tier::Cpu;
            out.choice.reason = "auto: the CUDA runner could not be created (" + r.error().message +
                                "); using the CPU tier";
        }
    }
    if (!primary && tp >= 1) {
        auto r = cpu::create_tensor_parallel_runner(model, pro, tp);
        if (!r) return r.error();
        primary = std::move(r.value());
        out.choice.reason += "; tensor parallel: " + std::to_string(tp) +
                             " shards in lockstep (CPU correctness mode)";
    } else if (!primary) {
        auto r = model::Runner::create_cpu(model, pro);
        if (!r) return r.error();
        primary = std::move(r.value());
    }

    std::unique_ptr<ForwardHooks> oracle_hooks;
    std::unique_ptr<model::Runner> oracle;
    if (ropts.validate_steps > 0) {
        oracle_hooks = std::make_unique<ForwardHooks>();  // the oracle takes no debug switches
        model::RunnerOptions oro = ro;
        oro.hooks = oracle_hooks.get();
        auto r = model::Runner::create_cpu(model, oro);
        if (!r) return make_error("validation oracle: " + r.error().message);
        oracle = std::move(r.value());
    }
    out.evidence->set_tier(to_string(out.choice.tier), out.choice.reason);
    out.evidence->set_validate_limit(static_cast<uint64_t>(ropts.validate_steps));
    if (ropts.validate_steps > 0)
        out.evidence->set_validation_mode(bitwise_validation(*primary) ? "bitwise" : "tolerance");
    out.runner = std::make_unique<CheckedRunner>(
        std::move(hooks), std::move(primary), std::move(oracle_hooks), std::move(oracle),
        out.evidence, ropts, model.config().n_layer, model.n_vocab());
    return out;
}

Result<TieredRunner> create_tiered_runner(const model::Model& model, const model::RunnerOptions& ro,
                                          const RuntimeOptions& ropts) {
    cuda::Probe probe;
    if (ropts.tier != TierRequest::Cpu) probe = cuda::probe();
    const size_t need = ropts.tier == TierRequest::Cpu ? 0 : cuda::device_bytes_needed(model, ro);
    auto choice =
        choose_tier(ropts.tier, ropts.tier_source, probe, need, ropts.device, ropts.device_source);
    if (!choice) return choice.error();
    RuntimeOptions o = ropts;
    if (choice->tier == Tier::Cuda) {
        auto n = cuda_tensor_parallel(o.tensor_parallel, probe);
        if (!n) return n.error();
        o.tensor_parallel = n.value();
    }
    return create_tiered_runner(model, ro, o, choice.value());
}

}  // namespace zinc::runtime
