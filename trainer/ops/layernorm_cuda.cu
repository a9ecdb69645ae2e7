// LayerNorm with the residual add on CUDA (the op and its CPU reference: layernorm.h).
//
// Forward: one warp per row, kFwdWarps rows per block. Each lane reads 16-byte packs of x and the
// residual (lane l takes packs l, l + 32, …: a warp reads 512 contiguous bytes at a time), writes
// the rounded sum, and keeps it as floats in the warp's slice of shared memory, from which the
// variance (two-pass, as the CPU) and the output are formed: x and residual are read once.
// Backward: one block of kBwdWarps warps per kLnRowsPerBlock rows; a warp per row at a time, the
// row's two sums by warp butterflies, dinp / dresidual written in the second pass; each warp adds
// its rows' dout · n and dout into its own slice of shared memory (a lane owns its columns: no
// atomics), then the block adds the warps' slices in warp order into the chunk's partial row;
// a column kernel adds the chunks in order into dw and db. Deterministic run to run.
#include <algorithm>

#include "trainer/ops/cuda_util.cuh"
#include "trainer/ops/layernorm.h"

namespace pretrain::ops::cuda {
namespace {

constexpr int kFwdWarps = 4;
constexpr int kBwdWarps = 4;
static_assert(kLnRowsPerBlock % kBwdWarps == 0);

template <typename T>
__global__ void __launch_bounds__(kFwdWarps * 32) layernorm_forward_kernel(LayerNormForward<T> a) {
  extern __shared__ float4 smem_f4[];
  float* smem = reinterpret_cast<float*>(smem_f4);
  constexpr int P = Pack<T>::n;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r = int64_t(blockIdx.x) * kFwdWarps + warp;
  if (r >= a.N) return;
  const int64_t C = a.C;
  float* s = smem + warp * C;
  const T* x = a.x + r * C;
  const T* res = a.residual ? a.residual + r * C : nullptr;
  float total = 0.0f;
  for (int64_t c = int64_t(lane) * P; c < C; c += 32 * P) {
    const Pack<T> xv = load_pack_stream(x + c);
    Pack<T> rv;
    if (res) rv = load_pack_stream(res + c);
    Pack<T> sv;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const float v = res ? to_float(xv.v[k]) + to_float(rv.v[k]) : to_float(xv.v[k]);
      sv.v[k] = from_float<T>(v);
      s[c + k] = to_float(sv.v[k]);
      total += s[c + k];
    }
    if (a.sum) store_pack(a.sum + r * C + c, sv);
  }
  const float m = warp_sum(total) / float(C);
  float var = 0.0f;
  for (int64_t c = int64_t(lane) * P; c < C; c += 32 * P)
#pragma unroll
    for (int k = 0; k < P; ++k) var += (s[c + k] - m) * (s[c + k] - m);
  const float rs = 1.0f / sqrtf(warp_sum(var) / float(C) + a.eps);
  for (int64_t c = int64_t(lane) * P; c < C; c += 32 * P) {
    const Pack<T> wv = load_pack(a.w + c), bv = load_pack(a.b + c);
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < P; ++k) o.v[k] = from_float<T>((s[c + k] - m) * rs * to_float(wv.v[k]) + to_float(bv.v[k]));
    store_pack(a.out + r * C + c, o);
  }
  if (lane == 0) a.mean[r] = m, a.rstd[r] = rs;
}

template <typename T>
__global__ void __launch_bounds__(kBwdWarps * 32) layernorm_backward_kernel(LayerNormBackward<T> a) {
  extern __shared__ float4 smem_f4[];
  float* smem = reinterpret_cast<float*>(smem_f4);  // [kBwdWarps][2][C]: each warp's dw, db
  constexpr int P = Pack<T>::n;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t C = a.C, chunk = blockIdx.x;
  float* pw = smem + int64_t(warp) * 2 * C;
  float* pb = pw + C;
  for (int64_t c = int64_t(lane) * P; c < C; c += 32 * P)
#pragma unroll
    for (int k = 0; k < P; ++k) pw[c + k] = pb[c + k] = 0.0f;
  for (int i = warp; i < kLnRowsPerBlock; i += kBwdWarps) {
    const int64_t r = chunk * kLnRowsPerBlock + i;
    if (r >= a.N) break;
    const T *x = a.inp + r * C, *d = a.dout + r * C;
    const float m = a.mean[r], s = a.rstd[r];
    float dn_sum = 0.0f, dnn_sum = 0.0f;
    for (int64_t c = int64_t(lane) * P; c < C; c += 32 * P) {
      const Pack<T> xv = load_pack(x + c), dv = load_pack(d + c), wv = load_pack(a.w + c);
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const float dout = to_float(dv.v[k]), n = (to_float(xv.v[k]) - m) * s, dn = dout * to_float(wv.v[k]);
        dn_sum += dn, dnn_sum += dn * n;
        pw[c + k] += dout * n, pb[c + k] += dout;
      }
    }
    const float dn_mean = warp_sum(dn_sum) / float(C), dnn_mean = warp_sum(dnn_sum) / float(C);
    for (int64_t c = int64_t(lane) * P; c < C; c += 32 * P) {
      const Pack<T> xv = load_pack(x + c), dv = load_pack(d + c), wv = load_pack(a.w + c);
      Pack<T> gi, gr;
      if (a.dresidual) gr = load_pack_plain(a.dresidual + r * C + c);
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const float n = (to_float(xv.v[k]) - m) * s;
        const float g = s * (to_float(dv.v[k]) * to_float(wv.v[k]) - dn_mean - n * dnn_mean);
        gi.v[k] = from_float<T>(g);
        if (a.dresidual) gr.v[k] = from_float<T>(to_float(gr.v[k]) + g);
      }
      if (a.dinp) store_pack(a.dinp + r * C + c, gi);
      if (a.dresidual) store_pack(a.dresidual + r * C + c, gr);
    }
  }
  __syncthreads();
  const int64_t chunks = gridDim.x;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    float sw = 0.0f, sb = 0.0f;
    for (int w = 0; w < kBwdWarps; ++w) sw += smem[int64_t(w) * 2 * C + c], sb += smem[int64_t(w) * 2 * C + C + c];
    a.scratch[chunk * C + c] = sw;
    a.scratch[(chunks + chunk) * C + c] = sb;
  }
}

// dw[c] += Σ_k partial_w[k][c], db likewise, chunks in order.
template <typename T>
__global__ void layernorm_param_kernel(T* dw, T* db, const float* partial, int64_t chunks, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sw = 0.0f, sb = 0.0f;
  for (int64_t k = 0; k < chunks; ++k) sw += partial[k * C + c], sb += partial[(chunks + k) * C + c];
  dw[c] = from_float<T>(to_float(dw[c]) + sw);
  db[c] = from_float<T>(to_float(db[c]) + sb);
}

}  // namespace

template <typename T>
void layernorm_forward(const Device& d, const LayerNormForward<T>& a) {
  require_packs<T>("layernorm_forward", a.C, {a.out, a.sum, a.x, a.residual, a.w, a.b});
  const size_t smem = shared_bytes_or_throw("layernorm_forward", reinterpret_cast<const void*>(&layernorm_forward_kernel<T>),
                                            size_t(kFwdWarps) * size_t(a.C) * sizeof(float));
  layernorm_forward_kernel<T><<<unsigned(ceil_div(a.N, kFwdWarps)), kFwdWarps * 32, smem, stream_of(d)>>>(a);
  check_launch("layernorm_forward");
}

template <typename T>
void layernorm_backward(const Device& d, const LayerNormBackward<T>& a) {
  require_packs<T>("layernorm_backward", a.C, {a.dinp, a.dresidual, a.dout, a.inp, a.w});
  const size_t smem = shared_bytes_or_throw("layernorm_backward", reinterpret_cast<const void*>(&layernorm_backward_kernel<T>),
                                            size_t(kBwdWarps) * 2 * size_t(a.C) * sizeof(float));
  const int64_t chunks = ceil_div(a.N, kLnRowsPerBlock);
  layernorm_backward_kernel<T><<<unsigned(chunks), kBwdWarps * 32, smem, stream_of(d)>>>(a);
  check_launch("layernorm_backward");
  layernorm_param_kernel<T><<<unsigned(ceil_div(a.C, 256)), 256, 0, stream_of(d)>>>(a.dw, a.db, a.scratch, chunks, a.C);
  check_launch("layernorm_backward (dw, db)");
}

#define PRETRAIN_INSTANTIATE(T)                                                         \
  template void layernorm_forward<T>(const Device&, const LayerNormForward<T>&); \
  template void layernorm_backward<T>(const Device&, const LayerNormBackward<T>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops::cuda
