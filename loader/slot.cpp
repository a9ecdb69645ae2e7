// The host slot's layout, and HostRows: the one place where sample fields are narrowed to the
// slot's types, so a bad id is caught here whatever source it came from.
#include <cstring>
#include <string>

#include "common/error.h"
#include "loader/source.h"

namespace pretrain {

namespace {

size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

[[noreturn]] void bad_value(const char* what, int64_t value, const std::string& expected) {
  throw Error(std::string(what) + " " + std::to_string(value) + ": expected " + expected);
}

}  // namespace

SlotLayout SlotLayout::make(ModelKind kind, int64_t batch_size, int64_t seq_len,
                            int64_t max_predictions, int64_t vocab_size, bool narrow_tokens, int64_t max_pack) {
  if (batch_size <= 0) throw UsageError("batch size must be positive, not " + std::to_string(batch_size));
  if (seq_len <= 0) throw UsageError("sequence length must be positive, not " + std::to_string(seq_len));
  if (kind == ModelKind::bert && (max_predictions < 0 || max_predictions > seq_len))
    throw UsageError("max_predictions " + std::to_string(max_predictions) + " must be in [0, seq_len]");
  if (kind == ModelKind::bert && seq_len > 65535)
    throw UsageError("BERT seq_len " + std::to_string(seq_len) + " is over 65535 (positions travel as uint16)");
  if (max_pack < 0 || max_pack > 127 || (max_pack > 0 && kind != ModelKind::bert))
    throw UsageError(cat("max_pack ", max_pack, " must be in [0, 127] (BERT only)"));
  SlotLayout l;
  l.kind = kind;
  l.max_pack = max_pack;
  l.batch_size = batch_size;
  l.max_predictions = kind == ModelKind::bert ? max_predictions : 0;
  l.vocab_size = vocab_size;
  l.token_dtype = narrow_tokens && vocab_size > 0 && vocab_size <= 65536 ? TensorDType::u16 : TensorDType::i32;
  return l.shorter(seq_len);
}

SlotLayout SlotLayout::shorter(int64_t length) const {
  if (length <= 0 || (seq_len > 0 && length > seq_len))
    throw UsageError(cat("a batch length of ", length, " does not fit slots of length ", seq_len));
  SlotLayout l = *this;
  l.seq_len = length;
  const size_t tok = dtype_size(l.token_dtype);
  const size_t bs = size_t(batch_size), s = size_t(length), p = size_t(l.max_predictions);
  size_t at = 0;
  auto take = [&](size_t bytes) { size_t here = at; at += align64(bytes); return here; };
  if (kind == ModelKind::bert) {
    l.input_ids = take(bs * s * tok);
    l.segment_ids = take(bs * s);
    l.input_mask = take(bs * s);
    l.masked_lm_positions = take(bs * p * 2);
    l.masked_lm_ids = take(bs * p * tok);
    l.next_sentence_labels = take(bs * size_t(l.nsp_slots()));
    if (max_pack > 0) {
      l.position_ids = take(bs * s * 2);
      l.sequence_ids = take(bs * s);
      l.next_sentence_positions = take(bs * size_t(max_pack) * 2);
    }
  } else {
    l.tokens = take(bs * (s + 1) * tok);
  }
  l.bytes = at;
  return l;
}

namespace {

// Writes ids into a token array of the slot (uint16 or int32), checking each against the
// vocabulary in the same pass (this is the hot loop of GPT reads). On an error the row is left
// half written, which is harmless: its batch fails.
template <typename Dst, typename Src>
void store_ids_as(const SlotLayout& l, Dst* dst, const Src* src, size_t count, int64_t limit) {
  for (size_t i = 0; i < count; ++i) {
    const int64_t v = int64_t(src[i]);
    if (v < 0 || v >= limit)
      bad_value("token id", v, l.vocab_size > 0 ? "an id below the vocabulary size " + std::to_string(l.vocab_size)
                                                : "a non-negative id that fits int32");
    dst[i] = Dst(v);
  }
}

template <typename Src>
void store_ids(const SlotLayout& l, uint8_t* dst_base, int64_t index, const Src* src, size_t count) {
  const int64_t limit = l.vocab_size > 0 ? l.vocab_size : (l.token_dtype == TensorDType::u16 ? 65536 : INT32_MAX + int64_t(1));
  if (l.token_dtype == TensorDType::u16) store_ids_as(l, reinterpret_cast<uint16_t*>(dst_base) + index, src, count, limit);
  else store_ids_as(l, reinterpret_cast<int32_t*>(dst_base) + index, src, count, limit);
}

}  // namespace

void HostRows::put_bert(int64_t row, const int32_t* input_ids, const int8_t* segment_ids,
                        const int8_t* input_mask, const int32_t* masked_lm_positions,
                        const int32_t* masked_lm_ids, int64_t predictions, int8_t next_sentence_label) const {
  const SlotLayout& l = layout_;
  const int64_t s = l.seq_len, p = predictions;
  if (p > l.max_predictions)
    throw Error(cat("internal: ", p, " predictions for a slot of ", l.max_predictions));
  store_ids(l, base_ + l.input_ids, row * s, input_ids, size_t(s));
  uint8_t* seg = base_ + l.segment_ids + row * s;
  uint8_t* mask = base_ + l.input_mask + row * s;
  for (int64_t i = 0; i < s; ++i) {
    if (segment_ids[i] < 0) bad_value("segment id", segment_ids[i], "0 or more");
    if (input_mask[i] != 0 && input_mask[i] != 1) bad_value("input_mask value", input_mask[i], "0 or 1");
    seg[i] = uint8_t(segment_ids[i]);
    mask[i] = uint8_t(input_mask[i]);
  }
  uint16_t* pos = array<uint16_t>(l.masked_lm_positions) + row * l.max_predictions;
  for (int64_t i = 0; i < p; ++i) {
    if (masked_lm_positions[i] < 0 || masked_lm_positions[i] >= s)
      bad_value("masked_lm_position", masked_lm_positions[i], "a position in [0, " + std::to_string(s) + ")");
    pos[i] = uint16_t(masked_lm_positions[i]);
  }
  store_ids(l, base_ + l.masked_lm_ids, row * l.max_predictions, masked_lm_ids, size_t(p));
  const size_t pad = size_t(l.max_predictions - p), tok = dtype_size(l.token_dtype);
  std::memset(pos + p, 0, pad * 2);
  std::memset(base_ + l.masked_lm_ids + size_t(row * l.max_predictions + p) * tok, 0, pad * tok);
  if (next_sentence_label != 0 && next_sentence_label != 1)
    bad_value("next_sentence_label", next_sentence_label, "0 or 1");
  base_[l.next_sentence_labels + size_t(row * l.nsp_slots())] = uint8_t(next_sentence_label);
}

void HostRows::put_packing(int64_t row, const int32_t* position_ids, const int8_t* sequence_ids,
                           const int32_t* next_sentence_positions, const int8_t* next_sentence_labels) const {
  const SlotLayout& l = layout_;
  if (l.max_pack == 0) throw Error("internal: a packed row for a slot that is not packed");
  const int64_t s = l.seq_len, k = l.max_pack;
  uint16_t* pos = array<uint16_t>(l.position_ids) + row * s;
  uint8_t* seq = base_ + l.sequence_ids + row * s;
  const uint8_t* mask = base_ + l.input_mask + row * s;
  for (int64_t i = 0; i < s; ++i) {
    if (position_ids[i] < 0 || position_ids[i] >= s)
      bad_value("position_id", position_ids[i], cat("a position in [0, ", s, ")"));
    if (sequence_ids[i] < 0 || sequence_ids[i] > k) bad_value("sequence_id", sequence_ids[i], cat("0 to ", k));
    if ((sequence_ids[i] != 0) != (mask[i] != 0))
      bad_value("sequence_id", sequence_ids[i], mask[i] ? cat("1 to ", k, " where input_mask is 1") : "0 where input_mask is 0");
    pos[i] = uint16_t(position_ids[i]);
    seq[i] = uint8_t(sequence_ids[i]);
  }
  uint16_t* cls = array<uint16_t>(l.next_sentence_positions) + row * k;
  uint8_t* labels = base_ + l.next_sentence_labels + row * k;
  for (int64_t j = 0; j < k; ++j) {
    if (next_sentence_positions[j] < 0 || next_sentence_positions[j] >= s)
      bad_value("next_sentence_position", next_sentence_positions[j], cat("a position in [0, ", s, ")"));
    if (next_sentence_labels[j] < -1 || next_sentence_labels[j] > 1)
      bad_value("packed next_sentence_label", next_sentence_labels[j], "-1 (no instance), 0 or 1");
    cls[j] = uint16_t(next_sentence_positions[j]);
    labels[j] = uint8_t(next_sentence_labels[j]);
  }
}

void HostRows::put_tokens(int64_t row, int64_t column, const uint32_t* tokens, size_t count) const {
  if (column < 0 || column + int64_t(count) > layout_.token_row())
    throw Error("internal: tokens [" + std::to_string(column) + ", " + std::to_string(column + int64_t(count)) +
                ") outside a row of " + std::to_string(layout_.token_row()));
  store_ids(layout_, base_ + layout_.tokens, row * layout_.token_row() + column, tokens, count);
}

void HostRows::put_tokens(int64_t row, int64_t column, const uint16_t* tokens, size_t count) const {
  if (column < 0 || column + int64_t(count) > layout_.token_row())
    throw Error("internal: tokens [" + std::to_string(column) + ", " + std::to_string(column + int64_t(count)) +
                ") outside a row of " + std::to_string(layout_.token_row()));
  store_ids(layout_, base_ + layout_.tokens, row * layout_.token_row() + column, tokens, count);
}

void HostRows::put_tokens(int64_t row, int64_t column, const TokenSpan& tokens) const {
  if (column < 0 || column + int64_t(tokens.size) > layout_.token_row())
    throw Error("internal: tokens [" + std::to_string(column) + ", " + std::to_string(column + int64_t(tokens.size)) +
                ") outside a row of " + std::to_string(layout_.token_row()));
  uint8_t* base = base_ + layout_.tokens;
  const int64_t at = row * layout_.token_row() + column;
  switch (tokens.dtype) {
    case MegatronDType::u8: store_ids(layout_, base, at, static_cast<const uint8_t*>(tokens.data), tokens.size); break;
    case MegatronDType::i8: store_ids(layout_, base, at, static_cast<const int8_t*>(tokens.data), tokens.size); break;
    case MegatronDType::i16: store_ids(layout_, base, at, static_cast<const int16_t*>(tokens.data), tokens.size); break;
    case MegatronDType::u16: store_ids(layout_, base, at, static_cast<const uint16_t*>(tokens.data), tokens.size); break;
    case MegatronDType::i32: store_ids(layout_, base, at, static_cast<const int32_t*>(tokens.data), tokens.size); break;
    case MegatronDType::i64: store_ids(layout_, base, at, static_cast<const int64_t*>(tokens.data), tokens.size); break;
    default: throw Error(std::string("token dtype ") + megatron_dtype_name(tokens.dtype) + " is not an integer type");
  }
}

}  // namespace pretrain
