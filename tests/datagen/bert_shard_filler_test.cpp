// The BERT writer: records dealt in order into the series' HDF5 shards of equal size, each record
// as the instance's row, counted in the statistics; a shard kept from an earlier run is counted
// but not written again; out-of-range options are refused naming the command-line option.
#include "datagen/shards/bert_shard_filler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "bert_record_expect.h"
#include "shard_stage_data.h"
#include "test_util.h"

namespace pretrain::bert_shard_filler_test {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr TokenId32 kMask = 4;

// Instance k: [CLS] (k+5)…  [SEP] 7 [SEP], `k % 3` predictions masked with [MASK].
BertInstance instance(int k) {
  BertInstance inst;
  const int a = 1 + k % 5;
  inst.tokens.push_back(2);
  for (int i = 0; i < a; ++i) inst.tokens.push_back(5 + k + i);
  inst.tokens.push_back(3);
  inst.tokens.insert(inst.tokens.end(), {7, 3});
  inst.segment_ids.assign(size_t(a) + 2, 0);
  inst.segment_ids.insert(inst.segment_ids.end(), {1, 1});
  inst.is_random_next = k % 2;
  for (int p = 0; p < k % 3 && p < a; ++p) {
    inst.masked_lm_positions.push_back(1 + p);
    inst.masked_lm_labels.push_back(inst.tokens[size_t(1 + p)]);
    inst.tokens[size_t(1 + p)] = kMask;
  }
  return inst;
}

struct Written {
  MakeShardsStats stats;
  std::vector<BertInstance> instances;
};

Written fill(const SplitOutput& out, int n) {
  Written w;
  const BertShardFillerOptions options{.seq_len = 16, .max_predictions = 3, .compression_level = 1, .mask_id = kMask};
  ShardSeries series(out, bert_shard_format(options), equal_sizes(uint64_t(n), out.num_shards));
  BertShardFiller filler(series, options, w.stats);
  std::string buffer;
  for (int k = 0; k < n; ++k) {
    w.instances.push_back(instance(k));
    buffer.clear();
    append_spill_record(w.instances.back(), buffer);
    filler.add(SpillRecord(buffer.data(), buffer.size(), "test", 0));
  }
  filler.finish();
  series.finish(w.stats.to_json(16));
  return w;
}

SplitOutput output_in(const std::string& dir) { return testing::split_output(dir, 3); }

TEST(BertShardFiller, RecordsAreDealtInOrderIntoShardsOfEqualSize) {
  set_log_level(LogLevel::warn);
  TempDir dir;
  const SplitOutput out = output_in(dir.file("bert"));
  const Written w = fill(out, 10);
  const Manifest m = Manifest::read(path_join(out.dir, kManifestName));
  EXPECT_EQ(m.format, kFormatBertHdf5);
  EXPECT_EQ(m.seq_len, 16);
  EXPECT_EQ(m.max_predictions, 3);
  ASSERT_EQ(m.shards.size(), 3u);
  size_t k = 0;
  for (size_t s = 0; s < 3; ++s) {
    BertShardReader reader(path_join(out.dir, m.shards[s].file));
    EXPECT_EQ(reader.size(), s == 0 ? 4 : 3);
    for (int64_t r = 0; r < reader.size(); ++r, ++k) {
      testing::expect_same_record(reader.read(r), w.instances[k].to_record(16, 3), int64_t(k));
    }
  }
  EXPECT_EQ(k, 10u);
  uint64_t tokens = 0, predictions = 0;
  for (const auto& inst : w.instances) tokens += inst.tokens.size(), predictions += inst.masked_lm_labels.size();
  EXPECT_EQ(w.stats.instance_tokens, tokens);
  EXPECT_EQ(w.stats.predictions, predictions);
  EXPECT_EQ(w.stats.masked_as_mask, predictions) << "every prediction here is a [MASK]";
  EXPECT_EQ(w.stats.random_next, 5u);
}

TEST(BertShardFiller, KeptShardsAreCountedButNotWrittenAgain) {
  set_log_level(LogLevel::warn);
  TempDir dir;
  SplitOutput out = output_in(dir.file("bert"));
  const Written first = fill(out, 10);
  const std::string shard = path_join(out.dir, "train-00001.hdf5"), link = dir.file("held");
  fs::create_hard_link(shard, link);
  out.resume = true;
  const Written again = fill(out, 10);
  EXPECT_TRUE(fs::equivalent(shard, link)) << "a verified shard was written again";
  EXPECT_EQ(again.stats.instance_tokens, first.stats.instance_tokens);
  EXPECT_EQ(again.stats.predictions, first.stats.predictions);
}

TEST(BertShardFiller, OptionsOutOfRangeAreRefusedNamingTheOption) {
  struct Case {
    std::function<void()> check;
    std::string says;
  };
  const BertInstanceOptions good;
  auto with = [&](std::function<void(BertInstanceOptions&)> change) {
    BertInstanceOptions o = good;
    change(o);
    return o;
  };
  auto shard_options = [](const BertInstanceOptions& instances, int dupe_factor, int compression_level) {
    return BertStageOptions{.instances = instances, .dupe_factor = dupe_factor, .compression_level = compression_level};
  };
  const std::vector<Case> cases = {
      {[] { BertShardFillerOptions{.seq_len = 4}.check(); }, "--seq-len"},
      {[] { BertShardFillerOptions{.seq_len = 65536}.check(); }, "--seq-len"},
      {[] { BertShardFillerOptions{.max_predictions = 0}.check(); }, "--max-predictions"},
      {[] { BertShardFillerOptions{.max_predictions = 256}.check(); }, "--max-predictions"},
      {[] { BertShardFillerOptions{.compression_level = 10}.check(); }, "--compression-level"},
      {[&] { shard_options(good, 0, 4).check(); }, "--dupe-factor"},
      {[&] { shard_options(with([](auto& o) { o.masked_lm_prob = 0; }), 1, 4).check(); }, "--masked-lm-prob"},
      {[&] { shard_options(with([](auto& o) { o.short_seq_prob = 1.5; }), 1, 4).check(); }, "--short-seq-prob"},
      {[&] { shard_options(with([](auto& o) { o.seq_len = 3; }), 1, 4).check(); }, "--seq-len"},
      {[&] { shard_options(good, 1, -1).check(); }, "--compression-level"},
  };
  for (const Case& c : cases) {
    try {
      c.check();
      ADD_FAILURE() << "no error; wanted one about " << c.says;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(shard_options(good, 1, 4).check());
}

}  // namespace
}  // namespace pretrain::bert_shard_filler_test
