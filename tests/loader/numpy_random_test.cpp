// numpy's legacy RandomState (loader/numpy_random.{h,cpp}): raw outputs, random_interval and
// shuffle against values numpy printed; MT19937 against the standard library's across the state's
// regenerations; random_interval's range and its draws.
#include "loader/numpy_random.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <tuple>
#include <vector>

namespace pretrain::numpy_random_test {
namespace {

std::vector<uint32_t> draws(uint32_t seed, int n) {
  NumpyRandomState rng(seed);
  std::vector<uint32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng.next_uint32());
  return out;
}

template <typename T>
std::vector<T> shuffled_arange(uint32_t seed, size_t n) {
  std::vector<T> x(n);
  std::iota(x.begin(), x.end(), T(0));
  NumpyRandomState rng(seed);
  rng.shuffle(std::span<T>(x));
  return x;
}

TEST(NumpyRandomState, RawOutputsMatchNumpy) {
  // [list(np.random.RandomState(s).randint(0, 2**32, size=4, dtype=np.uint32)) for s in (...)]
  EXPECT_EQ(draws(0, 4), (std::vector<uint32_t>{2357136044u, 2546248239u, 3071714933u, 3626093760u}));
  EXPECT_EQ(draws(7, 4), (std::vector<uint32_t>{327741615u, 976413892u, 3349725721u, 1369975286u}));
  EXPECT_EQ(draws(1234, 4), (std::vector<uint32_t>{822569775u, 2137449171u, 2671936806u, 3512589365u}));
  EXPECT_EQ(draws(5489, 4), (std::vector<uint32_t>{3499211612u, 581869302u, 3890346734u, 3586334585u}));
  EXPECT_EQ(draws(4294967295u, 4), (std::vector<uint32_t>{419326371u, 479346978u, 3918654476u, 2416749639u}));
}

TEST(NumpyRandomState, WideIntervalTakesTwoWordsHighFirst) {
  // list(np.random.RandomState(s).randint(0, 2**40, size=3, dtype=np.int64)): the legacy masked
  // path draws next_uint64 & (2^40 - 1), as random_interval does for max >= 2^32.
  for (auto [seed, expected] : {std::pair<uint32_t, std::vector<uint64_t>>{7, {752595690692ULL, 108744157686ULL, 291964244179ULL}},
                                {1234, {204000912083ULL, 166721346613ULL, 878802328948ULL}}}) {
    NumpyRandomState rng(seed);
    std::vector<uint64_t> got;
    for (int i = 0; i < 3; ++i) got.push_back(rng.random_interval((uint64_t(1) << 40) - 1));
    EXPECT_EQ(got, expected) << "seed " << seed;
  }
}

TEST(NumpyRandomState, ShuffleMatchesNumpy) {
  // a = np.arange(n, dtype=np.int32); np.random.RandomState(s).shuffle(a)
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 1), (std::vector<int32_t>{0}));
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 5), (std::vector<int32_t>{4, 0, 1, 2, 3}));
  EXPECT_EQ(shuffled_arange<int32_t>(1234, 10), (std::vector<int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  EXPECT_EQ(shuffled_arange<int32_t>(7, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(shuffled_arange<int32_t>(7, 5), (std::vector<int32_t>{0, 3, 2, 1, 4}));
  EXPECT_EQ(shuffled_arange<int32_t>(7, 10), (std::vector<int32_t>{8, 5, 0, 2, 1, 9, 7, 3, 6, 4}));
  // a = np.arange(100000, dtype=np.uint32); RandomState(s).shuffle(a);
  // list(a[:6]), int((a.astype(np.int64) * np.arange(100000)).sum())
  for (auto [seed, head, dot] : {std::tuple<uint32_t, std::vector<uint32_t>, int64_t>{
                                     1234, {13504, 72599, 42217, 97650, 99120, 13165}, 249809377481287},
                                 {7, {33909, 92307, 89107, 9538, 31008, 71305}, 250316905599413}}) {
    const auto a = shuffled_arange<uint32_t>(seed, 100000);
    EXPECT_EQ(std::vector<uint32_t>(a.begin(), a.begin() + 6), head);
    int64_t sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += int64_t(a[i]) * int64_t(i);
    EXPECT_EQ(sum, dot) << "seed " << seed;
  }
}

TEST(NumpyRandomState, ShufflesContinueOneStream) {
  // r = np.random.RandomState(1234); a = np.arange(10, dtype=np.int32); r.shuffle(a);
  // b = np.arange(6, dtype=np.uint32); r.shuffle(b)  →  b = [5, 0, 3, 4, 2, 1]
  NumpyRandomState rng(1234);
  std::vector<int32_t> a(10);
  std::iota(a.begin(), a.end(), 0);
  rng.shuffle(std::span<int32_t>(a));
  std::vector<uint32_t> b(6);
  std::iota(b.begin(), b.end(), 0u);
  rng.shuffle(std::span<uint32_t>(b));
  EXPECT_EQ(a, (std::vector<int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  EXPECT_EQ(b, (std::vector<uint32_t>{5, 0, 3, 4, 2, 1}));
}

// numpy seeds MT19937 with the reference init_genrand, as std::mt19937(seed) does: the same words,
// also past the first regeneration of the 624-word state.
TEST(NumpyRandomState, OutputsAreTheReferenceMt19937s) {
  for (uint32_t seed : {0u, 1u, 42u, 5489u, 4294967295u}) {
    NumpyRandomState ours(seed);
    std::mt19937 reference(seed);
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(ours.next_uint32(), reference()) << "seed " << seed << " draw " << i;
  }
  // next_uint64: two words, the first in the high half.
  NumpyRandomState wide(7), narrow(7);
  const uint64_t high = narrow.next_uint32(), low = narrow.next_uint32();
  EXPECT_EQ(wide.next_uint64(), high << 32 | low);
}

// random_interval(max) is in [0, max], takes every value there, and draws nothing for max 0;
// a shuffle of fewer than two elements draws nothing either.
TEST(NumpyRandomState, IntervalsStayInRangeAndZeroDrawsNothing) {
  NumpyRandomState rng(3);
  for (uint64_t max : {uint64_t{1}, uint64_t{5}, uint64_t{6}, uint64_t{1000}, (uint64_t{1} << 32) + 5}) {
    std::set<uint64_t> seen;
    for (int i = 0; i < 3000; ++i) {
      const uint64_t v = rng.random_interval(max);
      ASSERT_LE(v, max);
      seen.insert(v);
    }
    if (max <= 6) {
      EXPECT_EQ(seen.size(), max + 1) << "max " << max;
    }
  }
  NumpyRandomState a(11), b(11);
  EXPECT_EQ(a.random_interval(0), 0u);
  std::vector<int> none, one{5};
  a.shuffle(std::span<int>(none));
  a.shuffle(std::span<int>(one));
  EXPECT_EQ(one, std::vector<int>{5});
  EXPECT_EQ(a.next_uint32(), b.next_uint32()) << "nothing was drawn";
  // A max below 2^32 draws 32-bit words, one per try: the masked value of 2^32 - 1 is the word.
  NumpyRandomState c(11), d(11);
  EXPECT_EQ(c.random_interval(0xffffffffu), d.next_uint32());
  EXPECT_EQ(c.next_uint32(), d.next_uint32());
}

}  // namespace
}  // namespace pretrain::numpy_random_test
