// Union-find: a set's root is its smallest element (the keep rule: the first document in input order),
// whatever order the pairs come in.
#include "datagen/dedup/union_find.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace pretrain::union_find_test {
namespace {

TEST(UnionFind, RootIsTheSmallestIndex) {
  UnionFind u(10);
  EXPECT_TRUE(u.unite(7, 3));
  EXPECT_TRUE(u.unite(9, 7));
  EXPECT_FALSE(u.unite(3, 9));
  EXPECT_TRUE(u.unite(5, 9));
  EXPECT_EQ(u.find(9), 3u);
  EXPECT_EQ(u.find(5), 3u);
  EXPECT_EQ(u.find(4), 4u);
  std::vector<uint64_t> roots = u.roots();
  EXPECT_EQ(roots, (std::vector<uint64_t>{0, 1, 2, 3, 4, 3, 6, 3, 8, 3}));
}

TEST(UnionFind, OrderOfPairsDoesNotMatter) {
  std::mt19937_64 rng(5);
  const uint64_t n = 2000;
  std::vector<std::pair<uint64_t, uint64_t>> pairs(1500);
  for (auto& p : pairs) p = {rng() % n, rng() % n};
  UnionFind first(n);
  for (auto [x, y] : pairs) first.unite(x, y);
  std::vector<uint64_t> expected = first.roots();
  for (int round = 0; round < 3; ++round) {
    std::shuffle(pairs.begin(), pairs.end(), rng);
    UnionFind u(n);
    for (auto [x, y] : pairs) rng() % 2 ? u.unite(x, y) : u.unite(y, x);
    EXPECT_EQ(u.roots(), expected);
  }
  for (uint64_t x = 0; x < n; ++x) EXPECT_LE(expected[x], x);
}

TEST(UnionFind, OutOfRangeThrows) {
  UnionFind u(3);
  EXPECT_ANY_THROW(u.find(3));
}

}  // namespace
}  // namespace pretrain::union_find_test
