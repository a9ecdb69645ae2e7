// CUDA side of device.h. cudaGetDeviceCount fails without a driver ("driver version is
// insufficient", "no CUDA-capable device"): that is "no GPU", reported with the driver's words.
#include <cuda_runtime.h>

#include "common/device.h"

namespace pretrain {

DeviceReport query_devices() {
  DeviceReport r;
  r.built_with_cuda = true;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    r.reason = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls are not poisoned
    return r;
  }
  if (count == 0) r.reason = "no CUDA device";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    r.gpus.push_back(GpuInfo{i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return r;
}

}  // namespace pretrain
