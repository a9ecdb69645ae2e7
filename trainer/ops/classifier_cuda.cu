// The fused classifier on CUDA (the op and its CPU reference: classifier.h). One block of kThreads
// per row. Pass 1: each thread keeps a running (max, Σ exp) over its columns — 16-byte packs
// p, p + kThreads, … when rows are whole packs (ld a multiple of kPack<T>), else single columns —
// and the block merges them in a fixed order (warp butterflies, then warps in order). Pass 2
// re-reads the row (a bf16 GPT row is 100 KB: L2 keeps it between the passes) and writes the
// gradient over it. Stats mode stops after pass 1; apply mode starts at pass 2 with given stats.
#include "trainer/ops/classifier.h"
#include "trainer/ops/cuda_util.cuh"

namespace pretrain::ops::cuda {
namespace {

constexpr int kThreads = 512;

template <typename T, bool kVec>
__device__ MaxSum row_pass1(const FusedClassifier<T>& a, const T* x) {
  MaxSum acc;
  if constexpr (kVec) {
    constexpr int P = Pack<T>::n;
    for (int64_t v0 = int64_t(threadIdx.x) * P; v0 < a.V; v0 += int64_t(kThreads) * P) {
      const Pack<T> p = load_pack(x + v0);
#pragma unroll
      for (int k = 0; k < P; ++k)
        if (v0 + k < a.V) acc.add(to_float(p.v[k]));
    }
  } else {
    for (int64_t v = threadIdx.x; v < a.V; v += kThreads) acc.add(to_float(x[v]));
  }
  return acc;
}

template <typename T, bool kVec>
__device__ void row_pass2(const FusedClassifier<T>& a, T* x, int64_t t, float mx, float scale, float target_grad,
                          bool ignored) {
  // Gradient of column v: exp(x − max) · dloss / S, minus dloss at the target; 0 past V or ignored.
  auto grad = [&](int64_t v, float xv) {
    if (ignored || v >= a.V) return 0.0f;
    return __expf(xv - mx) * scale - (v == t ? target_grad : 0.0f);
  };
  if constexpr (kVec) {
    constexpr int P = Pack<T>::n;
    for (int64_t v0 = int64_t(threadIdx.x) * P; v0 < a.ld; v0 += int64_t(kThreads) * P) {
      const Pack<T> p = load_pack_plain(x + v0);
      Pack<T> g;
#pragma unroll
      for (int k = 0; k < P; ++k) g.v[k] = from_float<T>(grad(v0 + k, to_float(p.v[k])));
      store_pack(x + v0, g);
    }
  } else {
    for (int64_t v = threadIdx.x; v < a.ld; v += kThreads) x[v] = from_float<T>(grad(v, to_float(x[v])));
  }
}

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads) classifier_kernel(FusedClassifier<T> a, ClassifierRowStats* stats_out,
                                                              const ClassifierRowStats* stats_in) {
  __shared__ float shared[64];
  const int64_t r = blockIdx.x;
  T* x = a.logits + r * a.ld;
  const int32_t target = a.targets[r];
  const int64_t t = int64_t(target) - a.v0;
  ClassifierRowStats s;
  if (stats_in) {
    s = stats_in[r];
  } else {
    const MaxSum m = block_combine(row_pass1<T, kVec>(a, x), shared);
    s.max = m.max, s.sum = m.sum;
    s.target = target >= 0 && t >= 0 && t < a.V ? to_float(x[t]) : 0.0f;
    if (stats_out) {
      if (threadIdx.x == 0) stats_out[r] = s;
      return;
    }
  }
  const bool ignored = target < 0;
  if (threadIdx.x == 0) a.losses[r] = ignored ? 0.0f : logf(s.sum) + s.max - s.target;
  __syncthreads();  // every thread has read x[t] before any overwrites it
  row_pass2<T, kVec>(a, x, t, s.max, a.dloss / s.sum, a.dloss, ignored);
}

__global__ void combine_kernel(ClassifierRowStats* merged, const ClassifierRowStats* gathered, int64_t ranks, int64_t N) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= N) return;
  ClassifierRowStats s;
  for (int64_t k = 0; k < ranks; ++k) s = combine(s, gathered[k * N + r]);
  merged[r] = s;
}

}  // namespace

template <typename T>
void classifier(const Device& d, const FusedClassifier<T>& a, ClassifierRowStats* stats_out,
                const ClassifierRowStats* stats_in) {
  const bool vec = a.ld % kPack<T> == 0 && reinterpret_cast<uintptr_t>(a.logits) % 16 == 0;
  if (a.N > 0x7fffffff) throw Error(cat("classifier: ", a.N, " rows are more than a grid holds"));
  if (vec)
    classifier_kernel<T, true><<<unsigned(a.N), kThreads, 0, stream_of(d)>>>(a, stats_out, stats_in);
  else
    classifier_kernel<T, false><<<unsigned(a.N), kThreads, 0, stream_of(d)>>>(a, stats_out, stats_in);
  check_launch("classifier");
}

void classifier_combine_stats(const Device& d, ClassifierRowStats* merged, const ClassifierRowStats* gathered,
                              int64_t ranks, int64_t N) {
  combine_kernel<<<unsigned(ceil_div(N, 256)), 256, 0, stream_of(d)>>>(merged, gathered, ranks, N);
  check_launch("classifier_combine_stats");
}

#define PRETRAIN_INSTANTIATE(T)                                                                      \
  template void classifier<T>(const Device&, const FusedClassifier<T>&, ClassifierRowStats*, \
                              const ClassifierRowStats*);
PRETRAIN_OPS_STORAGE(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain::ops::cuda
