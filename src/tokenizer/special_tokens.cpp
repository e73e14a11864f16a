// zinc/tokenizer/special_tokens.cpp — special-token partition via a byte trie (see header).
#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <unordered_map>

namespace zinc::tokenizer {

SpecialMatcher::SpecialMatcher(const Vocab& vocab) {
    std::vector<TokenId> cands;
    for (TokenId id = 0; id < vocab.size(); ++id)
        if (vocab.attrs(id) & (attr::kControl | attr::kUserDefined | attr::kUnknown))
            cands.push_back(id);
    // Longest first; equal lengths by id (llama.cpp's std::sort leaves their order unspecified,
    // which only matters for two equal-length special tokens overlapping in the text).
    std::stable_sort(cands.begin(), cands.end(), [&](TokenId a, TokenId b) {
        return vocab.text(a).size() > vocab.text(b).size();
    });
    // Build with a temporary hash map of edges, then freeze into per-node sorted child lists
    // (lookups walk long runs like "\n\n\n..." byte by byte, so they must be cheap).
    std::unordered_map<uint64_t, uint32_t> edges;  // (node << 8 | byte) -> node
    nodes_.emplace_back();
    for (uint32_t rank = 0; rank < cands.size(); ++rank) {
        const TokenId id = cands[rank];
        const auto text = vocab.text(id);
        attrs_by_rank_.push_back(vocab.attrs(id));
        len_by_rank_.push_back(static_cast<uint32_t>(text.size()));
        uint32_t node = 0;
        for (unsigned char c : text) {
            const uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
            auto it = edges.find(key);
            if (it == edges.end()) {
                nodes_.emplace_back();
                it = edges.emplace(key, static_cast<uint32_t>(nodes_.size() - 1)).first;
            }
            node = it->second;
        }
        if (nodes_[node].token < 0) {  // texts are unique in a vocab, so this always holds
            nodes_[node].token = id;
            nodes_[node].rank = rank;
        }
    }
    std::vector<std::pair<uint64_t, uint32_t>> sorted(edges.begin(), edges.end());
    std::sort(sorted.begin(), sorted.end());
    edge_bytes_.reserve(sorted.size());
    edge_nodes_.reserve(sorted.size());
    for (const auto& [key, to] : sorted) {
        Node& from = nodes_[key >> 8];
        if (from.count == 0) from.first = static_cast<uint32_t>(edge_bytes_.size());
        ++from.count;
        edge_bytes_.push_back(static_cast<uint8_t>(key & 0xFF));
        edge_nodes_.push_back(to);
    }
}

uint32_t SpecialMatcher::child(uint32_t node, uint8_t byte) const {
    const Node& n = nodes_[node];
    const uint8_t* b = edge_bytes_.data() + n.first;
    const uint8_t* e = b + n.count;
    const uint8_t* it = std::lower_bound(b, e, byte);
    return (it != e && *it == byte) ? edge_nodes_[it - edge_bytes_.data()] : 0;
}

std::vector<Fragment> SpecialMatcher::partition(std::string_view text, bool parse_special,
                                                const std::vector<TextRange>* plain) const {
    std::vector<Fragment> out;
    if (text.empty()) return out;
    struct Hit {
        uint32_t rank;
        uint32_t pos;
        TokenId token;
    };
    std::vector<Hit> hits;
    // Whether [b, e) overlaps a plain range; `next` is the first range ending after the start
    // positions seen so far (they increase), so the scan is linear.
    size_t next = 0;
    auto in_plain = [&](size_t b, size_t e) {
        if (!plain) return false;
        while (next < plain->size() && (*plain)[next].end <= b) ++next;
        return next < plain->size() && (*plain)[next].begin < e;
    };
    if (nodes_.size() > 1) {
        for (size_t i = 0; i < text.size(); ++i) {
            uint32_t node = 0;
            for (size_t j = i; j < text.size(); ++j) {
                node = child(node, static_cast<uint8_t>(text[j]));
                if (node == 0) break;
                const Node& nd = nodes_[node];
                if (nd.token < 0) continue;
                const uint32_t a = attrs_by_rank_[nd.rank];
                if ((a & (attr::kControl | attr::kUnknown)) &&
                    (!parse_special || in_plain(i, j + 1)))
                    continue;
                hits.push_back({nd.rank, static_cast<uint32_t>(i), nd.token});
            }
        }
    }
    if (hits.empty()) {
        out.push_back({false, -1, 0, text.size()});
        return out;
    }
    // Order by (rank, position) with a counting sort on rank: hits were found in increasing
    // position, and a long run of e.g. "\n" yields dozens of hits per byte, so this is linear.
    {
        std::vector<uint32_t> start(len_by_rank_.size() + 1, 0);
        for (const Hit& h : hits) ++start[h.rank + 1];
        for (size_t r = 1; r < start.size(); ++r) start[r] += start[r - 1];
        std::vector<Hit> sorted(hits.size());
        for (const Hit& h : hits) sorted[start[h.rank]++] = h;
        hits.swap(sorted);
    }
    std::vector<uint8_t> claimed(text.size(), 0);
    std::vector<Hit> accepted;
    for (const Hit& h : hits) {
        const uint32_t len = len_by_rank_[h.rank];
        bool free = true;
        for (uint32_t k = 0; k < len && free; ++k) free = !claimed[h.pos + k];
        if (!free) continue;
        std::fill(claimed.begin() + h.pos, claimed.begin() + h.pos + len, 1);
        accepted.push_back(h);
    }
    std::sort(accepted.begin(), accepted.end(),
              [](const Hit& a, const Hit& b) { return a.pos < b.pos; });
    size_t cur = 0;
    for (const Hit& h : accepted) {
        if (h.pos > cur) out.push_back({false, -1, cur, h.pos - cur});
        out.push_back({true, h.token, 0, 0});
        cur = h.pos + len_by_rank_[h.rank];
    }
    if (cur < text.size()) out.push_back({false, -1, cur, text.size() - cur});
    return out;
}

}  // namespace zinc::tokenizer
