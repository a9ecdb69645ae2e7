// Which accelerators this process can use. One build serves both: a binary built with CUDA runs
// on a machine without a GPU or driver, and "no driver" reads as "no GPU", never as a crash.
#pragma once
#include <string>
#include <vector>

namespace pretrain {

struct GpuInfo {
  int index = 0;
  std::string name;
  size_t total_memory = 0;
  int major = 0, minor = 0;  // compute capability
};

struct DeviceReport {
  bool built_with_cuda = false;
  std::vector<GpuInfo> gpus;  // empty: none usable
  std::string reason;         // why none, when empty ("built without CUDA", the driver's message)
};

DeviceReport query_devices();
// The one parser of a device string: "cpu", "cuda" (GPU 0) or "cuda:N". Throws UsageError otherwise.
struct DeviceSpec {
  bool cuda = false;
  int index = 0;
};
DeviceSpec parse_device_spec(const std::string& device);
// Throws Error with a clear message when `device` ("cpu", "cuda", "cuda:N") cannot be used here.
void require_device(const std::string& device);

}  // namespace pretrain
