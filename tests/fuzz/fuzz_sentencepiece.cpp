// Fuzz target for the SentencePiece tokenizer: the input is text (any bytes) for both shared test
// models (English and Japanese): encode, tokenize, decode what came out, decode ids made from the
// input bytes, look the input up as a piece. Every id must be in range; a crash or an exception
// other than pretrain::Error is a bug. Without the shared data there is no model and nothing to do.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace {

std::vector<std::unique_ptr<pretrain::Tokenizer>> load_models() {
  std::vector<std::unique_ptr<pretrain::Tokenizer>> models;
  for (const char* name : {"vocab/spm-test_model.model", "vocab/spm-test_ja_model.model"}) {
    std::string path = pretrain::testing::shared_file(name);
    if (!path.empty()) models.push_back(pretrain::load_tokenizer(path));
  }
  return models;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pretrain;
  static const auto models = load_models();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : models) {
    try {
      std::vector<TokenId> ids = tok->encode(text);
      for (TokenId id : ids)
        if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
      std::vector<std::string> pieces = tok->tokenize(text);
      if (pieces.size() != ids.size()) __builtin_trap();
      (void)tok->decode(ids);
      (void)tok->decode(ids, true);
      // Arbitrary in-range ids (two bytes each) decode without trouble, control symbols included.
      std::vector<TokenId> raw;
      for (size_t i = 0; i + 1 < size; i += 2)
        raw.push_back(static_cast<TokenId>((data[i] | (data[i + 1] << 8)) % tok->vocab_size()));
      (void)tok->decode(raw);
      (void)tok->decode(raw, true);
      if (auto id = tok->token_to_id(text); id && (*id < 0 || *id >= tok->vocab_size())) __builtin_trap();
    } catch (const Error&) {
    }
  }
  return 0;
}
