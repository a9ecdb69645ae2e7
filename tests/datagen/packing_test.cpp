#include "datagen/shards/packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "common/error.h"

namespace pretrain::packing_test {
namespace {

// First-fit decreasing as plainly as it can be written: every opened pack scanned in order.
std::vector<std::vector<uint32_t>> reference_packs(const std::vector<PackItem>& items, const PackLimits& l) {
  std::vector<uint32_t> order(items.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return items[a].tokens > items[b].tokens; });
  std::vector<std::vector<uint32_t>> packs;
  std::vector<uint32_t> tokens, predictions;
  for (uint32_t i : order) {
    size_t p = 0;
    while (p < packs.size() && !(packs[p].size() < l.max_pack && tokens[p] + items[i].tokens <= l.seq_len &&
                                 predictions[p] + items[i].predictions <= l.max_predictions))
      ++p;
    if (p == packs.size()) packs.emplace_back(), tokens.push_back(0), predictions.push_back(0);
    packs[p].push_back(i);
    tokens[p] += items[i].tokens;
    predictions[p] += items[i].predictions;
  }
  return packs;
}

std::vector<std::vector<uint32_t>> as_lists(const Packs& packs) {
  std::vector<std::vector<uint32_t>> lists;
  for (size_t p = 0; p < packs.size(); ++p) lists.emplace_back(packs[p].begin(), packs[p].end());
  return lists;
}

// Lengths like BERT's (many full, many short), predictions ≈ 15% of them, sometimes more, so
// that the predictions budget binds too.
std::vector<PackItem> random_items(std::mt19937& rng, size_t n, const PackLimits& l) {
  std::vector<PackItem> items(n);
  for (auto& it : items) {
    it.tokens = rng() % 3 == 0 ? l.seq_len - uint32_t(rng() % 3) : 1 + uint32_t(rng() % l.seq_len);
    it.predictions = std::min<uint32_t>(l.max_predictions, it.tokens * (10 + uint32_t(rng() % 15)) / 100);
  }
  return items;
}

TEST(Packing, SameAsTheStraightforwardFirstFitDecreasing) {
  std::mt19937 rng(3);
  for (int round = 0; round < 200; ++round) {
    const PackLimits limits{.seq_len = 8 + uint32_t(rng() % 120), .max_predictions = 1 + uint32_t(rng() % 20),
                            .max_pack = 1 + uint32_t(rng() % 4)};
    const auto items = random_items(rng, rng() % 400, limits);
    ASSERT_EQ(as_lists(pack_first_fit_decreasing(items, limits)), reference_packs(items, limits))
        << "round " << round << ": seq_len " << limits.seq_len << ", max_predictions " << limits.max_predictions
        << ", max_pack " << limits.max_pack;
  }
}

TEST(Packing, EveryInstanceOnceWithinTheBudgetsLongestFirst) {
  std::mt19937 rng(8);
  const PackLimits limits{.seq_len = 128, .max_predictions = 20, .max_pack = 3};
  const auto items = random_items(rng, 5000, limits);
  const Packs packs = pack_first_fit_decreasing(items, limits);
  std::vector<int> seen(items.size(), 0);
  uint64_t tokens = 0;
  for (size_t p = 0; p < packs.size(); ++p) {
    uint32_t t = 0, predictions = 0;
    ASSERT_FALSE(packs[p].empty());
    ASSERT_LE(packs[p].size(), limits.max_pack);
    for (size_t k = 0; k < packs[p].size(); ++k) {
      const uint32_t i = packs[p][k];
      ++seen[i];
      t += items[i].tokens, predictions += items[i].predictions;
      if (k > 0) {
        EXPECT_GE(items[packs[p][k - 1]].tokens, items[i].tokens);
      }
    }
    EXPECT_LE(t, limits.seq_len);
    EXPECT_LE(predictions, limits.max_predictions);
    tokens += t;
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  EXPECT_LT(packs.size(), items.size());  // it packs at all
  EXPECT_GT(double(tokens) / double(packs.size() * limits.seq_len), 0.9);
  EXPECT_EQ(as_lists(pack_first_fit_decreasing(items, limits)), as_lists(packs));  // deterministic
}

TEST(Packing, EdgeCases) {
  const PackLimits limits{.seq_len = 10, .max_predictions = 2, .max_pack = 2};
  EXPECT_EQ(pack_first_fit_decreasing({}, limits).size(), 0u);
  // Equal lengths keep their order; a full pack (max_pack) is passed over.
  const std::vector<PackItem> items = {{4, 1}, {4, 1}, {1, 0}, {2, 2}, {1, 0}};
  EXPECT_EQ(as_lists(pack_first_fit_decreasing(items, limits)),
            (std::vector<std::vector<uint32_t>>{{0, 1}, {3, 2}, {4}}));
  // A pack short of prediction room is passed over, and filled later by what fits it.
  const std::vector<PackItem> predictions = {{4, 1}, {2, 2}, {1, 1}};
  EXPECT_EQ(as_lists(pack_first_fit_decreasing(predictions, limits)), (std::vector<std::vector<uint32_t>>{{0, 2}, {1}}));
  EXPECT_THROW(pack_first_fit_decreasing(std::vector<PackItem>{{11, 0}}, limits), Error);
  EXPECT_THROW(pack_first_fit_decreasing(std::vector<PackItem>{{3, 3}}, limits), Error);
  EXPECT_THROW(pack_first_fit_decreasing(std::vector<PackItem>{{0, 0}}, limits), Error);
}

}  // namespace
}  // namespace pretrain::packing_test
