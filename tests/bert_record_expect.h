// Field-by-field comparison of two BERT records, for the tests that check records against a
// reference (the format's round trip, Google's algorithm against NVIDIA's golden files).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>

#include "formats/bert_hdf5.h"

namespace pretrain::testing {

inline void expect_same_record(const BertRecord& got, const BertRecord& want, int64_t record) {
  EXPECT_EQ(got.input_ids, want.input_ids) << "record " << record;
  EXPECT_EQ(got.input_mask, want.input_mask) << "record " << record;
  EXPECT_EQ(got.segment_ids, want.segment_ids) << "record " << record;
  EXPECT_EQ(got.masked_lm_positions, want.masked_lm_positions) << "record " << record;
  EXPECT_EQ(got.masked_lm_ids, want.masked_lm_ids) << "record " << record;
  EXPECT_EQ(got.next_sentence_label, want.next_sentence_label) << "record " << record;
  EXPECT_EQ(got.position_ids, want.position_ids) << "record " << record;
  EXPECT_EQ(got.sequence_ids, want.sequence_ids) << "record " << record;
  EXPECT_EQ(got.next_sentence_positions, want.next_sentence_positions) << "record " << record;
  EXPECT_EQ(got.packed_next_sentence_labels, want.packed_next_sentence_labels) << "record " << record;
}

}  // namespace pretrain::testing
