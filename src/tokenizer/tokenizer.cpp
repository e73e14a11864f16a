// zinc/tokenizer/tokenizer.cpp — the factory: reads tokenizer.* metadata from a GGUF file into a
// VocabSpec and builds the tokenizer family named by tokenizer.ggml.model. Also the parts of
// Tokenizer shared by every family (is_eog, the base constructor).
#include <algorithm>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/utf8.h"

namespace zinc::tokenizer {

namespace {

std::string where(const gguf::File& f, std::string_view key) {
    return f.path() + ": " + std::string(key);
}

// Array of strings -> views into the mapping.
Result<void> read_strings(const gguf::File& f, std::string_view key,
                          std::vector<std::string_view>& out, bool required) {
    auto arr = f.get_array(key);
    if (!arr.ok()) return arr.error();
    const gguf::Value* v = *arr;
    if (!v) {
        if (required) return make_error(where(f, key) + ": missing (expected an array of strings)");
        return {};
    }
    if (v->elem_type != gguf::ValueType::STRING)
        return make_error(where(f, key) + ": expected an array of strings, got array of " +
                          std::string(gguf::value_type_name(v->elem_type)));
    out.reserve(v->arr.size());
    for (const auto& e : v->arr) out.push_back(e.str);
    return {};
}

Result<void> read_optional_id(const gguf::File& f, std::string_view key,
                              std::optional<int64_t>& out) {
    auto r = f.get_int(key);
    if (!r.ok()) return r.error();
    out = *r;
    return {};
}

Result<void> read_optional_bool(const gguf::File& f, std::string_view key,
                                std::optional<bool>& out) {
    auto r = f.get_bool(key);
    if (!r.ok()) return r.error();
    out = *r;
    return {};
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> make_tokenizer(const VocabSpec& spec) {
    if (spec.model == "gpt2") return make_bpe_tokenizer(spec);
    if (spec.model == "llama") return make_spm_tokenizer(spec);
    if (spec.model == "bert") return make_wordpiece_tokenizer(spec);
    return make_error("tokenizer.ggml.model: unsupported tokenizer model '" + spec.model +
                      "' (supported: gpt2, llama, bert)");
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const gguf::File& file) {
    VocabSpec spec;
    {
        auto model = file.get_string("tokenizer.ggml.model");
        if (!model.ok()) return model.error();
        if (!*model) return make_error(where(file, "tokenizer.ggml.model") + ": missing");
        spec.model = std::string(**model);
        auto pre = file.get_string("tokenizer.ggml.pre");
        if (!pre.ok()) return pre.error();
        if (*pre) spec.pre = std::string(**pre);
    }
    ZINC_TRY(read_strings(file, "tokenizer.ggml.tokens", spec.tokens, true));
    if (spec.model == "gpt2")
        ZINC_TRY(read_strings(file, "tokenizer.ggml.merges", spec.merges, true));

    auto scores = file.get_array("tokenizer.ggml.scores");
    if (!scores.ok()) return scores.error();
    if (*scores) {
        const gguf::Value* v = *scores;
        if (v->elem_type != gguf::ValueType::FLOAT32 && v->elem_type != gguf::ValueType::INT32)
            return make_error(where(file, "tokenizer.ggml.scores") +
                              ": expected an array of f32 or i32");
        spec.scores.reserve(v->arr.size());
        for (const auto& e : v->arr)
            spec.scores.push_back(static_cast<float>(e.as_float().value_or(0.0)));
    }
    auto types = file.get_array("tokenizer.ggml.token_type");
    if (!types.ok()) return types.error();
    if (*types) {
        const gguf::Value* v = *types;
        if (v->elem_type != gguf::ValueType::INT32)
            return make_error(where(file, "tokenizer.ggml.token_type") +
                              ": expected an array of i32");
        spec.token_types.reserve(v->arr.size());
        for (const auto& e : v->arr) spec.token_types.push_back(static_cast<int32_t>(e.i));
    }
    struct IdKey {
        const char* key;
        std::optional<int64_t>* out;
    };
    const IdKey id_keys[] = {
        {"tokenizer.ggml.bos_token_id", &spec.bos_id},
        {"tokenizer.ggml.eos_token_id", &spec.eos_id},
        {"tokenizer.ggml.eot_token_id", &spec.eot_id},
        {"tokenizer.ggml.eom_token_id", &spec.eom_id},
        {"tokenizer.ggml.unknown_token_id", &spec.unk_id},
        {"tokenizer.ggml.seperator_token_id", &spec.sep_id},  // sic: the GGUF key's spelling
        {"tokenizer.ggml.padding_token_id", &spec.pad_id},
        {"tokenizer.ggml.mask_token_id", &spec.mask_id},
        {"tokenizer.ggml.fim_pre_token_id", &spec.fim_pre_id},
        {"tokenizer.ggml.fim_suf_token_id", &spec.fim_suf_id},
        {"tokenizer.ggml.fim_mid_token_id", &spec.fim_mid_id},
        {"tokenizer.ggml.fim_pad_token_id", &spec.fim_pad_id},
        {"tokenizer.ggml.fim_rep_token_id", &spec.fim_rep_id},
        {"tokenizer.ggml.fim_sep_token_id", &spec.fim_sep_id},
    };
    for (const auto& k : id_keys) ZINC_TRY(read_optional_id(file, k.key, *k.out));
    ZINC_TRY(read_optional_bool(file, "tokenizer.ggml.add_bos_token", spec.add_bos));
    ZINC_TRY(read_optional_bool(file, "tokenizer.ggml.add_eos_token", spec.add_eos));
    ZINC_TRY(read_optional_bool(file, "tokenizer.ggml.add_space_prefix", spec.add_space_prefix));
    ZINC_TRY(read_optional_bool(file, "tokenizer.ggml.add_sep_token", spec.add_sep));
    ZINC_TRY(read_optional_bool(file, "tokenizer.ggml.normalizer.lowercase", spec.lowercase));
    ZINC_TRY(
        read_optional_bool(file, "tokenizer.ggml.normalizer.strip_accents", spec.strip_accents));

    auto tok = make_tokenizer(spec);
    if (!tok.ok()) return make_error(file.path() + ": " + tok.error().message);
    // A BOS/EOS id the file does not give falls back to llama.cpp's family default (SPM: bos 1,
    // eos 2; BPE: 11), which may be another token entirely (Gemma's id 1 is <eos>): say so.
    Tokenizer& t = *tok.value();
    const char* family = spec.model == "llama"  ? "sentencepiece"
                         : spec.model == "bert" ? "bert WordPiece"
                                                : "gpt2 BPE";
    auto note_default = [&](const char* key, const std::optional<int64_t>& given, TokenId used,
                            const char* what) {
        if (given || used < 0) return;
        t.warnings_.push_back(std::string(key) + " is missing; " + what + " defaults to id " +
                              std::to_string(used) + " \"" +
                              utf8::escape_for_terminal(t.token_text(used)) + "\" (the " + family +
                              " default), which may not be the model's " + what + " token");
    };
    note_default("tokenizer.ggml.bos_token_id", spec.bos_id, t.bos(), "BOS");
    note_default("tokenizer.ggml.eos_token_id", spec.eos_id, t.eos(), "EOS");
    return tok;
}

bool Tokenizer::is_eog(TokenId id) const {
    return id >= 0 && std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

TokenizerBase::TokenizerBase(std::unique_ptr<Vocab> vocab, Family family, const SpecialIds& ids,
                             std::vector<TokenId> eog, bool add_bos, bool add_eos)
    : vocab_(std::move(vocab)), family_(family), ids_(ids), matcher_(*vocab_) {
    bos_ = ids.bos;
    eos_ = ids.eos;
    eot_ = ids.eot;
    add_bos_ = add_bos;
    add_eos_ = add_eos;
    eog_ids_ = std::move(eog);
}

}  // namespace zinc::tokenizer
