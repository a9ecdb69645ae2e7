// TensorGroup (trainer/tensor_parallel/tensor_group.h) on CPU tensors over real ranks: ctest runs this
// under `mpirun -np 4` (label "mpi"); the world splits into groups of 1, 2 and 4. Sums, maxima,
// gathers in rank order and reduce-scatters of each rank's block, with values whose sums are exact;
// a group of one leaves its tensors alone and copies where a gather or scatter would.
#include "trainer/tensor_parallel/tensor_group.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/communicator.h"

namespace pretrain::tensor_group_mpi_test {
namespace {

class Groups : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const Communicator& world = Communicator::world();
    if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
    comm_ = world.split(world.rank() / GetParam(), world.rank() % GetParam());
    group_ = std::make_unique<TensorGroup>(*comm_, cpu_);
  }
  int r() const { return group_->rank(); }
  int t() const { return group_->size(); }

  const Device cpu_{};
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<TensorGroup> group_;
};

TEST_P(Groups, RankAndSizeAreTheGroupsConsecutiveWorldRanks) {
  EXPECT_EQ(t(), GetParam());
  EXPECT_EQ(r(), Communicator::world().rank() % GetParam());
}

// Rank k adds 10·k + i at element i: the group's sum is 10·Σk + t·i, in float and in double.
TEST_P(Groups, AllReduceSumsFloatsAndDoubles) {
  const int n = 37;
  std::vector<float> x(n);
  std::vector<double> y(n);
  for (int i = 0; i < n; ++i) x[size_t(i)] = float(10 * r() + i), y[size_t(i)] = 0.5 * (10 * r() + i);
  group_->all_reduce_sum(x.data(), n);
  group_->all_reduce_sum(y.data(), n);
  const int ranks = 10 * t() * (t() - 1) / 2;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(x[size_t(i)], float(ranks + t() * i)) << i;
    ASSERT_EQ(y[size_t(i)], 0.5 * (ranks + t() * i)) << i;
  }
}

// Element i is largest on rank i mod t, where it is 100 + i (elsewhere −i).
TEST_P(Groups, AllReduceMaxTakesTheLargest) {
  const int n = 11;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[size_t(i)] = i % t() == r() ? float(100 + i) : float(-i);
  group_->all_reduce_max(x.data(), n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(x[size_t(i)], float(100 + i)) << i;
}

// all_gather puts each rank's n floats at rank · n; reduce_scatter_sum gives rank k the sum of
// every rank's block k.
TEST_P(Groups, AllGatherInRankOrderAndReduceScatterByBlock) {
  const int n = 5;
  std::vector<float> mine(n), all(size_t(n * t()), -1.0f);
  for (int i = 0; i < n; ++i) mine[size_t(i)] = float(100 * r() + i);
  group_->all_gather(mine.data(), all.data(), n);
  for (int k = 0; k < t(); ++k)
    for (int i = 0; i < n; ++i) EXPECT_EQ(all[size_t(k * n + i)], float(100 * k + i)) << "rank " << k << " element " << i;

  std::vector<float> blocks(size_t(n * t())), out(n, -1.0f);
  for (int k = 0; k < t(); ++k)
    for (int i = 0; i < n; ++i) blocks[size_t(k * n + i)] = float(1000 * k + 10 * r() + i);
  group_->reduce_scatter_sum(blocks.data(), out.data(), n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(out[size_t(i)], float(t() * (1000 * r() + i) + 10 * t() * (t() - 1) / 2)) << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, Groups, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "of" + std::to_string(info.param); });

}  // namespace
}  // namespace pretrain::tensor_group_mpi_test
