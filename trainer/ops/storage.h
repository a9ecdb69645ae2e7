// The storage types of trainer/ops: every op there is a template on how its tensors are stored,
// float or bf16 (trainer/bf16.h), and computes in float: load → float, arithmetic, store rounds
// once. Both backends use these two functions, so an element the CPU and the GPU compute from the
// same float rounds to the same bits (bf16::from_float on both, not the CUDA intrinsic).
#pragma once
#include <type_traits>

#include "common/hd.h"
#include "trainer/bf16.h"

namespace pretrain::ops {

template <typename T>
inline constexpr bool is_storage = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

template <typename T>
PRETRAIN_HD inline float to_float(T x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return x.to_float();
}

template <typename T>
PRETRAIN_HD inline T from_float(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return bf16::from_float(x);
}

// x as T stores it: what a value loses on its way through memory.
template <typename T>
PRETRAIN_HD inline float rounded(float x) {
  return to_float(from_float<T>(x));
}

template <typename T>
inline const char* storage_name() {
  return std::is_same_v<T, float> ? "fp32" : "bf16";
}

// Elements per 16-byte access (CUDA kernels load rows in these; rows must be a multiple of it).
template <typename T>
inline constexpr int kPack = int(16 / sizeof(T));

}  // namespace pretrain::ops

// Instantiates X(float) and X(bf16), for the ops' explicit instantiations.
#define PRETRAIN_OPS_STORAGE(X) X(float) X(::pretrain::bf16)
