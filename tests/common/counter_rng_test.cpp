// common/counter_rng.h: value i of a stream is splitmix64's finaliser of key + i·γ, a function of
// (seed, document, pass) and i alone; draws in a range are unbiased.
#include "common/counter_rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace pretrain::counter_rng_test {
namespace {

std::vector<uint64_t> first(CounterRng rng, int n) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng.next());
  return out;
}

TEST(CounterRng, MixIsSplitMix64sFinaliser) {
  // SplitMix64 seeded with 0 (Vigna's splitmix64.c): its outputs are mix(k·γ), k = 1, 2, 3.
  const uint64_t gamma = 0x9e3779b97f4a7c15ULL;
  EXPECT_EQ(CounterRng::mix(gamma), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(CounterRng::mix(2 * gamma), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(CounterRng::mix(3 * gamma), 0x06c45d188009454fULL);
}

TEST(CounterRng, AStreamDependsOnItsKeyAloneAndEachPartOfIt) {
  EXPECT_EQ(first(CounterRng(7, 3, 1), 16), first(CounterRng(7, 3, 1), 16));
  const auto base = first(CounterRng(7, 3, 1), 4);
  EXPECT_NE(first(CounterRng(8, 3, 1), 4), base);
  EXPECT_NE(first(CounterRng(7, 4, 1), 4), base);
  EXPECT_NE(first(CounterRng(7, 3, 2), 4), base);
  EXPECT_NE(first(CounterRng(7, 1, 3), 4), base) << "document and pass are not interchangeable";
  // Drawing from another stream in between changes nothing.
  CounterRng a(7, 3, 1), other(7, 9, 1);
  std::vector<uint64_t> interleaved;
  for (int i = 0; i < 16; ++i) {
    interleaved.push_back(a.next());
    other.next();
  }
  EXPECT_EQ(interleaved, first(CounterRng(7, 3, 1), 16));
}

TEST(CounterRng, RandomIsInTheUnitIntervalAndRandbelowInRange) {
  CounterRng rng(1, 2, 3);
  for (int i = 0; i < 10000; ++i) {
    const double r = rng.random();
    ASSERT_GE(r, 0.0);
    ASSERT_LT(r, 1.0);
    ASSERT_LT(rng.randbelow(7), 7u);
    ASSERT_EQ(rng.randbelow(1), 0u);
  }
  bool low = false, high = false;
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.randint(-2, 2);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 2);
    low |= v == -2;
    high |= v == 2;
  }
  EXPECT_TRUE(low && high) << "randint includes both ends";
}

// 60,000 draws in [0, 6): each value within 3% (3.3 standard deviations) of 10,000; the seed is
// fixed, so the test cannot flake.
TEST(CounterRng, RandbelowIsUniform) {
  CounterRng rng(12345, 0, 0);
  std::vector<int> counts(6);
  for (int i = 0; i < 60000; ++i) ++counts[rng.randbelow(6)];
  for (int c : counts) EXPECT_NEAR(c, 10000, 300);
  // A range that is not a power of two near 2^64 is rejection-sampled, still in range.
  const uint64_t n = (uint64_t{1} << 63) + 12345;
  for (int i = 0; i < 1000; ++i) ASSERT_LT(rng.randbelow(n), n);
}

TEST(CounterRng, ShufflePermutesTheSameWayForTheSameKey) {
  std::vector<int> a(100), b, c;
  std::iota(a.begin(), a.end(), 0);
  b = c = a;
  CounterRng(5, 6, 0).shuffle(a);
  CounterRng(5, 6, 0).shuffle(b);
  CounterRng(5, 6, 1).shuffle(c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(a, identity);
}

}  // namespace
}  // namespace pretrain::counter_rng_test
