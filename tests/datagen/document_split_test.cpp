// The train/valid split of the token store's documents: every document on exactly one side, the
// valid share near the fraction, a document's side its own draw (the same in a smaller corpus and
// in GPT's shuffled order), the valid shard count, and the refusal of a fraction outside [0, 1).
#include "datagen/shards/document_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

#include "common/error.h"

namespace pretrain::document_split_test {
namespace {

TEST(DocumentSplit, NoValidFractionKeepsEveryDocumentInStoreOrder) {
  const DocumentSplit s = split_documents(100, {.seed = 7});
  std::vector<uint32_t> all(100);
  std::iota(all.begin(), all.end(), 0u);
  EXPECT_EQ(s.train, all);
  EXPECT_TRUE(s.valid.empty());
}

TEST(DocumentSplit, EveryDocumentIsOnOneSideAndTheValidShareIsNearTheFraction) {
  const DocumentSplit s = split_documents(2000, {.seed = 7, .valid_fraction = 0.25});
  EXPECT_EQ(s.train.size() + s.valid.size(), 2000u);
  EXPECT_GT(s.valid.size(), 400u);
  EXPECT_LT(s.valid.size(), 600u);
  std::set<uint32_t> seen(s.train.begin(), s.train.end());
  for (uint32_t d : s.valid) EXPECT_TRUE(seen.insert(d).second) << d << " on both sides";
  EXPECT_EQ(seen.size(), 2000u);
  EXPECT_TRUE(std::is_sorted(s.train.begin(), s.train.end()));
  EXPECT_TRUE(std::is_sorted(s.valid.begin(), s.valid.end()));
  // Another seed draws other documents.
  EXPECT_NE(split_documents(2000, {.seed = 8, .valid_fraction = 0.25}).valid, s.valid);
}

TEST(DocumentSplit, ADocumentsSideDoesNotDependOnTheOthersOrOnTheOrder) {
  const DocumentSplit big = split_documents(1000, {.seed = 3, .valid_fraction = 0.3});
  const DocumentSplit small = split_documents(400, {.seed = 3, .valid_fraction = 0.3});
  std::vector<uint32_t> prefix;
  for (uint32_t d : big.valid)
    if (d < 400) prefix.push_back(d);
  EXPECT_EQ(small.valid, prefix);

  // GPT: one seeded order of all documents, which both sides keep; the sides are the same sets.
  const DocumentSplit shuffled = split_documents(1000, {.seed = 3, .valid_fraction = 0.3, .shuffle = true});
  EXPECT_NE(shuffled.train, big.train) << "not shuffled";
  EXPECT_EQ(std::set<uint32_t>(shuffled.valid.begin(), shuffled.valid.end()),
            std::set<uint32_t>(big.valid.begin(), big.valid.end()));
  EXPECT_EQ(std::set<uint32_t>(shuffled.train.begin(), shuffled.train.end()),
            std::set<uint32_t>(big.train.begin(), big.train.end()));
  EXPECT_EQ(split_documents(1000, {.seed = 3, .valid_fraction = 0.3, .shuffle = true}).train, shuffled.train);
}

TEST(DocumentSplit, ValidShardsAreTheFractionRoundedUpAndAtLeastOne) {
  EXPECT_EQ(valid_shard_count(3, 0.3), 1);
  EXPECT_EQ(valid_shard_count(10, 0.25), 3);
  EXPECT_EQ(valid_shard_count(1, 0.01), 1);
  EXPECT_EQ(valid_shard_count(100, 0.05), 5);
}

TEST(DocumentSplit, AFractionOutsideZeroToOneIsRefused) {
  for (double f : {1.0, -0.1, 2.0}) {
    try {
      split_documents(10, {.valid_fraction = f});
      ADD_FAILURE() << "no error for valid_fraction " << f;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--valid-fraction"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pretrain::document_split_test
