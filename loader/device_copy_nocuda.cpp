// Built without CUDA: asking for a GPU is a clear error, not a crash.
#include "common/error.h"
#include "loader/device_copy.h"

namespace pretrain {

std::unique_ptr<DeviceBackend> make_cuda_backend(int device, int, int, bool) {
  throw Error("device cuda:" + std::to_string(device) + " asked for, but this build has no CUDA backend "
              "(configure with nvcc present, or -DPRETRAIN_CUDA=ON)");
}

}  // namespace pretrain
