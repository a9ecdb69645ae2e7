// The grid's arithmetic (trainer/parallel/grid.h) without MPI: Megatron's rank order (tensor
// fastest, then data, then pipeline), the data-parallel size and its refusals, and which layers a
// rank holds. The groups themselves are split over real ranks in layers_mpi_test.cpp and
// the 3D end-to-end tests.
#include "trainer/parallel/grid.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"

namespace pretrain::grid_test {
namespace {

TEST(Grid, MegatronRankOrder) {
  // tensor 2 × data 2 × pipeline 2: ranks 0,1 are a tensor group; 0,2 a data group; 0,4 a pipeline.
  EXPECT_EQ(grid_coordinates(1, 2, 2), (GridCoordinates{1, 0, 0}));
  EXPECT_EQ(grid_coordinates(2, 2, 2), (GridCoordinates{0, 1, 0}));
  EXPECT_EQ(grid_coordinates(4, 2, 2), (GridCoordinates{0, 0, 1}));
  EXPECT_EQ(grid_coordinates(7, 2, 2), (GridCoordinates{1, 1, 1}));
  const std::vector<std::tuple<int, int, int>> kShapes = {{1, 1, 1}, {2, 3, 2}, {4, 1, 3}, {1, 8, 1}, {3, 2, 4}};
  for (auto [t, d, p] : kShapes) {
    std::set<std::tuple<int, int, int>> seen;
    for (int rank = 0; rank < t * d * p; ++rank) {
      GridCoordinates c = grid_coordinates(rank, t, d);
      EXPECT_LT(c.tensor, t);
      EXPECT_LT(c.data, d);
      EXPECT_LT(c.pipeline, p);
      EXPECT_EQ(grid_rank(c, t, d), rank);
      seen.insert({c.tensor, c.data, c.pipeline});
    }
    EXPECT_EQ(seen.size(), size_t(t * d * p));
  }
}

std::string refusal(int world, GridShape shape) {
  try {
    data_parallel_size(world, shape);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Grid, DataParallelSizeAndRefusals) {
  EXPECT_EQ(data_parallel_size(8, {2, 2, 1, false}), 2);
  EXPECT_EQ(data_parallel_size(8, {1, 1, 1, false}), 8);
  EXPECT_EQ(data_parallel_size(4, {2, 2, 2, true}), 1);
  EXPECT_NE(refusal(6, {4, 1, 1, false}).find("6 ranks do not divide into tensor 4 × pipeline 1"), std::string::npos);
  EXPECT_NE(refusal(4, {0, 1, 1, false}).find("must be at least 1"), std::string::npos);
  EXPECT_NE(refusal(4, {1, 1, 2, false}).find("--virtual-stages needs --pipeline-parallel > 1"), std::string::npos);
  EXPECT_NE(refusal(4, {1, 2, 1, true}).find("--sequence-parallel needs --tensor-parallel > 1"), std::string::npos);
}

TEST(Grid, ModelShardLayers) {
  ModelConfig c;
  c.layers = 8;
  // Pipeline 2 × virtual 2: chunk c of stage s is virtual stage 2c + s, two layers each.
  ModelShard first = model_shard(c, {2, 2, 2, false}, {1, 0, 0});
  EXPECT_EQ(first.chunks, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {4, 6}}));
  EXPECT_TRUE(first.embeddings);
  EXPECT_FALSE(first.heads);
  EXPECT_EQ(first.tensor_rank, 1);
  EXPECT_EQ(first.tensor_size, 2);
  ModelShard last = model_shard(c, {2, 2, 2, false}, {0, 0, 1});
  EXPECT_EQ(last.chunks, (std::vector<std::pair<int64_t, int64_t>>{{2, 4}, {6, 8}}));
  EXPECT_FALSE(last.embeddings);
  EXPECT_TRUE(last.heads);
  ModelShard whole = model_shard(c, {1, 1, 1, false}, {0, 0, 0});
  EXPECT_EQ(whole.chunks, (std::vector<std::pair<int64_t, int64_t>>{{0, 8}}));
  EXPECT_TRUE(whole.embeddings && whole.heads);
  EXPECT_THROW(model_shard(c, {1, 3, 1, false}, {0, 0, 0}), UsageError);  // 8 layers over 3 stages
}

}  // namespace
}  // namespace pretrain::grid_test
