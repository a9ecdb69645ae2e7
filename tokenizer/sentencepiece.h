// SentencePiece: libsentencepiece's processor behind the Tokenizer interface.
#pragma once
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace pretrain {

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_path, const TokenizerOptions& options);

}  // namespace pretrain
