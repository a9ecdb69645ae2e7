// SentencePiece wrapper: ids and pieces as spm_encode gives them, decode, vocabulary lookups,
// special ids, invalid UTF-8, load errors and encode_batch on many threads.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace pretrain::sentencepiece_test {
namespace {

using ::pretrain::testing::TempDir;

// Expected values: /usr/bin/spm_encode --model spm-test_model.model --output_format=id|piece.
TEST(SentencePiece, EncodesAsSpmEncode) {
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  auto tok = load_tokenizer(model);
  EXPECT_EQ(tok->kind(), "sentencepiece");
  EXPECT_EQ(tok->encode("I saw a girl with a telescope."),
            (std::vector<TokenId>{9, 459, 11, 939, 44, 11, 4, 142, 82, 8, 28, 21, 132, 6}));
  EXPECT_EQ(tok->tokenize("I saw a girl"), (std::vector<std::string>{"\u2581I", "\u2581saw", "\u2581a", "\u2581girl"}));
  // No bos/eos and no post-processing: add_special_tokens changes nothing (spm_encode's default).
  EXPECT_EQ(tok->encode("I saw", true), tok->encode("I saw"));
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(SentencePiece, DecodeAndLookups) {
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  auto tok = load_tokenizer(model);
  std::string text = "I saw a girl with a telescope.";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_EQ(tok->vocab_size(), 1000);
  auto special = tok->special_ids();
  EXPECT_EQ(special.at("unk"), 0);
  EXPECT_EQ(special.at("bos"), 1);
  EXPECT_EQ(special.at("eos"), 2);
  EXPECT_EQ(special.count("pad"), 0u);  // pad_id is -1 in this model
  EXPECT_EQ(tok->id_to_token(1), "<s>");
  EXPECT_EQ(tok->token_to_id("<unk>"), 0);
  EXPECT_EQ(tok->token_to_id("\u2581saw"), 459);
  EXPECT_EQ(tok->token_to_id("no such piece"), std::nullopt);  // PieceToId would say 0 (unk)
  EXPECT_EQ(tok->token_to_id(""), std::nullopt);
  EXPECT_EQ(tok->token_to_id(std::string_view()), std::nullopt);  // the library would strlen(nullptr)
  EXPECT_THROW(tok->id_to_token(1000), UsageError);
  EXPECT_THROW(tok->id_to_token(-1), UsageError);
  // Control symbols: shown as pieces unless skipped; the text after them keeps its space.
  std::vector<TokenId> ids{1, 459, 11, 2};
  EXPECT_EQ(tok->decode(ids), "<s> saw a</s>");
  EXPECT_EQ(tok->decode(ids, true), "saw a");
  // <unk> shows as the library's " ⁇ "; skipping drops it.
  EXPECT_EQ(tok->decode(std::vector<TokenId>{459, 0}), "saw \u2047 ");
  EXPECT_EQ(tok->decode(std::vector<TokenId>{459, 0}, true), "saw");
  EXPECT_THROW(tok->decode(std::vector<TokenId>{5000}), UsageError);
}

TEST(SentencePiece, JapaneseModel) {
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_ja_model.model");
  auto tok = load_tokenizer(model);
  std::string text = "吾輩は猫である。名前はまだ無い。";
  auto ids = tok->encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok->decode(ids), text);
}

// The library reads each invalid byte as one U+FFFD; we repair maximal subparts first, so
// "\xE3\x81" (a truncated 3-byte sequence) is one U+FFFD, the same as the text with U+FFFD in it.
TEST(SentencePiece, InvalidUtf8IsReadAsReplacementCharacter) {
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  auto tok = load_tokenizer(model);
  EXPECT_EQ(tok->encode("a\xE3\x81 b"), tok->encode("a\uFFFD b"));
  EXPECT_EQ(tok->encode("a\xFF b"), tok->encode("a\uFFFD b"));
  EXPECT_EQ(tok->tokenize("x\xC0\xAFy"), tok->tokenize("x\uFFFD\uFFFDy"));  // overlong: two subparts
}

TEST(SentencePiece, BatchOnManyThreadsEqualsSerial) {
  PRETRAIN_REQUIRE_SHARED(model, "vocab/spm-test_model.model");
  PRETRAIN_REQUIRE_SHARED(text, "vocab/botchan.txt");
  auto tok = load_tokenizer(model);
  std::ifstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GT(lines.size(), 1000u);
  auto batch = tok->encode_batch(lines);
  ASSERT_EQ(batch.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) ASSERT_EQ(batch[i], tok->encode(lines[i])) << "line " << i;
}

TEST(SentencePiece, LoadErrorsNameTheFile) {
  TempDir dir;
  std::string missing = dir.file("missing.model");
  try {
    load_tokenizer(missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  std::string bad = dir.file("bad.model");
  std::ofstream(bad) << "this is not a ModelProto\n";
  try {
    load_tokenizer(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(bad), std::string::npos) << what;
    EXPECT_NE(what.find("cannot load the SentencePiece model"), std::string::npos) << what;
  }
  std::string empty = dir.file("empty.model");
  std::ofstream{empty};
  EXPECT_THROW(load_tokenizer(empty), Error);
}

}  // namespace
}  // namespace pretrain::sentencepiece_test
