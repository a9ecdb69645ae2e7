// LDDL's length bins (datagen/shards/length_bins.h): the bin rule, its refusals, and
// BertSplitWriter's layout on disk (one plain shard set per non-empty bin, padded to the bin's
// length, and the split's manifest listing them). make_shards_test.cpp checks whole runs.
#include "datagen/shards/length_bins.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "datagen/shards/bert_spill_record.h"
#include "formats/bert_hdf5.h"
#include "shard_stage_data.h"
#include "test_util.h"

namespace pretrain::length_bins_test {
namespace {

TEST(LengthBins, LddlsRule) {
  const LengthBins bins{.seq_len = 512, .bin_size = 64};
  EXPECT_EQ(bins.count(), 8);
  EXPECT_EQ(bins.bin_of(1), 0);
  EXPECT_EQ(bins.bin_of(64), 0);
  EXPECT_EQ(bins.bin_of(65), 1);
  EXPECT_EQ(bins.bin_of(512), 7);
  EXPECT_EQ(bins.max_length(0), 64);
  EXPECT_EQ(bins.max_length(7), 512);
  const LengthBins none{.seq_len = 128};
  EXPECT_EQ(none.count(), 1);
  EXPECT_EQ(none.bin_of(128), 0);
  EXPECT_EQ(none.max_length(0), 128);
  EXPECT_EQ(bin_dir_name(3), "bin-03");
}

TEST(LengthBins, Refusals) {
  EXPECT_NO_THROW((LengthBins{.seq_len = 128, .bin_size = 0}.check()));
  EXPECT_NO_THROW((LengthBins{.seq_len = 128, .bin_size = 128}.check()));
  for (int bad : {-8, 3, 48}) {
    try {
      LengthBins{.seq_len = 128, .bin_size = bad}.check();
      ADD_FAILURE() << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--bin-size"), std::string::npos) << e.what();
    }
  }
}

// A spill record of `n` tokens ([CLS] then words then [SEP]) and one prediction.
std::string record(size_t n) {
  BertInstance inst;
  inst.tokens.assign(n, 7);
  inst.tokens.front() = 2;
  inst.tokens.back() = 3;
  inst.segment_ids.assign(n, 0);
  inst.masked_lm_positions = {1};
  inst.masked_lm_labels = {9};
  std::string out;
  append_spill_record(inst, out);
  return out;
}

TEST(BertSplitWriter, OneShardSetPerNonEmptyBin) {
  testing::TempDir dir;
  const LengthBins bins{.seq_len = 32, .bin_size = 8};
  MakeShardsStats stats;
  BertSplitWriter writer(testing::split_output(dir.path(), 3), bins,
                         {.seq_len = 32, .max_predictions = 4, .compression_level = 1, .mask_id = 4}, stats);
  // During the run the split's manifest says it is not complete.
  EXPECT_FALSE(Manifest::read(path_join(dir.path(), kManifestName)).complete);
  const std::vector<std::vector<size_t>> lengths = {{5, 8, 8, 6, 7}, {}, {17, 24}, {32}};
  for (int b = 0; b < bins.count(); ++b) {
    writer.begin_bin(b, lengths[size_t(b)].size());
    for (size_t n : lengths[size_t(b)]) {
      const std::string r = record(n);
      writer.add(SpillRecord(r.data(), r.size(), "test", 0));
    }
    writer.end_bin();
  }
  writer.finish({{"instances", 8}});

  const Manifest split = Manifest::read(path_join(dir.path(), kManifestName));
  EXPECT_TRUE(split.complete);
  EXPECT_EQ(split.format, kFormatBertHdf5Binned);
  EXPECT_EQ(split.seq_len, 32);
  EXPECT_TRUE(split.shards.empty());
  EXPECT_EQ(split.extra.at("bin_size"), 8);
  EXPECT_EQ(split.extra.at("bin_records"), nlohmann::json({5, 0, 2, 1}));
  ASSERT_EQ(split.extra.at("bins").size(), 3u);  // bin 1 is empty: no directory
  EXPECT_FALSE(std::filesystem::exists(path_join(dir.path(), "bin-01")));
  for (const auto& bin : split.extra.at("bins")) {
    const int b = bin.at("bin");
    const std::string bin_dir = path_join(dir.path(), bin.at("dir").get<std::string>());
    const Manifest m = Manifest::read(path_join(bin_dir, kManifestName));
    EXPECT_EQ(m.format, kFormatBertHdf5);
    EXPECT_EQ(m.seq_len, bins.max_length(b));
    EXPECT_EQ(bin.at("max_length"), bins.max_length(b));
    EXPECT_EQ(m.total_records(), lengths[size_t(b)].size());
    // --num-shards 3, or one per record when the bin has fewer.
    EXPECT_EQ(m.shards.size(), std::min<size_t>(3, lengths[size_t(b)].size()));
    EXPECT_EQ(bin.at("shards"), m.shards.size());
    EXPECT_TRUE(verify_manifest(m, bin_dir).empty());
    std::vector<size_t> read;
    for (const ShardEntry& e : m.shards) {
      BertShardReader reader(path_join(bin_dir, e.file));
      EXPECT_EQ(reader.seq_len(), bins.max_length(b));
      for (int64_t i = 0; i < reader.size(); ++i) {
        const BertRecord rec = reader.read(i);
        size_t n = 0;
        while (n < rec.input_mask.size() && rec.input_mask[n]) ++n;
        read.push_back(n);
      }
    }
    EXPECT_EQ(read, lengths[size_t(b)]) << "bin " << b << ": the records in the order given";
  }
  EXPECT_EQ(stats.shards, 3u + 0u + 2u + 1u);
  // One length histogram over the run's seq_len, whatever the bin.
  EXPECT_EQ(stats.length_histogram.size(), size_t(32 / 2 + 1));
}

TEST(BertSplitWriter, WithoutBinsOneSeriesInTheSplitsDirectory) {
  testing::TempDir dir;
  MakeShardsStats stats;
  BertSplitWriter writer(testing::split_output(dir.path(), 2), LengthBins{.seq_len = 32},
                         {.seq_len = 32, .max_predictions = 4, .compression_level = 1, .mask_id = 4}, stats);
  writer.begin_bin(0, 3);
  for (size_t n : {5, 20, 32}) {
    const std::string r = record(n);
    writer.add(SpillRecord(r.data(), r.size(), "test", 0));
  }
  writer.end_bin();
  writer.finish({{"instances", 3}});
  const Manifest m = Manifest::read(path_join(dir.path(), kManifestName));
  EXPECT_EQ(m.format, kFormatBertHdf5);
  EXPECT_EQ(m.seq_len, 32);
  EXPECT_EQ(m.shards.size(), 2u);
  EXPECT_EQ(m.total_records(), 3u);
  EXPECT_EQ(m.stats.at("instances"), 3);
  EXPECT_FALSE(m.extra.contains("bins"));
}

}  // namespace
}  // namespace pretrain::length_bins_test
