// The embedding gradients on CUDA (the op and its CPU path: embedding_grad.h): the rows grouped by
// CUB on the device, then the two passes of sums in the CPU's order. Nothing leaves the device.
#include <cub/cub.cuh>

#include <algorithm>

#include "trainer/ops/cuda_util.cuh"
#include "trainer/ops/embedding_grad.h"

namespace pretrain::ops {

// Items are (key, row) for table 0, 1, 2 in row order: M = 3 · max_rows. Keys use 34 bits (table
// < 4, row < 2³²): kNoTableRow's low 34 bits are all ones, so rows landing nowhere sort last.
struct EmbeddingGrad::Scratch {
  int64_t M = 0, max_segments = 0, C = 0;
  uint64_t *keys_in = nullptr, *keys = nullptr, *unique = nullptr;
  int32_t *rows_in = nullptr, *rows = nullptr, *counts = nullptr, *begins = nullptr, *nseg = nullptr,
          *seg_base = nullptr;
  int32_t* totals = nullptr;  // [0] groups, [1] segments
  int2* segments = nullptr;
  EmbeddingGroup* groups = nullptr;
  float* partial = nullptr;
  void* cub = nullptr;
  size_t cub_bytes = 0;
};

namespace cuda {
namespace {

constexpr int kEndBit = 34;

template <typename X>
void alloc(X*& p, int64_t n) {
  cuda_check(cudaMalloc(&p, size_t(std::max<int64_t>(n, 1)) * sizeof(X)), "cudaMalloc (embedding grouping)");
}

template <typename S>
__global__ void items_kernel(EmbeddingBackward<S> a, uint64_t* keys, int32_t* rows) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= 3 * a.N) return;
  const int which = int(x / a.N);
  const int64_t r = x % a.N;
  keys[x] = embedding_key(a, which, r);
  rows[x] = int32_t(r);
}

__global__ void segment_counts_kernel(EmbeddingGrad::Scratch s) {
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= s.M) return;
  const bool real = g < s.totals[0] && s.unique[g] != kNoTableRow;
  const int32_t n = real ? s.counts[g] : 0;
  s.nseg[g] = n > kernels::kRowChunk ? int32_t((n + kernels::kRowChunk - 1) / kernels::kRowChunk) : 0;
}

__global__ void groups_kernel(EmbeddingGrad::Scratch s) {
  const int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int32_t runs = s.totals[0];
  if (g >= runs) return;
  const int32_t begin = s.begins[g], end = begin + s.counts[g], n = s.nseg[g];
  s.groups[g] = EmbeddingGroup{s.unique[g], begin, end, n > 0 ? s.seg_base[g] : -1};
  for (int32_t k = 0; k < n; ++k) {
    const int32_t b = begin + k * int32_t(kernels::kRowChunk);
    s.segments[s.seg_base[g] + k] = make_int2(b, min(end, b + int32_t(kernels::kRowChunk)));
  }
  if (g == runs - 1) s.totals[1] = s.seg_base[g] + n;
}

template <typename S>
__global__ void segment_sums_kernel(EmbeddingGrad::Scratch s, const S* dout) {
  const int64_t work = int64_t(s.totals[1]) * s.C;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < work; x += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = x / s.C, c = x % s.C;
    float sum = 0.0f;
    for (int32_t j = s.segments[k].x; j < s.segments[k].y; ++j) sum += to_float(dout[int64_t(s.rows[j]) * s.C + c]);
    s.partial[x] = sum;
  }
}

template <typename S>
__global__ void group_sums_kernel(EmbeddingGrad::Scratch s, EmbeddingBackward<S> a) {
  const int64_t work = int64_t(s.totals[0]) * s.C;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < work; x += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = x / s.C, c = x % s.C;
    const EmbeddingGroup g = s.groups[k];
    if (g.key == kNoTableRow) continue;
    float sum = 0.0f;
    if (g.segment < 0) {
      for (int32_t j = g.begin; j < g.end; ++j) sum += to_float(a.dout[int64_t(s.rows[j]) * s.C + c]);
    } else {
      const int32_t n = int32_t((g.end - g.begin + kernels::kRowChunk - 1) / kernels::kRowChunk);
      for (int32_t j = 0; j < n; ++j) sum += s.partial[int64_t(g.segment + j) * s.C + c];
    }
    S* row = embedding_table_row(a, g.key);
    row[c] = from_float<S>(to_float(row[c]) + sum);
  }
}

}  // namespace

EmbeddingGrad::Scratch* embedding_scratch(const Device& d, int64_t max_rows, int64_t C) {
  auto* s = new EmbeddingGrad::Scratch;
  s->M = 3 * max_rows, s->C = C;
  s->max_segments = 2 * ceil_div(s->M, kernels::kRowChunk) + 1;
  alloc(s->keys_in, s->M), alloc(s->keys, s->M), alloc(s->unique, s->M);
  alloc(s->rows_in, s->M), alloc(s->rows, s->M), alloc(s->counts, s->M), alloc(s->begins, s->M);
  alloc(s->nseg, s->M), alloc(s->seg_base, s->M), alloc(s->totals, 2), alloc(s->segments, s->max_segments);
  alloc(s->groups, s->M), alloc(s->partial, s->max_segments * C);
  // CUB's temporary storage: the largest of the three algorithms' needs at M items.
  size_t sort = 0, rle = 0, scan = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, sort, s->keys_in, s->keys, s->rows_in, s->rows, int(s->M), 0, kEndBit);
  cub::DeviceRunLengthEncode::Encode(nullptr, rle, s->keys, s->unique, s->counts, s->totals, int(s->M));
  cub::DeviceScan::ExclusiveSum(nullptr, scan, s->counts, s->begins, int(s->M));
  s->cub_bytes = std::max({sort, rle, scan, size_t(1)});
  cuda_check(cudaMalloc(&s->cub, s->cub_bytes), "cudaMalloc (CUB)");
  (void)d;
  return s;
}

void embedding_scratch_free(EmbeddingGrad::Scratch* s) {
  if (!s) return;
  cudaDeviceSynchronize();
  for (void* p : {static_cast<void*>(s->keys_in), static_cast<void*>(s->keys), static_cast<void*>(s->unique),
                  static_cast<void*>(s->rows_in), static_cast<void*>(s->rows), static_cast<void*>(s->counts),
                  static_cast<void*>(s->begins), static_cast<void*>(s->nseg), static_cast<void*>(s->seg_base),
                  static_cast<void*>(s->totals), static_cast<void*>(s->segments), static_cast<void*>(s->groups),
                  static_cast<void*>(s->partial), s->cub})
    if (p) cudaFree(p);
  delete s;
}

template <typename S>
void embedding_backward(const Device& d, EmbeddingGrad::Scratch& s, const EmbeddingBackward<S>& a) {
  cudaStream_t stream = stream_of(d);
  const int M = int(3 * a.N);
  items_kernel<S><<<unsigned(ceil_div(M, 256)), 256, 0, stream>>>(a, s.keys_in, s.rows_in);
  check_launch("embedding grouping (items)");
  size_t bytes = s.cub_bytes;
  cuda_check(cudaError_t(cub::DeviceRadixSort::SortPairs(s.cub, bytes, s.keys_in, s.keys, s.rows_in, s.rows, M, 0,
                                                         kEndBit, stream)),
             "cub::DeviceRadixSort::SortPairs");
  bytes = s.cub_bytes;
  cuda_check(cudaError_t(cub::DeviceRunLengthEncode::Encode(s.cub, bytes, s.keys, s.unique, s.counts, s.totals, M, stream)),
             "cub::DeviceRunLengthEncode::Encode");
  bytes = s.cub_bytes;
  cuda_check(cudaError_t(cub::DeviceScan::ExclusiveSum(s.cub, bytes, s.counts, s.begins, M, stream)),
             "cub::DeviceScan::ExclusiveSum");
  EmbeddingGrad::Scratch view = s;
  view.M = M;
  segment_counts_kernel<<<unsigned(ceil_div(M, 256)), 256, 0, stream>>>(view);
  bytes = s.cub_bytes;
  cuda_check(cudaError_t(cub::DeviceScan::ExclusiveSum(s.cub, bytes, s.nseg, s.seg_base, M, stream)),
             "cub::DeviceScan::ExclusiveSum");
  groups_kernel<<<unsigned(ceil_div(M, 256)), 256, 0, stream>>>(view);
  const unsigned grid = 132 * 8;
  segment_sums_kernel<S><<<grid, 256, 0, stream>>>(view, a.dout);
  group_sums_kernel<S><<<grid, 256, 0, stream>>>(view, a);
  check_launch("embedding grouping (sums)");
}

#define PRETRAIN_INSTANTIATE(S) \
  template void embedding_backward<S>(const Device&, EmbeddingGrad::Scratch&, const EmbeddingBackward<S>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace cuda
}  // namespace pretrain::ops
