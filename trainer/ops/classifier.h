// The fused classifier of GPT's LM head and BERT's MLM head (llm.c's fused_classifier): for each
// row of logits, the loss and the logits' gradient in one pass over the row, the gradient written
// in place of the logits. Only the storage-typed logits exist (bf16 in a bf16 run): no fp32 copy
// of the [N, V] logits and no probabilities are kept.
//
// Row r, its target t (< 0: ignored, as PyTorch's ignore_index: loss 0, gradient 0):
//   M = max_v x_v, S = Σ_v exp(x_v − M)    (one online pass: a running max rescales the sum)
//   loss_r = log S + M − x_t,  dx_v = (exp(x_v − M) / S − [v = t]) · dloss  (stored as T)
// Columns [V, ld) are padding (a vocabulary rounded up for 16-byte rows): left out of the softmax,
// gradient 0.
//
// The vocabulary-parallel form (Megatron's, as trainer/parallel/layers.h's cross-entropy): a
// tensor rank holds the columns of ids [v0, v0 + V). classifier_shard_stats writes each row's
// (M_k, S_k, x_t or 0) of the shard; the group all-gathers them ([ranks, N]) and
// classifier_combine_stats merges them in rank order (M = max M_k, S = Σ S_k · exp(M_k − M),
// x_t = Σ of the one rank's x_t), the same on every rank; classifier_shard_backward then writes the
// loss and the shard's gradient from the merged row statistics. classifier_forward_backward is
// the one-rank case in one kernel.
//
// CPU: the reference (cpu:: below; Σ exp in double). It is tested against the unfused ops in
// double (logits → softmax → cross-entropy → gradient, tests/trainer/classifier_test.cpp); the
// CUDA kernel (classifier_cuda.cu: a block of 512 threads per row, 16-byte loads when ld allows,
// the block's (max, sum) merged in a fixed tree, the row re-read from L2 for the gradient) is
// tested against the CPU (tests/gpu/classifier_test.cpp). Deterministic run to run.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/hd.h"
#include "trainer/backend.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops {

template <typename T>
struct FusedClassifier {
  T* logits;               // [N, ld]: in the logits, out their gradient
  float* losses;           // [N]
  const int32_t* targets;  // [N], global ids; < 0: ignored
  int64_t N, V, ld;        // V real columns (of this shard) in rows of ld
  float dloss;             // d(total loss) / d(loss_r): 1 / count for a mean
  int64_t v0 = 0;          // the id of column 0 (a vocabulary shard's first id)
};

// One row's statistics over some of its columns: max, Σ exp(x − max) over them, and the target's
// logit when the target is among them (else 0).
struct ClassifierRowStats {
  float max = -INFINITY, sum = 0.0f, target = 0.0f;
};

PRETRAIN_HD inline ClassifierRowStats combine(const ClassifierRowStats& a, const ClassifierRowStats& b) {
  const float m = a.max > b.max ? a.max : b.max;
  if (m == -INFINITY) return {m, 0.0f, a.target + b.target};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m), a.target + b.target};
}

template <typename T>
void classifier_forward_backward(const Device& d, const FusedClassifier<T>& a);
template <typename T>
void classifier_shard_stats(const Device& d, const FusedClassifier<T>& a, ClassifierRowStats* stats);
// merged[r] = the ranks' stats of row r combined in rank order; gathered: [ranks, N].
void classifier_combine_stats(const Device& d, ClassifierRowStats* merged, const ClassifierRowStats* gathered,
                              int64_t ranks, int64_t N);
template <typename T>
void classifier_shard_backward(const Device& d, const FusedClassifier<T>& a, const ClassifierRowStats* merged);

namespace cuda {
// stats_out: written when not null (the shard's stats); stats_in: the merged stats when not null
// (then no stats pass); neither: the fused one-rank op.
template <typename T>
void classifier(const Device& d, const FusedClassifier<T>& a, ClassifierRowStats* stats_out,
                const ClassifierRowStats* stats_in);
void classifier_combine_stats(const Device& d, ClassifierRowStats* merged, const ClassifierRowStats* gathered,
                              int64_t ranks, int64_t N);
}  // namespace cuda

namespace cpu {

template <typename T>
ClassifierRowStats row_stats(const FusedClassifier<T>& a, int64_t r) {
  const T* x = a.logits + r * a.ld;
  ClassifierRowStats s;
  for (int64_t v = 0; v < a.V; ++v) s.max = std::max(s.max, to_float(x[v]));
  double sum = 0;
  for (int64_t v = 0; v < a.V; ++v) sum += double(std::exp(to_float(x[v]) - s.max));
  s.sum = float(sum);
  const int64_t t = int64_t(a.targets[r]) - a.v0;
  s.target = a.targets[r] >= 0 && t >= 0 && t < a.V ? to_float(x[t]) : 0.0f;
  return s;
}

template <typename T>
void row_backward(const FusedClassifier<T>& a, int64_t r, const ClassifierRowStats& s) {
  T* x = a.logits + r * a.ld;
  if (a.targets[r] < 0) {
    a.losses[r] = 0.0f;
    for (int64_t v = 0; v < a.ld; ++v) x[v] = from_float<T>(0.0f);
    return;
  }
  a.losses[r] = std::log(s.sum) + s.max - s.target;
  const int64_t t = int64_t(a.targets[r]) - a.v0;
  const float scale = a.dloss / s.sum;
  for (int64_t v = 0; v < a.V; ++v)
    x[v] = from_float<T>(std::exp(to_float(x[v]) - s.max) * scale - (v == t ? a.dloss : 0.0f));
  for (int64_t v = a.V; v < a.ld; ++v) x[v] = from_float<T>(0.0f);
}

template <typename T>
void classifier_forward_backward(const FusedClassifier<T>& a) {
  cpu_launch(a.N, [&](int64_t r) { row_backward(a, r, row_stats(a, r)); });
}

}  // namespace cpu
}  // namespace pretrain::ops
