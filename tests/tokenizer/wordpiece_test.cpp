// WordPiece (BERT): greedy longest match, special tokens, casing, vocabulary files and their errors,
// bad and extreme input, threads, tokenizer.json. The normalizer and pre-tokenizer, and where HF's
// fast and slow/Google's tokenizers differ, are bert_pre_tokenizer_test.cpp's. Exactness against HF
// on real text is tests/compat/test_tokenizer_wordpiece.py; here the shared vocabularies are used
// where a test needs one.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece.h"

namespace pretrain::wordpiece_test {
namespace {

using testing::TempDir;
using Words = std::vector<std::string>;

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A small vocabulary in BERT's layout, for tests that need no real one.
std::string tiny_vocab(const TempDir& dir, const std::string& extra = "") {
  std::string path = dir.file("vocab.txt");
  write(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n,\n!\nworld\nun\n##aff\n##able\na\n##a\nx\n##y\n" + extra);
  return path;
}

TEST(WordPiece, GreedyLongestMatchFirst) {
  TempDir dir;
  auto tok = make_wordpiece_tokenizer(tiny_vocab(dir), {});
  EXPECT_EQ(tok->tokenize("Hello, world! unaffable"), (Words{"hello", ",", "world", "!", "un", "##aff", "##able"}));
  EXPECT_EQ(tok->tokenize("unaffablez"), (Words{"[UNK]"}));  // one piece has no match: the whole word
  EXPECT_EQ(tok->tokenize("xyy aaa"), (Words{"x", "##y", "##y", "a", "##a", "##a"}));
  EXPECT_EQ(tok->encode("hello"), (std::vector<TokenId>{5}));
}

TEST(WordPiece, MaxInputCharsPerWord) {
  TempDir dir;
  std::string vocab = tiny_vocab(dir);
  auto hf = make_wordpiece_tokenizer(vocab, {});
  EXPECT_EQ(hf->encode(std::string(100, 'a')).size(), 100u);
  EXPECT_EQ(hf->tokenize(std::string(101, 'a')), (Words{"[UNK]"}));
  EXPECT_EQ(hf->tokenize(std::string(202, '\xC3')), Words{});  // invalid bytes: U+FFFD, which clean_text drops
  TokenizerOptions google;
  google.max_input_chars_per_word = 200;
  EXPECT_EQ(make_wordpiece_tokenizer(vocab, google)->encode(std::string(101, 'a')).size(), 101u);
  // Characters, not bytes: 100 two-byte characters are within the limit, 101 are not.
  std::string accented;
  for (int i = 0; i < 101; ++i) accented += "\u00E0";
  EXPECT_EQ(hf->tokenize(accented), (Words{"[UNK]"}));
  EXPECT_EQ(hf->encode(accented.substr(0, 200)).size(), 100u);  // à → a after strip_accents
}

TEST(WordPiece, SpecialTokensInTheTextStayWhole) {
  TempDir dir;
  auto tok = make_wordpiece_tokenizer(tiny_vocab(dir), {});
  EXPECT_EQ(tok->tokenize("[MASK]"), (Words{"[MASK]"}));
  EXPECT_EQ(tok->tokenize("[mask]"), (Words{"[UNK]", "[UNK]", "[UNK]"}));  // matched before lowercasing, as HF
  EXPECT_EQ(tok->tokenize("x[SEP]y"), (Words{"x", "[SEP]", "[UNK]"}));
  EXPECT_EQ(tok->tokenize("[CLS][SEP] hello"), (Words{"[CLS]", "[SEP]", "hello"}));
}

TEST(WordPiece, SpecialIdsPostProcessDecode) {
  TempDir dir;
  auto tok = make_wordpiece_tokenizer(tiny_vocab(dir), {});
  EXPECT_EQ(tok->special_ids(),
            (std::map<std::string, TokenId>{{"pad", 0}, {"unk", 1}, {"cls", 2}, {"sep", 3}, {"mask", 4}}));
  std::vector<TokenId> a = tok->encode("hello"), b = tok->encode("world");
  std::span<const TokenId> bs(b);
  EXPECT_EQ(tok->post_process(a), (std::vector<TokenId>{2, 5, 3}));
  EXPECT_EQ(tok->post_process(a, &bs), (std::vector<TokenId>{2, 5, 3, 8, 3}));
  EXPECT_EQ(tok->encode("hello", true), (std::vector<TokenId>{2, 5, 3}));
  std::vector<TokenId> ids = tok->encode("Hello, world! unaffable", true);
  EXPECT_EQ(tok->decode(ids), "[CLS] hello, world! unaffable [SEP]");
  EXPECT_EQ(tok->decode(ids, true), "hello, world! unaffable");
  EXPECT_EQ(tok->id_to_token(10), "##aff");
  EXPECT_THROW(tok->id_to_token(-1), UsageError);
  EXPECT_THROW(tok->id_to_token(static_cast<TokenId>(tok->vocab_size())), UsageError);
  EXPECT_EQ(tok->token_to_id("world"), 8);
  EXPECT_FALSE(tok->token_to_id("nope").has_value());
}

TEST(WordPiece, AutoLowercaseFollowsTheVocabulary) {
  TempDir dir;
  auto uncased = make_wordpiece_tokenizer(tiny_vocab(dir), {});
  EXPECT_EQ(uncased->tokenize("HELLO"), (Words{"hello"}));
  auto cased = make_wordpiece_tokenizer(tiny_vocab(dir, "Hello\n"), {});
  EXPECT_EQ(cased->tokenize("Hello hello HELLO"), (Words{"Hello", "hello", "[UNK]"}));
  TokenizerOptions lower;
  lower.lowercase = true;
  EXPECT_EQ(make_wordpiece_tokenizer(tiny_vocab(dir, "Hello\n"), lower)->tokenize("Hello"), (Words{"hello"}));
  // strip_accents follows lowercase unless set.
  TokenizerOptions keep_accents = lower;
  keep_accents.strip_accents = false;
  EXPECT_EQ(make_wordpiece_tokenizer(tiny_vocab(dir, "é\n"), keep_accents)->tokenize("É"), (Words{"é"}));
}

TEST(WordPiece, VocabularyLinesAsPythonReadsThem) {
  TempDir dir;
  // \r\n, \r and \n all end a line (universal newlines); a later duplicate wins the lookup.
  write(dir.file("v.txt"), "[UNK]\r\nab\rcd\nab\n");
  auto tok = make_wordpiece_tokenizer(dir.file("v.txt"), {});
  EXPECT_EQ(tok->vocab_size(), 4);
  EXPECT_EQ(tok->token_to_id("ab"), 3);
  EXPECT_EQ(tok->id_to_token(1), "ab");
  EXPECT_EQ(tok->encode("cd ab"), (std::vector<TokenId>{2, 3}));
}

TEST(WordPiece, VocabularyErrorsNameTheFile) {
  TempDir dir;
  auto message = [](const std::string& path) {
    try {
      make_wordpiece_tokenizer(path, {});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(dir.file("missing.txt")).find("missing.txt"), std::string::npos);
  write(dir.file("empty.txt"), "");
  EXPECT_NE(message(dir.file("empty.txt")).find("empty.txt"), std::string::npos);
  write(dir.file("nounk.txt"), "a\nb\n");
  std::string no_unk = message(dir.file("nounk.txt"));
  EXPECT_NE(no_unk.find("nounk.txt"), std::string::npos);
  EXPECT_NE(no_unk.find("[UNK]"), std::string::npos);
  write(dir.file("bad.txt"), "[UNK]\nok\nb\xFFo\n");
  EXPECT_NE(message(dir.file("bad.txt")).find("bad.txt:3"), std::string::npos) << message(dir.file("bad.txt"));
}

TEST(WordPiece, BadAndExtremeInput) {
  TempDir dir;
  auto tok = make_wordpiece_tokenizer(tiny_vocab(dir), {});
  // Invalid UTF-8 reads as U+FFFD, which clean_text drops.
  EXPECT_EQ(tok->encode("hel\xFFlo"), tok->encode("hel\xEF\xBF\xBDlo"));
  EXPECT_EQ(tok->encode("hel\xFFlo"), tok->encode("hello"));
  EXPECT_EQ(tok->encode("\xC3"), std::vector<TokenId>{});
  EXPECT_EQ(tok->encode(""), std::vector<TokenId>{});
  // A 10 MB line of words, and a 10 MB word.
  std::string big;
  while (big.size() < 10'000'000) big += "hello world, ";
  std::vector<TokenId> ids = tok->encode(big);
  EXPECT_EQ(ids.size(), big.size() / 13 * 3);
  EXPECT_EQ(tok->encode(std::string(10'000'000, 'a')), std::vector<TokenId>{1});
}

TEST(WordPiece, EncodeBatchEqualsSerialAcrossThreads) {
  TempDir dir;
  auto tok = make_wordpiece_tokenizer(tiny_vocab(dir), {});
  std::vector<std::string> lines;
  std::mt19937 rng(3);
  const char* pieces[] = {"hello", "world", ",", "unaffable", "xyy", "Ä", "中", " ", "[MASK]", "\xFF", "aaa"};
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (int n = rng() % 20; n > 0; --n) s += pieces[rng() % std::size(pieces)];
    lines.push_back(s);
  }
  auto batch = tok->encode_batch(std::span<const std::string>(lines), true);
  ASSERT_EQ(batch.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(batch[i], tok->encode(lines[i], true)) << i;
}

TEST(WordPiece, HfTokenizerJson) {
  TempDir dir;
  write(dir.file("tokenizer.json"), R"({
    "added_tokens": [{"id": 0, "content": "[UNK]", "special": true, "normalized": false},
                     {"id": 5, "content": "<new>", "special": false, "normalized": false}],
    "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                   "strip_accents": null, "lowercase": false},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "@@",
              "max_input_chars_per_word": 5, "vocab": {"[UNK]": 0, "Ab": 1, "@@c": 2, "ab": 3, "é": 4}}})");
  auto tok = load_tokenizer(dir.file("tokenizer.json"));
  EXPECT_EQ(tok->kind(), "wordpiece");
  EXPECT_EQ(tok->tokenize("Abc ab abcdef é<new>"), (Words{"Ab", "@@c", "ab", "[UNK]", "é", "<new>"}));
  EXPECT_EQ(tok->vocab_size(), 6);
  EXPECT_EQ(tok->decode(tok->encode("Abc ab")), "Abc ab");
  write(dir.file("bad.json"), R"({"model": {"type": "WordPiece", "vocab": []}})");
  EXPECT_THROW(load_tokenizer(dir.file("bad.json")), Error);
  write(dir.file("other.json"), R"({"pre_tokenizer": {"type": "Whitespace"},
    "model": {"type": "WordPiece", "vocab": {"[UNK]": 0}}})");
  EXPECT_THROW(load_tokenizer(dir.file("other.json")), Error);
}

TEST(WordPiece, RealVocabulary) {
  PRETRAIN_REQUIRE_SHARED(vocab, "vocab/bert-base-uncased-vocab.txt");
  auto tok = load_tokenizer(vocab);
  EXPECT_EQ(tok->tokenize("Project Gutenberg's Botchan"),
            (Words{"project", "gut", "##enberg", "'", "s", "bot", "##chan"}));
  EXPECT_EQ(tok->special_ids(),
            (std::map<std::string, TokenId>{{"pad", 0}, {"unk", 100}, {"cls", 101}, {"sep", 102}, {"mask", 103}}));
  EXPECT_EQ(tok->vocab_size(), 30522);
}

}  // namespace
}  // namespace pretrain::wordpiece_test
