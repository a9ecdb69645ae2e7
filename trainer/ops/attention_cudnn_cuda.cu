// The inputs cuDNN's fused attention takes for a mask (attention_cudnn.cpp), written on the device:
// the padding mask's sequence lengths, the packed rows' block-diagonal bias, dropout's seed and
// offset. The graph code itself is host code, compiled once by the C++ compiler; only these
// kernels go through nvcc.
#include "trainer/ops/attention_cudnn_internal.h"
#include "trainer/ops/cuda_util.cuh"

namespace pretrain::ops::cudnn {
namespace {

__global__ void sequence_lengths_kernel(int32_t* lengths, const int32_t* mask, int64_t B, int64_t T) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  int32_t n = 0;
  for (int64_t t = 0; t < T; ++t) n += mask[b * T + t] != 0;
  lengths[b] = n;
}

__global__ void packed_bias_kernel(bf16* bias, const int32_t* ids, int64_t B, int64_t T) {
  const int64_t n = B * T * T;
  for (int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; x < n; x += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = x / (T * T), i = x / T % T, j = x % T;
    bias[x] = bf16::from_float(kernels::key_mask_score(ids + b * T, i, j));
  }
}

__global__ void seed_kernel(int64_t* rng, uint64_t seed, uint64_t offset) { rng[0] = int64_t(seed), rng[1] = int64_t(offset); }

}  // namespace

void write_sequence_lengths(int32_t* lengths, const int32_t* key_mask, int64_t B, int64_t T, void* stream) {
  sequence_lengths_kernel<<<unsigned(cuda::ceil_div(B, 128)), 128, 0, static_cast<cudaStream_t>(stream)>>>(lengths, key_mask, B, T);
  cuda::check_launch("cuDNN attention: sequence lengths");
}

void write_packed_bias(bf16* bias, const int32_t* ids, int64_t B, int64_t T, void* stream) {
  packed_bias_kernel<<<unsigned(std::min<int64_t>(cuda::ceil_div(B * T * T, 256), 4096)), 256, 0,
                       static_cast<cudaStream_t>(stream)>>>(bias, ids, B, T);
  cuda::check_launch("cuDNN attention: packed rows' bias");
}

void write_rng_state(int64_t* rng, uint64_t seed, uint64_t offset, void* stream) {
  seed_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(rng, seed, offset);
  cuda::check_launch("cuDNN attention: dropout seed");
}

}  // namespace pretrain::ops::cudnn
