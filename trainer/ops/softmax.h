// The attention softmax where it remains (the fallback attention of attention.h: batched GEMMs
// around it), masked and scaled, forward and backward.
//
// Forward, row r = (b · NH + h) · T + i of the [B, NH, T, T] scores QKᵀ (not yet scaled):
//   probs[j] = softmax_j(scale · scores[j] + mask(i, j)),
// mask: BERT's additive −10000 on masked keys (kernels::key_mask_score: padding keys, and for a
// packed row's instance the other instances' keys), and GPT's causal mask: keys j > i get exactly
// 0 and are not read. Backward: dscores = scale · probs ⊙ (dprobs − Σ_j probs · dprobs), the
// gradient of the unscaled scores (dscores may alias dprobs).
// CPU: the reference (cpu:: below). CUDA (softmax_cuda.cu): a warp per row, 16-byte loads, the
// online max and Σ exp in one pass and the probabilities in a second; the row's reductions are
// warp butterflies, so the bits are the same run to run. Needs T a multiple of kPack<S>.
#pragma once
#include <cmath>
#include <cstdint>

#include "trainer/backend.h"
#include "trainer/kernels.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops {

template <typename S>
struct SoftmaxForward {
  S* probs;               // [B, NH, T, T]
  const S* scores;        // [B, NH, T, T]; may alias probs
  const int32_t* key_mask;  // [B, T]: input_mask or sequence_ids; null: none
  bool causal;
  float scale;
  int64_t B, NH, T;
  float* lse = nullptr;     // [B, NH, T]: max + log Σ exp per row (flash attention's statistic); null: not wanted
};

template <typename S>
struct SoftmaxBackward {
  S* dscores;        // [rows, T]; may alias dprobs
  const S* dprobs;   // [rows, T]
  const S* probs;    // [rows, T]
  float scale;
  int64_t rows, T;
};

template <typename S>
void softmax_forward(const Device& d, const SoftmaxForward<S>& a);
template <typename S>
void softmax_backward(const Device& d, const SoftmaxBackward<S>& a);

namespace cuda {
template <typename S>
void softmax_forward(const Device& d, const SoftmaxForward<S>& a);
template <typename S>
void softmax_backward(const Device& d, const SoftmaxBackward<S>& a);
}  // namespace cuda

namespace cpu {

template <typename S>
void softmax_forward_row(const SoftmaxForward<S>& a, int64_t r) {
  const int64_t T_ = a.T, b = r / (a.NH * T_), i = r % T_, n = a.causal ? i + 1 : T_;
  const int32_t* km = a.key_mask ? a.key_mask + b * T_ : nullptr;
  const S* s = a.scores + r * T_;
  S* p = a.probs + r * T_;
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, to_float(s[j]) * a.scale + kernels::key_mask_score(km, i, j));
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(to_float(s[j]) * a.scale + kernels::key_mask_score(km, i, j) - mx);
  const float inv = 1.0f / sum;
  // The second exp (instead of keeping the first in p) keeps p free to alias s.
  for (int64_t j = 0; j < n; ++j)
    p[j] = from_float<S>(std::exp(to_float(s[j]) * a.scale + kernels::key_mask_score(km, i, j) - mx) * inv);
  for (int64_t j = n; j < T_; ++j) p[j] = from_float<S>(0.0f);
  if (a.lse) a.lse[r] = mx + std::log(sum);
}

template <typename S>
void softmax_backward_row(const SoftmaxBackward<S>& a, int64_t r) {
  const S *p = a.probs + r * a.T, *dp = a.dprobs + r * a.T;
  float dot = 0;
  for (int64_t j = 0; j < a.T; ++j) dot += to_float(p[j]) * to_float(dp[j]);
  S* ds = a.dscores + r * a.T;
  for (int64_t j = 0; j < a.T; ++j) ds[j] = from_float<S>(a.scale * to_float(p[j]) * (to_float(dp[j]) - dot));
}

template <typename S>
void softmax_forward(const SoftmaxForward<S>& a) {
  cpu_launch(a.B * a.NH * a.T, [&](int64_t r) { softmax_forward_row(a, r); });
}
template <typename S>
void softmax_backward(const SoftmaxBackward<S>& a) {
  cpu_launch(a.rows, [&](int64_t r) { softmax_backward_row(a, r); });
}

}  // namespace cpu
}  // namespace pretrain::ops
