// zinc/backend/cpu/runner.cpp — the CPU tier's Runner: the paged KV pool, the activation
// workspace, the thread pool, and the validation of a step batch before the executor runs the
// architecture's op list on it (backend/cpu/executor.cpp).
//
// One forward runs every row of the batch together: embeddings, norms, the Q/K/V, output and FFN
// matmuls go over all rows at once (one pass over the weights for all sequences: this is where
// batching pays on a memory-bound decode), RoPE and the K/V append use each row's own position
// and slot, and attention reads each sequence's own blocks (cpu::paged_attention). Each row's
// result depends only on its own sequence: the matmul kernels give the same bits for a row
// whatever other rows share the call (quant::gemm_tile and vec_dot_multi are bit-identical to
// vec_dot), and every other op is per row.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cpu/forward_state.h"
#include "model/arch_model.h"
#include "model/batch.h"
#include "model/embed_batch.h"
#include "model/state_slots.h"

namespace zinc::cpu {

using model::Batch;
using model::BatchSeq;
using model::RunnerOptions;

Result<void> validate_batch(const Batch& batch, const RunnerOptions& opts, int32_t n_vocab) {
    const int64_t n_rows = static_cast<int64_t>(batch.tokens.size());
    if (n_rows == 0 || batch.seqs.empty()) return make_error("forward: empty batch");
    if (n_rows > opts.max_batch_tokens) {
        return make_error("forward: " + std::to_string(n_rows) + " rows > max_batch_tokens " +
                          std::to_string(opts.max_batch_tokens));
    }
    if (static_cast<int64_t>(batch.seqs.size()) > opts.max_seqs) {
        return make_error("forward: " + std::to_string(batch.seqs.size()) +
                          " sequences > max_seqs " + std::to_string(opts.max_seqs));
    }
    for (int64_t i = 0; i < n_rows; ++i) {
        if (batch.tokens[i] < 0 || batch.tokens[i] >= n_vocab) {
            return make_error("forward: token id " + std::to_string(batch.tokens[i]) + " at row " +
                              std::to_string(i) + " is out of range [0, " +
                              std::to_string(n_vocab) + ")");
        }
    }
    int64_t next_row = 0;
    for (size_t si = 0; si < batch.seqs.size(); ++si) {
        const BatchSeq& s = batch.seqs[si];
        const std::string where = "forward: sequence " + std::to_string(si) + ": ";
        if (s.row0 != next_row || s.n_tokens < 1) {
            return make_error(where + "rows [" + std::to_string(s.row0) + ", +" +
                              std::to_string(s.n_tokens) + ") do not follow row " +
                              std::to_string(next_row) + " (expected >= 1 rows there)");
        }
        next_row += s.n_tokens;
        const int64_t end = static_cast<int64_t>(s.pos0) + s.n_tokens;
        if (s.pos0 < 0 || end > opts.max_seq_len) {
            return make_error(where + "positions [" + std::to_string(s.pos0) + ", " +
                              std::to_string(end) + ") outside [0, max_seq_len " +
                              std::to_string(opts.max_seq_len) + "]");
        }
        const int64_t need = (end + opts.block_size - 1) / opts.block_size;
        if (static_cast<int64_t>(s.block_table.size()) < need) {
            return make_error(where + "block table has " + std::to_string(s.block_table.size()) +
                              " blocks, " + std::to_string(need) + " needed for " +
                              std::to_string(end) + " positions");
        }
        for (int64_t b = 0; b < need; ++b) {
            if (s.block_table[b] < 0 || s.block_table[b] >= opts.n_blocks) {
                return make_error(where + "block id " + std::to_string(s.block_table[b]) +
                                  " at index " + std::to_string(b) + " out of range [0, " +
                                  std::to_string(opts.n_blocks) + ")");
            }
        }
    }
    if (next_row != n_rows) {
        return make_error("forward: sequences cover " + std::to_string(next_row) + " of " +
                          std::to_string(n_rows) + " rows");
    }
    return {};
}

Result<void> validate_options(const RunnerOptions& opts) {
    auto bad = [](const char* what, int64_t v, const char* range) {
        return make_error(std::string("cpu runner: ") + what + " " + std::to_string(v) +
                          " out of range " + range);
    };
    if (opts.n_blocks < 1) return bad("n_blocks", opts.n_blocks, "[1, ...)");
    if (opts.block_size < 1 || opts.block_size > (1 << 24))
        return bad("block_size", opts.block_size, "[1, 16777216]");
    if (opts.max_batch_tokens < 1 || opts.max_batch_tokens > (1 << 20))
        return bad("max_batch_tokens", opts.max_batch_tokens, "[1, 1048576]");
    if (opts.max_seqs < 1 || opts.max_seqs > opts.max_batch_tokens)
        return bad("max_seqs", opts.max_seqs, "[1, max_batch_tokens]");
    if (opts.max_seq_len < 1 || opts.max_seq_len > (1 << 24))
        return bad("max_seq_len", opts.max_seq_len, "[1, 16777216]");
    if (opts.n_threads < 0 || opts.n_threads > 1024)
        return bad("n_threads", opts.n_threads, "[0, 1024]");
    if (opts.n_state_slots < 0 || opts.n_state_slots > 65536)
        return bad("n_state_slots", opts.n_state_slots, "[0, 65536]");
    return model::StateSlots::check_options(opts.n_state_checkpoints, "cpu");
}

int64_t position_limit(const model::Program& prog) {
    int64_t limit = INT64_MAX;
    for (const model::Op& op : prog.ops)
        if (op.kind() == model::OpKind::AddEmbed && op.as<model::AddEmbedP>().by_position)
            limit = std::min(limit, op.as<model::AddEmbedP>().table->n_rows);
    return limit;
}

Result<void> validate_for_program(const Batch& batch, const model::Program& prog,
                                  const std::string& arch, int64_t limit, bool embeddings) {
    if (!embeddings && prog.logits == model::kNoTensor)
        return make_error("forward: " + arch +
                          " is an embedding model (no LM head): it computes embeddings only, not "
                          "logits");
    for (size_t si = 0; si < batch.seqs.size(); ++si) {  // absolute position embeddings
        const int64_t end = int64_t{batch.seqs[si].pos0} + batch.seqs[si].n_tokens;
        if (end > limit)
            return make_error("forward: sequence " + std::to_string(si) + " reaches position " +
                              std::to_string(end) + ", but " + arch +
                              "'s position embeddings cover " + std::to_string(limit) +
                              " positions");
    }
    if (!embeddings && batch.hidden_out && prog.hidden == model::kNoTensor)
        return make_error("forward: " + arch +
                          "'s op list marks no hidden state (Batch::hidden_out)");
    return {};
}

}  // namespace zinc::cpu

namespace zinc::model {

namespace {

class CpuRunner : public Runner {
  public:
    CpuRunner(const ArchModel& model, const Program& prog, const RunnerOptions& opts)
        : prog_(prog),
          cfg_(model.config()),
          opts_(opts),
          pool_(opts.n_threads),
          kv_(opts.nextn ? nextn_kv_config(cfg_) : cfg_, opts.n_blocks, opts.block_size),
          ws_(prog, opts.max_batch_tokens, opts.max_seq_len, pool_.n_threads()),
          rs_(prog, opts.n_state_slots > 0 ? opts.n_state_slots : opts.max_seqs,
              opts.n_state_checkpoints),
          max_positions_(cpu::position_limit(prog)) {
        opts_.n_state_slots = rs_.n_slots();
        opts_.n_state_checkpoints = rs_.n_checkpoints();
        if (const char* d = std::getenv("ZINC_DUMP")) dump_.name = d;
        opts_.n_threads = pool_.n_threads();
        const size_t rows = static_cast<size_t>(opts.max_batch_tokens);
        pos_.resize(rows);
        slot_.resize(rows);
        out_rows_.resize(rows);
        seqs_.reserve(static_cast<size_t>(opts.max_seqs));
        seq_slot_.reserve(static_cast<size_t>(opts.max_seqs));
    }

    Result<void> forward(const Batch& batch, float* logits) override {
        return run(batch, logits, false);
    }

    Result<void> forward_embed(const Batch& batch, float* hidden) override {
        const Program& prog = prog_;
        if (opts_.nextn) return make_error("embeddings: a NextN Runner computes none");
        ZINC_TRY(check_embed_batch(prog, cfg_.arch_name, batch, hidden));
        ZINC_TRY(run(batch, nullptr, true));
        const int64_t w = prog.width(prog.embd);
        const float* src = ws_.t[static_cast<size_t>(prog.embd)].data();
        std::copy(src, src + static_cast<int64_t>(batch.tokens.size()) * w, hidden);
        return {};
    }

  private:
    Result<void> run(const Batch& batch, float* logits, bool embeddings) {
        ZINC_TRY(
            cpu::validate_for_program(batch, prog_, cfg_.arch_name, max_positions_, embeddings));
        ZINC_TRY(validate(batch));
        const int64_t bs = opts_.block_size;
        seqs_.clear();
        seq_slot_.clear();
        int n_out = 0;
        for (const BatchSeq& s : batch.seqs) {
            seqs_.push_back({s.row0, s.n_tokens, s.pos0, s.block_table.data()});
            if (!rs_.empty()) {
                if (s.pos0 == 0) rs_.reset(s.state_slot);
                rs_.advance(s.state_slot, s.pos0, s.n_tokens, s.keep_states);
                seq_slot_.push_back(s.state_slot);
            }
            for (int32_t i = 0; i < s.n_tokens; ++i) {
                const int32_t r = s.row0 + i;
                const int64_t p = static_cast<int64_t>(s.pos0) + i;
                pos_[r] = static_cast<int32_t>(p);
                slot_[r] = static_cast<int64_t>(s.block_table[p / bs]) * bs + p % bs;
                if (embeddings || s.all_logits || (s.want_logits && i == s.n_tokens - 1))
                    out_rows_[n_out++] = r;
            }
        }
        if (opts_.nextn && batch.hidden_in == nullptr)
            return make_error(
                "forward: the NextN block needs Batch::hidden_in (the trunk's "
                "hidden state of every row)");
        cpu::ForwardState st{pool_, mm_, kv_, ws_, dump_};
        st.embeddings = embeddings;
        st.tokens = batch.tokens.data();
        st.hidden_in = batch.hidden_in;
        st.pos = pos_.data();
        st.kv_slot = slot_.data();
        st.n_tokens = static_cast<int>(batch.tokens.size());
        st.seqs = seqs_;
        st.out_rows = out_rows_.data();
        st.n_out = n_out;
        st.logits = n_out > 0 && !embeddings ? logits : nullptr;
        st.dump_pos0 = pos_[0];
        st.hooks = opts_.hooks;
        if (!rs_.empty()) {
            st.rs = &rs_;
            st.seq_slot = seq_slot_.data();
        }
        if (n_out > 0 && !embeddings && logits == nullptr)
            return make_error("forward: logits buffer is null");
        cpu::execute(prog_, st);
        if (batch.hidden_out && n_out > 0 && !embeddings) {
            const int64_t w = prog_.width(prog_.hidden);
            const float* src = ws_.t[static_cast<size_t>(prog_.hidden)].data();
            std::copy(src, src + int64_t{n_out} * w, batch.hidden_out);
        }
        return {};
    }

  public:
    void copy_block(int32_t src, int32_t dst) override { kv_.copy_block(src, dst); }
    const RunnerOptions& options() const override { return opts_; }
    std::string tier() const override { return "cpu"; }
    int64_t hidden_width() const override {
        return prog_.hidden == kNoTensor ? 0 : prog_.width(prog_.hidden);
    }
    size_t kv_bytes() const override { return kv_.bytes(); }
    size_t state_bytes() const override { return rs_.empty() ? 0 : rs_.bytes(); }
    int32_t state_checkpoints() const override { return rs_.n_checkpoints(); }
    Result<void> rewind_state(int32_t slot, int64_t pos) override {
        if (rs_.empty()) return {};  // attention only: nothing to rewind
        return rs_.rewind(slot, pos);
    }

  private:
    Result<void> validate(const Batch& batch) const {
        ZINC_TRY(cpu::validate_batch(batch, opts_, cfg_.n_vocab));
        if (rs_.empty()) return {};
        return rs_.slots().check(batch, "forward: ");
    }

    // The NextN block's pool: one attention layer (the block's ops use KV layer 0).
    static ModelConfig nextn_kv_config(const ModelConfig& c) {
        ModelConfig k = c;
        k.n_layer = 1;
        k.layer_kv_k.clear();
        k.layer_kv_v.clear();
        return k;
    }

    const Program& prog_;  // the trunk's op list, or the NextN block's
    const ModelConfig& cfg_;
    RunnerOptions opts_;
    cpu::ThreadPool pool_;
    cpu::MatmulScratch mm_;
    cpu::KvPool kv_;
    cpu::Workspace ws_;
    cpu::StatePool rs_;  // recurrent state slots (empty for attention-only models)
    DumpFilter dump_;
    std::vector<int32_t> pos_;             // (max_batch_tokens) position of each row
    std::vector<int64_t> slot_;            // (max_batch_tokens) physical KV row of each row
    std::vector<int32_t> out_rows_;        // rows whose logits are wanted
    std::vector<cpu::AttentionSeq> seqs_;  // this step's sequences
    std::vector<int32_t> seq_slot_;        // their state slots (recurrent models)
    const int64_t max_positions_;          // cpu::position_limit(prog_)
};

}  // namespace

Result<std::unique_ptr<Runner>> Runner::create_cpu(const Model& model, const RunnerOptions& opts) {
    ZINC_TRY(cpu::validate_options(opts));
    const auto* am = dynamic_cast<const ArchModel*>(&model);
    ZINC_CHECK(am != nullptr);
    if (opts.nextn && am->nextn_program() == nullptr)
        return make_error("cpu runner: " + model.arch_name() +
                          " has no NextN/MTP block to run (nextn_predict_layers)");
    const Program& prog = opts.nextn ? *am->nextn_program() : am->program();
    return std::unique_ptr<Runner>(std::make_unique<CpuRunner>(*am, prog, opts));
}

}  // namespace zinc::model
