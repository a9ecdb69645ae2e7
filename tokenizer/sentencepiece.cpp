// Placeholder until the SentencePiece wrapper lands (issue 4).
#include "tokenizer/sentencepiece.h"

#include "common/error.h"

namespace pretrain {
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_path, const TokenizerOptions&) {
  throw UsageError(Where{model_path}, "SentencePiece is not built yet");
}
}  // namespace pretrain
