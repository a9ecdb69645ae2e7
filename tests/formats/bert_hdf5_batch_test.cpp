// BertBatch (formats/bert_hdf5_batch.cpp): records as the datasets hold them. resize() gives
// zeros (a packed row's empty NSP slots −1) and refuses sizes that overflow; set() pads a short
// field and cuts a long one to its width, narrowing to the stored types; record() widens row i back.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "bert_hdf5_fixture.h"
#include "bert_record_expect.h"
#include "common/error.h"
#include "formats/bert_hdf5.h"

namespace pretrain::bert_hdf5_batch_test {
namespace {

using bert_hdf5_fixture::padded;
using bert_hdf5_fixture::padded_packed;
using bert_hdf5_fixture::random_packed_record;
using bert_hdf5_fixture::random_record;
using bert_hdf5_fixture::two_instance_row;

TEST(BertBatch, ResizeGivesZerosAndEmptySlotsOfMinusOne) {
  BertBatch plain(3, 5, 2);
  EXPECT_EQ(plain.size, 3);
  EXPECT_EQ(plain.seq_len, 5);
  EXPECT_EQ(plain.max_predictions, 2);
  EXPECT_EQ(plain.max_pack, 0);
  EXPECT_EQ(plain.input_ids, std::vector<int32_t>(15, 0));
  EXPECT_EQ(plain.input_mask, std::vector<int8_t>(15, 0));
  EXPECT_EQ(plain.segment_ids, std::vector<int8_t>(15, 0));
  EXPECT_EQ(plain.masked_lm_positions, std::vector<int32_t>(6, 0));
  EXPECT_EQ(plain.masked_lm_ids, std::vector<int32_t>(6, 0));
  EXPECT_EQ(plain.next_sentence_labels, std::vector<int8_t>(3, 0));
  EXPECT_TRUE(plain.position_ids.empty() && plain.sequence_ids.empty() && plain.next_sentence_positions.empty() &&
              plain.packed_next_sentence_labels.empty());

  BertBatch packed(2, 4, 1, 3);
  EXPECT_EQ(packed.position_ids, std::vector<int32_t>(8, 0));
  EXPECT_EQ(packed.sequence_ids, std::vector<int8_t>(8, 0));
  EXPECT_EQ(packed.next_sentence_positions, std::vector<int32_t>(6, 0));
  EXPECT_EQ(packed.packed_next_sentence_labels, std::vector<int8_t>(6, -1));
  // Growing keeps the rows there and gives the new ones the same values; shrinking to 0 empties.
  packed.input_ids[7] = 42;
  packed.packed_next_sentence_labels[5] = 1;
  packed.resize(3, 4, 1, 3);
  EXPECT_EQ(packed.input_ids[7], 42);
  EXPECT_EQ(packed.packed_next_sentence_labels[5], 1);
  EXPECT_EQ(packed.packed_next_sentence_labels[8], -1);
  packed.resize(0, 4, 1, 0);
  EXPECT_EQ(packed.size, 0);
  EXPECT_TRUE(packed.input_ids.empty() && packed.packed_next_sentence_labels.empty() && packed.position_ids.empty());
}

TEST(BertBatch, SizesThatOverflowOrAreNegativeAreErrors) {
  const int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  BertBatch b;
  try {
    b.resize(huge, 4, 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cat("BertBatch of ", huge, " x 4 is too large")), std::string::npos) << e.what();
  }
  EXPECT_THROW(b.resize(-1, 4, 1), Error);
  EXPECT_THROW(b.resize(2, -4, 1), Error);
  EXPECT_THROW(b.resize(2, 4, 1, -1), Error);
}

// A refused resize leaves the batch as it was: its sizes still describe its arrays.
TEST(BertBatch, ARefusedResizeChangesNothing) {
  BertBatch b;
  b.resize(2, 4, 3, 2);
  EXPECT_THROW(b.resize(2, 4, 3, -1), Error);
  EXPECT_THROW(b.resize(5, 6, -3), Error);
  EXPECT_EQ(b.size, 2);
  EXPECT_EQ(b.seq_len, 4);
  EXPECT_EQ(b.max_predictions, 3);
  EXPECT_EQ(b.max_pack, 2);
  EXPECT_EQ(b.input_ids.size(), 8u);
  EXPECT_EQ(b.masked_lm_ids.size(), 6u);
  EXPECT_EQ(b.next_sentence_positions.size(), 4u);
}

// set() then record() gives the record back padded, for every row of plain and packed batches,
// and leaves the other rows as they were.
TEST(BertBatch, SetThenRecordIsTheRecordPadded) {
  std::mt19937 rng(4);
  BertBatch plain(6, 16, 4);
  std::vector<BertRecord> rows;
  for (int64_t i = 0; i < plain.size; ++i) {
    rows.push_back(random_record(rng, 16, 4));
    plain.set(i, rows.back());
  }
  for (int64_t i = 0; i < plain.size; ++i) testing::expect_same_record(plain.record(i), padded(rows[size_t(i)], 16, 4), i);

  BertBatch packed(5, 24, 6, 3);
  rows.clear();
  for (int64_t i = 0; i < packed.size; ++i) {
    rows.push_back(random_packed_record(rng, 24, 6, 3));
    packed.set(i, rows.back());
  }
  for (int64_t i = 0; i < packed.size; ++i)
    testing::expect_same_record(packed.record(i), padded_packed(rows[size_t(i)], 24, 6, 3), i);
  // A row set again with a shorter record is padded anew, not left with the old tail.
  packed.set(2, two_instance_row());
  testing::expect_same_record(packed.record(2), padded_packed(two_instance_row(), 24, 6, 3), 2);
  testing::expect_same_record(packed.record(3), padded_packed(rows[3], 24, 6, 3), 3);
}

// set() does no range checks (the writer does): fields longer than their width are cut, values are
// narrowed to the stored type as a static_cast does.
TEST(BertBatch, SetCutsLongFieldsAndNarrowsValues) {
  BertBatch b(1, 3, 1);
  BertRecord r{{1, 2, 3, 4}, {1, 1, 1, 1}, {0, 300, -129, 1}, {2, 1}, {7, 8}, 257};
  b.set(0, r);
  EXPECT_EQ(b.input_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(b.segment_ids, (std::vector<int8_t>{0, static_cast<int8_t>(300), static_cast<int8_t>(-129)}));
  EXPECT_EQ(b.masked_lm_positions, std::vector<int32_t>{2});
  EXPECT_EQ(b.masked_lm_ids, std::vector<int32_t>{7});
  EXPECT_EQ(b.next_sentence_labels[0], 1);  // 257 as int8
  const BertRecord back = b.record(0);
  EXPECT_EQ(back.segment_ids, (std::vector<int32_t>{0, 44, 127}));
  EXPECT_TRUE(back.position_ids.empty()) << "an unpacked row has no packing fields";
}

}  // namespace
}  // namespace pretrain::bert_hdf5_batch_test
