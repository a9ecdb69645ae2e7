#include "datagen/shards/bert_spill_record.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/error.h"

namespace pretrain {

namespace {

constexpr uint8_t kNarrow = 16;  // the flag of a record whose ids are u16

bool fits_u16(const std::vector<TokenId32>& ids) {
  // An OR over the ids' bits, branch-free so it vectorizes (all_of's early exit did not: 2% of
  // make-pretraining-shards' CPU); a negative id sets the high bits as one past 65535 does.
  uint32_t bits = 0;
  for (TokenId32 id : ids) bits |= uint32_t(id);
  return bits < 65536;
}

// Writes `ids` at q as int32 or u16; returns the end.
char* put_ids(char* q, const std::vector<TokenId32>& ids, bool narrow) {
  if (ids.empty()) return q;  // memcpy from an empty vector's data() (null) is undefined
  if (!narrow) {
    std::memcpy(q, ids.data(), ids.size() * 4);
    return q + ids.size() * 4;
  }
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint16_t id = uint16_t(ids[k]);
    std::memcpy(q + 2 * k, &id, 2);
  }
  return q + ids.size() * 2;
}

}  // namespace

size_t spill_record_bytes(size_t n, size_t p, bool narrow) {
  const size_t bytes = 8 + (narrow ? 2 : 4) * (n + p) + 2 * p;
  return (bytes + 3) / 4 * 4;
}

void SpillIds::copy_to(TokenId32* out) const {
  if (!narrow_) {
    if (n_ > 0) std::memcpy(out, data_, n_ * 4);
    return;
  }
  const uint16_t* ids = reinterpret_cast<const uint16_t*>(data_);
  std::copy(ids, ids + n_, out);
}

std::vector<TokenId32> SpillIds::to_vector() const {
  std::vector<TokenId32> ids(n_);
  copy_to(ids.data());
  return ids;
}

void append_spill_record(const BertInstance& inst, std::string& out) {
  const uint16_t n = uint16_t(inst.tokens.size());
  uint16_t a_len = 0;
  while (a_len < n && inst.segment_ids[a_len] == 0) ++a_len;
  const uint8_t p = uint8_t(inst.masked_lm_positions.size());
  const bool narrow = fits_u16(inst.tokens) && fits_u16(inst.masked_lm_labels);
  const uint8_t flags = uint8_t((inst.is_random_next ? 1 : 0) | (inst.short_target ? 2 : 0) |
                                (inst.forced_random_next ? 4 : 0) | (inst.first_of_document ? 8 : 0) |
                                (narrow ? kNarrow : 0));
  const size_t at = out.size(), bytes = spill_record_bytes(n, p, narrow);
  out.resize(at + bytes);  // zeros: the padding
  char* q = out.data() + at;
  const uint16_t header[4] = {n, a_len, uint16_t(p | flags << 8), 0};
  std::memcpy(q, header, 8);
  q = put_ids(q + 8, inst.tokens, narrow);
  q = put_ids(q, inst.masked_lm_labels, narrow);
  for (size_t k = 0; k < p; ++k) {
    const uint16_t position = uint16_t(inst.masked_lm_positions[k]);
    std::memcpy(q + 2 * k, &position, 2);
  }
}

SpillRecord::SpillRecord(const char* data, size_t size, const std::string& file, size_t offset) {
  uint16_t header[4];
  if (size < 8) throw Error(Where::at_offset(file, int64_t(offset)), "truncated spill record");
  std::memcpy(header, data, 8);
  const size_t n = header[0], p = header[2] & 0xff;
  a_len = header[1];
  flags = uint8_t(header[2] >> 8);
  const bool narrow = flags & kNarrow;
  bytes = spill_record_bytes(n, p, narrow);
  if (size < bytes || a_len > n) throw Error(Where::at_offset(file, int64_t(offset)), "truncated spill record");
  const size_t width = narrow ? 2 : 4;
  tokens = SpillIds(data + 8, n, narrow);
  labels = SpillIds(data + 8 + width * n, p, narrow);
  positions = reinterpret_cast<const uint16_t*>(data + 8 + width * (n + p));
  for (size_t k = 0; k < p; ++k)
    if (positions[k] >= n) throw Error(Where::at_offset(file, int64_t(offset)), "spill record masks past its tokens");
}

void SpillRecord::write_at(BertBatch& batch, int64_t i, size_t offset, size_t first_prediction) const {
  const size_t n = tokens.size(), p = labels.size();
  const size_t row = size_t(i) * size_t(batch.seq_len) + offset;
  const size_t pred_row = size_t(i) * size_t(batch.max_predictions) + first_prediction;
  tokens.copy_to(batch.input_ids.data() + row);
  std::fill_n(batch.input_mask.data() + row, n, int8_t{1});
  int8_t* segments = batch.segment_ids.data() + row;
  std::fill(segments, segments + a_len, int8_t{0});
  std::fill(segments + a_len, segments + n, int8_t{1});
  int32_t* pos = batch.masked_lm_positions.data() + pred_row;
  for (size_t k = 0; k < p; ++k) pos[k] = int32_t(positions[k] + offset);
  labels.copy_to(batch.masked_lm_ids.data() + pred_row);
}

namespace {

// NVIDIA's padding (0) of row i past `tokens` tokens and `predictions` predictions.
void pad_row(BertBatch& batch, int64_t i, size_t tokens, size_t predictions) {
  const size_t seq = size_t(batch.seq_len), max_pred = size_t(batch.max_predictions);
  const size_t row = size_t(i) * seq, pred_row = size_t(i) * max_pred;
  std::fill(batch.input_ids.data() + row + tokens, batch.input_ids.data() + row + seq, 0);
  std::fill(batch.input_mask.data() + row + tokens, batch.input_mask.data() + row + seq, int8_t{0});
  std::fill(batch.segment_ids.data() + row + tokens, batch.segment_ids.data() + row + seq, int8_t{0});
  std::fill(batch.masked_lm_positions.data() + pred_row + predictions, batch.masked_lm_positions.data() + pred_row + max_pred, 0);
  std::fill(batch.masked_lm_ids.data() + pred_row + predictions, batch.masked_lm_ids.data() + pred_row + max_pred, 0);
}

}  // namespace

void SpillRecord::write_row(BertBatch& batch, int64_t i) const {
  write_at(batch, i, 0, 0);
  pad_row(batch, i, tokens.size(), labels.size());
  batch.next_sentence_labels[size_t(i)] = flags & 1;
}

void SpillRecord::write_packed_row(std::span<const SpillRecord> pack, BertBatch& batch, int64_t i) {
  const size_t seq = size_t(batch.seq_len), slots = size_t(batch.max_pack);
  const size_t row = size_t(i) * seq, slot_row = size_t(i) * slots;
  int32_t* position_ids = batch.position_ids.data() + row;
  int8_t* sequence_ids = batch.sequence_ids.data() + row;
  size_t offset = 0, predictions = 0;
  for (size_t k = 0; k < pack.size(); ++k) {
    const SpillRecord& r = pack[k];
    if (k >= slots || offset + r.tokens.size() > seq || predictions + r.labels.size() > size_t(batch.max_predictions))
      throw Error(cat("internal: a pack of ", pack.size(), " instances overflows a row of seq_len ", seq,
                      ", max_predictions ", batch.max_predictions, ", max_pack ", slots));
    r.write_at(batch, i, offset, predictions);
    std::iota(position_ids + offset, position_ids + offset + r.tokens.size(), 0);
    std::fill_n(sequence_ids + offset, r.tokens.size(), int8_t(k + 1));
    batch.next_sentence_positions[slot_row + k] = int32_t(offset);
    batch.packed_next_sentence_labels[slot_row + k] = int8_t(r.flags & 1);
    offset += r.tokens.size();
    predictions += r.labels.size();
  }
  pad_row(batch, i, offset, predictions);
  std::fill(position_ids + offset, position_ids + seq, 0);
  std::fill(sequence_ids + offset, sequence_ids + seq, int8_t{0});
  std::fill(batch.next_sentence_positions.data() + slot_row + pack.size(), batch.next_sentence_positions.data() + slot_row + slots, 0);
  std::fill(batch.packed_next_sentence_labels.data() + slot_row + pack.size(),
            batch.packed_next_sentence_labels.data() + slot_row + slots, int8_t{-1});
  batch.next_sentence_labels[size_t(i)] = pack.empty() ? 0 : pack.front().flags & 1;
}

}  // namespace pretrain
