// WordPiece training: HF's order (special tokens, alphabet by code point, "##" forms, merges by
// count), its limits (vocab_size, min_frequency, limit_alphabet), and the same result for any
// thread count. Exact agreement with HF's trainer is checked by tests/compat/test_train_tokenizer.py.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/progress.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/train_wordpiece.h"

namespace pretrain::train_wordpiece_test {
namespace {

TextSource lines_of(std::vector<std::string> lines) {
  return [lines = std::move(lines)](const TextSink& sink) {
    for (const auto& l : lines) sink(l);
  };
}

std::vector<std::string> train(const std::vector<std::string>& lines, WordPieceTrainerOptions options,
                               bool lowercase = true) {
  Progress::set_enabled(false);
  return train_wordpiece(count_words(lines_of(lines), bert_word_splitter(lowercase)), options);
}

std::string repeat(const std::string& word, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += word + " ";
  return s;
}

// HF's course example (hug×10, pug×5, pun×12, bun×4, hugs×5); HF gives the same entries, its "##x"
// in HashMap order (here: ##u ##g ##n ##s), ours by code point.
TEST(TrainWordPiece, SpecialTokensAlphabetContinuationsThenMerges) {
  WordPieceTrainerOptions options;
  options.vocab_size = 30;
  auto vocab = train({repeat("hug", 10) + repeat("pug", 5) + repeat("pun", 12) + repeat("bun", 4) + repeat("hugs", 5)},
                     options);
  EXPECT_EQ(vocab, (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "b", "g", "h", "n", "p",
                                             "s", "u", "##g", "##n", "##s", "##u", "##ug", "##un", "hug", "pun", "pug",
                                             "hugs", "bun"}));
}

TEST(TrainWordPiece, NormalizerAndPreTokenizerAreBerts) {
  WordPieceTrainerOptions options;
  options.vocab_size = 100;
  // Lowercased, accents stripped, punctuation split off.
  auto vocab = train({"H\xC3\xA9llo, WORLD! h\xC3\xA9llo world?"}, options);
  EXPECT_EQ(vocab, (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "!", ",", "?", "d", "e",
                                             "h", "l", "o", "r", "w", "##d", "##e", "##l", "##o", "##r", "he", "wo",
                                             "##ld", "##ll", "##rld", "hell", "world", "hello"}));
  // Cased: accents kept, no merges here before the vocabulary is full (HF gives the same set).
  options.vocab_size = 30;
  auto cased = train({"H\xC3\xA9llo, WORLD! h\xC3\xA9llo world?"}, options, false);
  EXPECT_EQ(cased.size(), 30u);
  EXPECT_EQ(cased[5], "!");
  EXPECT_EQ(cased.back(), "##\xC3\xA9");
}

TEST(TrainWordPiece, MinFrequencyAndVocabSizeStopMerging) {
  WordPieceTrainerOptions options;
  options.vocab_size = 1000;
  options.min_frequency = 100;  // no pair is that frequent
  auto vocab = train({repeat("hug", 10)}, options);
  EXPECT_EQ(vocab, (std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "g", "h", "u", "##g", "##u"}));
  options.min_frequency = 2;
  options.vocab_size = 11;  // one merge
  vocab = train({repeat("hug", 10)}, options);
  EXPECT_EQ(vocab.size(), 11u);
  EXPECT_EQ(vocab.back(), "hu");
}

TEST(TrainWordPiece, LimitAlphabetDropsTheRarestCharacters) {
  WordPieceTrainerOptions options;
  options.vocab_size = 100;
  options.limit_alphabet = 2;
  options.special_tokens = {};
  options.min_frequency = 1;
  // a: 4, b: 2, c: 1 → c goes, and "cab" is read as "##a ##b" (its "a" is not the word's first
  // character). Then the pairs, all once, in id order: (a, ##a), (a, ##b), (##a, ##b).
  auto vocab = train({"aa ab cab"}, options);
  EXPECT_EQ(vocab, (std::vector<std::string>{"a", "b", "##a", "##b", "aa", "ab", "##ab"}));
  // Equal counts: the higher code points go first.
  vocab = train({"z y x"}, options);
  EXPECT_EQ(vocab, (std::vector<std::string>{"x", "y"}));
}

TEST(TrainWordPiece, InvalidUtf8IsReadAsReplacementCharacterWhichCleanTextDrops) {
  std::vector<std::string> words;
  bert_word_splitter(true)("a\xFF" "b c\xE3\x81", words);
  EXPECT_EQ(words, (std::vector<std::string>{"ab", "c"}));
}

TEST(TrainWordPiece, SameResultForAnyThreadCount) {
  PRETRAIN_REQUIRE_SHARED(text, "vocab/botchan.txt");
  Progress::set_enabled(false);
  std::ifstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  WordPieceTrainerOptions options;
  options.vocab_size = 2000;
  std::vector<std::string> results[2];
  WordCounts counts[2];
  for (int threads : {1, 2}) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
    counts[threads - 1] = count_words(lines_of(lines), bert_word_splitter(true));
    results[threads - 1] = train_wordpiece(counts[threads - 1], options);
  }
  EXPECT_EQ(counts[0], counts[1]);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0].size(), 2000u);
}

TEST(TrainWordPiece, VocabTxtLoadsAsWordPiece) {
  testing::TempDir dir;
  WordPieceTrainerOptions options;
  options.vocab_size = 30;
  auto vocab = train({repeat("hug", 10) + repeat("pug", 5) + repeat("pun", 12) + repeat("bun", 4) + repeat("hugs", 5)},
                     options);
  std::string path = dir.file("vocab.txt");
  write_vocab_txt(path, vocab);
  EXPECT_EQ(read_file(path).substr(0, 6), "[PAD]\n");
  auto tok = load_tokenizer(path);
  EXPECT_EQ(tok->kind(), "wordpiece");
  EXPECT_EQ(tok->vocab_size(), static_cast<int64_t>(vocab.size()));
  EXPECT_EQ(tok->tokenize("hugs pun"), (std::vector<std::string>{"hugs", "pun"}));
  EXPECT_EQ(tok->tokenize("bug"), (std::vector<std::string>{"b", "##ug"}));
}

}  // namespace
}  // namespace pretrain::train_wordpiece_test
