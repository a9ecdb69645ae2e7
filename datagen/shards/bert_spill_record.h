// BERT instances as records in spill files (make-pretraining-shards' buckets between generating
// instances and shuffling them into shards), 4-byte aligned so that a record is read in place:
//   u16 length n, u16 length of [CLS] A [SEP], u8 predictions p, u8 flags (1: random next, 2: short
//   target, 4: forced random next, 8: first of its document and pass, 16: narrow ids), u16 0, then
//   ids int32 tokens[n], int32 labels[p] (u16 each when narrow), u16 positions[p], and u16 zeros
//   up to a multiple of 4 bytes.
// A record is narrow when all its ids are below 65536 (every id of BERT's 30,522-token vocabulary):
// that halves the spill, which for seq 128 and dupe 5 is ~6.5 bytes per corpus token otherwise
// (43 GB for the 1.3 G tokens of scripts/bench/scale.sh --gb 10, more than the shards).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datagen/shards/bert_instances.h"
#include "formats/bert_hdf5.h"

namespace pretrain {

// The layout's version, in spill.json: a bucket of another layout is made again (4: the records
// in zstd frames, spill_buckets.h).
inline constexpr int kSpillFormat = 4;

// Bytes of a record of n tokens and p predictions, with narrow (u16) or int32 ids.
size_t spill_record_bytes(size_t n, size_t p, bool narrow);

// A record's token ids or labels, stored as int32 or narrow (u16).
class SpillIds {
 public:
  SpillIds() = default;
  SpillIds(const char* data, size_t n, bool narrow) : data_(data), n_(n), narrow_(narrow) {}
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  TokenId32 operator[](size_t i) const {
    if (narrow_) return TokenId32(reinterpret_cast<const uint16_t*>(data_)[i]);
    return reinterpret_cast<const TokenId32*>(data_)[i];
  }
  void copy_to(TokenId32* out) const;
  std::vector<TokenId32> to_vector() const;

 private:
  const char* data_ = nullptr;
  size_t n_ = 0;
  bool narrow_ = false;
};

// Appends `inst` as one record.
void append_spill_record(const BertInstance& inst, std::string& out);

// A spill record read in place (`data` 4-byte aligned, as records are in a bucket read whole).
struct SpillRecord {
  SpillIds tokens;
  SpillIds labels;
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
