// WordPiece (BERT): BERT's basic tokenizer with ICU, then greedy longest-match-first WordPiece.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace pretrain {

struct TokenizerJson;

// From a vocab.txt (one token per line, id = line number); [PAD], [UNK], [CLS], [SEP] and [MASK]
// are the added (special) tokens.
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer(const std::string& vocab_path, const TokenizerOptions& options);
// From an HF tokenizer.json whose model is WordPiece (tokenizer_json.h): the model's options, the
// BertNormalizer's settings and the added tokens. The options override the file's.
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer_from_hf(const TokenizerJson& tokenizer_json,
                                                            const TokenizerOptions& options);
// The same from JSON already parsed (tests, fuzzers); `source` names it in messages.
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer_from_hf(const nlohmann::json& tokenizer_json,
                                                            const std::string& source, const TokenizerOptions& options);

}  // namespace pretrain
