// zinc/engine/draft_model.cpp — see draft_model.h.
#include "engine/draft_model.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "util/check.h"

namespace zinc::engine {

namespace {

class DraftModelDrafter : public Drafter {
  public:
    DraftModelDrafter(const model::Model& m, const DraftModelOptions& o) : model_(m), opts_(o) {}
    const char* name() const override { return "draft"; }

    void propose(uint64_t seq, std::span<const int32_t> tokens, int32_t max_draft,
                 std::vector<int32_t>& out) override {
        out.clear();
        if (tokens.empty() || max_draft <= 0) return;
        State* st = state_for(seq);
        if (st == nullptr) return;  // no memory for another Context: no proposal
        model::Context& ctx = *st->ctx;
        // Room in the draft's KV: the sequence plus the drafted tokens but the last.
        const int64_t room =
            static_cast<int64_t>(ctx.n_ctx()) - static_cast<int64_t>(tokens.size());
        if (room < 1) return;
        const auto n_draft = static_cast<int32_t>(std::min<int64_t>(max_draft, room));
        // Keep the KV of the longest agreeing prefix, but always run at least the last token
        // (its logits give the first draft token).
        size_t keep = 0;
        const size_t lim = std::min(st->fed.size(), tokens.size() - 1);
        while (keep < lim && st->fed[keep] == tokens[keep]) ++keep;
        // A recurrent draft model's state cannot go back to an earlier position (its evals keep
        // no checkpoints): any disagreement recomputes it from the start.
        if (model_.recurrent_state_bytes() > 0 && keep < st->fed.size()) keep = 0;
        ctx.truncate(static_cast<int>(keep));
        st->fed.resize(keep);
        if (!ctx.eval(tokens.subspan(keep)).ok()) return fail(seq);
        st->fed.insert(st->fed.end(), tokens.begin() + static_cast<std::ptrdiff_t>(keep),
                       tokens.end());
        const int32_t nv = model_.n_vocab();
        for (int32_t i = 0; i < n_draft; ++i) {
            const int32_t d = draft_argmax({ctx.logits(-1), static_cast<size_t>(nv)});
            out.push_back(d);
            if (i + 1 == n_draft) break;
            const int32_t one[1] = {d};
            if (!ctx.eval(one).ok()) break;
            st->fed.push_back(d);
        }
    }

    void release(uint64_t seq) override { states_.erase(seq); }

  private:
    struct State {
        std::unique_ptr<model::Context> ctx;
        std::vector<int32_t> fed;  // tokens whose K/V the Context holds, in order
    };

    State* state_for(uint64_t seq) {
        auto it = states_.find(seq);
        if (it != states_.end()) return &it->second;
        model::ContextOptions co;
        co.n_ctx = opts_.n_ctx;
        co.n_threads = opts_.n_threads;
        auto ctx = model::Context::create(model_, co);
        if (!ctx) return nullptr;
        State st;
        st.ctx = std::move(ctx.value());
        return &states_.emplace(seq, std::move(st)).first->second;
    }

    // An eval failed (cannot happen for in-range tokens within n_ctx): start over next time.
    void fail(uint64_t seq) { states_.erase(seq); }

    const model::Model& model_;
    DraftModelOptions opts_;
    std::unordered_map<uint64_t, State> states_;
};

}  // namespace

std::unique_ptr<Drafter> make_draft_model_drafter(const model::Model& model,
                                                  const DraftModelOptions& opts) {
    return std::make_unique<DraftModelDrafter>(model, opts);
}

}  // namespace zinc::engine
