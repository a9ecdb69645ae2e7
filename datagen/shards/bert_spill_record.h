// BERT instances as records in spill files (make-pretraining-shards' buckets between generating
// instances and shuffling them into shards), 4-byte aligned so that a record is read in place:
//   u16 length n, u16 length of [CLS] A [SEP], u8 predictions p, u8 flags (1: random next, 2: short
//   target, 4: forced random next, 8: first of its document and pass), u16 0, int32 tokens[n],
//   int32 labels[p], u16 positions[p], u16 0 when p is odd.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "datagen/shards/bert_instances.h"
#include "formats/bert_hdf5.h"

namespace pretrain {

// The layout's version, in spill.json: a bucket of another layout is made again.
inline constexpr int kSpillFormat = 2;

// Bytes of a record of n tokens and p predictions.
size_t spill_record_bytes(size_t n, size_t p);

// Appends `inst` as one record.
void append_spill_record(const BertInstance& inst, std::string& out);

// A spill record read in place (`data` 4-byte aligned, as records are in a bucket read whole).
struct SpillRecord {
  std::span<const TokenId32> tokens;
  std::span<const TokenId32> labels;
  const uint16_t* positions = nullptr;
  uint16_t a_len = 0;
  uint8_t flags = 0;
  size_t bytes = 0;

  // Checks that the record fits in [data, data + size) and is consistent; the throw names the
  // bucket file and offset.
  SpillRecord(const char* data, size_t size, const std::string& file, size_t offset);

  // Row i of the batch, with NVIDIA's padding (0); the same values as BertInstance::write_row.
  void write_row(BertBatch& batch, int64_t i) const;

  // Row i of a packed batch (batch.max_pack ≥ pack.size(), the instances fit seq_len and
  // max_predictions together): the instances one after the other from position 0, each as
  // write_row writes it but shifted by its offset (masked_lm_positions too), and the packed
  // fields of formats/bert_hdf5.h; next_sentence_labels is the first instance's.
  static void write_packed_row(std::span<const SpillRecord> pack, BertBatch& batch, int64_t i);

 private:
  // Tokens, mask and segments at [offset, offset + n) of row i, the predictions at
  // [first_prediction, + p) with positions shifted by offset; no padding, no label.
  void write_at(BertBatch& batch, int64_t i, size_t offset, size_t first_prediction) const;
};

}  // namespace pretrain
