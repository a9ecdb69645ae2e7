// The tokenizer a manifest's record names, loaded again (tokenizer/tokenizer_record.h): found as
// given or beside the manifest, refused with the file and the reason when it is gone, changed,
// another tokenizer, or the record names none; loaded with the recorded options.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/error.h"
#include "common/file.h"
#include "test_util.h"
#include "tokenizer/tokenizer_record.h"

namespace pretrain::tokenizer_record_test {
namespace {

using pretrain::testing::error_message;
using pretrain::testing::TempDir;

const char* kVocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nThe\nthe\nlight\n##house\n";

struct Recorded {
  TokenizerInfo record;
  std::string manifest;  // where the record says it is (nothing is read from it)
};

Recorded record_of(const TempDir& tmp, const std::string& vocab_path, const TokenizerOptions& options = {}) {
  make_dirs(tmp.file("shards"));
  return {load_tokenizer(vocab_path, options)->info(), tmp.file("shards/manifest.json")};
}

TEST(TokenizerRecord, LoadsTheRecordedFileWithTheRecordedOptions) {
  TempDir tmp;
  write_file_atomic(tmp.file("vocab.txt"), kVocab);
  TokenizerOptions lower;
  lower.lowercase = true;
  const Recorded r = record_of(tmp, tmp.file("vocab.txt"), lower);
  std::vector<std::string> paths;
  const auto tok = load_recorded_tokenizer(r.record, r.manifest, &paths);
  EXPECT_EQ(paths, std::vector<std::string>{tmp.file("vocab.txt")});
  // Cased by its vocabulary, lowercased by the recorded option: "The" reads as "the".
  EXPECT_EQ(tok->encode("The"), std::vector<TokenId>{6});
}

TEST(TokenizerRecord, AFileGivenRelativelyIsFoundBesideTheManifest) {
  TempDir tmp;
  make_dirs(tmp.file("shards"));
  write_file_atomic(tmp.file("shards/vocab.txt"), kVocab);
  Recorded r = record_of(tmp, tmp.file("shards/vocab.txt"));
  r.record.files[0].path = "vocab.txt";  // as given where make-pretraining-shards ran
  EXPECT_EQ(find_recorded_file("vocab.txt", r.manifest), tmp.file("shards/vocab.txt"));
  EXPECT_EQ(find_recorded_file("other.txt", r.manifest), "");
  std::vector<std::string> paths;
  load_recorded_tokenizer(r.record, r.manifest, &paths);
  EXPECT_EQ(paths, std::vector<std::string>{tmp.file("shards/vocab.txt")});
}

TEST(TokenizerRecord, GoneChangedOrAnotherTokenizerIsAnErrorNamingIt) {
  TempDir tmp;
  const std::string vocab = tmp.file("vocab.txt");
  write_file_atomic(vocab, kVocab);
  Recorded r = record_of(tmp, vocab);

  write_file_atomic(vocab, std::string(kVocab) + "sea\n");
  std::string e = error_message([&] { load_recorded_tokenizer(r.record, r.manifest); });
  EXPECT_NE(e.find(vocab + " has changed since it made the shards ("), std::string::npos) << e;

  write_file_atomic(vocab, std::string(kVocab).replace(0, 5, "[pad]"));  // the same size, other bytes
  e = error_message([&] { load_recorded_tokenizer(r.record, r.manifest); });
  EXPECT_NE(e.find(vocab + " has changed since it made the shards (xxh3 "), std::string::npos) << e;

  write_file_atomic(vocab, kVocab);
  Recorded other = r;
  other.record.kind = "bpe";
  e = error_message([&] { load_recorded_tokenizer(other.record, other.manifest); });
  EXPECT_NE(e.find("is not the tokenizer that made the shards (wordpiece"), std::string::npos) << e;

  std::remove(vocab.c_str());
  e = error_message([&] { load_recorded_tokenizer(r.record, r.manifest); });
  EXPECT_NE(e.find("(vocab '" + vocab + "') cannot be found"), std::string::npos) << e;
}

TEST(TokenizerRecord, ARecordWithoutFilesOrUnreadableIsAnErrorNotACrash) {
  TempDir tmp;
  TokenizerInfo none;
  none.kind = "wordpiece";
  std::string e = error_message([&] { load_recorded_tokenizer(none, tmp.file("manifest.json")); });
  EXPECT_NE(e.find("the manifest names no tokenizer files"), std::string::npos) << e;
  none.record_error = "\"files\" is not an array";
  e = error_message([&] { load_recorded_tokenizer(none, tmp.file("manifest.json")); });
  EXPECT_NE(e.find("the tokenizer record cannot be read (\"files\" is not an array)"), std::string::npos) << e;
}

}  // namespace
}  // namespace pretrain::tokenizer_record_test
