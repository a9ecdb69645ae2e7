// BERT with the counter RNG, one split of a token store: every instance written once into shards
// of equal size, well formed; the same bytes at 1 and 2 threads and with the store read through
// pread windows; the spill buckets' counts kept for --resume and reused; bad options refused
// before anything is written.
#include "datagen/shards/bert_counter_shards.h"

#include <gtest/gtest.h>

#include <oneapi/tbb/global_control.h>

#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/log.h"
#include "formats/bert_hdf5.h"
#include "shard_stage_data.h"
#include "test_util.h"

namespace pretrain::bert_counter_shards_test {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::toy_bert_vocab;
using testing::write_random_store;

class BertCounterShards : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::warn);
    write_random_store(dir.file("store"), 40, 11);
    store.emplace(dir.file("store"));
    all.resize(store->num_documents());
    std::iota(all.begin(), all.end(), 0u);
  }
  BertCounterOptions options(const std::string& name) const {
    BertCounterOptions o;
    o.instances.seq_len = 24;
    o.instances.max_predictions = 4;
    o.dupe_factor = 2;
    o.seed = 9;
    o.spill_dir = dir.file(name + "-spill");
    o.bucket_bytes = 2048;  // several buckets
    return o;
  }
  SplitOutput output(const std::string& name) const { return testing::split_output(dir.file(name), 2); }
  // Shard file → xxh3.
  std::map<std::string, std::string> shards(const std::string& name) const {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::directory_iterator(dir.file(name)))
      if (e.path().extension() == ".hdf5") out[e.path().filename().string()] = hex64(xxh3_file(e.path().string()));
    return out;
  }
  TempDir dir;
  std::optional<TokenStore> store;
  std::vector<uint32_t> all;
  const BertMaskVocab vocab = toy_bert_vocab();
};

TEST_F(BertCounterShards, EveryInstanceIsWrittenOnceIntoEqualShards) {
  MakeShardsStats stats;
  write_bert_counter_split(options("a"), vocab, *store, all, output("a"), stats);
  ASSERT_GT(stats.instances, 40u);
  EXPECT_EQ(stats.valid_instances, 0u);
  EXPECT_EQ(stats.shards, 2u);
  const Manifest m = Manifest::read(path_join(dir.file("a"), kManifestName));
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.format, kFormatBertHdf5);
  EXPECT_EQ(m.total_records(), stats.instances);
  EXPECT_EQ(m.shards[0].records, (stats.instances + 1) / 2);
  uint64_t tokens = 0;
  for (const auto& e : m.shards) {
    BertShardReader reader(path_join(dir.file("a"), e.file));
    for (int64_t r = 0; r < reader.size(); ++r) {
      const BertRecord rec = reader.read(r);
      int len = 0;
      while (len < 24 && rec.input_mask[size_t(len)]) ++len;
      EXPECT_EQ(rec.input_ids[0], 2) << "[CLS]";
      EXPECT_EQ(rec.input_ids[size_t(len - 1)], 3) << "[SEP]";
      tokens += uint64_t(len);
    }
  }
  EXPECT_EQ(tokens, stats.instance_tokens);
  // The buckets and their counts stay for a resumed run.
  const auto spill = nlohmann::json::parse(read_file(path_join(dir.file("a-spill"), "spill.json")));
  const auto counts = spill.at("counts").get<std::vector<uint64_t>>();
  EXPECT_GT(counts.size(), 2u) << "bucket_bytes makes several";
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), uint64_t{0}), stats.instances);
}

TEST_F(BertCounterShards, TheBytesDoNotDependOnThreadsOrHowTheStoreIsRead) {
  MakeShardsStats s1, s2, s3;
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    write_bert_counter_split(options("t1"), vocab, *store, all, output("t1"), s1);
  }
  {
    tbb::global_control two(tbb::global_control::max_allowed_parallelism, 2);
    write_bert_counter_split(options("t2"), vocab, *store, all, output("t2"), s2);
    BertCounterOptions windowed = options("w");
    windowed.store_resident_budget = 1;  // read through pread windows
    write_bert_counter_split(windowed, vocab, *store, all, output("w"), s3);
  }
  ASSERT_EQ(shards("t1").size(), 2u);
  EXPECT_EQ(shards("t1"), shards("t2"));
  EXPECT_EQ(shards("t1"), shards("w"));
  // Another seed gives other instances.
  BertCounterOptions other = options("seed");
  other.seed = 10;
  MakeShardsStats s4;
  write_bert_counter_split(other, vocab, *store, all, output("seed"), s4);
  EXPECT_NE(shards("seed"), shards("t1"));
}

TEST_F(BertCounterShards, TheValidSplitHasItsOwnShuffleAndCounts) {
  MakeShardsStats train, valid;
  SplitOutput v = output("v");
  v.valid = true;
  write_bert_counter_split(options("t"), vocab, *store, all, output("t"), train);
  write_bert_counter_split(options("v"), vocab, *store, all, v, valid);
  EXPECT_EQ(valid.valid_instances, train.instances) << "the same documents make the same instances";
  EXPECT_EQ(valid.instances, 0u);
  EXPECT_NE(shards("v"), shards("t")) << "in another order";
}

TEST_F(BertCounterShards, BadOptionsAreRefusedBeforeAnythingIsWritten) {
  struct Case {
    std::function<void(BertCounterOptions&, SplitOutput&)> change;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](BertCounterOptions& o, SplitOutput&) { o.dupe_factor = 0; }, "--dupe-factor"},
      {[](BertCounterOptions& o, SplitOutput&) { o.instances.seq_len = 4; }, "--seq-len"},
      {[](BertCounterOptions& o, SplitOutput&) { o.instances.masked_lm_prob = 2; }, "--masked-lm-prob"},
      {[](BertCounterOptions& o, SplitOutput&) { o.bucket_bytes = 0; }, "bucket size"},
      {[](BertCounterOptions& o, SplitOutput&) { o.spill_dir.clear(); }, "spill directory"},
      {[](BertCounterOptions&, SplitOutput& out) { out.num_shards = 0; }, "--num-shards"},
  };
  for (const Case& c : cases) {
    BertCounterOptions o = options("bad");
    SplitOutput out = output("bad");
    c.change(o, out);
    MakeShardsStats stats;
    try {
      write_bert_counter_split(o, vocab, *store, all, out, stats);
      ADD_FAILURE() << "no error; wanted one about " << c.says;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir.file("bad"))) << c.says;
    EXPECT_FALSE(fs::exists(dir.file("bad-spill"))) << c.says;
  }
}

}  // namespace
}  // namespace pretrain::bert_counter_shards_test
