// WordPiece (BERT): BERT's basic tokenizer with ICU, then greedy longest-match-first WordPiece.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace pretrain {

// From a vocab.txt (one token per line, id = line number).
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer(const std::string& vocab_path, const TokenizerOptions& options);
// From an HF tokenizer.json whose model is WordPiece (normalizer settings and added tokens read from it).
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer_from_hf(const nlohmann::json& tokenizer_json,
                                                            const std::string& source, const TokenizerOptions& options);

}  // namespace pretrain
