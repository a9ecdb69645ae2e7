// One host ring slot (loader/slot.cpp): SlotLayout's arrays (64-byte aligned, uint16 tokens when the
// vocabulary fits, a shorter bin's batch inside the same slot) and the sizes it refuses; HostRows,
// the one place sample fields are narrowed, with every value that does not fit refused with what
// it is and what was expected.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "formats/megatron.h"
#include "loader/source.h"
#include "test_util.h"

namespace pretrain::slot_test {
namespace {

// The message of the Error f() throws ("(no error)" when none).
template <typename F>
std::string error_of(F&& f) {
  return testing::error_message(std::forward<F>(f));
}

TEST(SlotLayout, ArraysAreAlignedAndTokensNarrowWhenTheVocabularyFits) {
  const SlotLayout bert = SlotLayout::make(ModelKind::bert, 3, 10, 4, 30522, true);
  EXPECT_EQ(bert.token_dtype, TensorDType::u16);
  EXPECT_EQ(bert.seq_len, 10);
  EXPECT_EQ(bert.nsp_slots(), 1);
  EXPECT_EQ(bert.token_row(), 10);
  // (offset, bytes) in layout order: ids (uint16), segments, mask, positions (uint16), masked ids, NSP.
  const std::vector<std::pair<size_t, size_t>> arrays = {
      {bert.input_ids, 3 * 10 * 2}, {bert.segment_ids, 3 * 10}, {bert.input_mask, 3 * 10},
      {bert.masked_lm_positions, 3 * 4 * 2}, {bert.masked_lm_ids, 3 * 4 * 2}, {bert.next_sentence_labels, 3}};
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ(arrays[i].first % 64, 0u) << i;
    EXPECT_LE(arrays[i].first + arrays[i].second, i + 1 < arrays.size() ? arrays[i + 1].first : bert.bytes) << i;
  }
  // Ids past uint16, or narrowing turned off: int32 tokens, a larger slot.
  const SlotLayout wide = SlotLayout::make(ModelKind::bert, 3, 10, 4, 65537, true);
  EXPECT_EQ(wide.token_dtype, TensorDType::i32);
  EXPECT_GT(wide.bytes, bert.bytes);
  EXPECT_EQ(SlotLayout::make(ModelKind::bert, 3, 10, 4, 65536, true).token_dtype, TensorDType::u16);
  EXPECT_EQ(SlotLayout::make(ModelKind::bert, 3, 10, 4, 30522, false).token_dtype, TensorDType::i32);
  EXPECT_EQ(SlotLayout::make(ModelKind::bert, 3, 10, 4, 0, true).token_dtype, TensorDType::i32) << "vocabulary unknown";
  // GPT: one row of seq_len + 1 tokens; no BERT arrays. Packed BERT: max_pack NSP slots per row.
  const SlotLayout gpt = SlotLayout::make(ModelKind::gpt, 2, 8, 5, 50257, true);
  EXPECT_EQ(gpt.token_row(), 9);
  EXPECT_EQ(gpt.max_predictions, 0);
  EXPECT_GE(gpt.bytes, size_t(2 * 9 * 2));
  const SlotLayout packed = SlotLayout::make(ModelKind::bert, 2, 8, 2, 100, true, 3);
  EXPECT_EQ(packed.nsp_slots(), 3);
  EXPECT_GT(packed.next_sentence_positions, packed.sequence_ids);
  EXPECT_EQ(packed.next_sentence_positions % 64, 0u);
}

// A binned source's shorter bins fill the same slot at their own length, with as many predictions.
TEST(SlotLayout, AShorterBatchFitsInsideTheSlot) {
  const SlotLayout full = SlotLayout::make(ModelKind::bert, 4, 24, 10, 30522, true);
  const SlotLayout short8 = full.shorter(8);
  EXPECT_EQ(short8.seq_len, 8);
  EXPECT_EQ(short8.max_predictions, 10) << "NVIDIA's layout keeps max_predictions in every bin";
  EXPECT_LE(short8.bytes, full.bytes);
  EXPECT_EQ(full.shorter(24).bytes, full.bytes);
  EXPECT_NE(error_of([&] { full.shorter(25); }).find("a batch length of 25 does not fit slots of length 24"), std::string::npos);
  EXPECT_THROW(full.shorter(0), UsageError);
}

TEST(SlotLayout, ImpossibleSizesAreUsageErrors) {
  struct Case {
    ModelKind kind;
    int64_t batch, seq, preds, pack;
    std::string expected;
  };
  const Case cases[] = {
      {ModelKind::bert, 0, 8, 2, 0, "batch size must be positive, not 0"},
      {ModelKind::bert, 2, -1, 2, 0, "sequence length must be positive, not -1"},
      {ModelKind::bert, 2, 8, 9, 0, "max_predictions 9 must be in [0, seq_len]"},
      {ModelKind::bert, 2, 8, -1, 0, "max_predictions -1"},
      {ModelKind::bert, 2, 65536, 2, 0, "BERT seq_len 65536 is over 65535"},
      {ModelKind::bert, 2, 8, 2, 128, "max_pack 128 must be in [0, 127]"},
      {ModelKind::gpt, 2, 8, 0, 2, "max_pack 2 must be in [0, 127] (BERT only)"},
  };
  for (const Case& c : cases) {
    try {
      SlotLayout::make(c.kind, c.batch, c.seq, c.preds, 100, true, c.pack);
      ADD_FAILURE() << "no error; expected " << c.expected;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
  }
}

// A BERT row as the slot holds it: ids narrowed, fields copied, predictions past the shard's zero.
TEST(HostRows, PutBertStoresTheRowAndPadsThePredictions) {
  const SlotLayout slot = SlotLayout::make(ModelKind::bert, 2, 4, 3, 1000, true);
  std::vector<uint8_t> bytes(slot.bytes, 0xEE);
  const HostRows rows(slot, bytes.data());
  const int32_t ids[4] = {101, 999, 7, 102}, pos[2] = {1, 2}, lab[2] = {5, 6};
  const int8_t seg[4] = {0, 0, 1, 1}, mask[4] = {1, 1, 1, 0};
  rows.put_bert(1, ids, seg, mask, pos, lab, 2, 1);  // a shard of 2 predictions in a slot of 3
  const uint16_t* stored_ids = rows.array<uint16_t>(slot.input_ids) + 4;
  EXPECT_EQ(std::vector<uint16_t>(stored_ids, stored_ids + 4), (std::vector<uint16_t>{101, 999, 7, 102}));
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + long(slot.segment_ids) + 4, bytes.begin() + long(slot.segment_ids) + 8),
            (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin() + long(slot.input_mask) + 4, bytes.begin() + long(slot.input_mask) + 8),
            (std::vector<uint8_t>{1, 1, 1, 0}));
  const uint16_t* stored_pos = rows.array<uint16_t>(slot.masked_lm_positions) + 3;
  const uint16_t* stored_lab = rows.array<uint16_t>(slot.masked_lm_ids) + 3;
  EXPECT_EQ(std::vector<uint16_t>(stored_pos, stored_pos + 3), (std::vector<uint16_t>{1, 2, 0}));
  EXPECT_EQ(std::vector<uint16_t>(stored_lab, stored_lab + 3), (std::vector<uint16_t>{5, 6, 0}));
  EXPECT_EQ(bytes[slot.next_sentence_labels + 1], 1);
  EXPECT_EQ(bytes[slot.input_mask], 0xEE) << "row 0 untouched";
}

// Each value that does not fit its slot: an Error saying what it is and what was expected (the
// source adds the file and record).
TEST(HostRows, ValuesThatDoNotFitAreRefusedSayingWhy) {
  const SlotLayout slot = SlotLayout::make(ModelKind::bert, 1, 4, 2, 1000, true);
  std::vector<uint8_t> bytes(slot.bytes);
  const HostRows rows(slot, bytes.data());
  struct Row {
    int32_t ids[4] = {101, 5, 6, 102};
    int8_t seg[4] = {0, 0, 1, 1}, mask[4] = {1, 1, 1, 1};
    int32_t pos[2] = {1, 2}, lab[2] = {5, 6};
    int64_t predictions = 2;
    int8_t nsp = 0;
  };
  auto put = [&](const Row& r) {
    return error_of([&] { rows.put_bert(0, r.ids, r.seg, r.mask, r.pos, r.lab, r.predictions, r.nsp); });
  };
  EXPECT_EQ(put(Row{}), "(no error)");
  const std::pair<void (*)(Row&), std::string> cases[] = {
      {[](Row& r) { r.ids[1] = 1000; }, "token id 1000: expected an id below the vocabulary size 1000"},
      {[](Row& r) { r.ids[2] = -3; }, "token id -3"},
      {[](Row& r) { r.lab[1] = 5000; }, "token id 5000"},
      {[](Row& r) { r.seg[0] = -1; }, "segment id -1: expected 0 or more"},
      {[](Row& r) { r.mask[3] = 2; }, "input_mask value 2: expected 0 or 1"},
      {[](Row& r) { r.pos[0] = 4; }, "masked_lm_position 4: expected a position in [0, 4)"},
      {[](Row& r) { r.nsp = -1; }, "next_sentence_label -1: expected 0 or 1"},
      {[](Row& r) { r.predictions = 3; }, "internal: 3 predictions for a slot of 2"},
  };
  for (const auto& [change, expected] : cases) {
    Row r;
    change(r);
    const std::string message = put(r);
    EXPECT_NE(message.find(expected), std::string::npos) << message << " lacks " << expected;
  }
}

// GPT tokens at a column of a row, from every Megatron dtype, checked against the vocabulary (or
// against uint16 / int32 when it is unknown) and the row's end.
TEST(HostRows, PutTokensChecksIdsAndTheRowsEnd) {
  const SlotLayout slot = SlotLayout::make(ModelKind::gpt, 2, 4, 0, 300, true);
  std::vector<uint8_t> bytes(slot.bytes);
  const HostRows rows(slot, bytes.data());
  const uint8_t u8[2] = {1, 255};
  const int16_t i16[2] = {299, 0};
  const int64_t i64[1] = {42};
  rows.put_tokens(1, 0, TokenSpan{u8, 2, MegatronDType::u8});
  rows.put_tokens(1, 2, TokenSpan{i16, 2, MegatronDType::i16});
  rows.put_tokens(1, 4, TokenSpan{i64, 1, MegatronDType::i64});
  const uint16_t* row1 = rows.array<uint16_t>(slot.tokens) + slot.token_row();
  EXPECT_EQ(std::vector<uint16_t>(row1, row1 + 5), (std::vector<uint16_t>{1, 255, 299, 0, 42}));
  const int64_t too_big[1] = {300};
  EXPECT_NE(error_of([&] { rows.put_tokens(0, 0, TokenSpan{too_big, 1, MegatronDType::i64}); }).find("token id 300"), std::string::npos);
  const int8_t negative[1] = {-1};
  EXPECT_NE(error_of([&] { rows.put_tokens(0, 0, TokenSpan{negative, 1, MegatronDType::i8}); }).find("token id -1"), std::string::npos);
  EXPECT_NE(error_of([&] { rows.put_tokens(0, 4, TokenSpan{u8, 2, MegatronDType::u8}); }).find("tokens [4, 6) outside a row of 5"),
            std::string::npos);
  const uint16_t u16[1] = {7};
  EXPECT_NE(error_of([&] { rows.put_tokens(0, -1, u16, 1); }).find("outside a row of 5"), std::string::npos);
  // No vocabulary: uint16 slots take ids below 65536, int32 slots any non-negative int32.
  const SlotLayout unknown = SlotLayout::make(ModelKind::gpt, 1, 2, 0, 0, false);
  std::vector<uint8_t> wide(unknown.bytes);
  const uint32_t big[2] = {70000, 2147483647u};
  HostRows(unknown, wide.data()).put_tokens(0, 0, big, 2);
  EXPECT_EQ(HostRows(unknown, wide.data()).array<int32_t>(unknown.tokens)[1], 2147483647);
  const uint32_t past[1] = {2147483648u};
  EXPECT_NE(error_of([&] { HostRows(unknown, wide.data()).put_tokens(0, 0, past, 1); }).find("a non-negative id that fits int32"),
            std::string::npos);
}

}  // namespace
}  // namespace pretrain::slot_test
