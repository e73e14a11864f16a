// zinc/tokenizer/vocab.cpp — building the token table and resolving special tokens / EOG the way
// llama.cpp's llama_vocab::impl::load does (defaults per family, metadata overrides, detection of
// EOT/FIM/EOG tokens by their text).
#include "tokenizer/vocab.h"

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <unordered_map>

namespace zinc::tokenizer {

namespace {

uint32_t attr_of_type(int32_t t) {
    switch (t) {
        case static_cast<int32_t>(TokenType::NORMAL):
            return attr::kNormal;
        case static_cast<int32_t>(TokenType::UNKNOWN):
            return attr::kUnknown;
        case static_cast<int32_t>(TokenType::CONTROL):
            return attr::kControl;
        case static_cast<int32_t>(TokenType::USER_DEFINED):
            return attr::kUserDefined;
        case static_cast<int32_t>(TokenType::UNUSED):
            return attr::kUnused;
        case static_cast<int32_t>(TokenType::BYTE):
            return attr::kByte;
        default:
            return attr::kUndefined;
    }
}

}  // namespace

Result<std::unique_ptr<Vocab>> Vocab::build(const VocabSpec& spec) {
    const size_t n = spec.tokens.size();
    if (n == 0) return make_error("tokenizer.ggml.tokens: empty vocabulary");
    if (n > static_cast<size_t>(INT32_MAX) - 1)
        return make_error("tokenizer.ggml.tokens: " + std::to_string(n) + " tokens is too many");
    if (!spec.scores.empty() && spec.scores.size() < n)
        return make_error("tokenizer.ggml.scores: " + std::to_string(spec.scores.size()) +
                          " scores for " + std::to_string(n) + " tokens");
    if (!spec.token_types.empty() && spec.token_types.size() < n)
        return make_error("tokenizer.ggml.token_type: " + std::to_string(spec.token_types.size()) +
                          " types for " + std::to_string(n) + " tokens");

    std::unique_ptr<Vocab> v(new Vocab());
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += spec.tokens[i].empty() ? 24 : spec.tokens[i].size();
    if (total > UINT32_MAX) return make_error("tokenizer.ggml.tokens: token texts exceed 4 GiB");
    v->arena_.reserve(total);
    v->offsets_.reserve(n + 1);
    v->offsets_.push_back(0);
    for (size_t i = 0; i < n; ++i) {
        std::string_view t = spec.tokens[i];
        std::string empty_name;
        if (t.empty()) {  // llama.cpp renames empty tokens so they stay unique and visible
            empty_name = "[EMPTY_" + std::to_string(i) + "]";
            t = empty_name;
        }
        v->arena_.insert(v->arena_.end(), t.begin(), t.end());
        v->offsets_.push_back(static_cast<uint32_t>(v->arena_.size()));
    }
    if (!spec.scores.empty()) v->scores_.assign(spec.scores.begin(), spec.scores.begin() + n);
    v->attrs_.resize(n);
    v->types_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const int32_t t = spec.token_types.empty() ? static_cast<int32_t>(TokenType::NORMAL)
                                                   : spec.token_types[i];
        v->attrs_[i] = attr_of_type(t);
        v->types_[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::UNDEFINED;
    }
    v->index_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<TokenId>(i);
        auto [it, inserted] = v->index_.emplace(v->text(id), id);
        if (!inserted)
            return make_error("tokenizer.ggml.tokens: duplicate token '" +
                              std::string(v->text(id)) + "' at ids " + std::to_string(it->second) +
                              " and " + std::to_string(i));
    }
    return v;
}

std::vector<TokenId> resolve_specials(const VocabSpec& spec, bool is_spm, Vocab& vocab,
                                      SpecialIds& ids) {
    const int32_t n = vocab.size();
    // Family defaults (llama.cpp): SPM bos=1 eos=2 unk=0; BPE bos=eos=11.
    if (is_spm) {
        ids.bos = 1;
        ids.eos = 2;
        ids.unk = 0;
    } else {
        ids.bos = 11;
        ids.eos = 11;
    }
    auto apply = [&](TokenId& id, const std::optional<int64_t>& key) {
        if (id >= n) id = -1;  // a default outside the vocab is disabled
        if (key && *key >= 0 && *key < n) id = static_cast<TokenId>(*key);
        // a key that is out of range keeps the default (llama.cpp warns)
    };
    apply(ids.bos, spec.bos_id);
    apply(ids.eos, spec.eos_id);
    apply(ids.eot, spec.eot_id);
    apply(ids.eom, spec.eom_id);
    apply(ids.unk, spec.unk_id);
    apply(ids.sep, spec.sep_id);
    apply(ids.pad, spec.pad_id);
    apply(ids.mask, spec.mask_id);
    apply(ids.fim_pre, spec.fim_pre_id);
    apply(ids.fim_suf, spec.fim_suf_id);
    apply(ids.fim_mid, spec.fim_mid_id);
    apply(ids.fim_pad, spec.fim_pad_id);
    apply(ids.fim_rep, spec.fim_rep_id);
    apply(ids.fim_sep, spec.fim_sep_id);

    // Detection by text. llama.cpp walks its std::unordered_map<std::string, id> (filled by
    // emplace in id order, no reserve) and keeps the first match. When several tokens match we
    // rebuild that map the same way and walk it: with the same standard library the hash and
    // rehash policy, hence the order, are the same (on SmolLM2 this picks <|endoftext|> over
    // <|im_end|>, as llama.cpp does).
    std::vector<TokenId> hash_order;  // ids in llama.cpp's iteration order, built on demand
    auto first_in_hash_order = [&](const std::vector<TokenId>& found) {
        if (hash_order.empty()) {
            std::unordered_map<std::string, TokenId> m;
            for (TokenId t = 0; t < n; ++t) m.emplace(std::string(vocab.text(t)), t);
            hash_order.reserve(m.size());
            for (const auto& kv : m) hash_order.push_back(kv.second);
        }
        for (TokenId t : hash_order)
            if (std::find(found.begin(), found.end(), t) != found.end()) return t;
        return found.front();
    };
    auto detect = [&](TokenId& id, std::initializer_list<std::string_view> names) {
        if (id != -1) return;
        std::vector<TokenId> found;
        for (auto name : names) {
            const TokenId t = vocab.find(name);
            if (t >= 0) found.push_back(t);
        }
        if (found.empty()) return;
        id = found.size() == 1 ? found.front() : first_in_hash_order(found);
        vocab.add_attr(id, attr::kControl);
    };
    detect(ids.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                     "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                     "<\xEF\xBD\x9C"
                     "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                     "<end_of_utterance>"});
    detect(ids.eom, {"<|eom_id|>"});
    detect(ids.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                         "<\xEF\xBD\x9C"
                         "fim\xE2\x96\x81"
                         "begin\xEF\xBD\x9C>",
                         "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"});
    detect(ids.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                         "<\xEF\xBD\x9C"
                         "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                         "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"});
    detect(ids.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                         "<\xEF\xBD\x9C"
                         "fim\xE2\x96\x81"
                         "end\xEF\xBD\x9C>",
                         "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"});
    detect(ids.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
    detect(ids.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
    detect(ids.fim_sep, {"<|file_sep|>"});

    std::set<TokenId> eog;
    for (TokenId id : {ids.fim_pad, ids.fim_rep, ids.fim_sep})
        if (id >= 0) eog.insert(id);
    for (std::string_view name :
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
          "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
          "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
          // Gemma 4: its turn's end, and the tool results' opener after a call (the client
          // runs the tools), as llama.cpp's list has them.
          "<eos>", "<turn|>", "<|tool_response>"}) {
        const TokenId t = vocab.find(name);
        if (t >= 0) {
            eog.insert(t);
            vocab.add_attr(t, attr::kControl);
        }
    }
    // gpt-oss: these are rendered even when special tokens are hidden.
    for (std::string_view name : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
        const TokenId t = vocab.find(name);
        if (t >= 0) vocab.set_attr(t, attr::kUserDefined);
    }
    for (TokenId id : {ids.eos, ids.eot, ids.eom})
        if (id >= 0) eog.insert(id);
    // o200k_harmony / solar-open: "<|end|>" is not end-of-generation there.
    {
        bool has_return = false, has_call = false, has_flush = false;
        TokenId end_id = -1;
        for (TokenId t : eog) {
            const auto s = vocab.text(t);
            if (s == "<|return|>")
                has_return = true;
            else if (s == "<|call|>" || s == "<|calls|>")
                has_call = true;
            else if (s == "<|flush|>")
                has_flush = true;
            else if (s == "<|end|>")
                end_id = t;
        }
        if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
            eog.erase(end_id);
            vocab.set_attr(end_id, attr::kUserDefined);
        }
    }
    // Gemma 4 (with <|tool_response>): "</s>" is a normal token there, not end-of-generation.
    {
        TokenId s_id = -1;
        bool gemma4 = false;
        for (TokenId t : eog) {
            const auto s = vocab.text(t);
            if (s == "<|tool_response>") gemma4 = true;
            if (s == "</s>") s_id = t;
        }
        if (gemma4 && s_id >= 0) {
            eog.erase(s_id);
            vocab.set_attr(s_id, attr::kNormal);
        }
    }
    return {eog.begin(), eog.end()};
}

}  // namespace zinc::tokenizer
