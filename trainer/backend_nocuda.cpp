// A CPU-only build: every CUDA entry point says so (open_device stops before any of them runs,
// since require_device reports "built without CUDA").
#include "common/error.h"
#include "trainer/backend_cuda.h"

namespace pretrain {
namespace cuda {
namespace {
[[noreturn]] void unavailable() { throw Error("this build has no CUDA backend (configure with nvcc present)"); }
}  // namespace

void open(Device&, int) { unavailable(); }
void close(Device&) {}
void* alloc(const Device&, size_t) { unavailable(); }
void free(const Device&, void*) { unavailable(); }
void zero(const Device&, void*, size_t) { unavailable(); }
void copy_to_device(const Device&, void*, const void*, size_t) { unavailable(); }
void copy_to_host(const Device&, void*, const void*, size_t) { unavailable(); }
void synchronize(const Device&) { unavailable(); }
void gemm_batched(const Device&, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                  int64_t, const float*, int64_t, int64_t, float, float*, int64_t, int64_t, int64_t) {
  unavailable();
}
bool gemm_epilogue(const Device&, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                   int64_t, float*, int64_t, const GemmEpilogue&) {
  unavailable();
}
}  // namespace cuda

template <typename Op>
void cuda_launch(const Device&, int64_t, const Op&) {
  throw Error("this build has no CUDA backend (configure with nvcc present)");
}
#define PRETRAIN_INSTANTIATE(Op) template void cuda_launch<kernels::Op>(const Device&, int64_t, const kernels::Op&);
PRETRAIN_TRAINER_KERNELS(PRETRAIN_INSTANTIATE)
#undef PRETRAIN_INSTANTIATE

}  // namespace pretrain
