// The bucketed gradient reducer (trainer/parallel/reducer.h) on real ranks: ctest runs this under
// `mpirun -np 4` (label "mpi"). Values are chosen so every sum is exact in floating point.
#include "trainer/parallel/reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "common/communicator.h"
#include "trainer/backend.h"
#include "trainer/model.h"

namespace pretrain::reducer_mpi_test {
namespace {

// The reducer sums every rank's gradients whatever ranges the backward pass hands it: adjacent
// ranges fill a bucket, a gap closes it, finish() reduces the rest.
TEST(GradientReducer, SumsEveryRangeInBucketsAndCountsThem) {
  const Communicator& world = Communicator::world();
  if (world.size() != 4) GTEST_SKIP() << "run under mpirun -np 4 (ctest does)";
  const Device cpu = open_device("cpu", 1);
  ModelConfig c = ModelConfig::preset(ModelKind::gpt, "tiny");
  c.layers = 2, c.hidden = 16, c.heads = 2, c.intermediate = 64, c.vocab_size = 23, c.max_positions = 16;
  Model model(c, cpu);
  const int64_t n = model.num_parameters();
  for (int64_t j = 0; j < n; ++j) model.grads()[j] = float((j % 7) + world.rank());
  GradientReducer reducer(world, nullptr, model, /*bucket_floats=*/500);
  // The backward pass's order: from the arena's end down, with one gap (a range not handed over
  // until last) that must close the open bucket.
  const int64_t gap_begin = n / 3, gap_end = n / 3 + 40;
  int64_t end = n, ranges = 0;
  while (end > gap_end) {
    const int64_t begin = std::max(gap_end, end - 123);
    reducer.ready(begin, end), ++ranges;
    end = begin;
  }
  end = gap_begin;
  while (end > 0) {
    const int64_t begin = std::max<int64_t>(0, end - 321);
    reducer.ready(begin, end), ++ranges;
    end = begin;
  }
  reducer.ready(gap_begin, gap_end), ++ranges;
  reducer.finish();
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(model.grads()[j], float(4 * (j % 7) + 6)) << "element " << j;
  // A bucket closes once it holds 500 floats: it is under 500 + the longest range (321).
  EXPECT_GE(reducer.buckets(), n / (500 + 321));
  EXPECT_LT(reducer.buckets(), ranges);
}

}  // namespace
}  // namespace pretrain::reducer_mpi_test
