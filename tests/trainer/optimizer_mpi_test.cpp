// ZeRO-1 (trainer/optimizer.h with zero on): each rank of a group updates its block of the
// parameter arena only, with moments for that block only, yet the result is the unsharded step's:
// the global gradient norm (clipping) and LAMB's per-tensor norms of tensors that cross a block
// boundary add the ranks' partial sums. ctest runs this under `mpirun -np 4`; groups of 2 and 4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "common/communicator.h"
#include "optimizer_fixtures.h"
#include "trainer/optimizer.h"

namespace pretrain::optimizer_mpi_test {
namespace {

using testing::fill_normal;
using testing::tiny_bert;
const Device kCpu{};

// Within 1e-6 of the largest magnitude: the partial sums add in another order than one rank's.
void expect_close(const float* ours, const float* want, int64_t begin, int64_t end, const char* what) {
  float scale = 0;
  for (int64_t k = begin; k < end; ++k) scale = std::max(scale, std::abs(want[k]));
  for (int64_t k = begin; k < end; ++k)
    ASSERT_NEAR(ours[k], want[k], 1e-6f * scale) << what << " element " << k;
}

class ZeroOne : public ::testing::TestWithParam<std::tuple<OptimizerKind, int>> {};

TEST_P(ZeroOne, ShardedStepsEqualTheUnshardedOnes) {
  const Communicator& world = Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  const auto [kind, size] = GetParam();
  const auto group = world.split(world.rank() / size, world.rank() % size);
  OptimizerConfig c;
  c.kind = kind, c.lr = 0.01, c.weight_decay = 0.1, c.max_grad_norm = 1.0, c.schedule = LrSchedule::constant;
  Model sharded(tiny_bert(), kCpu), whole(tiny_bert(), kCpu);
  const int64_t n = whole.num_parameters();
  fill_normal(whole.weights(), n, 7, 0.5f);
  std::copy(whole.weights(), whole.weights() + n, sharded.weights());
  Optimizer zero(c, sharded, group.get(), /*zero=*/true), plain(c, whole);

  ASSERT_TRUE(zero.sharded());
  const std::vector<int64_t>& sizes = zero.shard_sizes();
  ASSERT_EQ(int(sizes.size()), size);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), n);
  EXPECT_EQ(zero.shard_begin(), std::accumulate(sizes.begin(), sizes.begin() + group->rank(), int64_t{0}));
  EXPECT_EQ(zero.shard_end() - zero.shard_begin(), sizes[size_t(group->rank())]);
  EXPECT_LT(zero.state_bytes(), plain.state_bytes());

  const int64_t lo = zero.shard_begin(), hi = zero.shard_end();
  for (int t = 1; t <= 3; ++t) {
    // The same gradients on every rank: what ZeRO's reduce-scatter would have left in place.
    fill_normal(whole.grads(), n, 100 + uint32_t(t), 0.1f);
    std::copy(whole.grads(), whole.grads() + n, sharded.grads());
    const UpdateInfo a = zero.step(t), b = plain.step(t);
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-12 * b.grad_norm);
    EXPECT_LT(b.clip, 1.0);  // the bound clips: the sharded norm must be the whole one
    expect_close(sharded.weights(), whole.weights(), lo, hi, "this rank's weights");
    // The rest is the other ranks' to update (the trainer all-gathers the weights after the step).
    std::copy(whole.weights(), whole.weights() + lo, sharded.weights());
    std::copy(whole.weights() + hi, whole.weights() + n, sharded.weights() + hi);
  }
  std::vector<float> m, v, m_whole, v_whole;
  zero.moments_to_host(m, v);  // gathered from every rank
  plain.moments_to_host(m_whole, v_whole);
  expect_close(m.data(), m_whole.data(), 0, n, "first moments");
  expect_close(v.data(), v_whole.data(), 0, n, "second moments");
}

INSTANTIATE_TEST_SUITE_P(KindsAndRanks, ZeroOne,
                         ::testing::Combine(::testing::Values(OptimizerKind::adamw, OptimizerKind::lamb),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return std::string(optimizer_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "_ranks";
                         });

}  // namespace
}  // namespace pretrain::optimizer_mpi_test
