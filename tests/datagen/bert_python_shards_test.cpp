// BERT with --rng python over a token store: the shards hold exactly the instances of
// create_training_instances_python (the Python script's algorithm) on the same documents, in its
// order, dealt into shards of equal size; a valid split and bad options are refused.
#include "datagen/shards/bert_python_shards.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "bert_record_expect.h"
#include "formats/bert_hdf5.h"
#include "shard_stage_data.h"
#include "test_util.h"

namespace pretrain::bert_python_shards_test {
namespace {

using testing::TempDir;

BertPythonOptions options() {
  BertPythonOptions o;
  o.instances.seq_len = 24;
  o.instances.max_predictions = 4;
  o.instances.whole_word_mask = false;
  o.dupe_factor = 2;
  o.seed = 12345;
  return o;
}

SplitOutput output_in(const std::string& dir) { return testing::split_output(dir, 2); }

TEST(BertPythonShards, TheShardsHoldThePythonAlgorithmsInstancesInItsOrder) {
  set_log_level(LogLevel::warn);
  TempDir dir;
  InMemoryCorpus corpus = testing::write_random_store(dir.file("store"), 30, 5);
  const TokenStore store(dir.file("store"));
  const BertMaskVocab vocab = testing::toy_bert_vocab();
  MakeShardsStats stats;
  write_bert_python_shards(options(), vocab, store, output_in(dir.file("out")), stats);

  const auto want = create_training_instances_python(corpus, options().instances, vocab, 2, 12345);
  ASSERT_GT(want.size(), 30u);
  EXPECT_EQ(stats.instances, want.size());
  EXPECT_EQ(stats.train_documents, 30u);
  EXPECT_EQ(stats.shards, 2u);
  const Manifest m = Manifest::read(path_join(dir.file("out"), kManifestName));
  EXPECT_TRUE(m.complete);
  ASSERT_EQ(m.shards.size(), 2u);
  size_t k = 0;
  for (const auto& e : m.shards) {
    BertShardReader reader(path_join(dir.file("out"), e.file));
    EXPECT_EQ(uint64_t(reader.size()), e.records);
    for (int64_t r = 0; r < reader.size(); ++r, ++k) {
      ASSERT_LT(k, want.size());
      testing::expect_same_record(reader.read(r), want[k].to_record(24, 4), int64_t(k));
    }
  }
  EXPECT_EQ(k, want.size());
}

TEST(BertPythonShards, AValidSplitAndBadOptionsAreRefusedBeforeAnythingIsWritten) {
  set_log_level(LogLevel::warn);
  TempDir dir;
  testing::write_random_store(dir.file("store"), 5, 5);
  const TokenStore store(dir.file("store"));
  const BertMaskVocab vocab = testing::toy_bert_vocab();
  auto error_of = [&](const BertPythonOptions& o, const SplitOutput& out) -> std::string {
    MakeShardsStats stats;
    try {
      write_bert_python_shards(o, vocab, store, out, stats);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  SplitOutput valid = output_in(dir.file("out"));
  valid.valid = true;
  EXPECT_NE(error_of(options(), valid).find("no valid split"), std::string::npos);
  BertPythonOptions o = options();
  o.dupe_factor = 0;
  EXPECT_NE(error_of(o, output_in(dir.file("out"))).find("--dupe-factor"), std::string::npos);
  o = options();
  o.instances.short_seq_prob = -1;
  EXPECT_NE(error_of(o, output_in(dir.file("out"))).find("--short-seq-prob"), std::string::npos);
  o = options();
  o.compression_level = 11;
  EXPECT_NE(error_of(o, output_in(dir.file("out"))).find("--compression-level"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
  EXPECT_EQ(error_of(options(), output_in(dir.file("out"))), "") << "the good options work";
}

}  // namespace
}  // namespace pretrain::bert_python_shards_test
