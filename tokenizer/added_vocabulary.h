// Added tokens: entries kept whole wherever they occur in the text ("[MASK]", "<|endoftext|>", a
// tokenizer.json's added_tokens), cut out of the raw text before the normalizer and the
// pre-tokenizer see it, as HF's AddedVocabulary does. WordPiece and byte-level BPE share all of
// it: the token type, reading tokenizer.json's "added_tokens", and the one matcher.
//
// HF matches tokens with normalized=true in the normalized text; we match every added token in the
// raw text. BERT's and GPT-2's added tokens are all normalized=false, so this differs only for
// normalized=true tokens that normalization would change or create.
#pragma once
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace pretrain {

// One entry of tokenizer.json's added_tokens, with the HF flags that change how it matches.
struct AddedToken {
  std::string content;
  TokenId id = 0;
  bool special = false;      // decode(skip_special_tokens) drops it
  bool single_word = false;  // matches only where no word character touches it on either side
  bool lstrip = false;       // HF: the match also takes the whitespace on its left
  bool rstrip = false;       // … and on its right
};

// tokenizer.json's "added_tokens": an array of {"id", "content", "special", "single_word", "lstrip",
// "rstrip", "normalized"}, in file order. Errors name `source` and the entry (added_tokens[i]): not
// an object, id not an integer in [0, kMaxTokenId), content not a non-empty string, a flag not a
// bool. Content is valid UTF-8 (bad bytes in JSON built in code become U+FFFD).
std::vector<AddedToken> read_added_tokens(const nlohmann::json& added_tokens, const std::string& source);

// Which of HF's per-token flags a model takes. A token asking for one it does not take is refused.
struct AddedTokenFlags {
  bool single_word = false;   // honoured by the matcher
  bool ignore_strip = false;  // lstrip/rstrip accepted and ignored (only where that changes no id)
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // `tokens` in file order (the first of two with the same content wins). Throws Error naming
  // `source` and the entry when a token has a flag `flags` does not take.
  AddedVocabulary(std::vector<AddedToken> tokens, AddedTokenFlags flags, const std::string& source);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  bool empty() const { return tokens_.empty(); }
  // The token spelled `content`, or nullptr.
  const AddedToken* find(std::string_view content) const;

  // Splits text (valid UTF-8) at the added tokens, left to right: f(segment, nullptr) for each
  // non-empty run of text between them, f({}, &token) for each match. HF's precedence: the
  // earliest match wins, and of the tokens matching there the longest (then the first listed);
  // the text a match covers is not searched again.
  template <typename F>
  void split(std::string_view text, F&& f) const;

 private:
  // Where token k next matches at or after `from` (single_word checked), or npos.
  size_t next_match(std::string_view text, size_t k, size_t from) const;

  std::vector<AddedToken> tokens_;
};

template <typename F>
void AddedVocabulary::split(std::string_view text, F&& f) const {
  if (text.empty()) return;
  if (tokens_.empty()) {
    f(text, nullptr);
    return;
  }
  // next[k]: where token k matches next at or after pos, searched again only once pos passes it,
  // so the text is scanned about once per token however many matches it has. BERT's vocab.txt has
  // five added tokens: the stack array keeps encoding free of allocations.
  constexpr size_t kNone = std::string_view::npos;
  size_t next_small[16];
  std::vector<size_t> next_large;
  size_t* next = next_small;
  if (tokens_.size() > std::size(next_small)) {
    next_large.resize(tokens_.size());
    next = next_large.data();
  }
  for (size_t k = 0; k < tokens_.size(); ++k) next[k] = next_match(text, k, 0);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = kNone;
    const AddedToken* best_token = nullptr;
    for (size_t k = 0; k < tokens_.size(); ++k) {
      if (next[k] < pos) next[k] = next_match(text, k, pos);
      const size_t at = next[k];
      if (at < best || (at == best && at != kNone && tokens_[k].content.size() > best_token->content.size())) {
        best = at;
        best_token = &tokens_[k];
      }
    }
    if (best == kNone) break;
    if (best > pos) f(text.substr(pos, best - pos), nullptr);
    f(std::string_view(), best_token);
    pos = best + best_token->content.size();
  }
  if (pos < text.size()) f(text.substr(pos), nullptr);
}

}  // namespace pretrain
