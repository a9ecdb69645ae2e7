// Placeholder until the BPE model lands (issue 4).
#include "tokenizer/bpe.h"

#include "common/error.h"

namespace pretrain {
std::unique_ptr<Tokenizer> make_bpe_tokenizer(const std::string& vocab_path, const std::string&, const TokenizerOptions&) {
  throw UsageError(Where{vocab_path}, "BPE is not built yet");
}
std::unique_ptr<Tokenizer> make_bpe_tokenizer_from_hf(const nlohmann::json&, const std::string& source,
                                                            const TokenizerOptions&) {
  throw UsageError(Where{source}, "BPE is not built yet");
}
}  // namespace pretrain
