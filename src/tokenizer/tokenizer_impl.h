// zinc/tokenizer/tokenizer_impl.h — the common base of the two tokenizer families (internal):
// owns the Vocab, the special-token matcher and the resolved special ids, and implements the
// vocabulary accessors and token_to_piece. Subclasses implement encode().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace zinc::tokenizer {

enum class Family { ByteLevelBpe, SentencePiece };

class TokenizerBase : public Tokenizer {
  public:
    TokenizerBase(std::unique_ptr<Vocab> vocab, Family family, const SpecialIds& ids,
                  std::vector<TokenId> eog, bool add_bos, bool add_eos);

    std::string token_to_piece(TokenId id, bool special = false) const override;
    int32_t n_vocab() const override { return vocab_->size(); }
    std::string_view token_text(TokenId id) const override;
    TokenType token_type(TokenId id) const override;

    const Vocab& vocab() const { return *vocab_; }
    const SpecialIds& special_ids() const { return ids_; }

  protected:
    std::unique_ptr<Vocab> vocab_;
    Family family_;
    SpecialIds ids_;
    SpecialMatcher matcher_;
};

/// Byte-level BPE ("gpt2"). Defined in bpe_gpt2.cpp.
Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(const VocabSpec& spec);
/// SentencePiece-style BPE ("llama"). Defined in spm_bpe.cpp.
Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(const VocabSpec& spec);
/// WordPiece ("bert"). Defined in wordpiece.cpp.
Result<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(const VocabSpec& spec);
/// Build from an in-memory spec (dispatches on spec.model). Defined in tokenizer.cpp.
Result<std::unique_ptr<Tokenizer>> make_tokenizer(const VocabSpec& spec);

}  // namespace zinc::tokenizer
