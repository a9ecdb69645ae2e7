// BERT instances as spill records: a record read in place gives the instance's row exactly as
// BertInstance::write_row writes it (tokens, mask, segments, predictions, NSP label, padding) and
// its flags; a packed row holds several at their offsets; records are 4-byte aligned; a truncated or inconsistent record is an error naming
// the file and offset.
#include "datagen/shards/bert_spill_record.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <string>

#include "common/error.h"

namespace pretrain::bert_spill_record_test {
namespace {

// [CLS] 10 11 [SEP] 12 13 14 [SEP] with `p` predictions at positions 1, 2, 4…
BertInstance instance(size_t p, bool random_next) {
  BertInstance inst;
  inst.tokens = {2, 10, 11, 3, 12, 13, 14, 3};
  inst.segment_ids = {0, 0, 0, 0, 1, 1, 1, 1};
  inst.is_random_next = random_next;
  inst.short_target = true;
  inst.first_of_document = !random_next;
  const int32_t at[] = {1, 2, 4, 5, 6};
  for (size_t k = 0; k < p; ++k) {
    inst.masked_lm_positions.push_back(at[k]);
    inst.masked_lm_labels.push_back(inst.tokens[size_t(at[k])]);
    inst.tokens[size_t(at[k])] = 4;  // [MASK]
  }
  return inst;
}

TEST(BertSpillRecord, ARecordGivesTheInstancesRowAndFlags) {
  for (size_t p : {size_t{0}, size_t{1}, size_t{2}, size_t{5}}) {
    const BertInstance inst = instance(p, p % 2 == 1);
    std::string bytes = "PAD!";  // records follow each other; this one starts at offset 4
    append_spill_record(inst, bytes);
    ASSERT_EQ(bytes.size(), 4 + spill_record_bytes(8, p, true)) << "ids below 65536 are stored narrow";
    EXPECT_EQ(bytes.size() % 4, 0u) << "4-byte aligned";
    const SpillRecord r(bytes.data() + 4, bytes.size() - 4, "bucket", 4);
    EXPECT_EQ(r.bytes, bytes.size() - 4);
    EXPECT_EQ(r.a_len, 4);
    EXPECT_EQ(r.tokens.to_vector(), inst.tokens);
    EXPECT_EQ(r.labels.to_vector(), inst.masked_lm_labels);
    EXPECT_EQ(bool(r.flags & 1), inst.is_random_next);
    EXPECT_EQ(bool(r.flags & 2), true) << "short target";
    EXPECT_EQ(bool(r.flags & 8), inst.first_of_document);

    BertBatch ours(2, 12, 6), theirs(2, 12, 6);
    r.write_row(ours, 1);
    inst.write_row(theirs, 1);
    EXPECT_EQ(ours.input_ids, theirs.input_ids) << p;
    EXPECT_EQ(ours.input_mask, theirs.input_mask);
    EXPECT_EQ(ours.segment_ids, theirs.segment_ids);
    EXPECT_EQ(ours.masked_lm_positions, theirs.masked_lm_positions);
    EXPECT_EQ(ours.masked_lm_ids, theirs.masked_lm_ids);
    EXPECT_EQ(ours.next_sentence_labels, theirs.next_sentence_labels);
  }
}

// Ids past 65535 (a vocabulary larger than BERT's) keep the record's ids int32; records of both
// widths follow each other in one bucket, and both give BertInstance::write_row's row.
TEST(BertSpillRecord, IdsPast65535KeepTheRecordWideAndBothWidthsMix) {
  BertInstance wide = instance(2, true), label_wide = instance(2, false), narrow = instance(1, false);
  wide.tokens[6] = 70000;
  label_wide.masked_lm_labels[1] = 65536;
  std::string bytes;
  for (const BertInstance* inst : {&wide, &narrow, &label_wide}) append_spill_record(*inst, bytes);
  EXPECT_EQ(bytes.size(), spill_record_bytes(8, 2, false) + spill_record_bytes(8, 1, true) + spill_record_bytes(8, 2, false));
  EXPECT_LT(spill_record_bytes(128, 20, true) * 10, spill_record_bytes(128, 20, false) * 6) << "narrow is about half";
  size_t at = 0;
  for (const BertInstance* inst : {&wide, &narrow, &label_wide}) {
    const SpillRecord r(bytes.data() + at, bytes.size() - at, "bucket", at);
    EXPECT_EQ(r.tokens.to_vector(), inst->tokens);
    EXPECT_EQ(r.labels.to_vector(), inst->masked_lm_labels);
    BertBatch ours(1, 12, 6), theirs(1, 12, 6);
    r.write_row(ours, 0);
    inst->write_row(theirs, 0);
    EXPECT_EQ(ours.input_ids, theirs.input_ids);
    EXPECT_EQ(ours.masked_lm_positions, theirs.masked_lm_positions);
    EXPECT_EQ(ours.masked_lm_ids, theirs.masked_lm_ids);
    at += r.bytes;
  }
  EXPECT_EQ(at, bytes.size());
}

// A packed row: each instance as write_row writes it, shifted to its offset (predictions too),
// the packed fields filled and padded, over whatever the row held before.
TEST(BertSpillRecord, APackedRowHoldsEachInstanceAtItsOffset) {
  const BertInstance first = instance(2, true), second = instance(1, false);
  std::string bytes;
  append_spill_record(first, bytes);
  const size_t at = bytes.size();
  append_spill_record(second, bytes);
  const SpillRecord records[] = {SpillRecord(bytes.data(), bytes.size(), "b", 0),
                                 SpillRecord(bytes.data() + at, bytes.size() - at, "b", at)};
  BertBatch batch(2, 20, 5, 3);
  std::fill(batch.input_ids.begin(), batch.input_ids.end(), 99);  // stale values must not survive
  std::fill(batch.sequence_ids.begin(), batch.sequence_ids.end(), int8_t{7});
  std::fill(batch.masked_lm_positions.begin(), batch.masked_lm_positions.end(), 9);
  SpillRecord::write_packed_row(records, batch, 1);
  const BertRecord row = batch.record(1);
  std::vector<int32_t> ids = first.tokens;
  ids.insert(ids.end(), second.tokens.begin(), second.tokens.end());
  ids.resize(20, 0);
  EXPECT_EQ(row.input_ids, ids);
  EXPECT_EQ(row.segment_ids, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(row.input_mask, (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(row.sequence_ids, (std::vector<int32_t>{1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0}));
  EXPECT_EQ(row.position_ids, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0}));
  EXPECT_EQ(row.masked_lm_positions, (std::vector<int32_t>{1, 2, 9, 0, 0}));
  EXPECT_EQ(row.masked_lm_ids, (std::vector<int32_t>{10, 11, 10, 0, 0}));
  EXPECT_EQ(row.next_sentence_positions, (std::vector<int32_t>{0, 8, 0}));
  EXPECT_EQ(row.packed_next_sentence_labels, (std::vector<int32_t>{1, 0, -1}));
  EXPECT_EQ(row.next_sentence_label, 1);
  EXPECT_EQ(packed_row_problem(batch, 1), "");
  // One instance alone is write_row's row in NVIDIA's six datasets.
  BertBatch alone(1, 20, 5, 3), plain(1, 20, 5);
  SpillRecord::write_packed_row(std::span(records, 1), alone, 0);
  records[0].write_row(plain, 0);
  EXPECT_EQ(alone.input_ids, plain.input_ids);
  EXPECT_EQ(alone.segment_ids, plain.segment_ids);
  EXPECT_EQ(alone.masked_lm_positions, plain.masked_lm_positions);
  EXPECT_EQ(alone.next_sentence_labels, plain.next_sentence_labels);
  BertBatch narrow(1, 12, 5, 3);  // 16 tokens do not fit 12
  EXPECT_THROW(SpillRecord::write_packed_row(records, narrow, 0), Error);
}

TEST(BertSpillRecord, ATruncatedOrInconsistentRecordNamesTheFileAndOffset) {
  std::string bytes;
  append_spill_record(instance(2, false), bytes);
  auto error_of = [&](const std::string& data) -> std::string {
    try {
      (void)SpillRecord(data.data(), data.size(), "spill/bucket-3.bin", 96);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  for (size_t cut : {size_t{0}, size_t{5}, bytes.size() - 1}) {
    const std::string what = error_of(bytes.substr(0, cut));
    EXPECT_NE(what.find("spill/bucket-3.bin"), std::string::npos) << what;
    EXPECT_NE(what.find("96"), std::string::npos) << what;
    EXPECT_NE(what.find("truncated"), std::string::npos) << what;
  }
  std::string past = bytes;
  const size_t positions = 8 + 2 * 8 + 2 * 2;  // narrow: 8 tokens and 2 labels of 2 bytes
  past[positions] = 8;  // a masked position at the length
  EXPECT_NE(error_of(past).find("masks past its tokens"), std::string::npos) << error_of(past);
  EXPECT_EQ(error_of(bytes), "") << "the intact record reads";
}

}  // namespace
}  // namespace pretrain::bert_spill_record_test
