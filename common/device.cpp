#include "common/device.h"

#include <cstdlib>

#include "common/error.h"

namespace pretrain {

DeviceSpec parse_device_spec(const std::string& device) {
  if (device == "cpu") return {};
  if (device == "cuda") return {true, 0};
  if (device.rfind("cuda:", 0) == 0) {
    char* end = nullptr;
    const long v = std::strtol(device.c_str() + 5, &end, 10);
    if (*end == 0 && end != device.c_str() + 5 && v >= 0 && v < (1 << 20)) return {true, static_cast<int>(v)};
    throw UsageError(cat("bad device index in '", device, "': expected cpu, cuda or cuda:N"));
  }
  throw UsageError(cat("unknown device '", device, "': expected cpu, cuda or cuda:N"));
}

void require_device(const std::string& device) {
  const DeviceSpec spec = parse_device_spec(device);
  if (!spec.cuda) return;
  const int index = spec.index;
  DeviceReport r = query_devices();
  if (!r.built_with_cuda) throw Error(cat("--device ", device, ": this binary was ", r.reason));
  if (r.gpus.empty()) throw Error(cat("--device ", device, ": no usable GPU here (", r.reason, ")"));
  if (index >= static_cast<int>(r.gpus.size()))
    throw Error(cat("--device ", device, ": only ", r.gpus.size(), " GPU(s) here"));
}

}  // namespace pretrain
