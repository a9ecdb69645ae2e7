// The one reader of HF tokenizers' tokenizer.json. It parses the file once and hands WordPiece and
// byte-level BPE the parts they use, typed and checked against HF's schema; each model then
// refuses the settings it does not implement (a normalizer for BPE, a pre-tokenizer other than
// BERT's for WordPiece, …). Every error names the file, and the entry where there is one
// (merges[i], added_tokens[i]).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace pretrain {

struct TokenizerJson {
  // The normalizer, where there is one, with the BertNormalizer fields (HF's defaults where absent).
  struct Normalizer {
    std::string type;  // "BertNormalizer", "NFC", "Sequence", …
    bool clean_text = true;
    bool handle_chinese_chars = true;
    bool lowercase = true;
    std::optional<bool> strip_accents;  // null: follow lowercase
  };
  // The pre-tokenizer, where there is one; a Sequence of one step is that step.
  struct PreTokenizer {
    std::string type;  // "BertPreTokenizer", "ByteLevel", "Sequence", …
    bool add_prefix_space = false;  // ByteLevel's
    bool use_regex = true;          // ByteLevel's
  };

  std::string source;      // the file, for messages
  std::string model_type;  // "WordPiece" or "BPE": the reader refuses other models

  // model.vocab, in the object's (key) order; ids checked as read_vocab_object does.
  std::vector<std::pair<std::string, TokenId>> vocab;
  // BPE: model.merges by rank, from "left right" (tokenizers < 0.20) or ["left", "right"].
  std::vector<std::pair<std::string, std::string>> merges;
  // The model's options; absent or null fields are nullopt (each model has its own defaults).
  std::optional<std::string> unk_token;
  std::optional<std::string> continuing_subword_prefix;
  std::optional<std::string> end_of_word_suffix;  // BPE
  std::optional<int> max_input_chars_per_word;    // WordPiece
  double dropout = 0;                             // BPE; null is 0
  bool ignore_merges = false;                     // BPE

  std::optional<Normalizer> normalizer;
  std::optional<PreTokenizer> pre_tokenizer;
  std::vector<AddedToken> added_tokens;  // file order
};

// Reads and checks the file: not JSON is an Error at the byte offset, anything else names the file.
TokenizerJson read_tokenizer_json(const std::string& path);
// The same from JSON already parsed (tests, fuzzers); `source` names it in messages.
TokenizerJson parse_tokenizer_json(const nlohmann::json& tokenizer_json, const std::string& source);

// A token → id object: tokenizer.json's model.vocab, GPT-2's encoder.json / vocab.json. In the
// object's (key) order; an id that is not an integer in [0, kMaxTokenId) is an Error at `where`.
std::vector<std::pair<std::string, TokenId>> read_vocab_object(const nlohmann::json& object, const Where& where);

// The entries of the JSON text of such an object (GPT-2's 1 MB encoder.json) without building the
// JSON document, whose std::map of 50k values was half of make-pretraining-shards' GPT start-up:
// read_vocab_object()'s entries, but in the file's order. Returns nothing unless the text is a
// flat object of integer ids in range with no key or id twice: the caller then reads it as a
// document, whose errors name what is wrong.
std::optional<std::vector<std::pair<std::string, TokenId>>> read_flat_vocab_json(std::string_view text);

}  // namespace pretrain
