// Fuzz target for WordPiece (BERT): any bytes, encoded by an uncased and a cased tokenizer and in
// Python-compatible mode. It must not crash, every id must be in the vocabulary, decode must take
// the ids back, and the fused normalizer/pre-tokenizer must give the words its reference gives.
// Uses the shared uncased vocabulary when present, else a small one built here.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/utf8.h"
#include "test_util.h"
#include "tokenizer/bert_pre_tokenizer.h"
#include "tokenizer/wordpiece.h"

namespace {

using pretrain::TokenizerOptions;

std::unique_ptr<pretrain::Tokenizer> make(const TokenizerOptions& options) {
  std::string vocab = pretrain::testing::shared_file("vocab/bert-base-uncased-vocab.txt");
  if (!vocab.empty()) return pretrain::make_wordpiece_tokenizer(vocab, options);
  nlohmann::json j;
  j["model"] = {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"}};
  const char* tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a", "b", "##b", "ab", "é", "中", ".", "##é"};
  for (int i = 0; i < static_cast<int>(std::size(tokens)); ++i) j["model"]["vocab"][tokens[i]] = i;
  j["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", true}};
  return pretrain::make_wordpiece_tokenizer_from_hf(j, "fuzz", options);
}

void check(const pretrain::Tokenizer& tok, std::string_view text) {
  std::vector<pretrain::TokenId> ids = tok.encode(text, true);
  for (pretrain::TokenId id : ids)
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  std::string decoded = tok.decode(ids, true);
  if (!pretrain::is_valid_utf8(decoded)) __builtin_trap();
}

void check_words(const pretrain::BertPreTokenizer& pre, const std::string& valid_text) {
  pretrain::BertWords words;
  pre.run(valid_text, words);
  std::vector<std::string> reference = pre.reference(valid_text);
  if (reference.size() != words.size()) __builtin_trap();
  for (size_t i = 0; i < words.size(); ++i)
    if (words[i] != reference[i]) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto uncased = make({});
  static const auto cased = [] {
    TokenizerOptions o;
    o.lowercase = false;
    o.max_input_chars_per_word = 200;
    return make(o);
  }();
  static const auto python = [] {
    TokenizerOptions o;
    o.python_compat = true;
    return make(o);
  }();
  static const pretrain::BertPreTokenizer pre_uncased({}), pre_cased([] {
    pretrain::BertNormalizerOptions o;
    o.lowercase = o.strip_accents = false;
    return o;
  }());
  std::string_view text(reinterpret_cast<const char*>(data), size);
  check(*uncased, text);
  check(*cased, text);
  check(*python, text);
  std::string repaired(text);
  pretrain::repair_utf8(repaired);
  check_words(pre_uncased, repaired);
  check_words(pre_cased, repaired);
  return 0;
}
