// The tokenizer files of an HF directory (trainer/hf_tokenizer.h): written from the tokenizer the
// shards' manifest names, with do_lower_case as it tokenized; when that tokenizer is gone or has
// changed since, nothing is written and the call says so (the trainer warns, naming the path).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/manifest.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "trainer/hf_tokenizer.h"

namespace pretrain::hf_tokenizer_test {
namespace {

using pretrain::testing::TempDir;

// A manifest as make-pretraining-shards writes it for a WordPiece vocabulary: the tokenizer's
// info, and its path among the arguments.
std::string shards_made_with(const TempDir& tmp, const std::string& vocab, std::vector<std::string> extra_args = {}) {
  write_file_atomic(tmp.file("vocab.txt"), vocab);
  Manifest m;
  m.format = kFormatBertHdf5;
  m.tokenizer = load_tokenizer(tmp.file("vocab.txt"))->info();
  m.args = {"--model", "bert", "--tokenizer", tmp.file("vocab.txt")};
  m.args.insert(m.args.end(), extra_args.begin(), extra_args.end());
  make_dirs(tmp.file("shards"));
  m.write(tmp.file("shards/manifest.json"));
  return tmp.file("shards/manifest.json");
}

const char* kUncased = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nlight\n##house\na\nb\n";
const char* kCased = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nThe\nthe\nlight\n##house\nA\na\n";

nlohmann::json json_of(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

TEST(HfTokenizer, WordPieceVocabularyAndCasing) {
  TempDir tmp;
  const std::string manifest = shards_made_with(tmp, kUncased);
  ASSERT_TRUE(write_hf_tokenizer(tmp.file("out"), manifest, 512));
  EXPECT_EQ(read_file(tmp.file("out/vocab.txt")), kUncased);
  const auto config = json_of(tmp.file("out/tokenizer_config.json"));
  EXPECT_EQ(config["tokenizer_class"], "BertTokenizer");
  EXPECT_EQ(config["do_lower_case"], true);
  EXPECT_EQ(config["strip_accents"], true);  // follows lowercasing, as in BERT's uncased vocabularies
  EXPECT_EQ(config["model_max_length"], 512);
  EXPECT_EQ(json_of(tmp.file("out/special_tokens_map.json"))["mask_token"], "[MASK]");

  TempDir cased;
  ASSERT_TRUE(write_hf_tokenizer(cased.file("out"), shards_made_with(cased, kCased), 512));
  EXPECT_EQ(json_of(cased.file("out/tokenizer_config.json"))["do_lower_case"], false);
  EXPECT_EQ(json_of(cased.file("out/tokenizer_config.json"))["strip_accents"], false);
  TempDir forced;  // --lowercase given to make-pretraining-shards wins over the vocabulary's casing
  ASSERT_TRUE(write_hf_tokenizer(forced.file("out"), shards_made_with(forced, kCased, {"--lowercase"}), 512));
  EXPECT_EQ(json_of(forced.file("out/tokenizer_config.json"))["do_lower_case"], true);
}

TEST(HfTokenizer, GoneOrChangedTokenizerWritesNothing) {
  TempDir tmp;
  const std::string manifest = shards_made_with(tmp, kUncased);
  write_file_atomic(tmp.file("vocab.txt"), std::string(kUncased) + "c\n");  // changed since
  EXPECT_FALSE(write_hf_tokenizer(tmp.file("changed"), manifest, 512));
  EXPECT_FALSE(file_exists(tmp.file("changed/vocab.txt")));
  std::filesystem::remove(tmp.file("vocab.txt"));  // gone
  EXPECT_FALSE(write_hf_tokenizer(tmp.file("gone"), manifest, 512));
  EXPECT_FALSE(write_hf_tokenizer(tmp.file("none"), "", 512));  // shards without a manifest
}

TEST(HfTokenizer, FindsTheShardsManifest) {
  TempDir tmp;
  const std::string manifest = shards_made_with(tmp, kUncased);
  EXPECT_EQ(find_shards_manifest({tmp.file("shards")}), manifest);
  EXPECT_EQ(find_shards_manifest({manifest}), manifest);
  EXPECT_EQ(find_shards_manifest({tmp.file("shards/train-00000.hdf5")}), manifest);
  EXPECT_EQ(find_shards_manifest({tmp.file("elsewhere")}), "");
}

}  // namespace
}  // namespace pretrain::hf_tokenizer_test
