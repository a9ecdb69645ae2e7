// PythonRandom against CPython 3.11's random.Random. The expected values were printed by Debian's
// /usr/bin/python3 (3.11.2) with:
//   r = random.Random(12345)
//   [r.getrandbits(32) for _ in range(3)]; [repr(r.random()) for _ in range(3)]
//   [r.randint(0, 10**6) for _ in range(5)]; x = list(range(10)); r.shuffle(x); x
//   r.getrandbits(40), r.getrandbits(64), r.randint(1, 1), r.randrange(-5, 5)
//   for s in (0, -7, 2**40 + 5): r = random.Random(s); r.getrandbits(32), repr(r.random())
// The compat test tests/compat/test_python_random.py checks longer streams against python3 live.
#include "datagen/shards/python_random.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace pretrain::python_random_test {
namespace {

TEST(PythonRandom, MatchesCPythonForSeed12345) {
  PythonRandom r(12345);
  EXPECT_EQ(r.getrandbits(32), 1789368711u);
  EXPECT_EQ(r.getrandbits(32), 3146859322u);
  EXPECT_EQ(r.getrandbits(32), 43676229u);
  EXPECT_EQ(r.random(), 0.8201747225612886);
  EXPECT_EQ(r.random(), 0.802848393459915);
  EXPECT_EQ(r.random(), 0.8551383418471491);
  for (int64_t want : {977047, 203068, 283372, 593502, 457418}) EXPECT_EQ(r.randint(0, 1000000), want);
  std::vector<int> x{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  r.shuffle(x);
  EXPECT_EQ(x, (std::vector<int>{8, 0, 4, 7, 9, 3, 6, 1, 5, 2}));
  EXPECT_EQ(r.getrandbits(40), 808978141473ull);
  EXPECT_EQ(r.getrandbits(64), 13519059396826741711ull);
  EXPECT_EQ(r.randint(1, 1), 1);
  EXPECT_EQ(r.randrange(-5, 5), 3);
}

TEST(PythonRandom, SeedsUseTheAbsoluteValueAndEveryWord) {
  PythonRandom zero(0), negative(-7), wide((int64_t(1) << 40) + 5);
  EXPECT_EQ(zero.getrandbits(32), 3626764237u);
  EXPECT_EQ(zero.random(), 0.3852453064766108);
  EXPECT_EQ(negative.getrandbits(32), 1390851128u);
  EXPECT_EQ(negative.random(), 0.9478653606090632);
  EXPECT_EQ(wide.getrandbits(32), 2166296868u);
  EXPECT_EQ(wide.random(), 0.516921470080349);
}

TEST(PythonRandom, EmptyRangesAreUsageErrors) {
  PythonRandom r(1);
  EXPECT_THROW(r.randrange(3, 3), UsageError);
  EXPECT_THROW(r.randint(2, 1), UsageError);
  EXPECT_THROW(r.randbelow(0), UsageError);
  EXPECT_THROW(r.getrandbits(65), UsageError);
}

}  // namespace
}  // namespace pretrain::python_random_test
