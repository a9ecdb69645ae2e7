// The shards of one split: equal sizes (±1), numbered names, the manifest rewritten incomplete
// after each commit and complete at the end, the stop a kill would make, and --resume keeping the
// shards an earlier run of the same key finished, up to the first whose checksum fails.
#include "datagen/shards/shard_series.h"

#include <gtest/gtest.h>

#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "test_util.h"

namespace pretrain::shard_series_test {
namespace {

using testing::TempDir;

SplitOutput output_in(const std::string& dir, const std::string& key) {
  SplitOutput out;
  out.dir = dir;
  out.num_shards = 3;
  out.manifest.tool = "test";
  out.manifest.seed = 5;
  out.manifest.extra["key"] = key;
  return out;
}

const ShardFormat kFormat{.name = "test-format", .extension = ".txt", .seq_len = 16};

// A series of three shards whose files hold `text` and their number.
void write_series(ShardSeries& series, const std::string& text) {
  for (size_t i = 0; i < series.count(); ++i) {
    if (series.kept(i)) continue;
    write_file_atomic(series.path(i), text + std::to_string(i));
    series.committed(i, series.size(i));
  }
  series.finish({{"records", 10}});
}

TEST(ShardSeries, EqualSizesDifferByAtMostOneTheFirstLarger) {
  EXPECT_EQ(equal_sizes(10, 3), (std::vector<uint64_t>{4, 3, 3}));
  EXPECT_EQ(equal_sizes(2, 3), (std::vector<uint64_t>{1, 1, 0}));
  EXPECT_EQ(equal_sizes(9, 1), (std::vector<uint64_t>{9}));
  EXPECT_EQ(equal_sizes(9, 0), (std::vector<uint64_t>{9})) << "at least one shard";
}

TEST(ShardSeries, TheManifestListsEachCommittedShardAndIsCompleteAtTheEnd) {
  TempDir dir;
  const std::string out = dir.file("split");
  ShardSeries series(output_in(out, "k"), kFormat, equal_sizes(10, 3));
  EXPECT_EQ(series.name(0), "train-00000.txt");
  EXPECT_EQ(series.path(2), path_join(out, "train-00002.txt"));
  write_file_atomic(series.path(0), "zero");
  series.committed(0, 4);
  Manifest m = Manifest::read(path_join(out, kManifestName));
  EXPECT_FALSE(m.complete);
  ASSERT_EQ(m.shards.size(), 1u);
  EXPECT_EQ(m.shards[0].records, 4u);
  EXPECT_EQ(m.format, "test-format");
  EXPECT_EQ(m.seq_len, 16);
  EXPECT_EQ(m.tool, "test");
  for (size_t i = 1; i < 3; ++i) {
    write_file_atomic(series.path(i), "more");
    series.committed(i, series.size(i));
  }
  series.finish({{"records", 10}});
  m = Manifest::read(path_join(out, kManifestName));
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.total_records(), 10u);
  EXPECT_EQ(m.stats.at("records"), 10);
  EXPECT_EQ(m.extra.at("key"), "k");
  EXPECT_TRUE(verify_manifest(m, out).empty());
}

TEST(ShardSeries, StopAfterShardsThrowsOnceThatManyAreCommitted) {
  TempDir dir;
  SplitOutput o = output_in(dir.file("split"), "k");
  o.stop_after_shards = 2;
  ShardSeries series(o, kFormat, equal_sizes(10, 3));
  EXPECT_THROW(write_series(series, "x"), MakeShardsInterrupted);
  const Manifest m = Manifest::read(path_join(o.dir, kManifestName));
  EXPECT_FALSE(m.complete);
  EXPECT_EQ(m.shards.size(), 2u);
}

TEST(ShardSeries, ResumeKeepsEveryVerifiedShardOfTheSameKey) {
  TempDir dir;
  SplitOutput o = output_in(dir.file("split"), "k");
  {
    ShardSeries first(o, kFormat, equal_sizes(10, 3));
    write_series(first, "x");
  }
  o.resume = true;
  {
    ShardSeries all(o, kFormat, equal_sizes(10, 3));
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all.kept(i)) << i;
  }
  write_file_atomic(path_join(o.dir, "train-00001.txt"), "y1");  // same size, other bytes
  {
    ShardSeries damaged(o, kFormat, equal_sizes(10, 3));
    EXPECT_TRUE(damaged.kept(0));
    EXPECT_FALSE(damaged.kept(1));
    EXPECT_TRUE(damaged.kept(2)) << "a shard that verifies after a bad one is kept (ranks commit out of order)";
  }
  SplitOutput other = o;
  other.manifest.extra["key"] = "other options";
  ShardSeries changed(other, kFormat, equal_sizes(10, 3));
  EXPECT_FALSE(changed.kept(0));
  o.resume = false;
  ShardSeries fresh(o, kFormat, equal_sizes(10, 3));
  EXPECT_FALSE(fresh.kept(0)) << "without resume nothing is kept";
}

// A run killed while writing leaves train-NNNNN.<ext>.tmp-<its pid>; the next run, which writes that
// shard again under its own pid, removes it (issue 20: one --resume in 10 left one behind).
TEST(ShardSeries, TempFilesOfAKilledWriterAreRemovedByTheNextRun) {
  TempDir dir;
  SplitOutput o = output_in(dir.file("split"), "k");
  make_dirs(o.dir);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: its pid now names no process
  const std::string dead = std::to_string(child), alive = std::to_string(::getpid());
  const std::vector<std::string> stale = {"train-00002.txt.tmp-" + dead, "train-00000.idx.tmp-" + dead,
                                          "manifest.json.tmp-" + dead};
  const std::vector<std::string> kept = {"train-00001.txt.tmp-" + alive, "notes.txt.tmp-" + dead,
                                         "train-00001.txt.tmp-x" + dead};
  for (const auto& name : stale) write_file_atomic(path_join(o.dir, name), "half");
  for (const auto& name : kept) write_file_atomic(path_join(o.dir, name), "other");
  o.resume = true;
  ShardSeries series(o, kFormat, equal_sizes(10, 3));
  for (const auto& name : stale) EXPECT_FALSE(file_exists(path_join(o.dir, name))) << name << " was left behind";
  for (const auto& name : kept) EXPECT_TRUE(file_exists(path_join(o.dir, name))) << name << " is not a dead writer's";
  write_series(series, "x");
  for (const auto& name : stale) EXPECT_FALSE(file_exists(path_join(o.dir, name)));
}

TEST(ShardSeries, NoShardsOrNoDirectoryIsRefused) {
  SplitOutput o = output_in("somewhere", "k");
  o.num_shards = 0;
  try {
    o.check();
    ADD_FAILURE() << "no error for 0 shards";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--num-shards"), std::string::npos) << e.what();
  }
  o.num_shards = 1;
  EXPECT_NO_THROW(o.check());
  o.dir.clear();
  EXPECT_THROW(o.check(), UsageError);
}

}  // namespace
}  // namespace pretrain::shard_series_test
