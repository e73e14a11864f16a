// zinc/backend/cpu/tp_runner.cpp — N shard programs of the CPU tier in lockstep, summed at each
// AllReduce (backend/cpu/tp_runner.h).
#include "backend/cpu/tp_runner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/forward_state.h"
#include "model/arch_model.h"
#include "model/embed_batch.h"
#include "model/shard.h"

namespace zinc::cpu {

namespace {

using model::Batch;
using model::BatchSeq;
using model::RunnerOptions;

class TensorParallelRunner : public model::Runner {
  public:
    TensorParallelRunner(const model::ArchModel& m, const RunnerOptions& o,
                         std::unique_ptr<model::ShardSet> set)
        : cfg_(m.config()),
          opts_(o),
          set_(std::move(set)),
          pool_(o.n_threads),
          max_positions_(position_limit(set_->shards[0].program)) {
        if (const char* d = std::getenv("ZINC_DUMP")) dump_.name = d;
        opts_.n_threads = pool_.n_threads();
        for (const model::Shard& s : set_->shards) {
            ranks_.push_back(std::make_unique<Rank>(s, opts_, pool_.n_threads()));
        }
        // The AllReduce ops sit at the same indices in every rank's list.
        const auto& ops = set_->shards[0].program.ops;
        for (size_t i = 0; i < ops.size(); ++i)
            if (ops[i].kind() == model::OpKind::AllReduce) reduces_.push_back(i);
        const size_t rows = static_cast<size_t>(o.max_batch_tokens);
        pos_.resize(rows);
        slot_.resize(rows);
        out_rows_.resize(rows);
        seqs_.reserve(static_cast<size_t>(o.max_seqs));
    }

    Result<void> forward(const Batch& batch, float* logits) override {
        // hidden_width() is 0 here, so hidden_out is an error (model/batch.h). Program::hidden
        // would be whole on rank 0, but its one reader, NextN drafting, runs on qwen35, which
        // the shard transform refuses.
        if (batch.hidden_out)
            return make_error(
                "forward: the tensor-parallel runner does not return hidden states "
                "(Batch::hidden_out)");
        return step(batch, logits, false);
    }

    // The embeddings value (Program::embd) is replicated: after the last AllReduce before it
    // every rank holds the whole residual stream, so rank 0's rows are the unsharded ones (up to
    // the order of the partial sums).
    Result<void> forward_embed(const Batch& batch, float* hidden) override {
        const model::Program& p0 = ranks_[0]->program;
        ZINC_TRY(model::check_embed_batch(p0, cfg_.arch_name, batch, hidden));
        ZINC_TRY(step(batch, nullptr, true));
        const int64_t w = p0.width(p0.embd);
        const float* src = ranks_[0]->ws.t[static_cast<size_t>(p0.embd)].data();
        std::copy(src, src + static_cast<int64_t>(batch.tokens.size()) * w, hidden);
        return {};
    }

  private:
    // One step of every rank; `embeddings`: every row an output row, the ops up to
    // Program::embd_op (model/shard.h renumbers it for the rank programs), no logits.
    Result<void> step(const Batch& batch, float* logits, bool embeddings) {
        const model::Program& p0 = ranks_[0]->program;
        ZINC_TRY(validate_for_program(batch, p0, cfg_.arch_name, max_positions_, embeddings));
        ZINC_TRY(validate_batch(batch, opts_, cfg_.n_vocab));
        const int64_t bs = opts_.block_size;
        seqs_.clear();
        int n_out = 0;
        for (const BatchSeq& s : batch.seqs) {
            seqs_.push_back({s.row0, s.n_tokens, s.pos0, s.block_table.data()});
            for (int32_t i = 0; i < s.n_tokens; ++i) {
                const int32_t r = s.row0 + i;
                const int64_t p = static_cast<int64_t>(s.pos0) + i;
                pos_[r] = static_cast<int32_t>(p);
                slot_[r] = static_cast<int64_t>(s.block_table[p / bs]) * bs + p % bs;
                if (embeddings || s.all_logits || (s.want_logits && i == s.n_tokens - 1))
                    out_rows_[n_out++] = r;
            }
        }
        if (n_out > 0 && !embeddings && logits == nullptr)
            return make_error("forward: logits buffer is null");
        runtime::ForwardHooks* hooks = opts_.hooks;
        const size_t n_shortcuts = hooks ? hooks->shortcuts.size() : 0;
        std::vector<ForwardState> st;
        st.reserve(ranks_.size());
        for (size_t r = 0; r < ranks_.size(); ++r) {
            Rank& rk = *ranks_[r];
            st.push_back(ForwardState{pool_, mm_, rk.kv, rk.ws, r == 0 ? dump_ : no_dump_});
            ForwardState& s = st.back();
            s.tokens = batch.tokens.data();
            s.pos = pos_.data();
            s.kv_slot = slot_.data();
            s.n_tokens = static_cast<int>(batch.tokens.size());
            s.seqs = seqs_;
            s.out_rows = out_rows_.data();
            s.n_out = n_out;
            s.embeddings = embeddings;
            s.logits = r == 0 && n_out > 0 && !embeddings ? logits : nullptr;  // head: rank 0
            s.dump_pos0 = pos_[0];
            if (hooks && r == 0) {
                s.hooks = hooks;
            } else if (hooks) {  // other ranks: counts and the same skipped layers, no captures
                rk.hooks.begin_step(false);
                rk.hooks.shortcuts.clear();
                rk.hooks.skip_layers = hooks->skip_layers;
                s.hooks = &rk.hooks;
            }
        }
        const size_t end = embeddings ? static_cast<size_t>(p0.embd_op) + 1 : p0.ops.size();
        size_t begin = 0;
        for (size_t a : reduces_) {
            if (a >= end) break;
            for (size_t r = 0; r < ranks_.size(); ++r)
                execute_ops(ranks_[r]->program, st[r], begin, a);
            all_reduce(st, ranks_[0]->program.ops[a].outs[0].t);
            begin = a;  // the AllReduce op itself (the identity) runs next, observing the sum
        }
        for (size_t r = 0; r < ranks_.size(); ++r)
            execute_ops(ranks_[r]->program, st[r], begin, end);
        if (hooks) {
            for (size_t r = 1; r < ranks_.size(); ++r) hooks->step += ranks_[r]->hooks.step;
            // A skipped layer is reported once per segment of it: keep one report per layer.
            auto& sc = hooks->shortcuts;
            std::vector<runtime::Shortcut> uniq(sc.begin(), sc.begin() + n_shortcuts);
            for (size_t i = n_shortcuts; i < sc.size(); ++i) {
                bool seen = false;
                for (size_t j = n_shortcuts; j < uniq.size(); ++j)
                    seen |= uniq[j].what == sc[i].what;
                if (!seen) uniq.push_back(sc[i]);
            }
            sc = std::move(uniq);
        }
        return {};
    }

  public:
    void copy_block(int32_t src, int32_t dst) override {
        for (auto& r : ranks_) r->kv.copy_block(src, dst);
    }
    const RunnerOptions& options() const override { return opts_; }
    std::string tier() const override { return "cpu"; }
    int tensor_parallel() const override { return set_->n_shards; }
    size_t kv_bytes() const override {
        size_t b = 0;
        for (const auto& r : ranks_) b += r->kv.bytes();
        return b;
    }

  private:
    struct Rank {
        Rank(const model::Shard& s, const RunnerOptions& o, int n_threads)
            : program(s.program),
              kv(s.config, o.n_blocks, o.block_size),
              ws(s.program, o.max_batch_tokens, o.max_seq_len, n_threads) {}
        const model::Program& program;
        KvPool kv;
        Workspace ws;
        runtime::ForwardHooks hooks;  // ranks > 0: their op counts, merged into the Runner's
    };

    // Tensor t = sum over ranks of each rank's t, in rank order, on every rank.
    void all_reduce(std::vector<ForwardState>& st, model::Tid t) {
        const int n_rows = st[0].n_tokens;
        const int64_t w = ranks_[0]->program.width(t);
        const size_t n = static_cast<size_t>(n_rows) * static_cast<size_t>(w);
        float* acc = ranks_[0]->ws.t[static_cast<size_t>(t)].data();
        for (size_t r = 1; r < ranks_.size(); ++r) {
            ZINC_CHECK(st[r].n_tokens == n_rows);
            cpu::add(acc, ranks_[r]->ws.t[static_cast<size_t>(t)].data(), acc,
                     static_cast<int64_t>(n));
        }
        for (size_t r = 1; r < ranks_.size(); ++r)
            std::memcpy(ranks_[r]->ws.t[static_cast<size_t>(t)].data(), acc, sizeof(float) * n);
    }

    const model::ModelConfig& cfg_;
    RunnerOptions opts_;
    std::unique_ptr<model::ShardSet> set_;
    ThreadPool pool_;
    MatmulScratch mm_;
    std::vector<std::unique_ptr<Rank>> ranks_;
    const int64_t max_positions_;  // position_limit of the rank programs (all alike)
    std::vector<size_t> reduces_;  // indices of the AllReduce ops
    model::DumpFilter dump_, no_dump_;
    std::vector<int32_t> pos_;
    std::vector<int64_t> slot_;
    std::vector<int32_t> out_rows_;
    std::vector<AttentionSeq> seqs_;
};

}  // namespace

Result<std::unique_ptr<model::Runner>> create_tensor_parallel_runner(
    const model::Model& model, const model::RunnerOptions& opts, int n_ranks) {
    ZINC_TRY(validate_options(opts));
    const auto* am = dynamic_cast<const model::ArchModel*>(&model);
    ZINC_CHECK(am != nullptr);
    auto set = model::shard_program(am->program(), am->config(), n_ranks);
    if (!set) return set.error();
    return std::unique_ptr<model::Runner>(
        std::make_unique<TensorParallelRunner>(*am, opts, std::move(set.value())));
}

Result<std::unique_ptr<model::Runner>> create_tensor_parallel_runner(
    const model::Model& model, const model::RunnerOptions& opts,
    std::unique_ptr<model::ShardSet> shards) {
    ZINC_TRY(validate_options(opts));
    const auto* am = dynamic_cast<const model::ArchModel*>(&model);
    ZINC_CHECK(am != nullptr && shards && !shards->shards.empty());
    return std::unique_ptr<model::Runner>(
        std::make_unique<TensorParallelRunner>(*am, opts, std::move(shards)));
}

}  // namespace zinc::cpu
