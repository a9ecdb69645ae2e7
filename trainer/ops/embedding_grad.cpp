// The embedding gradients' CPU path (the reference of embedding_grad_cuda.cu, the same sums in the
// same order) and the dispatch.
#include "trainer/ops/embedding_grad.h"

#include <algorithm>
#include <numeric>

#include "trainer/ops/dispatch.h"

namespace pretrain::ops {

#if PRETRAIN_HAVE_CUDA
namespace cuda {
EmbeddingGrad::Scratch* embedding_scratch(const Device& d, int64_t max_rows, int64_t C);
void embedding_scratch_free(EmbeddingGrad::Scratch* s);
template <typename S>
void embedding_backward(const Device& d, EmbeddingGrad::Scratch& s, const EmbeddingBackward<S>& a);
}  // namespace cuda
#endif

namespace cpu {

template <typename S>
void embedding_backward(const EmbeddingBackward<S>& a) {
  const int64_t N = a.N, C = a.C, K = kernels::kRowChunk;
  // Items (key, row) for table 0, then 1, then 2, rows increasing: a stable sort by key leaves each
  // group's rows in increasing order (the GPU's radix sort is stable too).
  std::vector<uint64_t> keys;
  std::vector<int32_t> rows;
  for (int which = 0; which < 3; ++which)
    for (int64_t r = 0; r < N; ++r)
      if (const uint64_t k = embedding_key(a, which, r); k != kNoTableRow) keys.push_back(k), rows.push_back(int32_t(r));
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return keys[x] < keys[y]; });
  std::vector<EmbeddingGroup> groups;
  std::vector<std::pair<int32_t, int32_t>> segments;
  std::vector<int32_t> sorted(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted[i] = rows[order[i]];
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && keys[order[j]] == keys[order[i]]) ++j;
    EmbeddingGroup g{keys[order[i]], int32_t(i), int32_t(j), -1};
    if (int64_t(j - i) > K) {
      g.segment = int32_t(segments.size());
      for (size_t b = i; b < j; b += size_t(K)) segments.push_back({int32_t(b), int32_t(std::min(j, b + size_t(K)))});
    }
    groups.push_back(g);
    i = j;
  }
  // Pass 1: each segment's column sums; pass 2: each group's rows or segments, in order.
  std::vector<float> partial(segments.size() * size_t(C));
  cpu_launch(int64_t(segments.size()) * C, [&](int64_t x) {
    const int64_t k = x / C, c = x % C;
    float s = 0;
    for (int32_t j = segments[size_t(k)].first; j < segments[size_t(k)].second; ++j)
      s += to_float(a.dout[int64_t(sorted[size_t(j)]) * C + c]);
    partial[size_t(x)] = s;
  });
  cpu_launch(int64_t(groups.size()) * C, [&](int64_t x) {
    const int64_t k = x / C, c = x % C;
    const EmbeddingGroup& g = groups[size_t(k)];
    float s = 0;
    if (g.segment < 0) {
      for (int32_t j = g.begin; j < g.end; ++j) s += to_float(a.dout[int64_t(sorted[size_t(j)]) * C + c]);
    } else {
      const int32_t n = int32_t((g.end - g.begin + K - 1) / K);
      for (int32_t j = 0; j < n; ++j) s += partial[size_t(int64_t(g.segment + j) * C + c)];
    }
    S* row = embedding_table_row(a, g.key);
    row[c] = from_float<S>(to_float(row[c]) + s);
  });
}

}  // namespace cpu

EmbeddingGrad::EmbeddingGrad(const Device& d, int64_t max_rows, int64_t C) : d_(d), max_rows_(max_rows), C_(C) {
#if PRETRAIN_HAVE_CUDA
  if (d.cuda) scratch_ = cuda::embedding_scratch(d, max_rows, C);
#endif
}

EmbeddingGrad::~EmbeddingGrad() {
#if PRETRAIN_HAVE_CUDA
  cuda::embedding_scratch_free(scratch_);
#endif
}

template <typename S>
void EmbeddingGrad::backward(const EmbeddingBackward<S>& a) {
  if (a.N <= 0) return;
  if (a.N > max_rows_ || a.C != C_)
    throw Error(cat("embedding backward: ", a.N, " rows of ", a.C, " for scratch of ", max_rows_, " rows of ", C_));
  PRETRAIN_OPS_DISPATCH(d_, cuda::embedding_backward(d_, *scratch_, a), cpu::embedding_backward(a));
}

#define PRETRAIN_INSTANTIATE(S) template void EmbeddingGrad::backward<S>(const EmbeddingBackward<S>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops
