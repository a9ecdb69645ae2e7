// LayerNorm fused with the residual add, forward and backward (issue #47's row kernels).
//
// Forward, row r: s = x + residual (stored as T: the sum the next residual add or the backward
// reads), out = (s − mean) · rstd · w + b, mean and rstd (float) kept for the backward pass. The
// statistics are taken of s as stored, so the backward, which reads it back, sees the same row.
// Both of the trainer's forms are this one op; they differ in which output goes on:
//   GPT (pre-LN):  sum is the residual stream, out feeds the next attention or MLP;
//   BERT (post-LN): out is the residual stream and the next layer's input; sum is only kept for
//   the backward. With residual null, s = x (the first LayerNorm; sum may then be null).
// Backward, row r: g = rstd · (dn − mean(dn) − n · mean(dn · n)), dn = dout · w, n the normalised
// row; dinp = g (written) and dresidual += g, in the same pass (GPT: the stream's gradient, dinp
// null; BERT: dinp is the sublayer output's gradient and dresidual the previous LayerNorm
// output's, which the attention's or MLP's input GEMM also adds to). dw += Σ_r dout · n and
// db += Σ_r dout over rows, as deterministic two-pass column sums: fixed chunks of rows, then the
// chunks added in order, so the bits do not depend on the thread count or the grid.
//
// CPU (this file's cpu:: functions, run over rows by oneTBB): the reference the CUDA kernels are
// tested against (tests/gpu/layernorm_test.cpp); it is tested against the double-precision
// definitions of trainer/reference.h (tests/trainer/layernorm_test.cpp).
// CUDA (layernorm_cuda.cu): a warp per row, 16-byte loads, the row kept in shared memory between
// the passes; the backward runs one block per kLnRowsPerBlock rows, each warp summing its rows'
// dw and db in its own slice of shared memory.
// Needs C a multiple of kPack<T> (4 floats, 8 bf16) and 16-byte aligned rows on CUDA.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "trainer/backend.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops {

template <typename T>
struct LayerNormForward {
  T* out;             // [N, C]
  T* sum;             // [N, C]: x + residual as stored; null: not kept (then residual must be null)
  float *mean, *rstd;  // [N]
  const T* x;         // [N, C]
  const T* residual;  // [N, C]; null: no residual add
  const T *w, *b;     // [C]
  int64_t N, C;
  float eps;
};

template <typename T>
struct LayerNormBackward {
  T* dinp;       // [N, C], written; null: not wanted
  T* dresidual;  // [N, C], += the same gradient; null: none
  T *dw, *db;    // [C], += the column sums
  float* scratch;  // layernorm_backward_scratch(N, C) floats
  const T* dout;   // [N, C]
  const T* inp;    // [N, C]: the forward's s (its `sum`, or x without a residual)
  const T* w;
  const float *mean, *rstd;
  int64_t N, C;
};

// Rows per block of the CUDA backward (and per partial sum of its dw, db).
inline constexpr int64_t kLnRowsPerBlock = 16;
inline int64_t layernorm_backward_scratch(int64_t N, int64_t C) {
  return 2 * ((N + kLnRowsPerBlock - 1) / kLnRowsPerBlock) * C;
}

template <typename T>
void layernorm_forward(const Device& d, const LayerNormForward<T>& a);
template <typename T>
void layernorm_backward(const Device& d, const LayerNormBackward<T>& a);

namespace cuda {
template <typename T>
void layernorm_forward(const Device& d, const LayerNormForward<T>& a);
template <typename T>
void layernorm_backward(const Device& d, const LayerNormBackward<T>& a);
}  // namespace cuda

namespace cpu {

// Row r of the forward; s: C floats of the caller's.
template <typename T>
void layernorm_forward_row(const LayerNormForward<T>& a, int64_t r, float* s) {
  const int64_t C = a.C;
  const T* x = a.x + r * C;
  float m = 0;
  for (int64_t c = 0; c < C; ++c) {
    const float v = a.residual ? to_float(x[c]) + to_float(a.residual[r * C + c]) : to_float(x[c]);
    const T stored = from_float<T>(v);
    if (a.sum) a.sum[r * C + c] = stored;
    s[c] = to_float(stored);
    m += s[c];
  }
  m /= float(C);
  float v = 0;
  for (int64_t c = 0; c < C; ++c) v += (s[c] - m) * (s[c] - m);
  const float rs = 1.0f / std::sqrt(v / float(C) + a.eps);
  for (int64_t c = 0; c < C; ++c)
    a.out[r * C + c] = from_float<T>((s[c] - m) * rs * to_float(a.w[c]) + to_float(a.b[c]));
  a.mean[r] = m, a.rstd[r] = rs;
}

// Row r of the backward's input gradient.
template <typename T>
void layernorm_backward_row(const LayerNormBackward<T>& a, int64_t r) {
  const int64_t C = a.C;
  const T *x = a.inp + r * C, *d = a.dout + r * C;
  const float m = a.mean[r], s = a.rstd[r];
  float dn_mean = 0, dnn_mean = 0;
  for (int64_t c = 0; c < C; ++c) {
    const float dn = to_float(d[c]) * to_float(a.w[c]);
    dn_mean += dn;
    dnn_mean += dn * (to_float(x[c]) - m) * s;
  }
  dn_mean /= float(C), dnn_mean /= float(C);
  for (int64_t c = 0; c < C; ++c) {
    const float n = (to_float(x[c]) - m) * s;
    const float g = s * (to_float(d[c]) * to_float(a.w[c]) - dn_mean - n * dnn_mean);
    if (a.dinp) a.dinp[r * C + c] = from_float<T>(g);
    if (a.dresidual) a.dresidual[r * C + c] = from_float<T>(to_float(a.dresidual[r * C + c]) + g);
  }
}

template <typename T>
void layernorm_forward(const LayerNormForward<T>& a) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, a.N), [&](const tbb::blocked_range<int64_t>& rows) {
    std::vector<float> s(static_cast<size_t>(a.C));
    for (int64_t r = rows.begin(); r < rows.end(); ++r) layernorm_forward_row(a, r, s.data());
  });
}

template <typename T>
void layernorm_backward(const LayerNormBackward<T>& a) {
  const int64_t N = a.N, C = a.C, chunks = (N + kLnRowsPerBlock - 1) / kLnRowsPerBlock;
  cpu_launch(N, [&](int64_t r) { layernorm_backward_row(a, r); });
  // dw, db: chunk k's column sums (rows in order), then the chunks in order.
  float *pw = a.scratch, *pb = a.scratch + chunks * C;
  cpu_launch(chunks * C, [&](int64_t i) {
    const int64_t k = i / C, c = i % C, r1 = std::min(N, (k + 1) * kLnRowsPerBlock);
    float sw = 0, sb = 0;
    for (int64_t r = k * kLnRowsPerBlock; r < r1; ++r) {
      const float dout = to_float(a.dout[r * C + c]);
      sw += dout * (to_float(a.inp[r * C + c]) - a.mean[r]) * a.rstd[r];
      sb += dout;
    }
    pw[i] = sw, pb[i] = sb;
  });
  cpu_launch(C, [&](int64_t c) {
    float sw = 0, sb = 0;
    for (int64_t k = 0; k < chunks; ++k) sw += pw[k * C + c], sb += pb[k * C + c];
    a.dw[c] = from_float<T>(to_float(a.dw[c]) + sw);
    a.db[c] = from_float<T>(to_float(a.db[c]) + sb);
  });
}

}  // namespace cpu
}  // namespace pretrain::ops
