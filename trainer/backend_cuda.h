// The CUDA half of trainer/backend.h: defined in backend_cuda.cu, or in backend_nocuda.cpp (a
// CPU-only build) where each throws a clear error. Only backend.cpp calls these.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "trainer/backend.h"

namespace pretrain::cuda {

void open(Device& d, int index);
void close(Device& d);
void* alloc(const Device& d, size_t bytes);
void free(const Device& d, void* p);
void zero(const Device& d, void* p, size_t bytes);
void copy_to_device(const Device& d, void* dst, const void* src, size_t bytes);
void copy_to_host(const Device& d, void* dst, const void* src, size_t bytes);
void synchronize(const Device& d);
void gemm_batched(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* A, int64_t lda, int64_t sa, const float* B, int64_t ldb, int64_t sb,
                  float beta, float* C, int64_t ldc, int64_t sc, int64_t batch);
// The bias / GELU epilogue fused into a cuBLASLt GEMM (beta = 0). False: no fused kernel for this
// shape, and the caller runs the unfused form.
bool gemm_epilogue(const Device& d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, const GemmEpilogue& epilogue);

}  // namespace pretrain::cuda
