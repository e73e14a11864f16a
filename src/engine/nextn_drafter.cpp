// zinc/engine/nextn_drafter.cpp — see nextn_drafter.h.
#include "engine/nextn_drafter.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "model/batch.h"
#include "model/config.h"
#include "model/model.h"
#include "util/check.h"

namespace zinc::engine {

namespace {

// Positions per KV block of the block's pool: a slot's table is contiguous, so it only sets how
// often attention steps to the next block.
constexpr int32_t kBlockSize = 64;
// Rows of one forward of the block: the positions observed since the last proposal (a
// verification's pending token and accepted drafts, at most 1 + kSpecMaxDraft), plus one.
constexpr int32_t kMaxRows = kSpecMaxDraft + 2;

class NextnDrafter : public Drafter {
  public:
    NextnDrafter(std::unique_ptr<model::Runner> r, int32_t n_embd, int32_t n_vocab,
                 const NextnDrafterOptions& o)
        : runner_(std::move(r)), n_embd_(n_embd), n_vocab_(n_vocab), opts_(o) {
        blocks_per_slot_ = (o.n_ctx + kBlockSize - 1) / kBlockSize;
        free_slots_.resize(static_cast<size_t>(o.n_seqs));
        std::iota(free_slots_.rbegin(), free_slots_.rend(), 0);  // slot 0 is taken first
        logits_.resize(static_cast<size_t>(n_vocab));
        h_out_.resize(static_cast<size_t>(n_embd));
    }
    const char* name() const override { return "nextn"; }
    bool wants_hidden() const override { return true; }

    void observe_hidden(uint64_t seq, int32_t pos0, std::span<const float> rows) override {
        const auto ne = static_cast<size_t>(n_embd_);
        ZINC_CHECK(rows.size() % ne == 0);
        State* st = state_for(seq);
        if (st == nullptr || rows.empty()) return;  // every slot taken: this one is not drafted
        const int32_t next = st->base + st->n_fed + st->n_pending(ne);
        if (st->base < 0 || pos0 < st->base || pos0 > next) {
            // A new history (first rows, a recomputed sequence, or a gap): from pos0 on.
            st->base = pos0;
            st->n_fed = 0;
            st->h.clear();
        } else if (pos0 < st->base + st->n_fed) {
            // Rows the block already ran are replaced: its history goes back to pos0.
            st->n_fed = pos0 - st->base;
            st->h.clear();
        } else {
            st->h.resize(static_cast<size_t>(pos0 - st->base - st->n_fed) * ne);
        }
        st->h.insert(st->h.end(), rows.begin(), rows.end());
    }

    void propose(uint64_t seq, std::span<const int32_t> tokens, int32_t max_draft,
                 std::vector<int32_t>& out) override {
        out.clear();
        auto it = states_.find(seq);
        if (it == states_.end() || max_draft <= 0 || tokens.size() < 2) return;
        State& st = it->second;
        const auto ne = static_cast<size_t>(n_embd_);
        // The block's last row is position n - 2: h_{n-2} and the pending token t_{n-1}.
        const auto last = static_cast<int32_t>(tokens.size()) - 2;
        if (st.base < 0 || st.base > last) return;
        if (st.base + st.n_fed > last) {
            // Proposed before, and nothing new since: run the last position again.
            if (st.n_fed == 0 || st.base + st.n_fed != last + 1 || st.h_last_pos != last) return;
            --st.n_fed;
            st.h.insert(st.h.begin(), st.h_last.begin(), st.h_last.end());
        }
        const int32_t first = st.base + st.n_fed;                   // first position to run
        if (st.base + st.n_fed + st.n_pending(ne) <= last) return;  // h_{last} not observed
        if (last - st.base + max_draft > opts_.n_ctx) return;       // past the slot's positions
        // The history: positions [first, last], in chunks of kMaxRows, logits of the last row.
        for (int32_t p = first; p <= last;) {
            const int32_t n = std::min(kMaxRows, last - p + 1);
            const size_t off = static_cast<size_t>(p - first) * ne;
            if (!run(st, p - st.base, tokens.subspan(static_cast<size_t>(p + 1), n),
                     std::span<const float>(st.h.data() + off, static_cast<size_t>(n) * ne),
                     p + n > last))
                return fail(seq);
            p += n;
        }
        const size_t n_run = static_cast<size_t>(last - first + 1);
        st.h_last.assign(st.h.begin() + static_cast<std::ptrdiff_t>((n_run - 1) * ne),
                         st.h.begin() + static_cast<std::ptrdiff_t>(n_run * ne));
        st.h.erase(st.h.begin(), st.h.begin() + static_cast<std::ptrdiff_t>(n_run * ne));
        st.n_fed = last + 1 - st.base;
        st.h_last_pos = last;
        // The chain: each draft token with the block's own output as h, one position further;
        // these K/V rows lie past n_fed and are overwritten by the next proposal's history.
        for (int32_t i = 0;; ++i) {
            const int32_t d = draft_argmax(logits_);
            out.push_back(d);
            if (i + 1 == max_draft) break;
            const std::vector<float> h = h_out_;
            if (!run(st, st.n_fed + i, std::span<const int32_t>(&out.back(), 1), h, true)) break;
        }
    }

    void release(uint64_t seq) override {
        auto it = states_.find(seq);
        if (it == states_.end()) return;
        free_slots_.push_back(it->second.slot);
        states_.erase(it);
    }

  private:
    struct State {
        int32_t slot = 0;
        int32_t base = -1;     // absolute position of the block's history position 0 (-1: none)
        int32_t n_fed = 0;     // history positions [0, n_fed) are in the block's KV
        std::vector<float> h;  // observed h rows for positions [base + n_fed, ...)
        std::vector<float> h_last;  // h of the last position run, h_last_pos
        int32_t h_last_pos = -1;
        int32_t n_pending(size_t ne) const { return static_cast<int32_t>(h.size() / ne); }
    };

    State* state_for(uint64_t seq) {
        auto it = states_.find(seq);
        if (it != states_.end()) return &it->second;
        if (free_slots_.empty()) return nullptr;
        State st;
        st.slot = free_slots_.back();
        free_slots_.pop_back();
        return &states_.emplace(seq, std::move(st)).first->second;
    }

    // One forward of the block for rows at history positions [pos0, pos0 + n): tokens and h
    // rows; the last row's logits into logits_ and its output (the next h) into h_out_.
    bool run(const State& st, int32_t pos0, std::span<const int32_t> toks, std::span<const float> h,
             bool want_logits) {
        const int32_t n = static_cast<int32_t>(toks.size());
        const int32_t b0 = st.slot * blocks_per_slot_;
        const int32_t nb = (pos0 + n + kBlockSize - 1) / kBlockSize;
        table_.resize(static_cast<size_t>(nb));
        std::iota(table_.begin(), table_.end(), b0);
        model::BatchSeq bs;
        bs.n_tokens = n;
        bs.pos0 = pos0;
        bs.block_table = table_;
        bs.want_logits = want_logits;
        model::Batch batch{toks, std::span<const model::BatchSeq>(&bs, 1)};
        batch.hidden_in = h.data();
        batch.hidden_out = want_logits ? h_out_.data() : nullptr;
        return runner_->forward(batch, want_logits ? logits_.data() : nullptr).ok();
    }

    // A forward failed (cannot happen for in-range tokens and positions): start over.
    void fail(uint64_t seq) {
        auto it = states_.find(seq);
        if (it == states_.end()) return;
        it->second.base = -1;
        it->second.n_fed = 0;
        it->second.h.clear();
    }

    std::unique_ptr<model::Runner> runner_;
    int32_t n_embd_, n_vocab_;
    NextnDrafterOptions opts_;
    int32_t blocks_per_slot_ = 0;
    std::vector<int32_t> free_slots_;
    std::unordered_map<uint64_t, State> states_;
    std::vector<int32_t> table_;
    std::vector<float> logits_;  // (n_vocab) of the last row run
    std::vector<float> h_out_;   // (n_embd) the block's output of the last row run
};

}  // namespace

Result<std::unique_ptr<Drafter>> make_nextn_drafter(const model::Model& model,
                                                    const NextnDrafterOptions& o) {
    const model::ModelConfig& c = model.config();
    if (model.n_nextn_layers() == 0)
        return make_error("nextn drafter: this " + c.arch_name +
                          " model has no NextN/MTP layers (" + c.arch_name +
                          ".nextn_predict_layers is 0 or absent)");
    if (o.n_ctx < 2 || o.n_ctx > (1 << 24))
        return make_error("nextn drafter: n_ctx " + std::to_string(o.n_ctx) +
                          " out of range [2, 16777216]");
    if (o.n_seqs < 1 || o.n_seqs > 4096)
        return make_error("nextn drafter: n_seqs " + std::to_string(o.n_seqs) +
                          " out of range [1, 4096]");
    const int64_t blocks = int64_t{(o.n_ctx + kBlockSize - 1) / kBlockSize} * o.n_seqs;
    if (blocks > (int64_t{1} << 30))
        return make_error("nextn drafter: n_ctx x n_seqs too large (" + std::to_string(blocks) +
                          " KV blocks)");
    model::RunnerOptions ro;
    ro.nextn = true;
    ro.block_size = kBlockSize;
    ro.n_blocks = static_cast<int32_t>(blocks);
    ro.max_batch_tokens = kMaxRows;
    ro.max_seqs = 1;
    ro.max_seq_len = o.n_ctx;
    ro.n_threads = o.n_threads;
    auto r = model::Runner::create_cpu(model, ro);
    if (!r) return make_error("nextn drafter: " + r.error().message);
    return std::unique_ptr<Drafter>(
        std::make_unique<NextnDrafter>(std::move(r.value()), c.n_embd, c.n_vocab, o));
}

}  // namespace zinc::engine
