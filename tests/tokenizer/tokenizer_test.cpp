// load_tokenizer: which file means which tokenizer, partners found beside each other, directories,
// the manifest's TokenizerInfo, and errors that name the file.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "test_util.h"

namespace pretrain::load_tokenizer_test {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& path) {
  try {
    load_tokenizer(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LoadTokenizer, RecognisesEachKindByItsFiles) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  PRETRAIN_REQUIRE_SHARED(encoder, "vocab/gpt2-encoder.json");
  PRETRAIN_REQUIRE_SHARED(merges, "vocab/gpt2-vocab.bpe");
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  EXPECT_EQ(load_tokenizer(vocab)->kind(), "wordpiece");
  EXPECT_EQ(load_tokenizer(model)->kind(), "sentencepiece");
  // Either GPT-2 file finds the other (shared prefix "gpt2-"), and both give the same tokenizer.
  auto from_encoder = load_tokenizer(encoder), from_merges = load_tokenizer(merges);
  EXPECT_EQ(from_encoder->kind(), "bpe");
  EXPECT_EQ(from_encoder->info().vocab_hash, from_merges->info().vocab_hash);
  EXPECT_EQ(from_encoder->encode("Hello world"), from_merges->encode("Hello world"));
  EXPECT_EQ(from_encoder->vocab_size(), 50257);
  EXPECT_EQ(from_encoder->special_ids().at("eod"), 50256);
}

TEST(LoadTokenizer, InfoIsWhatTheManifestRecords) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  auto tok = load_tokenizer(vocab);
  TokenizerInfo info = tok->info();
  EXPECT_EQ(info.kind, "wordpiece");
  EXPECT_EQ(info.vocab_size, 30522);
  EXPECT_EQ(info.vocab_hash, hex64(xxh3_file(vocab)));
  EXPECT_EQ(info.special_ids.at("cls"), 101);
  EXPECT_EQ(info.special_ids.at("sep"), 102);
  EXPECT_EQ(info.special_ids.at("mask"), 103);
  EXPECT_EQ(info.special_ids.at("pad"), 0);
  EXPECT_TRUE(tok->is_special(101));
  EXPECT_FALSE(tok->is_special(2000));
  // The post-processor wraps a pair as BERT does.
  std::vector<TokenId> a{7592}, b{2088};
  std::span<const TokenId> bs(b);
  EXPECT_EQ(tok->post_process(a, &bs), (std::vector<TokenId>{101, 7592, 102, 2088, 102}));
  EXPECT_EQ(tok->encode("hello", true), (std::vector<TokenId>{101, 7592, 102}));
}

TEST(LoadTokenizer, DirectoriesPickTheDocumentedFile) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  testing::TempDir dir;
  fs::create_directories(dir.file("wp"));
  fs::copy_file(vocab, dir.file("wp/vocab.txt"));
  EXPECT_EQ(load_tokenizer(dir.file("wp"))->kind(), "wordpiece");
  fs::create_directories(dir.file("spm"));
  fs::copy_file(model, dir.file("spm/m.model"));
  EXPECT_EQ(load_tokenizer(dir.file("spm"))->kind(), "sentencepiece");
  fs::create_directories(dir.file("empty"));
  EXPECT_NE(error_of(dir.file("empty")).find("no tokenizer here"), std::string::npos);
}

TEST(LoadTokenizer, ErrorsNameTheFile) {
  testing::TempDir dir;
  EXPECT_NE(error_of(dir.file("nope.txt")).find("nope.txt"), std::string::npos);
  // A BPE file without its partner.
  write_file_atomic(dir.file("lonely-encoder.json"), "{\"a\": 0}");
  std::string e = error_of(dir.file("lonely-encoder.json"));
  EXPECT_NE(e.find("lonely-encoder.json"), std::string::npos) << e;
  EXPECT_NE(e.find("partner"), std::string::npos) << e;
  // tokenizer.json that is not JSON, or has no model.
  write_file_atomic(dir.file("tokenizer.json"), "{\"model\": ");
  e = error_of(dir.file("tokenizer.json"));
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  write_file_atomic(dir.file("tokenizer.json"), "{\"model\": {\"type\": \"Unigram\"}}");
  e = error_of(dir.file("tokenizer.json"));
  EXPECT_NE(e.find("Unigram"), std::string::npos) << e;
  // Not a SentencePiece model.
  write_file_atomic(dir.file("bad.model"), "not a protobuf");
  EXPECT_NE(error_of(dir.file("bad.model")).find("bad.model"), std::string::npos);
}

TEST(LoadTokenizer, EncodeBatchKeepsTheOrder) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-cased-vocab.txt");
  auto tok = load_tokenizer(vocab);
  std::vector<std::string> texts;
  for (int i = 0; i < 3000; ++i) texts.push_back("Sentence number " + std::to_string(i) + (i % 7 ? "" : " with more words in it"));
  auto batch = tok->encode_batch(texts);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) ASSERT_EQ(batch[i], tok->encode(texts[i])) << i;
}

}  // namespace
}  // namespace pretrain::load_tokenizer_test
