// bert_padding.h: the tokens computed unbinned and binned, and the rows first-fit decreasing packs
// into, on hand-counted cases and against the reference below (instances placed one at a time, as
// scripts/bench/padding.py places them) on random length counts.
#include "formats/bert_padding.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/error.h"

namespace pretrain::bert_padding_test {
namespace {

// First-fit decreasing one instance at a time: longest first, each into the lowest-numbered row
// with room for it and fewer than max_pack instances (a row with no room left is closed), else
// into a new row.
uint64_t reference_rows(const std::vector<uint64_t>& counts, int64_t seq_len, int64_t max_pack) {
  struct Row {
    int64_t room, held;
  };
  std::vector<Row> rows;
  for (int64_t n = int64_t(counts.size()) - 1; n >= 0; --n)
    for (uint64_t c = 0; c < counts[size_t(n)]; ++c) {
      Row* into = nullptr;
      for (Row& r : rows)
        if (r.held < max_pack && r.room > 0 && r.room >= n) {
          into = &r;
          break;
        }
      if (!into) into = &rows.emplace_back(Row{seq_len, 0});
      into->room -= n;
      ++into->held;
    }
  return rows.size();
}

TEST(BertPadding, UnbinnedPadsEveryInstanceToSeqLen) {
  // 2 instances of 3 tokens, 1 of 8: 3 · 8.
  EXPECT_EQ(unbinned_tokens(std::vector<uint64_t>{0, 0, 0, 2, 0, 0, 0, 0, 1}, 8), 24u);
  EXPECT_EQ(unbinned_tokens(std::vector<uint64_t>{}, 8), 0u);
}

TEST(BertPadding, BinnedPadsToTheBinsUpperEdge) {
  // seq 8, bins of 4: lengths 1..4 → 4, 5..8 → 8. Instances 3, 3, 4, 5, 8: 4 + 4 + 4 + 8 + 8.
  const std::vector<uint64_t> counts = {0, 0, 0, 2, 1, 1, 0, 0, 1};
  EXPECT_EQ(binned_tokens(counts, 8, 4), 28u);
  // Bins of 3 do not divide 8: the last bin is cut at seq_len (3, 3, 6, 6, 8).
  EXPECT_EQ(binned_tokens(counts, 8, 3), 26u);
  EXPECT_EQ(binned_tokens(counts, 8, 8), unbinned_tokens(counts, 8));
  EXPECT_EQ(binned_tokens(counts, 8, 1), 3u + 3 + 4 + 5 + 8);  // no padding at all
  EXPECT_EQ(binned_tokens(std::vector<uint64_t>{5}, 8, 4), 0u);  // length 0: nothing, as padding.py
  EXPECT_THROW(binned_tokens(counts, 8, 0), UsageError);
  EXPECT_THROW(binned_tokens(counts, 8, 9), UsageError);
}

TEST(BertPadding, PackedRowsByHand) {
  // seq 10, at most 3 a row. Lengths 7, 6, 4, 3, 3, 2, 2: 7+3 | 6+4 | 3+2+2 → 3 rows.
  std::vector<uint64_t> counts(11, 0);
  counts[7] = 1, counts[6] = 1, counts[4] = 1, counts[3] = 2, counts[2] = 2;
  EXPECT_EQ(packed_rows(counts, 10, 3), 3u);
  // At most 1 a row: a row per instance.
  EXPECT_EQ(packed_rows(counts, 10, 1), 7u);
  // At most 2: 7+3 | 6+4 | 3+2 | 2.
  EXPECT_EQ(packed_rows(counts, 10, 2), 4u);
  // Nine of 1 token, three a row → 3 rows; ten of 10 tokens → 10 rows.
  EXPECT_EQ(packed_rows(std::vector<uint64_t>{0, 9}, 10, 3), 3u);
  std::vector<uint64_t> full(11, 0);
  full[10] = 10;
  EXPECT_EQ(packed_rows(full, 10, 3), 10u);
  EXPECT_EQ(packed_rows(std::vector<uint64_t>{}, 10, 3), 0u);
}

TEST(BertPadding, PackedRowsLeaveTheFirstRowWithRoomForEachLength) {
  // seq 10: 6, 6, 5, then 4, 4, 4, 4: the 4s go to rows 0 and 1 (room 4 each), then row 2
  // (room 5), then a new row. A run of alike rows is split by the first that fills.
  std::vector<uint64_t> counts(11, 0);
  counts[6] = 2, counts[5] = 1, counts[4] = 4;
  EXPECT_EQ(packed_rows(counts, 10, 3), 4u);
  EXPECT_EQ(reference_rows(counts, 10, 3), 4u);
}

TEST(BertPadding, PackedRowsAgreeWithPlacingOneAtATime) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t seq_len = std::uniform_int_distribution<int64_t>(1, 64)(rng);
    const int64_t max_pack = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    const int64_t shortest = std::uniform_int_distribution<int64_t>(0, seq_len)(rng);
    std::vector<uint64_t> counts(size_t(seq_len) + 1, 0);
    const int kinds = std::uniform_int_distribution<int>(1, 8)(rng);
    for (int k = 0; k < kinds; ++k)
      counts[size_t(std::uniform_int_distribution<int64_t>(shortest, seq_len)(rng))] +=
          std::uniform_int_distribution<uint64_t>(1, 40)(rng);
    ASSERT_EQ(packed_rows(counts, seq_len, max_pack), reference_rows(counts, seq_len, max_pack))
        << "trial " << trial << ", seq_len " << seq_len << ", max_pack " << max_pack;
  }
}

TEST(BertPadding, RefusesLengthsPastSeqLenAndNoInstancesPerRow) {
  EXPECT_THROW(packed_rows(std::vector<uint64_t>{0, 0, 0, 1}, 2, 3), UsageError);
  EXPECT_THROW(packed_rows(std::vector<uint64_t>{0, 1}, 2, 0), UsageError);
  EXPECT_THROW(unbinned_tokens(std::vector<uint64_t>{0, 1}, 0), UsageError);
  EXPECT_NO_THROW(packed_rows(std::vector<uint64_t>{0, 0, 1, 0, 0}, 2, 3));  // empty counts past seq_len
}

}  // namespace
}  // namespace pretrain::bert_padding_test
