// The masked, scaled attention softmax on CUDA (the op and its CPU reference: softmax.h): a warp
// per row, kWarps rows per block, each lane taking 16-byte packs l, l + 32, … of the row. Pass 1
// keeps a running (max, Σ exp) per lane and merges the lanes by butterfly; pass 2 re-reads the row
// (from L1/L2) and writes the probabilities; a causal row reads keys ≤ i only and writes zeros past.
#include "trainer/ops/cuda_util.cuh"
#include "trainer/ops/softmax.h"

namespace pretrain::ops::cuda {
namespace {

constexpr int kWarps = 4;

template <typename S>
__global__ void __launch_bounds__(kWarps * 32) softmax_forward_kernel(SoftmaxForward<S> a) {
  constexpr int P = Pack<S>::n;
  const int lane = threadIdx.x % 32;
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32, T_ = a.T;
  if (r >= a.B * a.NH * T_) return;
  const int64_t b = r / (a.NH * T_), i = r % T_, n = a.causal ? i + 1 : T_;
  const int32_t* km = a.key_mask ? a.key_mask + b * T_ : nullptr;
  const S* s = a.scores + r * T_;
  MaxSum acc;
  for (int64_t j0 = int64_t(lane) * P; j0 < n; j0 += 32 * P) {
    const Pack<S> v = load_pack(s + j0);
#pragma unroll
    for (int k = 0; k < P; ++k)
      if (j0 + k < n) acc.add(to_float(v.v[k]) * a.scale + kernels::key_mask_score(km, i, j0 + k));
  }
  acc = warp_combine(acc);
  const float inv = 1.0f / acc.sum;
  if (a.lse && lane == 0) a.lse[r] = acc.max + logf(acc.sum);
  S* p = a.probs + r * T_;
  for (int64_t j0 = int64_t(lane) * P; j0 < T_; j0 += 32 * P) {
    Pack<S> o;
    if (j0 < n) {
      const Pack<S> v = load_pack_plain(s + j0);  // probs may alias scores: no read-only cache
#pragma unroll
      for (int k = 0; k < P; ++k)
        o.v[k] = from_float<S>(j0 + k < n ? __expf(to_float(v.v[k]) * a.scale + kernels::key_mask_score(km, i, j0 + k) - acc.max) * inv
                                          : 0.0f);
    } else {
#pragma unroll
      for (int k = 0; k < P; ++k) o.v[k] = from_float<S>(0.0f);
    }
    store_pack(p + j0, o);
  }
}

template <typename S>
__global__ void __launch_bounds__(kWarps * 32) softmax_backward_kernel(SoftmaxBackward<S> a) {
  constexpr int P = Pack<S>::n;
  const int lane = threadIdx.x % 32;
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= a.rows) return;
  const S *p = a.probs + r * a.T, *dp = a.dprobs + r * a.T;
  float dot = 0.0f;
  for (int64_t j = int64_t(lane) * P; j < a.T; j += 32 * P) {
    const Pack<S> pv = load_pack(p + j), dv = load_pack_plain(dp + j);
#pragma unroll
    for (int k = 0; k < P; ++k) dot += to_float(pv.v[k]) * to_float(dv.v[k]);
  }
  dot = warp_sum(dot);
  S* ds = a.dscores + r * a.T;
  for (int64_t j = int64_t(lane) * P; j < a.T; j += 32 * P) {
    const Pack<S> pv = load_pack(p + j), dv = load_pack_plain(dp + j);
    Pack<S> o;
#pragma unroll
    for (int k = 0; k < P; ++k) o.v[k] = from_float<S>(a.scale * to_float(pv.v[k]) * (to_float(dv.v[k]) - dot));
    store_pack(ds + j, o);
  }
}

}  // namespace

template <typename S>
void softmax_forward(const Device& d, const SoftmaxForward<S>& a) {
  require_packs<S>("softmax_forward", a.T, {a.probs, a.scores});
  const int64_t rows = a.B * a.NH * a.T;
  softmax_forward_kernel<S><<<unsigned(ceil_div(rows, kWarps)), kWarps * 32, 0, stream_of(d)>>>(a);
  check_launch("softmax_forward");
}

template <typename S>
void softmax_backward(const Device& d, const SoftmaxBackward<S>& a) {
  require_packs<S>("softmax_backward", a.T, {a.dscores, a.dprobs, a.probs});
  softmax_backward_kernel<S><<<unsigned(ceil_div(a.rows, kWarps)), kWarps * 32, 0, stream_of(d)>>>(a);
  check_launch("softmax_backward");
}

#define PRETRAIN_INSTANTIATE(S)                                                    \
  template void softmax_forward<S>(const Device&, const SoftmaxForward<S>&); \
  template void softmax_backward<S>(const Device&, const SoftmaxBackward<S>&);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops::cuda
