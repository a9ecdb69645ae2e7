// The six datasets of a BERT shard, in the file and in memory (internal to formats/): their
// names, element sizes and widths, in NVIDIA's creation order, and where each lives in a
// BertBatch. Shared by the writer, the reader and inspect.
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

enum class Width { seq, predictions, one };

struct Column {
  const char* name;
  size_t elem;  // bytes per element in memory (and in our files): 4 = int32, 1 = int8
  Width width;
};

constexpr std::array<Column, 6> kColumns = {{
    {"input_ids", 4, Width::seq},
    {"input_mask", 1, Width::seq},
    {"segment_ids", 1, Width::seq},
    {"masked_lm_positions", 4, Width::predictions},
    {"masked_lm_ids", 4, Width::predictions},
    {"next_sentence_labels", 1, Width::one},
}};
constexpr size_t kPositions = 3;  // masked_lm_positions: max_predictions is its width

inline int64_t column_width(const Column& c, int64_t seq, int64_t max_pred) {
  return c.width == Width::seq ? seq : c.width == Width::predictions ? max_pred : 1;
}

// Column i of the batch, as bytes.
inline uint8_t* column_data(BertBatch& b, size_t i) {
  switch (i) {
    case 0: return reinterpret_cast<uint8_t*>(b.input_ids.data());
    case 1: return reinterpret_cast<uint8_t*>(b.input_mask.data());
    case 2: return reinterpret_cast<uint8_t*>(b.segment_ids.data());
    case 3: return reinterpret_cast<uint8_t*>(b.masked_lm_positions.data());
    case 4: return reinterpret_cast<uint8_t*>(b.masked_lm_ids.data());
    default: return reinterpret_cast<uint8_t*>(b.next_sentence_labels.data());
  }
}
inline const uint8_t* column_data(const BertBatch& b, size_t i) { return column_data(const_cast<BertBatch&>(b), i); }

// HDF5 types: as our files store the column, and as memory holds it.
inline hid_t file_type(const Column& c) { return c.elem == 4 ? H5T_STD_I32LE : H5T_STD_I8LE; }
inline hid_t memory_type(const Column& c) { return c.elem == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8; }

}  // namespace pretrain::bert_hdf5
