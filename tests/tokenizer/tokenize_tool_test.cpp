// The `tokenize` command's work (tokenizer/tokenize_tool.{h,cpp}): one output line per input line,
// in order, whatever the batch size (CRLF, empty lines, a last line without '\n'); ids, tokens,
// special tokens, and --decode back to text; counts; ids that are not ids, or not in the
// vocabulary, named with the input and the line.
#include "tokenizer/tokenize_tool.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "common/error.h"
#include "common/progress.h"
#include "test_util.h"
#include "tokenizer/wordpiece.h"

namespace pretrain::tokenize_tool_test {
namespace {

using testing::TempDir;
using Output = TokenizeToolOptions::Output;

// BERT's layout, ids 0-15: [PAD] [UNK] [CLS] [SEP] [MASK] hello , ! world un ##aff ##able a ##a x ##y
std::unique_ptr<Tokenizer> tiny_wordpiece(const TempDir& dir) {
  const std::string path = dir.file("vocab.txt");
  std::ofstream(path, std::ios::binary) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n,\n!\nworld\nun\n##aff\n##able\na\n##a\nx\n##y\n";
  return make_wordpiece_tokenizer(path, {});
}

struct Result {
  std::string out;
  TokenizeToolStats stats;
};

Result run(const Tokenizer& tok, const std::string& input, TokenizeToolOptions options = {}) {
  Progress::set_enabled(false);
  std::istringstream in(input);
  std::ostringstream out;
  Result r;
  r.stats = run_tokenize(tok, options, in, out);
  r.out = out.str();
  return r;
}

TEST(TokenizeTool, OneLineOutPerLineInAsIdsOrTokens) {
  TempDir dir;
  const auto tok = tiny_wordpiece(dir);
  const std::string input = "Hello, world!\r\n\nunaffable";  // CRLF, an empty line, no final '\n'
  Result ids = run(*tok, input);
  EXPECT_EQ(ids.out, "5 6 8 7\n\n9 10 11\n");
  EXPECT_EQ(ids.stats.lines, 3u);
  EXPECT_EQ(ids.stats.bytes, input.size());
  EXPECT_EQ(ids.stats.tokens, 7u);
  EXPECT_EQ(run(*tok, input, {.output = Output::tokens}).out, "hello , world !\n\nun ##aff ##able\n");
  EXPECT_EQ(run(*tok, input, {.add_special_tokens = true}).out, "2 5 6 8 7 3\n2 3\n2 9 10 11 3\n");
  Result wrapped = run(*tok, input, {.output = Output::tokens, .add_special_tokens = true});
  EXPECT_EQ(wrapped.out, "[CLS] hello , world ! [SEP]\n[CLS] [SEP]\n[CLS] un ##aff ##able [SEP]\n");
  EXPECT_EQ(wrapped.stats.tokens, 13u);
  Result nothing = run(*tok, "");
  EXPECT_EQ(nothing.out, "");
  EXPECT_EQ(nothing.stats.lines, 0u);
  EXPECT_EQ(run(*tok, "\n").out, "\n");
}

// Lines are encoded in batches on workers; the output is the same, in order, for any batch size.
TEST(TokenizeTool, TheBatchSizeChangesNothing) {
  TempDir dir;
  const auto tok = tiny_wordpiece(dir);
  const char* words[] = {"hello", "world", "unaffable", "xyy", "aaa", "!", ",", "zzz", ""};
  std::mt19937 rng(9);
  std::string input;
  for (int line = 0; line < 500; ++line) {
    for (int n = rng() % 8; n > 0; --n) input += std::string(words[rng() % std::size(words)]) + " ";
    input += '\n';
  }
  for (Output output : {Output::ids, Output::tokens}) {
    const Result whole = run(*tok, input, {.output = output});
    EXPECT_EQ(whole.stats.lines, 500u);
    for (size_t batch : {1, 7, 64}) {
      const Result r = run(*tok, input, {.output = output, .batch_lines = batch});
      EXPECT_EQ(r.out, whole.out) << "batches of " << batch;
      EXPECT_EQ(r.stats.tokens, whole.stats.tokens);
    }
  }
}

TEST(TokenizeTool, DecodeTurnsIdsBackIntoText) {
  TempDir dir;
  const auto tok = tiny_wordpiece(dir);
  const std::string ids = "5 6 8 7\n2\t9 10 11  3\n\n";  // tabs and runs of spaces separate too
  Result text = run(*tok, ids, {.output = Output::decode});
  EXPECT_EQ(text.out, tok->decode(std::vector<TokenId>{5, 6, 8, 7}) + "\n" +
                          tok->decode(std::vector<TokenId>{2, 9, 10, 11, 3}) + "\n\n");
  EXPECT_NE(text.out.find("[CLS] unaffable [SEP]"), std::string::npos) << text.out;
  EXPECT_EQ(text.stats.lines, 3u);
  Result skipped = run(*tok, ids, {.output = Output::decode, .skip_special_tokens = true});
  EXPECT_NE(skipped.out.find("\nunaffable\n"), std::string::npos) << skipped.out;
  EXPECT_EQ(skipped.out.find("[CLS]"), std::string::npos) << skipped.out;
}

// What is not a list of ids, or names an id the vocabulary lacks, stops the run with the input's
// name and the line (counted across batches).
TEST(TokenizeTool, BadIdsNameTheInputAndLine) {
  TempDir dir;
  const auto tok = tiny_wordpiece(dir);
  struct Case {
    std::string input;
    std::vector<std::string> expected;
  };
  const Case cases[] = {
      {"5 6\n5 x7\n", {"ids.txt:2", "expected space-separated token ids, found \"x7\""}},
      {"5,6\n", {"ids.txt:1", "found \"5,6\""}},
      {"1 2\n3\n16\n", {"ids.txt:3", "token id 16 is outside the vocabulary (size 16)"}},
      {"-1\n", {"ids.txt:1", "token id -1 is outside the vocabulary"}},
      {"99999999999\n", {"ids.txt:1", "expected space-separated token ids"}},
  };
  for (const Case& c : cases) {
    const std::string message = testing::error_message([&] {
      run(*tok, c.input, {.output = Output::decode, .batch_lines = 1, .input_name = "ids.txt"});
    });
    for (const std::string& part : c.expected) EXPECT_NE(message.find(part), std::string::npos) << message << " lacks " << part;
  }
}

TEST(TokenizeTool, AnOutputThatFailsIsAnError) {
  TempDir dir;
  const auto tok = tiny_wordpiece(dir);
  Progress::set_enabled(false);
  std::istringstream in("hello\n");
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  EXPECT_NE(testing::error_message([&] { run_tokenize(*tok, {}, in, out); }).find("cannot write the output"), std::string::npos);
}

}  // namespace
}  // namespace pretrain::tokenize_tool_test
