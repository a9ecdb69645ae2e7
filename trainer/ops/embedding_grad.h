// The embedding tables' gradients with the rows grouped on the device (issue #47: no host work in
// the step). Today (trainer/tensor_parallel/layers.cpp) the ids come to the host, are sorted there
// and the groups copied back; here the grouping is a CUB radix sort and run-length encoding on the
// device, and the sums are the same as the host-grouped ones: the same bits.
//
// Row r of dout [N, C] lands in the word table's row ids[r] − v0 (when this vocabulary shard holds
// it), the position table's row position_of(r) and the token-type table's row types[r] (BERT). The
// rows landing in one table row form a group, in increasing row order (a stable sort of (table,
// table row) keys over the rows in order); a group of more than kernels::kRowChunk rows is cut into
// segments of kRowChunk whose sums are taken first (pass 1), then every group's rows (or segment
// sums), in order, are added to its table row (pass 2): table[row] += Σ. Every sum is in float in
// a fixed order, so the CPU (std::stable_sort, the same two passes) and the GPU give equal bits,
// at any launch configuration; tests/gpu/embedding_grad_test.cpp checks they do, and
// tests/trainer/embedding_grad_test.cpp checks the CPU against the sums in double.
// CUDA (embedding_grad_cuda.cu): keys (table << 32 | row) and row indices sorted by
// cub::DeviceRadixSort::SortPairs (stable), runs by cub::DeviceRunLengthEncode, their starts and
// segment counts by cub::DeviceScan; the passes are grid-stride kernels over (segment or group,
// column), reading the group count on the device. Scratch is allocated once for max_rows.
#pragma once
#include <cstdint>
#include <vector>

#include "trainer/backend.h"
#include "trainer/kernels.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops {

template <typename S>
struct EmbeddingBackward {
  S* words;      // [vrows or V, C], += ; the word table's gradient
  S* positions;  // [max positions, C], += ; null: not this rank's (tensor parallel)
  S* types;      // [type vocabulary, C], += ; null: none (GPT)
  const S* dout;  // [N, C]
  const int32_t* ids;
  const int32_t* token_types;  // [N]; with types
  const int32_t* position_ids;  // [N]; null: r mod T
  int64_t N, T, C;
  int64_t v0 = 0, vrows = 0;  // the vocabulary shard [v0, v0 + vrows); vrows 0: every id
};

class EmbeddingGrad {
 public:
  EmbeddingGrad(const Device& d, int64_t max_rows, int64_t C);
  ~EmbeddingGrad();
  EmbeddingGrad(const EmbeddingGrad&) = delete;
  EmbeddingGrad& operator=(const EmbeddingGrad&) = delete;
  template <typename S>
  void backward(const EmbeddingBackward<S>& a);

  struct Scratch;  // the CUDA side's buffers (embedding_grad_cuda.cu)

 private:
  const Device& d_;
  int64_t max_rows_, C_;
  Scratch* scratch_ = nullptr;
};

// A group of rows landing in one table row: its key (table << 32 | row) and its rows
// order[begin, end); segment: its first segment when end − begin > kRowChunk, else −1.
struct EmbeddingGroup {
  uint64_t key;
  int32_t begin, end, segment;
};
inline constexpr uint64_t kNoTableRow = ~uint64_t(0);  // a row that lands nowhere in this table

// The land key of row r's item `which` (0 words, 1 positions, 2 types), kNoTableRow when none.
template <typename S>
PRETRAIN_HD inline uint64_t embedding_key(const EmbeddingBackward<S>& a, int which, int64_t r) {
  if (which == 0) {
    const int64_t id = int64_t(a.ids[r]) - a.v0;
    if (a.vrows != 0 && (id < 0 || id >= a.vrows)) return kNoTableRow;
    return uint64_t(id);
  }
  if (which == 1) return a.positions ? (uint64_t(1) << 32) | uint64_t(kernels::position_of(a.position_ids, r, a.T)) : kNoTableRow;
  return a.types && a.token_types ? (uint64_t(2) << 32) | uint64_t(uint32_t(a.token_types[r])) : kNoTableRow;
}

template <typename S>
PRETRAIN_HD inline S* embedding_table_row(const EmbeddingBackward<S>& a, uint64_t key) {
  const uint64_t table = key >> 32, row = key & 0xffffffffu;
  S* base = table == 0 ? a.words : table == 1 ? a.positions : a.types;
  return base + int64_t(row) * a.C;
}

namespace cpu {
template <typename S>
void embedding_backward(const EmbeddingBackward<S>& a);
}

}  // namespace pretrain::ops
