// How an op of trainer/ops picks its backend: the CUDA kernels on a CUDA device (compiled only when
// the build has CUDA: PRETRAIN_HAVE_CUDA, private to pretrain_trainer), the CPU reference
// otherwise. For the ops' .cpp files.
#pragma once
#include "common/error.h"

#if PRETRAIN_HAVE_CUDA
#define PRETRAIN_OPS_DISPATCH(device, cuda_call, cpu_call) \
  do {                                                     \
    if ((device).cuda) {                                   \
      cuda_call;                                           \
    } else {                                               \
      cpu_call;                                            \
    }                                                      \
  } while (0)
#else
#define PRETRAIN_OPS_DISPATCH(device, cuda_call, cpu_call)                              \
  do {                                                                                  \
    if ((device).cuda) throw ::pretrain::Error("trainer/ops: built without CUDA"); \
    cpu_call;                                                                           \
  } while (0)
#endif

// The same as a statement: on a CUDA device runs `call` and returns from the calling function; the
// CPU code follows it. (For CPU code with braces, which a macro argument cannot hold.)
#if PRETRAIN_HAVE_CUDA
#define PRETRAIN_OPS_ON_CUDA(device, call) \
  if ((device).cuda) {                     \
    call;                                  \
    return;                                \
  }
#else
#define PRETRAIN_OPS_ON_CUDA(device, call) \
  if ((device).cuda) throw ::pretrain::Error("trainer/ops: built without CUDA");
#endif
