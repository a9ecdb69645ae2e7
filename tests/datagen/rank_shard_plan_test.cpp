// Where shards start in the ranks' parts: the --shard-bytes rule over sizes alone, the same
// however the documents are cut into parts, and the same shards the sinks themselves write.
#include "datagen/wikiprep/rank_shard_plan.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "datagen/wikiprep/document_shard_sinks.h"
#include "test_util.h"

namespace pretrain::rank_shard_plan_test {
namespace {

using testing::TempDir;

// (shard index, document number counted over all parts) of every start, planning part by part.
std::vector<std::pair<uint64_t, uint64_t>> plan_over_parts(const std::vector<std::vector<uint64_t>>& parts,
                                                           WikiprepFormat format, uint64_t shard_bytes) {
  std::vector<std::pair<uint64_t, uint64_t>> starts;
  ShardCursor cursor;
  uint64_t docs_before = 0;
  for (const std::vector<uint64_t>& sizes : parts) {
    uint64_t byte = 0;
    std::vector<uint64_t> offsets;
    for (uint64_t s : sizes) offsets.push_back(byte), byte += s;
    for (const ShardStart& s : plan_shard_starts(sizes, format, shard_bytes, cursor)) {
      EXPECT_EQ(s.byte, offsets.at(s.doc)) << "a start's byte is its document's offset in the part";
      starts.emplace_back(s.index, docs_before + s.doc);
    }
    docs_before += sizes.size();
  }
  return starts;
}

TEST(RankShardPlan, OnePart) {
  ShardCursor cursor;
  // Limit 10: [4, 5] (9), [3, 6] (9), [12] alone, [1].
  std::vector<ShardStart> starts = plan_shard_starts({4, 5, 3, 6, 12, 1}, WikiprepFormat::jsonl, 10, cursor);
  ASSERT_EQ(starts.size(), 4u);
  EXPECT_EQ(starts[0].index, 0u);
  EXPECT_EQ(starts[1].index, 1u);
  EXPECT_EQ(starts[1].doc, 2u);
  EXPECT_EQ(starts[1].byte, 9u);
  EXPECT_EQ(starts[2].doc, 4u);
  EXPECT_EQ(starts[3].doc, 5u);
  EXPECT_EQ(starts[3].byte, 30u);
  EXPECT_EQ(cursor.index, 3u);  // the open shard, with the last document in it
  EXPECT_EQ(cursor.open_docs, 1u);
  EXPECT_EQ(cursor.open_bytes, 1u);
}

TEST(RankShardPlan, SentencesCountTheBlankLineAfterEachDocument) {
  ShardCursor jsonl, sentences;
  // 4 + 6 = 10 fits in 10 bytes of JSON lines; as sentence text each takes one more.
  EXPECT_EQ(plan_shard_starts({4, 6}, WikiprepFormat::jsonl, 10, jsonl).size(), 1u);
  EXPECT_EQ(plan_shard_starts({4, 6}, WikiprepFormat::sentences, 10, sentences).size(), 2u);
  EXPECT_EQ(sentences.open_bytes, 7u);
}

TEST(RankShardPlan, AnEmptyPartHandsTheCursorOn) {
  ShardCursor cursor{4, 2, 9};
  EXPECT_TRUE(plan_shard_starts({}, WikiprepFormat::jsonl, 10, cursor).empty());
  EXPECT_EQ(cursor.index, 4u);
  EXPECT_EQ(cursor.open_docs, 2u);
  EXPECT_EQ(cursor.open_bytes, 9u);
}

TEST(RankShardPlan, TheSameStartsHoweverThePartsAreCut) {
  std::mt19937 rng(7);
  std::vector<uint64_t> sizes(200);
  for (uint64_t& s : sizes) s = 1 + rng() % 300;
  for (WikiprepFormat format : {WikiprepFormat::jsonl, WikiprepFormat::sentences}) {
    const auto whole = plan_over_parts({sizes}, format, 1000);
    ASSERT_GT(whole.size(), 20u);
    for (int ranks : {2, 3, 7, 64}) {
      std::vector<std::vector<uint64_t>> parts(static_cast<size_t>(ranks));
      for (size_t i = 0; i < sizes.size(); ++i) parts[i * size_t(ranks) / sizes.size()].push_back(sizes[i]);
      parts[1].clear();  // a rank whose share held no page: its part is empty
      std::vector<uint64_t> kept;
      for (const auto& p : parts) kept.insert(kept.end(), p.begin(), p.end());
      EXPECT_EQ(plan_over_parts(parts, format, 1000), plan_over_parts({kept}, format, 1000)) << ranks << " ranks";
    }
  }
}

// The plan is only right if it is the sinks' own rule: run both over the same documents.
TEST(RankShardPlan, StartsWhereTheSinksStartShards) {
  std::mt19937 rng(11);
  for (WikiprepFormat format : {WikiprepFormat::jsonl, WikiprepFormat::sentences}) {
    TempDir dir;
    WikiprepOptions o;
    o.output_dir = dir.path();
    o.format = format;
    o.shard_bytes = 2000;
    std::unique_ptr<ShardSink> sink = open_shard_sink(o, 0);
    std::vector<uint64_t> sizes;
    for (int i = 0; i < 60; ++i) {
      CleanDocument d;
      d.doc = {std::to_string(i), "", "T", std::string(1 + rng() % 900, 't')};
      d.sentences = d.doc.text + "\n";
      std::string line;
      serialize_document(format, d, line);
      sizes.push_back(line.size());
      sink->add(d);
    }
    Manifest m = sink->finish(Manifest());
    ShardCursor cursor;
    std::vector<ShardStart> starts = plan_shard_starts(sizes, format, o.shard_bytes, cursor);
    ASSERT_EQ(starts.size(), m.shards.size());
    for (size_t i = 0; i < starts.size(); ++i) {
      uint64_t end = i + 1 < starts.size() ? starts[i + 1].doc : sizes.size();
      EXPECT_EQ(end - starts[i].doc, m.shards[i].records) << "shard " << i;
      EXPECT_EQ(starts[i].index, i);
    }
  }
}

}  // namespace
}  // namespace pretrain::rank_shard_plan_test
