// The gradient reducer's bucketing (trainer/parallel/reducer.h) in one process, where the sum over
// the ranks is the gradients themselves: exactly when a bucket closes (full, or at a gap in the
// ranges), what finish() adds, and that no gradient changes. The sums over real ranks:
// reducer_mpi_test.cpp.
#include "trainer/parallel/reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/communicator.h"
#include "fixtures.h"

namespace pretrain::reducer_test {
namespace {

using testing::tiny_model;

class Reducer : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::fill_normal(model_.grads(), model_.num_parameters(), 3, 1.0f);
    before_.assign(model_.grads(), model_.grads() + model_.num_parameters());
  }
  // Hands over [end − size·count, end) in `count` ranges of `size`, from the top down, as the
  // backward pass does.
  static int64_t hand_over(GradientReducer& r, int64_t end, int64_t size, int count) {
    for (int i = 0; i < count; ++i, end -= size) r.ready(end - size, end);
    return end;
  }
  void expect_unchanged() const {
    EXPECT_TRUE(std::equal(before_.begin(), before_.end(), model_.grads())) << "a gradient changed";
  }

  const Device cpu_{};
  Model model_{tiny_model(ModelKind::gpt), cpu_};
  std::vector<float> before_;
};

// Adjacent ranges fill a bucket until it holds at least bucket_floats; the rest goes at finish().
TEST_F(Reducer, ABucketClosesOnceItHoldsEnough) {
  ASSERT_GE(model_.num_parameters(), 300);
  GradientReducer r(Communicator::world(), nullptr, model_, 100);
  const int64_t n = model_.num_parameters();
  hand_over(r, n, 30, 3);  // 90 floats: still open
  EXPECT_EQ(r.buckets(), 0);
  hand_over(r, n - 90, 30, 1);  // 120: closed
  EXPECT_EQ(r.buckets(), 1);
  hand_over(r, n - 120, 30, 5);  // 150 more: one bucket of 120, 30 left open
  EXPECT_EQ(r.buckets(), 2);
  r.finish();
  EXPECT_EQ(r.buckets(), 3);
  r.finish();  // nothing open: nothing more
  EXPECT_EQ(r.buckets(), 3);
  expect_unchanged();
}

// A range that does not continue the open bucket downwards (a parameter handed over later)
// closes it however small it is.
TEST_F(Reducer, AGapClosesTheOpenBucket) {
  GradientReducer r(Communicator::world(), nullptr, model_, 1000);
  const int64_t n = model_.num_parameters();
  r.ready(n - 10, n);
  r.ready(n - 30, n - 20);  // skips [n − 20, n − 10)
  EXPECT_EQ(r.buckets(), 1);
  r.ready(n - 40, n - 30);  // continues the second bucket
  EXPECT_EQ(r.buckets(), 1);
  r.ready(n - 20, n - 10);  // the gap, last
  EXPECT_EQ(r.buckets(), 2);
  r.finish();
  EXPECT_EQ(r.buckets(), 3);
  expect_unchanged();
}

// --bucket-mb small enough to round to no floats: every range is a bucket of its own; and a
// reducer serves step after step.
TEST_F(Reducer, NoBucketSizeMeansOneBucketPerRangeStepAfterStep) {
  GradientReducer r(Communicator::world(), nullptr, model_, 0);
  const int64_t n = model_.num_parameters();
  for (int step = 1; step <= 2; ++step) {
    hand_over(r, n, 7, 4);
    r.finish();
    EXPECT_EQ(r.buckets(), 4 * step);
  }
  expect_unchanged();
}

}  // namespace
}  // namespace pretrain::reducer_test
