#include "trainer/tensor_parallel/layers.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "trainer/tensor_parallel/tensor_group.h"

namespace pretrain {

using namespace kernels;

void linear(const Device& d, float* out, const float* inp, const float* W, const float* b, int64_t N, int64_t IC,
            int64_t OC) {
  gemm(d, false, true, N, OC, IC, 1.0f, inp, IC, W, IC, 0.0f, out, OC, {.bias = b});
}

void linear_gelu(const Device& d, float* out, float* pre, Gelu act, const float* inp, const float* W, const float* b,
                 int64_t N, int64_t IC, int64_t OC) {
  if (act == Gelu::tanh)
    return gemm(d, false, true, N, OC, IC, 1.0f, inp, IC, W, IC, 0.0f, out, OC, {.bias = b, .gelu_aux = pre});
  linear(d, pre, inp, W, b, N, IC, OC);
  launch(d, N * OC, GeluForward{out, pre, act});
}

void bias_backward(const Device& d, float* db, const float* dout, int64_t N, int64_t C, float* scratch) {
  launch(d, row_chunks(N) * C, BiasPartials{scratch, dout, N, C});
  launch(d, C, AddColumnPartials{db, scratch, row_chunks(N), C});
}

void linear_backward(const Device& d, float* dinp, bool accumulate, float* dW, float* db, const float* dout,
                     const float* inp, const float* W, int64_t N, int64_t IC, int64_t OC, float* scratch) {
  if (dinp) gemm(d, false, false, N, IC, OC, 1.0f, dout, OC, W, IC, accumulate ? 1.0f : 0.0f, dinp, IC);
  gemm(d, true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
  bias_backward(d, db, dout, N, OC, scratch);
}

void layernorm(const Device& d, float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
               int64_t N, int64_t C, float eps) {
  launch(d, N, LayerNormForward{out, mean, rstd, inp, w, b, C, eps});
}

void layernorm_backward(const Device& d, float* dinp, bool accumulate, float* dw, float* db, const float* dout,
                        const float* inp, const float* w, const float* mean, const float* rstd, int64_t N, int64_t C,
                        float* scratch) {
  launch(d, row_chunks(N) * C, LayerNormParamPartials{scratch, dout, inp, mean, rstd, N, C});
  launch(d, C, AddColumnPartials{dw, scratch, row_chunks(N), C});
  launch(d, C, AddColumnPartials{db, scratch + row_chunks(N) * C, row_chunks(N), C});
  launch(d, N, LayerNormBackward{dinp, dout, inp, w, mean, rstd, C, accumulate});
}

void dropout(const Device& d, float* x, int64_t n, uint64_t key, float p, int64_t offset) {
  if (key != 0 && p > 0) launch(d, n, Dropout{x, x, key, p, offset});
}

const float* gather_rows(const Device&, const ModelShard& s, const float* region, float* full, int64_t N, int64_t C) {
  if (!s.sequence_parallel) return region;
  s.tensor->all_gather(region, full, N / s.tensor_size * C);
  return full;
}

void reduce_rows(const Device&, const ModelShard& s, float* partial, float* region, int64_t N, int64_t C) {
  if (s.tensor_size == 1) return;
  if (s.sequence_parallel)
    s.tensor->reduce_scatter_sum(partial, region, N / s.tensor_size * C);
  else
    s.tensor->all_reduce_sum(region, N * C);
}

const float* column_parallel_forward(const Device& d, const ModelShard& s, float* out, const float* region,
                                     float* full, const float* W, const float* b, int64_t N, int64_t IC, int64_t OCl,
                                     float* gelu_out, Gelu act) {
  const float* X = gather_rows(d, s, region, full, N, IC);
  if (gelu_out)
    linear_gelu(d, gelu_out, out, act, X, W, b, N, IC, OCl);
  else
    linear(d, out, X, W, b, N, IC, OCl);
  return X;
}

void column_parallel_backward(const Device& d, const ModelShard& s, float* dregion, float* scratch, float* dW,
                              float* db, const float* dout, const float* X, const float* W, int64_t N, int64_t IC,
                              int64_t OCl, float* bias_scratch) {
  float* part = partial_target(s, dregion, scratch);
  linear_backward(d, part, false, dW, db, dout, X, W, N, IC, OCl, bias_scratch);
  reduce_rows(d, s, part, dregion, N, IC);
}

void row_parallel_forward(const Device& d, const ModelShard& s, float* region, float* scratch, const float* X,
                          const float* W, const float* b, int64_t N, int64_t ICl, int64_t OC) {
  float* part = partial_target(s, region, scratch);
  linear(d, part, X, W, s.tensor_rank == 0 ? b : nullptr, N, ICl, OC);
  reduce_rows(d, s, part, region, N, OC);
}

void row_parallel_backward(const Device& d, const ModelShard& s, float* dX, const float* dregion, float* full,
                           float* dW, float* db, const float* X, const float* W, int64_t N, int64_t ICl, int64_t OC,
                           float* bias_scratch) {
  const float* dout = gather_rows(d, s, dregion, full, N, OC);
  linear_backward(d, dX, false, dW, db, dout, X, W, N, ICl, OC, bias_scratch);
}

void vocab_parallel_embedding_forward(const Device& d, const ModelShard& s, const VocabularyShard& v, float* region,
                                      float* scratch, const EmbeddingInputs& in, const EmbeddingTables& t, int64_t N,
                                      int64_t T, int64_t C) {
  const bool lead = s.tensor_rank == 0;
  float* part = partial_target(s, region, scratch);
  const int64_t rows = s.tensor_size > 1 ? v.rows : 0;  // 0: every id is this rank's
  launch(d, N, EmbedForward{part, in.ids, lead ? in.types : nullptr, t.words, lead ? t.positions : nullptr, t.types, T,
                            C, v.begin, rows, in.positions});
  reduce_rows(d, s, part, region, N, C);
}

void vocab_parallel_embedding_backward(const Device& d, const ModelShard& s, const VocabularyShard& v,
                                       const EmbeddingGrads& g, const float* dregion, float* full,
                                       const EmbeddingInputs& in, int64_t N, int64_t T, int64_t C,
                                       const EmbeddingScratch& scratch) {
  if (N == 0) return;
  const float* dout = gather_rows(d, s, dregion, full, N, C);
  const int64_t rows = s.tensor_size > 1 ? v.rows : 0;
  auto host = [&](const int32_t* p) {
    std::vector<int32_t> h(p ? size_t(N) : 0);
    if (p) copy_to_host(d, h.data(), p, h.size() * sizeof(int32_t));
    return h;
  };
  const std::vector<int32_t> ids = host(in.ids), types = host(g.types ? in.types : nullptr), pos = host(in.positions);
  // (table, table row, dout row) of every row that lands somewhere, sorted: each group's rows in
  // increasing order, so the sums run in a fixed order whatever the schedule.
  std::vector<std::array<int32_t, 3>> land;
  land.reserve(size_t(3 * N));
  for (int64_t r = 0; r < N; ++r) {
    const int64_t id = int64_t(ids[size_t(r)]) - v.begin;
    if (rows == 0 || (id >= 0 && id < rows)) land.push_back({0, int32_t(id), int32_t(r)});
    land.push_back({1, int32_t(position_of(pos.empty() ? nullptr : pos.data(), r, T)), int32_t(r)});
    if (g.types) land.push_back({2, types[size_t(r)], int32_t(r)});
  }
  std::sort(land.begin(), land.end());
  // The device index: order, then the segments, then the groups (embedding_scratch_ints' layout).
  const int64_t max_segments = embedding_segments(N);
  std::vector<int32_t> index(size_t(embedding_scratch_ints(N)), 0);
  int32_t* order = index.data();
  int32_t* segments = order + 3 * N;
  std::vector<EmbedGroup> groups;
  int32_t nseg = 0;
  for (size_t i = 0; i < land.size();) {
    size_t j = i;
    while (j < land.size() && land[j][0] == land[i][0] && land[j][1] == land[i][1]) order[j] = land[j][2], ++j;
    EmbedGroup grp{land[i][0], land[i][1], int32_t(i), int32_t(j), -1};
    if (int64_t(j - i) > kRowChunk) {
      grp.segment = nseg;
      for (size_t b = i; b < j; b += size_t(kRowChunk), ++nseg) {
        if (nseg >= max_segments) throw Error("embedding backward: more segments than planned");
        segments[2 * nseg] = int32_t(b), segments[2 * nseg + 1] = int32_t(std::min(j, b + size_t(kRowChunk)));
      }
    }
    groups.push_back(grp);
    i = j;
  }
  int32_t* group_ints = segments + 2 * max_segments;
  std::memcpy(group_ints, groups.data(), groups.size() * sizeof(EmbedGroup));
  const size_t used = size_t(group_ints - index.data()) + groups.size() * sizeof(EmbedGroup) / sizeof(int32_t);
  copy_to_device(d, scratch.index, index.data(), used * sizeof(int32_t));
  const int32_t* d_order = scratch.index;
  const auto* d_groups = reinterpret_cast<const EmbedGroup*>(scratch.index + (group_ints - index.data()));
  launch(d, nseg * C, EmbedSegmentSums{scratch.partial, dout, d_order, scratch.index + 3 * N, C});
  launch(d, int64_t(groups.size()) * C,
         EmbedGroupSums{g.words, g.positions, g.types, dout, d_order, d_groups, scratch.partial, C});
}

void vocab_parallel_cross_entropy(const Device& d, const ModelShard& s, const VocabularyShard& v, float* logits,
                                  float* losses, const int32_t* targets, int64_t n, float dloss, float* scratch) {
  if (s.tensor_size == 1) return launch(d, n, CrossEntropy{logits, losses, targets, v.vocab, dloss});
  // Σ exp in doubles, 8-byte aligned after the two float vectors (scratch is 256-byte aligned).
  float *mx = scratch, *tl = scratch + n;
  double* sum = reinterpret_cast<double*>(scratch + 2 * n);
  launch(d, n, VocabShardMax{logits, mx, tl, targets, v.rows, v.begin, v.vocab});
  s.tensor->all_reduce_max(mx, n);
  s.tensor->all_reduce_sum(tl, n);
  launch(d, n, VocabShardSumExp{logits, mx, sum, v.rows, v.begin, v.vocab});
  s.tensor->all_reduce_sum(sum, n);
  launch(d, n, VocabShardLoss{logits, losses, targets, mx, tl, sum, v.rows, v.begin, v.vocab, dloss});
}

int64_t vocab_parallel_correct(const Device& d, const ModelShard& s, const VocabularyShard& v, const float* logits,
                               const int32_t* targets, int64_t n, float* scratch) {
  if (n == 0) return 0;
  float *mx = scratch, *tl = scratch + n;
  launch(d, n, VocabShardMax{logits, mx, tl, targets, v.rows, v.begin, v.vocab});
  if (s.tensor_size > 1) {
    s.tensor->all_reduce_max(mx, n);
    s.tensor->all_reduce_sum(tl, n);  // the target logit: 0 on the ranks that do not hold it
  }
  std::vector<float> host(size_t(2 * n));
  std::vector<int32_t> target(static_cast<size_t>(n));
  copy_to_host(d, host.data(), scratch, host.size() * sizeof(float));
  copy_to_host(d, target.data(), targets, target.size() * sizeof(int32_t));
  int64_t correct = 0;
  for (int64_t r = 0; r < n; ++r) correct += target[size_t(r)] >= 0 && host[size_t(n + r)] >= host[size_t(r)];
  return correct;
}

}  // namespace pretrain
