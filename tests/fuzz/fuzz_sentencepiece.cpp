// Fuzz target for the SentencePiece tokenizer: the input is text (any bytes) for both shared test
// models (English and Japanese): encode, tokenize, decode what came out, decode ids made from the
// input bytes, look the input up as a piece. Every id must be in range; a crash or an exception
// other than pretrain::Error is a bug. Without the shared data (a lent machine's campaign, say) two
// small models are trained here instead, a unigram one and a BPE one with byte fallback, so the
// target never runs with no model (it once did: coverage 15 over 34 M executions).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/train_sentencepiece.h"

namespace {

// Lines of made-up words from Latin, accented, Greek and Japanese syllables, digits and
// punctuation: varied enough for a few hundred pieces.
std::vector<std::string> training_lines() {
  const char* syllables[] = {"the", "light", "house", "sta", "nd", "ro", "ck", "ship", "ni", "ght", "über", "fluss",
                             "côté", "près", "mer", "φά", "ρος", "βρά", "χο", "πλοί", "灯", "台", "岩", "船", "港",
                             "東京", "大阪", "まち", "かわ", "やま", "12", "3.5", ",", "(", ")", "#", "%", "-"};
  const size_t n = std::size(syllables);
  std::vector<std::string> lines;
  for (size_t i = 0; i < 600; ++i) {
    std::string line;
    for (size_t w = 0; w < 10; ++w) {
      const size_t k = i * 31 + w * 17;
      line += syllables[k % n];
      line += syllables[(k / 7 + w) % n];
      if (w % 3 != 2) line += syllables[(k * 5 + i) % n];
      line += ' ';
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::vector<std::unique_ptr<pretrain::Tokenizer>> load_models() {
  using namespace pretrain;
  std::vector<std::unique_ptr<Tokenizer>> models;
  for (const char* name : {"vocab/spm-test_model.model", "vocab/spm-test_ja_model.model"}) {
    std::string path = pretrain::testing::shared_file(name);
    if (!path.empty()) models.push_back(load_tokenizer(path));
  }
  if (!models.empty()) return models;
  static const pretrain::testing::TempDir dir;
  const std::vector<std::string> lines = training_lines();
  for (const char* type : {"unigram", "bpe"}) {
    SentencePieceTrainerOptions options;
    options.vocab_size = std::string_view(type) == "bpe" ? 400 : 200;  // BPE: 256 byte pieces first
    options.model_type = type;
    options.byte_fallback = std::string_view(type) == "bpe";
    options.character_coverage = 1.0;
    const SentencePieceModel trained = train_sentencepiece(
        [&](const TextSink& sink) {
          for (const auto& line : lines) sink(line);
        },
        options);
    const std::string path = dir.file(cat(type, ".model"));
    write_file_atomic(path, trained.model);
    models.push_back(load_tokenizer(path));
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
