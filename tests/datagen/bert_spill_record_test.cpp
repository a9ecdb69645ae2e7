// BERT instances as spill records: a record read in place gives the instance's row exactly as
// BertInstance::write_row writes it (tokens, mask, segments, predictions, NSP label, padding) and
// its flags; records are 4-byte aligned; a truncated or inconsistent record is an error naming
// the file and offset.
#include "datagen/shards/bert_spill_record.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"

namespace pretrain {
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
    ASSERT_EQ(bytes.size(), 4 + spill_record_bytes(8, p));
    EXPECT_EQ(bytes.size() % 4, 0u) << "4-byte aligned";
    const SpillRecord r(bytes.data() + 4, bytes.size() - 4, "bucket", 4);
    EXPECT_EQ(r.bytes, bytes.size() - 4);
    EXPECT_EQ(r.a_len, 4);
    EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.end()), inst.tokens);
    EXPECT_EQ(std::vector<int32_t>(r.labels.begin(), r.labels.end()), inst.masked_lm_labels);
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
  const size_t positions = 8 + 4 * 8 + 4 * 2;
  past[positions] = 8;  // a masked position at the length
  EXPECT_NE(error_of(past).find("masks past its tokens"), std::string::npos) << error_of(past);
  EXPECT_EQ(error_of(bytes), "") << "the intact record reads";
}

}  // namespace
}  // namespace pretrain
