// The datasets of a BERT shard, in the file and in memory (internal to formats/): their names,
// element sizes and widths, in creation order (NVIDIA's six, then a packed shard's four), and
// where each lives in a BertBatch. Shared by the writer, the reader and inspect.
#pragma once
#include <hdf5.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "formats/bert_hdf5.h"

namespace pretrain::bert_hdf5 {

static_assert(std::endian::native == std::endian::little,
              "the raw-chunk paths copy little-endian file bytes straight into memory");

enum class Width { seq, predictions, one, pack };

struct Column {
  const char* name;
  size_t elem;  // bytes per element in memory (and in our files): 4 = int32, 1 = int8
  Width width;
};

constexpr std::array<Column, 10> kColumns = {{
    {"input_ids", 4, Width::seq},
    {"input_mask", 1, Width::seq},
    {"segment_ids", 1, Width::seq},
    {"masked_lm_positions", 4, Width::predictions},
    {"masked_lm_ids", 4, Width::predictions},
    {"next_sentence_labels", 1, Width::one},
    {"position_ids", 4, Width::seq},
    {"sequence_ids", 1, Width::seq},
    {"next_sentence_positions", 4, Width::pack},
    {"packed_next_sentence_labels", 1, Width::pack},
}};
constexpr size_t kNvidiaColumns = 6;  // the first six; a packed shard has all ten
constexpr size_t kPositions = 3;      // masked_lm_positions: max_predictions is its width
constexpr size_t kPackPositions = 8;  // next_sentence_positions: max_pack is its width

inline size_t column_count(int64_t max_pack) { return max_pack > 0 ? kColumns.size() : kNvidiaColumns; }

inline int64_t column_width(const Column& c, int64_t seq, int64_t max_pred, int64_t max_pack) {
  switch (c.width) {
    case Width::seq: return seq;
    case Width::predictions: return max_pred;
    case Width::pack: return max_pack;
    default: return 1;
  }
}
inline const char* width_name(const Column& c) {
  switch (c.width) {
    case Width::seq: return "[N, seq_len]";
    case Width::predictions: return "[N, max_predictions]";
    case Width::pack: return "[N, max_pack]";
    default: return "[N]";
  }
}

// Column i of the batch, as bytes.
inline uint8_t* column_data(BertBatch& b, size_t i) {
  switch (i) {
    case 0: return reinterpret_cast<uint8_t*>(b.input_ids.data());
    case 1: return reinterpret_cast<uint8_t*>(b.input_mask.data());
    case 2: return reinterpret_cast<uint8_t*>(b.segment_ids.data());
    case 3: return reinterpret_cast<uint8_t*>(b.masked_lm_positions.data());
    case 4: return reinterpret_cast<uint8_t*>(b.masked_lm_ids.data());
    case 5: return reinterpret_cast<uint8_t*>(b.next_sentence_labels.data());
    case 6: return reinterpret_cast<uint8_t*>(b.position_ids.data());
    case 7: return reinterpret_cast<uint8_t*>(b.sequence_ids.data());
    case 8: return reinterpret_cast<uint8_t*>(b.next_sentence_positions.data());
    default: return reinterpret_cast<uint8_t*>(b.packed_next_sentence_labels.data());
  }
}
inline const uint8_t* column_data(const BertBatch& b, size_t i) { return column_data(const_cast<BertBatch&>(b), i); }

// HDF5 types: as our files store the column, and as memory holds it.
inline hid_t file_type(const Column& c) { return c.elem == 4 ? H5T_STD_I32LE : H5T_STD_I8LE; }
inline hid_t memory_type(const Column& c) { return c.elem == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8; }

}  // namespace pretrain::bert_hdf5
