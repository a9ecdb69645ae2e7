// SentencePiece training through the library: a model that loads, the same bytes twice and for
// any --threads, spm_train's .vocab format, and errors for no text or a too large vocabulary.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/train_sentencepiece.h"

namespace pretrain::train_sentencepiece_test {
namespace {

TextSource lines_of(const std::vector<std::string>& lines) {
  return [&lines](const TextSink& sink) {
    for (const auto& l : lines) sink(l);
  };
}

std::vector<std::string> botchan_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TrainSentencePiece, TrainsALoadableModelTheSameForAnyThreadCount) {
  PRETRAIN_REQUIRE_SHARED(text, "vocab/botchan.txt");
  auto lines = botchan_lines(text);
  SentencePieceTrainerOptions options;
  options.vocab_size = 300;
  SentencePieceModel models[2];
  for (int threads : {1, 2}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    models[threads - 1] = train_sentencepiece(lines_of(lines), options);
  }
  EXPECT_EQ(models[0].model, models[1].model);
  EXPECT_EQ(models[0].vocab, models[1].vocab);
  EXPECT_GT(models[0].sentences, 4000u);

  testing::TempDir dir;
  std::string path = dir.file("spm.model");
  write_file_atomic(path, models[0].model);
  auto tok = load_tokenizer(path);
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 300);
  std::string sentence = "I saw a girl with a telescope.";
  EXPECT_EQ(tok->decode(tok->encode(sentence)), sentence);
  // spm.vocab: one "piece<TAB>score" line per piece, <unk> <s> </s> first with score 0.
  EXPECT_EQ(models[0].vocab.substr(0, 21), "<unk>\t0\n<s>\t0\n</s>\t0\n");
  EXPECT_EQ(std::count(models[0].vocab.begin(), models[0].vocab.end(), '\n'), 300);
}

TEST(TrainSentencePiece, Bpe) {
  PRETRAIN_REQUIRE_SHARED(text, "vocab/botchan.txt");
  auto lines = botchan_lines(text);
  SentencePieceTrainerOptions options;
  options.vocab_size = 300;
  options.model_type = "bpe";
  auto model = train_sentencepiece(lines_of(lines), options);
  testing::TempDir dir;
  write_file_atomic(dir.file("spm.model"), model.model);
  auto tok = load_tokenizer(dir.file("spm.model"));
  EXPECT_EQ(tok->vocab_size(), 300);
}

TEST(TrainSentencePiece, Errors) {
  std::vector<std::string> none{"", ""};
  EXPECT_THROW(train_sentencepiece(lines_of(none), {}), UsageError);
  std::vector<std::string> tiny{"a b c"};
  SentencePieceTrainerOptions options;
  options.vocab_size = 1000;
  try {
    train_sentencepiece(lines_of(tiny), options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Vocabulary size too high"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::train_sentencepiece_test
