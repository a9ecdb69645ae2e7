// packed_row_problem (formats/bert_hdf5_packed.cpp), shard-tool verify's check of a packed row:
// rows that keep every invariant pass, whatever their number of instances, and each broken
// invariant is named with the field, index and value.
#include <gtest/gtest.h>

#include <string>

#include "bert_hdf5_fixture.h"
#include "formats/bert_hdf5.h"

namespace pretrain::bert_hdf5_packed_test {
namespace {

using bert_hdf5_fixture::padded_packed;
using bert_hdf5_fixture::random_packed_record;
using bert_hdf5_fixture::two_instance_row;

// The problem of `r` (padded to its shard's widths) as row 0 of a batch.
std::string problem_of(const BertRecord& r, int64_t seq, int64_t max_pred, int64_t max_pack) {
  BertBatch b(1, seq, max_pred, max_pack);
  b.set(0, r);
  return packed_row_problem(b, 0);
}

::testing::AssertionResult names(const std::string& problem, const std::string& part) {
  return problem.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                                 : ::testing::AssertionFailure() << "'" << problem << "' lacks '" << part << "'";
}

// Each broken invariant of a packed row is named.
TEST(BertHdf5, PackedRowProblemsAreNamed) {
  auto problem = [](auto change) {
    BertRecord r = padded_packed(two_instance_row(), 8, 3, 3);
    change(r);
    return problem_of(r, 8, 3, 3);
  };
  EXPECT_EQ(problem([](BertRecord&) {}), "");
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[4] = 1; }), "sequence_ids[4] = 1, expected 2"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[3] = 3; }), "sequence_ids[3] = 3"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[7] = 2, r.input_mask[7] = 1; }), "after padding"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.input_mask[6] = 1; }), "input_mask[6] = 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.position_ids[4] = 2; }), "position_ids[4] = 2, expected 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.next_sentence_positions[1] = 2; }), "next_sentence_positions[1] = 2"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.packed_next_sentence_labels[2] = 0; }), "-1 (no instance)"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.packed_next_sentence_labels[1] = -1; }), "0 or 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.next_sentence_label = 0; }), "the first instance's 1"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.masked_lm_positions[1] = 3; }), "instance 2's [CLS]"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.masked_lm_positions[1] = 7; }), "is padding"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.masked_lm_positions = {4, 1, 0}; }), "ascending"));
  EXPECT_TRUE(names(problem([](BertRecord& r) { r.sequence_ids[0] = 0, r.input_mask[0] = 0; }), "starts with its first"));
}

// Rows of one instance, of max_pack instances filling every position, and random rows all pass;
// the check reads row i of the batch, not row 0.
TEST(PackedRowProblem, GoodRowsOfAnyShapePass) {
  const BertRecord one{{101, 5, 102}, {1, 1, 1}, {0, 0, 1}, {2}, {9}, 0, {0, 1, 2}, {1, 1, 1}, {0}, {0}};
  EXPECT_EQ(problem_of(padded_packed(one, 8, 2, 3), 8, 2, 3), "");
  const BertRecord full{{101, 5, 102, 101, 6, 102, 101, 102}, std::vector<int32_t>(8, 1), std::vector<int32_t>(8, 0),
                        {1, 4}, {7, 8}, 0, {0, 1, 2, 0, 1, 2, 0, 1}, {1, 1, 1, 2, 2, 2, 3, 3}, {0, 3, 6}, {0, 1, 1}};
  EXPECT_EQ(problem_of(full, 8, 2, 3), "");
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    const BertRecord r = padded_packed(random_packed_record(rng, 24, 6, 4), 24, 6, 4);
    EXPECT_EQ(problem_of(r, 24, 6, 4), "") << "row " << i;
  }
  BertBatch b(2, 8, 3, 3);
  BertRecord broken = padded_packed(two_instance_row(), 8, 3, 3);
  broken.position_ids[1] = 5;
  b.set(0, broken);
  b.set(1, padded_packed(two_instance_row(), 8, 3, 3));
  EXPECT_TRUE(names(packed_row_problem(b, 0), "position_ids[1] = 5, expected 1"));
  EXPECT_EQ(packed_row_problem(b, 1), "");
}

// What the first test does not reach: an instance slot past the last, predictions after the
// 0-padding, a row longer than max_pack instances.
TEST(PackedRowProblem, SlotsAndPredictionsPastTheInstances) {
  BertRecord r = padded_packed(two_instance_row(), 8, 3, 3);
  r.next_sentence_positions[2] = 6;
  EXPECT_TRUE(names(problem_of(r, 8, 3, 3), "next_sentence_positions[2] = 6 past the 2 instances, expected 0"));
  r = padded_packed(two_instance_row(), 8, 3, 3);
  r.masked_lm_positions = {1, 0, 4};
  EXPECT_TRUE(names(problem_of(r, 8, 3, 3), "masked_lm_positions[2] = 4 after 0-padding"));
  r = padded_packed(two_instance_row(), 8, 3, 1);  // two instances, one slot
  EXPECT_TRUE(names(problem_of(r, 8, 3, 1), "sequence_ids[3] = 2, expected 1, 2 (instances in order, at most 1) or 0"));
}

}  // namespace
}  // namespace pretrain::bert_hdf5_packed_test
