// Placeholder until the WordPiece model lands (issue 4).
#include "tokenizer/wordpiece.h"

#include "common/error.h"

namespace pretrain {
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer(const std::string& vocab_path, const TokenizerOptions&) {
  throw UsageError(Where{vocab_path}, "WordPiece is not built yet");
}
std::unique_ptr<Tokenizer> make_wordpiece_tokenizer_from_hf(const nlohmann::json&, const std::string& source,
                                                            const TokenizerOptions&) {
  throw UsageError(Where{source}, "WordPiece is not built yet");
}
}  // namespace pretrain
