// zinc/engine/drafter.cpp — the prompt lookup drafter, the adaptive draft length and the
// model drafters' greedy pick.
#include "engine/drafter.h"

#include <algorithm>

namespace zinc::engine {

const char* to_string(SpecMode m) {
    switch (m) {
        case SpecMode::Off:
            return "off";
        case SpecMode::Lookup:
            return "lookup";
        case SpecMode::Draft:
            return "draft";
        case SpecMode::NextN:
            return "nextn";
    }
    return "?";
}

std::optional<SpecMode> parse_spec_mode(std::string_view s) {
    if (s == "off") return SpecMode::Off;
    if (s == "lookup") return SpecMode::Lookup;
    if (s == "draft") return SpecMode::Draft;
    if (s == "nextn") return SpecMode::NextN;
    return std::nullopt;
}

int32_t draft_argmax(std::span<const float> l) {
    int32_t best = 0;
    for (size_t i = 1; i < l.size(); ++i)
        if (l[i] > l[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    return best;
}

void DraftLength::update(int32_t n_drafted, int32_t n_accepted) {
    if (n_drafted <= 0) return;
    if (n_accepted >= n_drafted) {
        len = std::min(max, len + 1);
    } else if (n_accepted == 0) {
        len = std::max(1, len / 2);
    } else {
        len = std::max(1, len - 1);
    }
}

namespace {

// Prompt lookup decoding: for n = max_ngram .. 1, the last n tokens are searched in the earlier
// tokens, latest occurrence first (in edited or reviewed code the nearest copy is the likeliest
// to continue the same way); the tokens after the first match found are the draft.
class LookupDrafter : public Drafter {
  public:
    explicit LookupDrafter(int32_t max_ngram) : max_ngram_(max_ngram) {}
    const char* name() const override { return "lookup"; }

    void propose(uint64_t, std::span<const int32_t> t, int32_t max_draft,
                 std::vector<int32_t>& out) override {
        out.clear();
        const auto n_tok = static_cast<int64_t>(t.size());
        for (int64_t n = std::min<int64_t>(max_ngram_, n_tok - 1); n >= 1; --n) {
            const int32_t* tail = t.data() + (n_tok - n);
            // A match at i (t[i, i + n) == tail) with i + n < n_tok has a continuation.
            for (int64_t i = n_tok - n - 1; i >= 0; --i) {
                if (t[static_cast<size_t>(i)] != tail[0] ||
                    !std::equal(tail, tail + n, t.data() + i))
                    continue;
                const int64_t from = i + n;
                const int64_t to = std::min<int64_t>(n_tok, from + max_draft);
                out.assign(t.begin() + from, t.begin() + to);
                return;
            }
        }
    }

  private:
    int32_t max_ngram_;
};

}  // namespace

std::unique_ptr<Drafter> make_lookup_drafter(int32_t max_ngram) {
    return std::make_unique<LookupDrafter>(std::max<int32_t>(1, max_ngram));
}

}  // namespace zinc::engine
