// make-pretraining-shards' statistics as JSON: the counts as counted, the shares derived from
// them (masking 80/10/10, NSP, padding, the length histogram) only when there are predictions
// (BERT), and a stage clock that adds its time to the pair it is given.
#include "datagen/shards/make_shards_stats.h"

#include <gtest/gtest.h>

namespace pretrain::make_shards_stats_test {
namespace {

TEST(MakeShardsStats, BertSharesAreDerivedFromTheCounts) {
  const MakeShardsStats s{.documents = 10, .instances = 6, .valid_instances = 2, .instance_tokens = 200,
                          .predictions = 40, .masked_as_mask = 30, .masked_kept = 6, .masked_random = 4,
                          .random_next = 5, .forced_random_next = 2, .document_passes = 4,
                          .short_document_passes = 1, .short_target_instances = 2, .length_histogram = {1, 2, 3}};
  const nlohmann::json j = s.to_json(32);
  EXPECT_EQ(j.at("documents"), 10);
  EXPECT_EQ(j.at("instances"), 6);
  EXPECT_DOUBLE_EQ(j.at("masked_fraction").get<double>(), 40.0 / 200);
  EXPECT_DOUBLE_EQ(j.at("mask_share").get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j.at("kept_share").get<double>(), 0.15);
  EXPECT_DOUBLE_EQ(j.at("random_share").get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(j.at("nsp_random_share").get<double>(), 5.0 / 8);
  EXPECT_DOUBLE_EQ(j.at("nsp_coin_random_share").get<double>(), 3.0 / 6);
  EXPECT_DOUBLE_EQ(j.at("short_target_share").get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j.at("padding_share").get<double>(), 1.0 - 200.0 / (8 * 32));
  EXPECT_EQ(j.at("length_histogram").at("bin_width"), 2);
  EXPECT_EQ(j.at("length_histogram").at("counts"), nlohmann::json({1, 2, 3}));
}

TEST(MakeShardsStats, WithoutPredictionsThereAreNoMaskingShares) {
  MakeShardsStats s;
  s.instances = 3;
  s.instance_tokens = 99;
  const nlohmann::json j = s.to_json(0);
  EXPECT_EQ(j.at("instance_tokens"), 99);
  EXPECT_FALSE(j.contains("predictions"));
  EXPECT_FALSE(j.contains("length_histogram"));
  EXPECT_TRUE(j.at("stage_seconds").contains("tokenize"));
  EXPECT_TRUE(j.at("stage_cpu_seconds").contains("write"));
}

TEST(MakeShardsStats, AStageClockAddsItsWallAndCpuTime) {
  MakeShardsStats s;
  s.write_seconds = 1;
  const StageClock clock;
  volatile double x = 0;
  for (int i = 0; i < 2000000; ++i) x = x + 1e-9 * i;  // some CPU time
  clock.add_to(s.write_seconds, s.write_cpu_seconds);
  EXPECT_GT(s.write_seconds, 1.0);
  EXPECT_GE(s.write_cpu_seconds, 0.0);
  EXPECT_GT(clock.wall_seconds(), 0.0);
  EXPECT_EQ(s.tokenize_seconds, 0.0) << "only the pair given";
}

}  // namespace
}  // namespace pretrain::make_shards_stats_test
