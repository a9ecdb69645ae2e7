// BertBatch: records as the datasets hold them (struct of arrays, row-major).
#include "formats/bert_hdf5.h"

#include <algorithm>
#include <type_traits>

#include "common/error.h"

namespace pretrain {

void BertBatch::resize(int64_t n, int64_t seq, int64_t max_pred, int64_t pack) {
  auto elements = [](int64_t a, int64_t b) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) throw Error(cat("BertBatch of ", a, " x ", b, " is too large"));
    return static_cast<size_t>(r);
  };
  // Every size is checked before anything changes: a refused resize leaves the batch as it was.
  const size_t tokens = elements(n, seq), predictions = elements(n, max_pred), slots = elements(n, pack);
  const size_t rows = elements(n, 1);
  size = n, seq_len = seq, max_predictions = max_pred, max_pack = pack;
  input_ids.resize(tokens);
  input_mask.resize(tokens);
  segment_ids.resize(tokens);
  masked_lm_positions.resize(predictions);
  masked_lm_ids.resize(predictions);
  next_sentence_labels.resize(rows);
  position_ids.resize(pack > 0 ? tokens : 0);
  sequence_ids.resize(pack > 0 ? tokens : 0);
  next_sentence_positions.resize(slots);
  packed_next_sentence_labels.resize(slots, int8_t{-1});
}

BertRecord BertBatch::record(int64_t i) const {
  BertRecord r;
  auto row = [i](const auto& v, int64_t w) {
    auto first = v.begin() + i * w;
    return std::vector<int32_t>(first, first + w);
  };
  r.input_ids = row(input_ids, seq_len);
  r.input_mask = row(input_mask, seq_len);
  r.segment_ids = row(segment_ids, seq_len);
  r.masked_lm_positions = row(masked_lm_positions, max_predictions);
  r.masked_lm_ids = row(masked_lm_ids, max_predictions);
  r.next_sentence_label = next_sentence_labels[static_cast<size_t>(i)];
  if (max_pack > 0) {
    r.position_ids = row(position_ids, seq_len);
    r.sequence_ids = row(sequence_ids, seq_len);
    r.next_sentence_positions = row(next_sentence_positions, max_pack);
    r.packed_next_sentence_labels = row(packed_next_sentence_labels, max_pack);
  }
  return r;
}

void BertBatch::set(int64_t i, const BertRecord& r) {
  auto put = [i](auto& v, int64_t w, const std::vector<int32_t>& src, int fill = 0) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    auto* row = v.data() + i * w;
    int64_t n = std::min<int64_t>(w, static_cast<int64_t>(src.size()));
    for (int64_t j = 0; j < n; ++j) row[j] = static_cast<T>(src[static_cast<size_t>(j)]);
    std::fill(row + n, row + w, static_cast<T>(fill));
  };
  put(input_ids, seq_len, r.input_ids);
  put(input_mask, seq_len, r.input_mask);
  put(segment_ids, seq_len, r.segment_ids);
  put(masked_lm_positions, max_predictions, r.masked_lm_positions);
  put(masked_lm_ids, max_predictions, r.masked_lm_ids);
  next_sentence_labels[static_cast<size_t>(i)] = static_cast<int8_t>(r.next_sentence_label);
  if (max_pack > 0) {
    put(position_ids, seq_len, r.position_ids);
    put(sequence_ids, seq_len, r.sequence_ids);
    put(next_sentence_positions, max_pack, r.next_sentence_positions);
    put(packed_next_sentence_labels, max_pack, r.packed_next_sentence_labels, -1);
  }
}

}  // namespace pretrain
