// What trainer/ops' CUDA kernels share: 16-byte packs of a row (float4 or 8 bf16), warp and block
// reductions in a fixed order, the device's stream and launch checks. For .cu files only.
//
// Reductions: a warp reduces with a butterfly of __shfl_xor_sync (every lane ends with the same
// value, formed in the same order on every launch), a block with its warps' results added in warp
// order by every thread; so a kernel whose work split is fixed by its compile-time shape gives
// the same bits run after run, whatever the grid.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "common/cuda_check.h"
#include "trainer/backend.h"
#include "trainer/ops/storage.h"

namespace pretrain::ops::cuda {

inline cudaStream_t stream_of(const Device& d) { return static_cast<cudaStream_t>(d.stream); }

inline void check_launch(const char* what) { cuda_check(cudaGetLastError(), what); }

// One 16-byte access of a row: kPack<T> elements.
template <typename T>
struct alignas(16) Pack {
  static constexpr int n = kPack<T>;
  T v[n];
};

template <typename T>
__device__ inline Pack<T> load_pack(const T* p) {  // read-only data, cached
  Pack<T> r;
  *reinterpret_cast<int4*>(&r) = __ldg(reinterpret_cast<const int4*>(p));
  return r;
}
template <typename T>
__device__ inline Pack<T> load_pack_stream(const T* p) {  // read once: evict first
  Pack<T> r;
  *reinterpret_cast<int4*>(&r) = __ldcs(reinterpret_cast<const int4*>(p));
  return r;
}
template <typename T>
__device__ inline Pack<T> load_pack_plain(const T* p) {  // memory this kernel also writes
  Pack<T> r;
  *reinterpret_cast<int4*>(&r) = *reinterpret_cast<const int4*>(p);
  return r;
}
template <typename T>
__device__ inline void store_pack(T* p, const Pack<T>& x) {
  *reinterpret_cast<int4*>(p) = *reinterpret_cast<const int4*>(&x);
}

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ inline double warp_sum(double x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ inline float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// A running (max, Σ exp(x − max)) pair: the online softmax's state.
struct MaxSum {
  float max = -INFINITY, sum = 0.0f;
  __device__ void add(float x) {  // x > −inf (masked elements are skipped, not added)
    if (x > max) {
      sum = sum * __expf(max - x) + 1.0f;  // exp(−inf) = 0 on the first element
      max = x;
    } else {
      sum += __expf(x - max);
    }
  }
  __device__ static MaxSum combine(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.max, b.max);
    if (m == -INFINITY) return a;
    return {m, a.sum * __expf(a.max - m) + b.sum * __expf(b.max - m)};
  }
};
__device__ inline MaxSum warp_combine(MaxSum s) {
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, s.max, o), __shfl_xor_sync(0xffffffffu, s.sum, o)};
    s = MaxSum::combine(s, other);
  }
  return s;
}

// Block-wide reductions (blockDim.x a multiple of 32, ≤ 1024); every thread gets the result.
// `shared` holds 32 values; the call ends with a barrier, so it may be called again at once.
__device__ inline float block_sum(float x, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_sum(x);
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < warps; ++w) s += shared[w];
  __syncthreads();
  return s;
}
__device__ inline MaxSum block_combine(MaxSum x, float* shared) {  // shared: 64 floats
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_combine(x);
  if (lane == 0) shared[warp] = x.max, shared[32 + warp] = x.sum;
  __syncthreads();
  MaxSum s;
  for (int w = 0; w < warps; ++w) s = MaxSum::combine(s, MaxSum{shared[w], shared[32 + w]});
  __syncthreads();
  return s;
}

// A kernel's rows must be whole 16-byte packs on 16-byte boundaries; else an Error naming the op.
template <typename T>
void require_packs(const char* op, int64_t C, std::initializer_list<const void*> ptrs) {
  if (C % kPack<T> != 0)
    throw Error(cat(op, ": C = ", C, " is not a multiple of ", kPack<T>, " (16-byte ", storage_name<T>(), " rows)"));
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) throw Error(cat(op, ": a tensor is not 16-byte aligned"));
}

inline size_t shared_bytes_or_throw(const char* op, const void* kernel, size_t bytes) {
  int dev = 0, optin = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
  if (bytes > size_t(optin)) throw Error(cat(op, ": a row needs ", bytes, " bytes of shared memory, the device has ", optin));
  if (bytes > 48 * 1024)
    cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
               "cudaFuncSetAttribute");
  return bytes;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace pretrain::ops::cuda
