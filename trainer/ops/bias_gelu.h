// Bias + GELU fused, forward and backward, and the bias gradient alone (the column reduction every
// linear layer's backward needs): the kernels for what cuBLASLt's epilogues do not cover.
//
// Which epilogue applies (CUDA 13's cublasLt.h; cuBLASLt's GELU is the tanh approximation, so it
// fits GPT-2 and not BERT's erf GELU):
//   GPT fc forward:   CUBLASLT_EPILOGUE_GELU_AUX_BIAS (bias, tanh GELU, the pre-activation kept
//                     in the aux buffer, bf16 like D: CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE
//                     defaults to D's type);
//   GPT fc backward:  CUBLASLT_EPILOGUE_DGELU_BGRAD on the dX GEMM of the projection (dgelu with
//                     the aux, and the fc bias gradient);
//   weight GEMMs:     CUBLASLT_EPILOGUE_BGRADB gives a linear layer's bias gradient from its dW GEMM;
//   BERT (erf GELU):  bias_gelu_forward / bias_gelu_backward below, after a plain GEMM.
// cuBLASLt's bias gradients are reductions of its own, not promised to be the same bits at every
// launch or algorithm; bias_gelu_backward's are (below). The trainer picks per run.
//
// Forward, element (r, c): pre = inp + bias[c] (stored as T, the backward's input), out = gelu(pre)
// computed from pre as stored. Backward: dinp = dout · gelu'(pre) (gelu false: no GELU, dinp =
// dout and may be null), dbias += Σ_r dinp as a deterministic two-pass column sum: chunks of
// kernels::kRowChunk rows, then the chunks in order.
// CPU: the reference (cpu:: below). CUDA (bias_gelu_cuda.cu): 16-byte packs; the backward's block
// owns 128 packs of columns × one chunk of rows, each thread walking its chunk's rows for its
// columns, so the partial sums need no atomics. Needs C a multiple of kPack<T>.
#pragma once
#include <algorithm>
#include <cstdint>

#include "trainer/backend.h"
#include "trainer/kernels.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops {

using kernels::Gelu;

template <typename T>
struct BiasGeluForward {
  T* out;          // [N, C]
  T* pre;          // [N, C]: inp + bias as stored; null: not kept
  const T* inp;    // [N, C]; may alias out
  const T* bias;   // [C]; null: none
  int64_t N, C;
  Gelu kind;
};

template <typename T>
struct BiasGeluBackward {
  T* dinp;          // [N, C]; may alias dout; null (gelu false only): not written
  T* dbias;         // [C], += Σ_r dinp; null: not wanted
  float* scratch;   // bias_backward_scratch(N, C) floats
  const T* dout;    // [N, C]
  const T* pre;     // [N, C]: the forward's pre-activation (gelu only)
  int64_t N, C;
  Gelu kind;
  bool gelu = true;  // false: the bias gradient of dout alone
};

inline int64_t bias_backward_scratch(int64_t N, int64_t C) { return kernels::row_chunks(N) * C; }

template <typename T>
void bias_gelu_forward(const Device& d, const BiasGeluForward<T>& a);
template <typename T>
void bias_gelu_backward(const Device& d, const BiasGeluBackward<T>& a);

namespace cuda {
template <typename T>
void bias_gelu_forward(const Device& d, const BiasGeluForward<T>& a);
template <typename T>
void bias_gelu_backward(const Device& d, const BiasGeluBackward<T>& a);
}  // namespace cuda

namespace cpu {

template <typename T>
void bias_gelu_forward(const BiasGeluForward<T>& a) {
  cpu_launch(a.N * a.C, [&](int64_t i) {
    const T pre = from_float<T>(to_float(a.inp[i]) + (a.bias ? to_float(a.bias[i % a.C]) : 0.0f));
    if (a.pre) a.pre[i] = pre;
    a.out[i] = from_float<T>(kernels::gelu(a.kind, to_float(pre)));
  });
}

template <typename T>
float bias_gelu_grad(const BiasGeluBackward<T>& a, int64_t i) {
  const float g = to_float(a.dout[i]);
  return a.gelu ? g * kernels::gelu_grad(a.kind, to_float(a.pre[i])) : g;
}

template <typename T>
void bias_gelu_backward(const BiasGeluBackward<T>& a) {
  const int64_t N = a.N, C = a.C, chunks = kernels::row_chunks(N);
  if (a.dbias) {  // before dinp is written: it may alias dout
    cpu_launch(chunks * C, [&](int64_t i) {
      const int64_t k = i / C, c = i % C, r1 = std::min(N, (k + 1) * kernels::kRowChunk);
      float s = 0;
      for (int64_t r = k * kernels::kRowChunk; r < r1; ++r) s += to_float(from_float<T>(bias_gelu_grad(a, r * C + c)));
      a.scratch[i] = s;
    });
    cpu_launch(C, [&](int64_t c) {
      float s = 0;
      for (int64_t k = 0; k < chunks; ++k) s += a.scratch[k * C + c];
      a.dbias[c] = from_float<T>(to_float(a.dbias[c]) + s);
    });
  }
  if (a.dinp) cpu_launch(N * C, [&](int64_t i) { a.dinp[i] = from_float<T>(bias_gelu_grad(a, i)); });
}

}  // namespace cpu
}  // namespace pretrain::ops
