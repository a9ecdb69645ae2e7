// The check of every CUDA runtime call in our .cu files: a failure is an Error naming the call and
// CUDA's words for it. For .cu files only (it includes cuda_runtime.h), so not installed.
#pragma once
#include <cuda_runtime.h>

#include "common/error.h"

namespace pretrain {

inline void cuda_check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a launch's error so that the next call does not report it again
  throw Error(cat("CUDA ", what, ": ", cudaGetErrorString(err)));
}

}  // namespace pretrain
