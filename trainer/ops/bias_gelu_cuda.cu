// Bias + GELU and the bias gradient on CUDA (the op and its CPU reference: bias_gelu.h).
// Forward: one 16-byte pack per thread, grid-stride. Backward: block (x, k) owns kThreads packs of
// columns of row chunk k; each thread walks the chunk's rows for its pack, writing dinp and adding
// the stored gradient into its own partial sums, then writes them to scratch[k]; a column kernel
// adds the chunks in order into dbias. No atomics: the same bits on every run.
#include <algorithm>

#include "trainer/ops/bias_gelu.h"
#include "trainer/ops/cuda_util.cuh"

namespace pretrain::ops::cuda {
namespace {

constexpr int kThreads = 128;

template <typename T>
__global__ void bias_gelu_forward_kernel(BiasGeluForward<T> a) {
  constexpr int P = Pack<T>::n;
  const int64_t packs = a.N * a.C / P;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < packs; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i * P, c = e % a.C;
    const Pack<T> x = load_pack_plain(a.inp + e);  // out may alias inp
    Pack<T> bv;
    if (a.bias) bv = load_pack(a.bias + c);
    Pack<T> pre, out;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      pre.v[k] = from_float<T>(to_float(x.v[k]) + (a.bias ? to_float(bv.v[k]) : 0.0f));
      out.v[k] = from_float<T>(kernels::gelu(a.kind, to_float(pre.v[k])));
    }
    if (a.pre) store_pack(a.pre + e, pre);
    store_pack(a.out + e, out);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) bias_gelu_backward_kernel(BiasGeluBackward<T> a) {
  constexpr int P = Pack<T>::n;
  const int64_t c = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * P, k = blockIdx.y;
  if (c >= a.C) return;
  const int64_t r1 = min(a.N, (k + 1) * kernels::kRowChunk);
  float s[P];
#pragma unroll
  for (int j = 0; j < P; ++j) s[j] = 0.0f;
  for (int64_t r = k * kernels::kRowChunk; r < r1; ++r) {
    const int64_t e = r * a.C + c;
    const Pack<T> d = load_pack_plain(a.dout + e);  // dinp may alias dout
    Pack<T> g;
    if (a.gelu) {
      const Pack<T> pre = load_pack_stream(a.pre + e);
#pragma unroll
      for (int j = 0; j < P; ++j) g.v[j] = from_float<T>(to_float(d.v[j]) * kernels::gelu_grad(a.kind, to_float(pre.v[j])));
    } else {
      g = d;
    }
#pragma unroll
    for (int j = 0; j < P; ++j) s[j] += to_float(g.v[j]);
    if (a.dinp) store_pack(a.dinp + e, g);
  }
  if (a.dbias) {
#pragma unroll
    for (int j = 0; j < P; ++j) a.scratch[k * a.C + c + j] = s[j];
  }
}

template <typename T>
__global__ void add_chunks_kernel(T* out, const float* partial, int64_t chunks, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s = 0.0f;
  for (int64_t k = 0; k < chunks; ++k) s += partial[k * C + c];
  out[c] = from_float<T>(to_float(out[c]) + s);
}

}  // namespace

template <typename T>
void bias_gelu_forward(const Device& d, const BiasGeluForward<T>& a) {
  require_packs<T>("bias_gelu_forward", a.C, {a.out, a.pre, a.inp, a.bias});
  const int64_t packs = a.N * a.C / kPack<T>;
  const unsigned blocks = unsigned(std::min<int64_t>(ceil_div(packs, 256), 132 * 16));
  bias_gelu_forward_kernel<T><<<blocks, 256, 0, stream_of(d)>>>(a);
  check_launch("bias_gelu_forward");
}

template <typename T>
void bias_gelu_backward(const Device& d, const BiasGeluBackward<T>& a) {
  require_packs<T>("bias_gelu_backward", a.C, {a.dinp, a.dout, a.pre});
  const int64_t chunks = kernels::row_chunks(a.N);
  if (chunks > 65535) throw Error(cat("bias_gelu_backward: ", a.N, " rows are more than 65535 chunks"));
  const dim3 grid(unsigned(ceil_div(a.C / kPack<T>, kThreads)), unsigned(chunks));
  bias_gelu_backward_kernel<T><<<grid, kThreads, 0, stream_of(d)>>>(a);
  check_launch("bias_gelu_backward");
  if (a.dbias) {
    add_chunks_kernel<T><<<unsigned(ceil_div(a.C, 256)), 256, 0, stream_of(d)>>>(a.dbias, a.scratch, chunks, a.C);
    check_launch("bias_gelu_backward (dbias)");
  }
}

#define PRETRAIN_INSTANTIATE(T)                                                        \
  template void bias_gelu_forward<T>(const Device&, const BiasGeluForward<T>&); \
  template void bias_gelu_backward<T>(const Device&, const BiasGeluBackward<T>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops::cuda
