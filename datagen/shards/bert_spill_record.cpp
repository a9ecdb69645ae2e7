#include "datagen/shards/bert_spill_record.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace pretrain {

size_t spill_record_bytes(size_t n, size_t p) { return 8 + 4 * n + 4 * p + 2 * p + (p & 1) * 2; }

void append_spill_record(const BertInstance& inst, std::string& out) {
  const uint16_t n = uint16_t(inst.tokens.size());
  uint16_t a_len = 0;
  while (a_len < n && inst.segment_ids[a_len] == 0) ++a_len;
  const uint8_t p = uint8_t(inst.masked_lm_positions.size());
  const uint8_t flags = uint8_t((inst.is_random_next ? 1 : 0) | (inst.short_target ? 2 : 0) |
                                (inst.forced_random_next ? 4 : 0) | (inst.first_of_document ? 8 : 0));
  const size_t at = out.size();
  out.resize(at + spill_record_bytes(n, p));
  char* q = out.data() + at;
  const uint16_t header[4] = {n, a_len, uint16_t(p | flags << 8), 0};
  std::memcpy(q, header, 8);
  // memcpy from an empty vector's data() (null) is undefined even for 0 bytes: an instance may
  // have no predictions.
  if (n > 0) std::memcpy(q + 8, inst.tokens.data(), size_t(n) * 4);
  if (p > 0) std::memcpy(q + 8 + size_t(n) * 4, inst.masked_lm_labels.data(), size_t(p) * 4);
  uint16_t* positions = reinterpret_cast<uint16_t*>(q + 8 + size_t(n) * 4 + size_t(p) * 4);
  for (size_t k = 0; k < p; ++k) positions[k] = uint16_t(inst.masked_lm_positions[k]);
  if (p & 1) positions[p] = 0;
}

SpillRecord::SpillRecord(const char* data, size_t size, const std::string& file, size_t offset) {
  uint16_t header[4];
  if (size < 8) throw Error(Where::at_offset(file, int64_t(offset)), "truncated spill record");
  std::memcpy(header, data, 8);
  const size_t n = header[0], p = header[2] & 0xff;
  a_len = header[1];
  flags = uint8_t(header[2] >> 8);
  bytes = spill_record_bytes(n, p);
  if (size < bytes || a_len > n) throw Error(Where::at_offset(file, int64_t(offset)), "truncated spill record");
  tokens = {reinterpret_cast<const TokenId32*>(data + 8), n};
  labels = {reinterpret_cast<const TokenId32*>(data + 8 + 4 * n), p};
  positions = reinterpret_cast<const uint16_t*>(data + 8 + 4 * n + 4 * p);
  for (size_t k = 0; k < p; ++k)
    if (positions[k] >= n) throw Error(Where::at_offset(file, int64_t(offset)), "spill record masks past its tokens");
}

void SpillRecord::write_row(BertBatch& batch, int64_t i) const {
  const size_t seq = size_t(batch.seq_len), max_pred = size_t(batch.max_predictions), n = tokens.size();
  const size_t p = labels.size(), row = size_t(i) * seq, pred_row = size_t(i) * max_pred;
  TokenId32* ids = batch.input_ids.data() + row;
  std::copy(tokens.begin(), tokens.end(), ids);
  std::fill(ids + n, ids + seq, 0);
  int8_t* mask = batch.input_mask.data() + row;
  std::fill(mask, mask + n, int8_t{1});
  std::fill(mask + n, mask + seq, int8_t{0});
  int8_t* segments = batch.segment_ids.data() + row;
  std::fill(segments, segments + a_len, int8_t{0});
  std::fill(segments + a_len, segments + n, int8_t{1});
  std::fill(segments + n, segments + seq, int8_t{0});
  int32_t* pos = batch.masked_lm_positions.data() + pred_row;
  std::copy(positions, positions + p, pos);
  std::fill(pos + p, pos + max_pred, 0);
  TokenId32* lm_ids = batch.masked_lm_ids.data() + pred_row;
  std::copy(labels.begin(), labels.end(), lm_ids);
  std::fill(lm_ids + p, lm_ids + max_pred, 0);
  batch.next_sentence_labels[size_t(i)] = flags & 1;
}

}  // namespace pretrain
