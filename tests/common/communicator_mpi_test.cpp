// The Communicator's collectives and point to point (common/communicator.h) on real ranks: ctest
// runs this under `mpirun -np 4` (label "mpi"). Values are chosen so every sum is exact in
// floating point, so the checks are equalities; each test also runs on a split of 2 ranks.
#include "common/communicator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace pretrain::communicator_mpi_test {
namespace {

class Collectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const Communicator& world = Communicator::world();
    if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
    const int size = GetParam();
    group_ = world.split(world.rank() / size, world.rank() % size);
  }
  const Communicator& g() const { return *group_; }
  std::unique_ptr<Communicator> group_;
};

TEST_P(Collectives, SplitGivesConsecutiveRanksInKeyOrder) {
  EXPECT_EQ(g().size(), GetParam());
  EXPECT_EQ(g().rank(), Communicator::world().rank() % GetParam());
  EXPECT_TRUE(g().distributed());
}

TEST_P(Collectives, AllReduceSumsEveryTypeAndMaxTakesTheLargest) {
  const int r = g().rank(), n = g().size();
  std::vector<float> f = {float(r), 1.0f, -2.0f * float(r)};
  std::vector<double> d = {0.5 * r, 3.0};
  std::vector<int64_t> i = {int64_t(r) << 40, 1};
  g().all_reduce_sum(f.data(), 3), g().all_reduce_sum(d.data(), 2), g().all_reduce_sum(i.data(), 2);
  const double ranks = n * (n - 1) / 2.0;  // 0 + 1 + … + n − 1
  EXPECT_EQ(f, (std::vector<float>{float(ranks), float(n), float(-2 * ranks)}));
  EXPECT_EQ(d, (std::vector<double>{0.5 * ranks, 3.0 * n}));
  EXPECT_EQ(i, (std::vector<int64_t>{int64_t(ranks) << 40, n}));
  std::vector<float> m = {float(r), -float(r)};
  g().all_reduce_max(m.data(), 2);
  EXPECT_EQ(m, (std::vector<float>{float(n - 1), 0.0f}));
}

TEST_P(Collectives, BroadcastAndAllGatherKeepRankOrder) {
  const int r = g().rank(), n = g().size();
  int64_t value = r == 1 ? 4242 : -1;
  g().broadcast(&value, sizeof value, 1);
  EXPECT_EQ(value, 4242);
  const int32_t mine[2] = {r, 10 * r};
  std::vector<int32_t> all(2 * size_t(n));
  g().all_gather(mine, all.data(), sizeof mine);
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[2 * k], k);
    EXPECT_EQ(all[2 * k + 1], 10 * k);
  }
  std::vector<float> equal(3 * size_t(n));
  const float three[3] = {float(r), float(r) + 0.5f, 7.0f};
  g().all_gather_equal(three, equal.data(), 3);
  for (int k = 0; k < n; ++k) EXPECT_EQ(equal[3 * k + 1], float(k) + 0.5f);
}

// ZeRO-1's pair: uneven blocks (the arena's size is rarely a multiple of the ranks).
TEST_P(Collectives, ReduceScatterAndAllGatherBlocksRoundTripUnevenBlocks) {
  const int r = g().rank(), n = g().size();
  std::vector<int64_t> counts;
  const int64_t total = 11;
  for (int k = 0; k < n; ++k) counts.push_back(total * (k + 1) / n - total * k / n);
  std::vector<float> in(total);
  for (int64_t j = 0; j < total; ++j) in[size_t(j)] = float(j + 100 * r);
  std::vector<float> out(static_cast<size_t>(counts[size_t(r)]));
  g().reduce_scatter_sum(in.data(), out.data(), counts);
  const int64_t begin = std::accumulate(counts.begin(), counts.begin() + r, int64_t{0});
  for (size_t j = 0; j < out.size(); ++j)
    EXPECT_EQ(out[j], float(n * (begin + int64_t(j)) + 100 * n * (n - 1) / 2)) << "element " << begin + int64_t(j);
  std::vector<float> data(total, -1.0f);
  for (size_t j = 0; j < out.size(); ++j) data[size_t(begin) + j] = out[j];
  g().all_gather_blocks(data.data(), counts);
  for (int64_t j = 0; j < total; ++j) EXPECT_EQ(data[size_t(j)], float(n * j + 100 * n * (n - 1) / 2));
  std::vector<float> eq(2 * size_t(n), float(r + 1)), part(2);
  g().reduce_scatter_equal(eq.data(), part.data(), 2);
  EXPECT_EQ(part, (std::vector<float>(2, float(n * (n + 1) / 2))));
}

TEST_P(Collectives, PointToPointDeliversInTagOrderAndChecksTheSize) {
  const int r = g().rank(), n = g().size();
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  std::vector<float> a(5, float(r)), b(3, float(-r));
  Communicator::Request first = g().isend(a.data(), a.size() * sizeof(float), next, 7);
  Communicator::Request second = g().isend(b.data(), b.size() * sizeof(float), next, 8);
  std::vector<float> got_b(3), got_a(5);
  g().recv(got_b.data(), got_b.size() * sizeof(float), previous, 8);  // out of send order: by tag
  g().recv(got_a.data(), got_a.size() * sizeof(float), previous, 7);
  first.wait(), second.wait();
  EXPECT_EQ(got_a, std::vector<float>(5, float(previous)));
  EXPECT_EQ(got_b, std::vector<float>(3, float(-previous)));
  g().barrier();
}

// The watchdog's words for a group: its name and its members as the world numbers them (the
// split's keys reversed, so a group's rank differs from its world rank).
TEST(Communicator, AGroupIsDescribedByNameAndWorldRanks) {
  const Communicator& world = Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  EXPECT_EQ(world.description(), "the world (ranks 0-3)");
  const int r = world.rank();
  const auto odd_even = world.split(r % 2, -r, "parity");
  const int a = r % 2, b = r % 2 + 2;  // its members; key -r puts the larger first
  EXPECT_EQ(odd_even->description(),
            "the parity group (world ranks " + std::to_string(b) + ", " + std::to_string(a) + ")");
  EXPECT_EQ(odd_even->world_rank_of(0), b);
  EXPECT_EQ(odd_even->world_rank_of(1), a);
  EXPECT_EQ(odd_even->world_rank_of(2), -1);
  EXPECT_EQ(world.split(r, 0, "alone")->description(), "the alone group (world rank " + std::to_string(r) + ")");
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_ranks"; });

}  // namespace
}  // namespace pretrain::communicator_mpi_test
