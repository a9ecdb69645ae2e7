// The CUDA backend: each op of trainer/kernels.h runs as a grid-stride kernel on the device's
// stream (the op's body is the one the CPU backend runs and the unit tests check), GEMMs go to
// cuBLAS. Nothing here is reached on a machine without a GPU: open_device stops first.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "trainer/backend_cuda.h"

namespace pretrain {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("trainer: ") + what + ": " + cudaGetErrorString(err));
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(cat("trainer: ", what, ": cuBLAS status ", int(status)));
}

cudaStream_t stream_of(const Device& d) { return static_cast<cudaStream_t>(d.stream); }

template <typename Op>
__global__ void op_kernel(Op op, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) op(i);
}

}  // namespace

template <typename Op>
void cuda_launch(const Device& d, int64_t n, const Op& op) {
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, 65535));
  op_kernel<<<blocks, threads, 0, stream_of(d)>>>(op, n);
  check(cudaGetLastError(), "kernel launch");
}
#define PRETRAIN_INSTANTIATE(Op) template void cuda_launch<kernels::Op>(const Device&, int64_t, const kernels::Op&);
PRETRAIN_TRAINER_KERNELS(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

namespace cuda {

void open(Device& d, int index) {
  check(cudaSetDevice(index), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cublasHandle_t handle = nullptr;
  check(cublasCreate(&handle), "cublasCreate");
  check(cublasSetStream(handle, stream), "cublasSetStream");
  // fp32 GEMMs stay fp32 (no TF32): the CPU and the PyTorch references are plain fp32.
  check(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  d.stream = stream;
  d.blas = handle;
  d.name = prop.name;
}

void close(Device& d) {
  if (d.blas) cublasDestroy(static_cast<cublasHandle_t>(d.blas));
  if (d.stream) cudaStreamDestroy(stream_of(d));
  d.blas = d.stream = nullptr;
}

void* alloc(const Device& d, size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  check(cudaMemsetAsync(p, 0, bytes, stream_of(d)), "cudaMemsetAsync");
  return p;
}

void free(const Device& d, void* p) {
  if (!p) return;
  cudaStreamSynchronize(stream_of(d));
  cudaFree(p);
}

void zero(const Device& d, void* p, size_t bytes) {
  if (bytes) check(cudaMemsetAsync(p, 0, bytes, stream_of(d)), "cudaMemsetAsync");
}

void copy_to_device(const Device& d, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(d)), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize");  // src may be a temporary
}

void copy_to_host(const Device& d, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_of(d)), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize");
}

void synchronize(const Device& d) { check(cudaStreamSynchronize(stream_of(d)), "cudaStreamSynchronize"); }

size_t memory_used(const Device&) {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return total - free_bytes;
}

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands.
void gemm_batched(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
                  float beta, float* C, int64_t ldc, int64_t sc, int64_t batch) {
  // fp32 storage throughout; bf16 / fp16 are the tensor-core compute modes that round A and B.
  const cublasComputeType_t compute = d.gemm_precision == Precision::bf16   ? CUBLAS_COMPUTE_32F_FAST_16BF
                                      : d.gemm_precision == Precision::fp16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                                            : CUBLAS_COMPUTE_32F;
  check(cublasGemmStridedBatchedEx(static_cast<cublasHandle_t>(d.blas), tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   ta ? CUBLAS_OP_T : CUBLAS_OP_N, int(n), int(m), int(k), &alpha, B, CUDA_R_32F,
                                   int(ldb), sb, A, CUDA_R_32F, int(lda), sa, &beta, C, CUDA_R_32F, int(ldc), sc,
                                   int(batch), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

}  // namespace cuda
}  // namespace pretrain
