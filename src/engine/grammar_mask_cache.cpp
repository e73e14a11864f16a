// zinc/engine/grammar_mask_cache.cpp — see grammar_mask_cache.h.
#include "engine/grammar_mask_cache.h"

#include <cstdlib>

#include "util/check.h"

namespace zinc::engine {

GrammarMaskCache::Options grammar_mask_options_from_env() {
    GrammarMaskCache::Options o;
    if (const char* e = std::getenv("ZINC_GRAMMAR_ABSTRACT"); e && std::string(e) == "0")
        o.abstract_keys = false;
    return o;
}

GrammarMaskCache::GrammarMaskCache(std::shared_ptr<const Grammar> g, size_t n_vocab, Options o)
    : g_(std::move(g)), n_words_((n_vocab + 63) / 64), opts_(o), keys_(*g_) {}

GrammarMaskCache::GrammarMaskCache(std::shared_ptr<const Grammar> g, size_t n_vocab)
    : GrammarMaskCache(std::move(g), n_vocab, grammar_mask_options_from_env()) {}

void GrammarMaskCache::key(const GrammarState& s, uint32_t max_len, std::string& out) {
    if (!opts_.abstract_keys) return GrammarStateKeys::exact_key(s, out);
    std::lock_guard<std::mutex> lk(mu_);
    keys_.key(s, max_len, out);
}

bool GrammarMaskCache::or_into(size_t bucket, const std::string& key, std::vector<uint64_t>& bits) {
    ZINC_CHECK(bits.size() == n_words_ && bucket < 256);
    std::string k(1, static_cast<char>(bucket));
    k += key;
    std::lock_guard<std::mutex> lk(mu_);
    auto it = masks_.find(k);
    if (it == masks_.end()) {
        ++stats_.misses;
        return false;
    }
    ++stats_.hits;
    const std::vector<uint64_t>& m = it->second;
    for (size_t i = 0; i < n_words_; ++i) bits[i] |= m[i];
    return true;
}

void GrammarMaskCache::insert(size_t bucket, const std::string& key,
                              const std::vector<uint64_t>& bits) {
    ZINC_CHECK(bits.size() == n_words_ && bucket < 256);
    std::string k(1, static_cast<char>(bucket));
    k += key;
    std::lock_guard<std::mutex> lk(mu_);
    const size_t per = n_words_ * sizeof(uint64_t) + k.size();
    while (!fifo_.empty() && (masks_.size() + 1) * per > opts_.max_bytes) {
        masks_.erase(fifo_.front());
        fifo_.pop_front();
    }
    if (masks_.emplace(k, bits).second) fifo_.push_back(std::move(k));
}

GrammarMaskCache::Stats GrammarMaskCache::stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    Stats s = stats_;
    s.entries = masks_.size();
    return s;
}

}  // namespace zinc::engine
